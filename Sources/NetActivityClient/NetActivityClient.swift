import DBusKit
import Glibc

/// A held activity lease: the indicator counts it until `end()` (or until this process exits).
public final class ActivityLease: @unchecked Sendable {
    // @unchecked: the fd is only closed once, guarded by `end()` being idempotent on one thread.
    private var fd: Int32

    init(fd: Int32) { self.fd = fd }

    /// Releases the lease.
    public func end() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    deinit { end() }
}

/// A connection to the netactivity agent.
///
/// This is the synchronous core of the client library: each call is one blocking round trip.
public final class NetActivityClient {
    static let busName = "org.example.NetActivity"
    static let path = "/org/example/NetActivity"
    static let interface = "org.example.NetActivity"

    let connection: Connection

    /// Connects to the session bus, or to `address`.
    public init(address: String? = nil) throws(NetActivityError) {
        do {
            connection = try Connection(address: address)
        } catch {
            throw NetActivityError(error)
        }
    }

    /// This connection's unique bus name (the key the agent counts under).
    public var uniqueName: String { connection.uniqueName }

    func call(
        _ member: String, interface: String = NetActivityClient.interface,
        _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) throws(NetActivityError) -> Message {
        do {
            let m = try Message.methodCall(
                destination: Self.busName, path: Self.path, interface: interface, member: member)
            var w = m.writer()
            try body(&w)
            return try connection.call(m, timeoutMilliseconds: 25_000)
        } catch let e as DBusError {
            throw NetActivityError(e)
        } catch {
            throw NetActivityError(name: "org.freedesktop.DBus.Error.Failed", message: "\(error)")
        }
    }

    public func incrementActivityCount() throws(NetActivityError) {
        _ = try call("IncrementActivityCount")
    }

    public func decrementActivityCount() throws(NetActivityError) {
        _ = try call("DecrementActivityCount")
    }

    /// Begins a lease; the activity lasts until the lease ends.
    public func beginActivity(reason: String) throws(NetActivityError) -> ActivityLease {
        let reply = try call("BeginActivity") { w in w.append(reason) }
        var r = reply.reader()
        do {
            return ActivityLease(fd: try r.readFD())
        } catch {
            throw NetActivityError(error)
        }
    }

    /// Runs `body` while holding a lease.
    public func withActivity<T>(reason: String, _ body: () throws -> T) throws -> T {
        let lease = try beginActivity(reason: reason)
        defer { lease.end() }
        return try body()
    }

    /// Every property of the agent.
    public func status() throws(NetActivityError) -> ActivityStatus {
        let reply = try call("GetAll", interface: "org.freedesktop.DBus.Properties") { w in w.append(Self.interface) }
        var r = reply.reader()
        var status = ActivityStatus()
        do {
            status.apply(try r.readVardict())
        } catch {
            throw NetActivityError(error)
        }
        return status
    }

    public func setEnabled(_ enabled: Bool) throws(NetActivityError) {
        try setProperty("Enabled", .bool(enabled))
    }

    public func setActivationDelay(seconds: Double) throws(NetActivityError) {
        try setProperty("ActivationDelay", .double(seconds))
    }

    public func setCompletionDelay(seconds: Double) throws(NetActivityError) {
        try setProperty("CompletionDelay", .double(seconds))
    }

    func setProperty(_ name: String, _ value: DBusValue) throws(NetActivityError) {
        _ = try call("Set", interface: "org.freedesktop.DBus.Properties") { w in
            w.append(Self.interface)
            w.append(name)
            try w.append(.variant(value))
        }
    }

    /// The pid of a bus client (for tools that act on other clients).
    public func processID(of busName: String) throws(NetActivityError) -> UInt32 {
        do {
            let reply = try connection.busCall("GetConnectionUnixProcessID") { w in w.append(busName) }
            var r = reply.reader()
            return try r.read(UInt32.self)
        } catch let e as DBusError {
            throw NetActivityError(e)
        } catch {
            throw NetActivityError(name: "org.freedesktop.DBus.Error.Failed", message: "\(error)")
        }
    }

    /// Follows the agent: calls `onChange` with the current status at once, then after every
    /// change, and with nil while the agent is not on the bus. No polling: it sleeps until a
    /// signal arrives. Returns when `onChange` returns false or the bus goes away.
    public func watch(_ onChange: @escaping (ActivityStatus?) -> Bool) throws(NetActivityError) {
        let loop = EventLoop()
        connection.attach(to: loop)
        let changed = SignalMatch(path: Self.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let owner = SignalMatch(
            sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged")
        do {
            try connection.addMatch(changed.rule + ",arg0='\(Self.interface)'")
            try connection.addMatch(owner.rule + ",arg0='\(Self.busName)'")
        } catch {
            throw NetActivityError(error)
        }
        var current: ActivityStatus? = try? status()
        var running = onChange(current)
        connection.onSignal(changed) { message in
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.interface, let props = try? r.readVardict(), var s = current else { return }
            s.apply(props)
            current = s
            if !onChange(s) { running = false; loop.stop() }
        }
        connection.onSignal(owner) { [unowned self] message in
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.busName else { return }
            _ = try? r.read(String.self)
            let newOwner = (try? r.read(String.self)) ?? ""
            // A new agent starts from its own state: read it whole.
            current = newOwner.isEmpty ? nil : (try? self.status())
            if !onChange(current) { running = false; loop.stop() }
        }
        connection.onDisconnect = { running = false; loop.stop() }
        while running { loop.runOnce(maxWaitNanoseconds: nil) }
    }
}

