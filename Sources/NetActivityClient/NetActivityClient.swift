import LinuxKit
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
    static let busName = NetActivityBus.name
    static let path = NetActivityBus.objectPath
    static let interface = NetActivityInterface.activity.rawValue

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
        _ member: String, interface: String = NetActivityClient.interface, path: String = NetActivityClient.path,
        _ body: (inout MessageWriter) throws -> Void = { _ in }
    ) throws(NetActivityError) -> Message {
        do {
            let m = try Message.methodCall(
                destination: Self.busName, path: path, interface: interface, member: member)
            var w = m.writer()
            try body(&w)
            return try connection.call(m, timeoutMilliseconds: 25_000)
        } catch let e as DBusError {
            throw NetActivityError(e)
        } catch {
            throw NetActivityError(.failed, "\(error)")
        }
    }

    public func incrementActivityCount() throws(NetActivityError) {
        _ = try call(ActivityMember.Method.incrementActivityCount.rawValue)
    }

    public func decrementActivityCount() throws(NetActivityError) {
        _ = try call(ActivityMember.Method.decrementActivityCount.rawValue)
    }

    /// Begins a lease; the activity lasts until the lease ends.
    public func beginActivity(reason: String) throws(NetActivityError) -> ActivityLease {
        let reply = try call(ActivityMember.Method.beginActivity.rawValue) { w in w.append(reason) }
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
        try setProperty(ActivityMember.Property.enabled.rawValue, .bool(enabled))
    }

    public func setActivationDelay(seconds: Double) throws(NetActivityError) {
        try setProperty(ActivityMember.Property.activationDelay.rawValue, .double(seconds))
    }

    public func setCompletionDelay(seconds: Double) throws(NetActivityError) {
        try setProperty(ActivityMember.Property.completionDelay.rawValue, .double(seconds))
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
            throw NetActivityError(.failed, "\(error)")
        }
    }

    /// The process name of a bus client ("" when it has left or cannot be read).
    public func processName(of busName: String) -> String {
        (try? processID(of: busName)).map { ServiceProcess.processName(pid: $0) } ?? ""
    }

    /// Follows the agent: calls `onChange` with the current status at once, then after every
    /// change, and with nil while the agent is not on the bus. No polling: it sleeps until a
    /// signal arrives. Returns when `onChange` returns false or the bus goes away.
    public func watch(_ onChange: @escaping (ActivityStatus?) -> Bool) throws(NetActivityError) {
        let loop = EventLoop()
        connection.attach(to: loop)
        let changed = SignalMatch(path: Self.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let owner = SignalMatch.nameOwnerChanged
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
            guard let change = SignalMatch.nameOwnerChange(message), change.name == Self.busName else { return }
            // A new agent starts from its own state: read it whole.
            current = change.newOwner.isEmpty ? nil : (try? self.status())
            if !onChange(current) { running = false; loop.stop() }
        }
        connection.onDisconnect = { running = false; loop.stop() }
        while running { loop.runOnce(maxWaitNanoseconds: nil) }
    }

    // MARK: tasks

    static let taskInterface = NetActivityInterface.task.rawValue

    /// Every task the agent holds (live and recently completed), ordered by task number.
    public func tasks() throws(NetActivityError) -> [TaskSnapshot] {
        let reply = try call("GetManagedObjects", interface: "org.freedesktop.DBus.ObjectManager")
        var r = reply.reader()
        do {
            return try Self.readManagedTasks(&r).values.sorted(by: Self.taskOrder)
        } catch {
            throw NetActivityError(error)
        }
    }

    static func taskOrder(_ a: TaskSnapshot, _ b: TaskSnapshot) -> Bool {
        let (x, y) = (a.path ?? "", b.path ?? "")
        return x.count != y.count ? x.count < y.count : x < y
    }

    static func readManagedTasks(_ r: inout MessageReader) throws(DBusError) -> [String: TaskSnapshot] {
        var out: [String: TaskSnapshot] = [:]
        var objects = try r.enterArray()
        while !objects.isAtEnd() {
            var entry = try objects.enterDictEntry()
            let path = try entry.readObjectPath()
            if let props = try readInterfaces(&entry)[taskInterface] { out[path] = TaskSnapshot(path: path, properties: props) }
        }
        return out
    }

    /// `a{sa{sv}}`
    static func readInterfaces(_ r: inout MessageReader) throws(DBusError) -> [String: [String: DBusValue]] {
        var out: [String: [String: DBusValue]] = [:]
        var interfaces = try r.enterArray()
        while !interfaces.isAtEnd() {
            var entry = try interfaces.enterDictEntry()
            let name = try entry.read(String.self)
            out[name] = try entry.readVardict()
        }
        return out
    }

    /// One change seen by `watchTasks`.
    public enum TaskEvent: Sendable, Equatable {
        case added(TaskSnapshot)
        case changed(TaskSnapshot)
        case removed(path: String)
    }

    /// Follows every task: `added` for each one there now, then one event per change, with
    /// `removed` when a task leaves (or the agent stops). Survives agent restarts. No polling.
    /// Returns when `onEvent` returns false or the bus goes away.
    public func watchTasks(_ onEvent: @escaping (TaskEvent) -> Bool) throws(NetActivityError) {
        let loop = EventLoop()
        connection.attach(to: loop)
        let om = "org.freedesktop.DBus.ObjectManager"
        let added = SignalMatch(path: Self.path, interface: om, member: "InterfacesAdded")
        let removed = SignalMatch(path: Self.path, interface: om, member: "InterfacesRemoved")
        let changed = SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let owner = SignalMatch.nameOwnerChanged
        do {
            try connection.addMatch(added.rule + ",sender='\(Self.busName)'")
            try connection.addMatch(removed.rule + ",sender='\(Self.busName)'")
            try connection.addMatch(
                changed.rule + ",sender='\(Self.busName)',path_namespace='\(Self.path)/tasks',arg0='\(Self.taskInterface)'")
            try connection.addMatch(owner.rule + ",arg0='\(Self.busName)'")
        } catch {
            throw NetActivityError(error)
        }
        var known: [String: TaskSnapshot] = [:]
        var running = true
        func emit(_ event: TaskEvent) {
            guard running else { return }
            if !onEvent(event) {
                running = false
                loop.stop()
            }
        }
        func reload() {
            let now = (try? tasks()) ?? []
            for path in known.keys.sorted() where !now.contains(where: { $0.path == path }) {
                known[path] = nil
                emit(.removed(path: path))
            }
            for t in now where known[t.path ?? ""] != t {
                let isNew = known[t.path ?? ""] == nil
                known[t.path ?? ""] = t
                emit(isNew ? .added(t) : .changed(t))
            }
        }
        reload()
        connection.onSignal(added) { message in
            var r = message.reader()
            guard let path = try? r.readObjectPath(), let props = (try? Self.readInterfaces(&r))?[Self.taskInterface] else { return }
            let t = TaskSnapshot(path: path, properties: props)
            known[path] = t
            emit(.added(t))
        }
        connection.onSignal(removed) { message in
            var r = message.reader()
            guard let path = try? r.readObjectPath(), known.removeValue(forKey: path) != nil else { return }
            emit(.removed(path: path))
        }
        connection.onSignal(changed) { message in
            var r = message.reader()
            guard let path = message.path, var t = known[path], (try? r.read(String.self)) == Self.taskInterface,
                  let props = try? r.readVardict()
            else { return }
            t.apply(props)
            guard t != known[path] else { return }
            known[path] = t
            emit(.changed(t))
        }
        connection.onSignal(owner) { message in
            guard SignalMatch.nameOwnerChange(message)?.name == Self.busName else { return }
            reload()
        }
        connection.onDisconnect = { running = false; loop.stop() }
        while running { loop.runOnce(maxWaitNanoseconds: nil) }
    }

    // MARK: image cache

    static let cacheInterface = NetActivityInterface.imageCache.rawValue

    /// Stores `data` (an image) under `identifier` in the shared cache.
    public func addImage(_ data: [UInt8], identifier: String) throws(NetActivityError) {
        _ = try call(ImageCacheMember.Method.addImage.rawValue, interface: Self.cacheInterface) { w in
            w.append(identifier)
            try w.appendBytes(data)
        }
    }

    /// The image as a sealed read-only memfd (close it when done) and its size; nil on a miss.
    public func openImage(identifier: String) throws(NetActivityError) -> (fd: Int32, size: UInt64)? {
        do {
            let reply = try call(ImageCacheMember.Method.openImage.rawValue, interface: Self.cacheInterface) { w in w.append(identifier) }
            var r = reply.reader()
            let fd = try r.readFD()
            let size = (try? r.read(UInt64.self)) ?? 0
            return (fd, size)
        } catch let e as NetActivityError where e.code == .notFound {
            return nil
        } catch let e as NetActivityError {
            throw e
        } catch {
            throw NetActivityError(.failed, "\(error)")
        }
    }

    /// Whether an image was removed.
    public func removeImage(identifier: String) throws(NetActivityError) -> Bool {
        try readBool(try call(ImageCacheMember.Method.removeImage.rawValue, interface: Self.cacheInterface) { w in w.append(identifier) })
    }

    /// Whether the cache held anything.
    public func removeAllImages() throws(NetActivityError) -> Bool {
        try readBool(try call(ImageCacheMember.Method.removeAllImages.rawValue, interface: Self.cacheInterface))
    }

    private func readBool(_ reply: Message) throws(NetActivityError) -> Bool {
        var r = reply.reader()
        do { return try r.read(Bool.self) } catch { throw NetActivityError(error) }
    }

    /// The cache's properties: "MemoryCapacity", "PreferredMemoryUsageAfterPurge", "MemoryUsage",
    /// "ImageCount", and the "Statistics" counters by name.
    public func cacheStatus() throws(NetActivityError) -> (properties: [String: UInt64], statistics: [(String, UInt64)]) {
        let reply = try call("GetAll", interface: "org.freedesktop.DBus.Properties") { w in w.append(Self.cacheInterface) }
        var r = reply.reader()
        let all: [String: DBusValue]
        do { all = try r.readVardict() } catch { throw NetActivityError(error) }
        var properties: [String: UInt64] = [:]
        for (k, v) in all {
            if let n = v.uint64Value { properties[k] = n } else if let n = v.uint32Value { properties[k] = UInt64(n) }
        }
        var statistics: [(String, UInt64)] = []
        if case .dict(_, _, let entries)? = all[ImageCacheMember.Property.statistics.rawValue] {
            for (k, v) in entries { if let name = k.stringValue, let n = v.uint64Value { statistics.append((name, n)) } }
        }
        return (properties, statistics)
    }

    // MARK: tasks of this connection

    /// Begins a task owned by this connection and returns its object path. It runs until
    /// `completeTask` or until this connection closes (then it completes with `ClientVanished`).
    public func beginTask(_ description: String, desktopID: String? = nil) throws(NetActivityError) -> String {
        let reply = try call(ActivityMember.Method.beginTask.rawValue) { w in
            w.append(description)
            var options: [String: DBusValue] = [:]
            if let desktopID { options[TaskMember.Option.desktopID.rawValue] = .string(desktopID) }
            try w.appendVardict(options)
        }
        var r = reply.reader()
        do {
            return try r.readObjectPath()
        } catch {
            throw NetActivityError(error)
        }
    }

    /// Sets a task's byte counters (an expected size of 0 is unknown; counters only grow).
    public func setTaskProgress(
        _ task: String, sent: UInt64 = 0, expectedToSend: UInt64 = 0, received: UInt64, expectedToReceive: UInt64
    ) throws(NetActivityError) {
        _ = try call(TaskMember.Method.setProgress.rawValue, interface: Self.taskInterface, path: task) { w in
            for v in [sent, expectedToSend, received, expectedToReceive] { w.append(v) }
        }
    }

    /// Completes a task: successfully when `error` is nil.
    public func completeTask(_ task: String, error: String? = nil) throws(NetActivityError) {
        _ = try call(TaskMember.Method.complete.rawValue, interface: Self.taskInterface, path: task) { w in w.append(error ?? "") }
    }

    // MARK: downloads

    static let downloaderInterface = NetActivityInterface.downloader.rawValue

    /// Downloads `url` through the shared downloader into the shared cache and waits for it:
    /// `progress` gets (received, expected; 0 = unknown) as the transfer's task reports them.
    /// Returns true when it was already cached. Errors are the agent's (`code` `.agent("HTTP")`,
    /// `.agent("Timeout")`, ...). Blocking: for command-line tools.
    @discardableResult
    public func download(
        url: String, additionalIdentifier: String = "", reload: Bool = false,
        progress: @escaping (UInt64, UInt64) -> Void = { _, _ in }
    ) throws(NetActivityError) -> Bool {
        let loop = EventLoop()
        connection.attach(to: loop)
        // DownloadFinished is sent to us alone; it needs no match rule, only a handler.
        var finished: (ok: Bool, name: String, message: String)?
        var receipt = ""
        connection.onSignal(SignalMatch(path: Self.path, interface: Self.downloaderInterface, member: DownloaderMember.Signal.downloadFinished.rawValue)) { message in
            var r = message.reader()
            guard let got = try? r.read(String.self), got == receipt, (try? r.read(String.self)) != nil,
                  let ok = try? r.read(Bool.self), let name = try? r.read(String.self), let text = try? r.read(String.self)
            else { return }
            finished = (ok, name, text)
            loop.stop()
        }
        let reply = try call(DownloaderMember.Method.downloadImage.rawValue, interface: Self.downloaderInterface) { w in
            w.append(url)
            var options: [String: DBusValue] = [:]
            if !additionalIdentifier.isEmpty { options[DownloaderMember.Option.additionalIdentifier.rawValue] = .string(additionalIdentifier) }
            if reload { options[DownloaderMember.Option.reload.rawValue] = .bool(true) }
            try w.appendVardict(options)
        }
        var r = reply.reader()
        let task: String
        do {
            receipt = try r.read(String.self)
            task = try r.readObjectPath()
            if try r.read(Bool.self) { return true }
        } catch {
            throw NetActivityError(error)
        }
        let changed = SignalMatch(path: task, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        try? connection.addMatch(changed.rule + ",sender='\(Self.busName)'")
        var received: UInt64 = 0, expected: UInt64 = 0
        func apply(_ props: [String: DBusValue]) {
            // Counters only grow; a signal queued during the GetAll below may be older than its answer.
            if let v = props[TaskMember.Property.countOfBytesReceived.rawValue]?.uint64Value { received = max(received, v) }
            if let v = props[TaskMember.Property.countOfBytesExpectedToReceive.rawValue]?.uint64Value { expected = v }
            progress(received, expected)
        }
        connection.onSignal(changed) { message in
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.taskInterface, let props = try? r.readVardict() else { return }
            apply(props)
        }
        // Changes sent before the match rule was in place are lost (the expected size usually comes with
        // the first one), so read the current values once, now that every later change reaches us.
        if let reply = try? call("GetAll", interface: "org.freedesktop.DBus.Properties", path: task, { w in w.append(Self.taskInterface) }) {
            var r = reply.reader()
            if let props = try? r.readVardict() { apply(props) }
        }
        connection.onDisconnect = { loop.stop() }
        while finished == nil, connection.isConnected { loop.runOnce(maxWaitNanoseconds: nil) }
        guard let finished else {
            throw NetActivityError(.disconnected, "The bus went away during the download")
        }
        guard finished.ok else { throw NetActivityError(name: finished.name, message: finished.message) }
        return false
    }

    /// The cached image for (url, additional identifier) as bytes, or nil.
    public func cachedImage(url: String, additionalIdentifier: String = "") throws(NetActivityError) -> [UInt8]? {
        let reply = try call(ImageCacheMember.Method.lookupImageForRequest.rawValue, interface: Self.cacheInterface) { w in
            w.append(url)
            w.append(additionalIdentifier)
        }
        var r = reply.reader()
        do {
            let found = try r.read(Bool.self)
            let data = try r.readBytes()
            return found ? data : nil
        } catch {
            throw NetActivityError(error)
        }
    }
}
