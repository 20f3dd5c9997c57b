public import DBusKit
import Glibc
public import LinuxKit
import NetActivityCore

/// Who is on the bus: each peer's app (the unit of fairness: `AppIdentity`), its process, and its
/// departure. Services charge what a client holds to its app and hear departures through this, in
/// the order they registered.
public protocol PeerRegistry: AnyObject {
    /// The app `peer` belongs to ("unit:app-firefox-12.scope", "flatpak:org.example.App",
    /// "pid:1234"); the peer's own name while it is not known.
    func app(of peer: String) -> String
    /// The process name of `peer` (`/proc/PID/comm`), delivered once, later (never inside the call);
    /// "" when it cannot be known.
    func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void)
    /// `handler` runs when a peer leaves the bus, after those registered before it.
    func onDeparture(_ handler: @escaping (String) -> Void)
}

/// The registry of a real bus: NameOwnerChanged for departures (only disappearances of unique
/// names, so a busy bus wakes the agent less), GetConnectionUnixProcessID for each new peer's
/// process, and `/proc/PID/cgroup` for its app. All asked without blocking the loop.
public final class BusPeerRegistry: PeerRegistry {
    private let connection: Connection
    private let scheduler: any Scheduler
    private var departureHandlers: [(String) -> Void] = []
    private struct Peer {
        let pid: UInt32
        let app: String
    }
    /// Read on every call, on the loop's thread only: no runtime exclusivity check.
    @exclusivity(unchecked) private var peers: [String: Peer] = [:]
    @exclusivity(unchecked) private var lastKnown: String?
    /// Peers being resolved, with what waits for them.
    private var resolving: [String: [(_ leaving: Bool) -> Void]] = [:]

    public init(connection: Connection, scheduler: any Scheduler) {
        self.connection = connection
        self.scheduler = scheduler
    }

    /// Subscribes to departures; call before serving.
    public func start() throws(DBusError) {
        try connection.addMatch(SignalMatch.nameOwnerChanged.rule + ",arg2=''")
        connection.onSignal(SignalMatch.nameOwnerChanged) { [unowned self] message in
            guard let change = SignalMatch.nameOwnerChange(message), change.newOwner.isEmpty, change.name.hasPrefix(":")
            else { return }
            self.departed(change.name)
        }
    }

    /// A peer that leaves while its calls wait for its app has them served first, as an app of its
    /// own (a fire-and-forget setter still takes effect), then everything it held is released.
    func departed(_ peer: String) {
        if let waiting = resolving.removeValue(forKey: peer) {
            peers[peer] = Peer(pid: 0, app: "peer:" + peer)
            for job in waiting { job(true) }
        }
        for handler in departureHandlers { handler(peer) }
        peers[peer] = nil
        if lastKnown == peer { lastKnown = nil }
    }

    public func onDeparture(_ handler: @escaping (String) -> Void) {
        departureHandlers.append(handler)
    }

    public func app(of peer: String) -> String { peers[peer]?.app ?? peer }

    public func isKnown(_ peer: String) -> Bool {
        // The peer that called last is usually the one calling now: a comparison, not a hash.
        if peer == lastKnown { return true }
        guard peers[peer] != nil else { return false }
        lastKnown = peer
        return true
    }

    /// Learns `peer`'s process and app, then runs `then` (at once when already known; jobs queued
    /// meanwhile run in the order they came). `leaving` is true when the peer left first: the jobs
    /// then run just before the departure handlers.
    public func resolve(_ peer: String, then: @escaping (_ leaving: Bool) -> Void) {
        if peers[peer] != nil { return then(false) }
        if resolving[peer] != nil {
            resolving[peer]!.append(then)
            return
        }
        resolving[peer] = [then]
        connection.busCallAsync("GetConnectionUnixProcessID", timeoutMilliseconds: 5000, { w in w.append(peer) }) {
            [self] result in
            // A strong capture: the call ends (answered or timed out) and lets go of it. A weak
            // one would give the registry a side table, and every call's use of it the slow path.
            guard let waiting = self.resolving.removeValue(forKey: peer) else { return }
            var pid: UInt32 = 0
            if case .success(let reply) = result {
                var r = reply.reader()
                pid = (try? r.read(UInt32.self)) ?? 0
            }
            // A peer whose process cannot be known (it left meanwhile) is an app of its own.
            let app = pid == 0 ? "peer:" + peer : AppIdentity.app(pid: pid, cgroup: Self.read("/proc/\(pid)/cgroup"))
            self.peers[peer] = Peer(pid: pid, app: app)
            for job in waiting { job(false) }
        }
    }

    public func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void) {
        resolve(peer) { [self] _ in
            guard let pid = self.peers[peer]?.pid, pid != 0 else { return known("") }
            // Later, as the protocol promises: on the next turn of the loop.
            let name = ServiceProcess.processName(pid: pid)
            self.scheduler.schedule(afterNanoseconds: 0) { known(name) }
        }
    }

    /// A small procfs file, read without blocking (procfs files never block).
    static func read(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = Glibc.read(fd, &buf, buf.count)
        return n > 0 ? String(decoding: buf[..<n], as: UTF8.self) : ""
    }
}
