public import DBusKit
import Glibc
public import LinuxKit
public import Logging
public import NetActivityCore

/// Who is on the bus: each peer's identity (`ClientIdentity`: its app, the leaf charged, whether it
/// is sandboxed), its process, and its departure. Services charge what a client holds to its leaf
/// and hear departures through this, in the order they registered.
public protocol PeerRegistry: AnyObject {
    /// What `peer` is charged as: its app ("app:org.gnome.Terminal", "flatpak:org.example.App"),
    /// or its process in the unscoped pool ("unscoped/pid:1234"); the peer's own name while it is
    /// not known (only the agent itself, and callers the registry never saw).
    func app(of peer: String) -> String
    /// The whole identity of `peer` (an unknown peer is a host process of the unscoped pool).
    func identity(of peer: String) -> ClientIdentity
    /// The name of `peer` as people know it: its app's `Name` from the app's `.desktop` file, else
    /// its process name (`/proc/PID/comm`). Delivered once, later (never inside the call); "" when
    /// it cannot be known.
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
        let identity: ClientIdentity
    }
    /// Read on every call, on the loop's thread only: no runtime exclusivity check.
    @exclusivity(unchecked) private var peers: [String: Peer] = [:]
    @exclusivity(unchecked) private var lastKnown: String?
    /// Peers being resolved, with what waits for them.
    private var resolving: [String: [(_ leaving: Bool) -> Void]] = [:]

    /// Bytes of calls held (waiting for their peer's identity, or for the bus to say whether the
    /// peer reads), and the most that may be: libdbus stops reading at 63 MiB of messages it holds,
    /// and the answers the registry waits for must still get through.
    public private(set) var heldBytes = 0
    public static let maxHeldBytes = 24 << 20

    public func hold(_ bytes: Int) { heldBytes += bytes }

    /// For the log of peers that do not read.
    private let logger: Logger
    /// Apps' names from their desktop files.
    private let appNames = AppNames()

    public init(connection: Connection, scheduler: any Scheduler, logger: Logger) {
        self.connection = connection
        self.scheduler = scheduler
        self.logger = logger
    }

    /// Subscribes to departures; call before serving.
    public func start() throws(DBusError) {
        connection.onVolume = { [unowned self] in self.inspectBacklog() }
        connection.onLargeMessage = { [unowned self] peer, bytes in self.sentLarge(to: peer, bytes: bytes) }
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
            // Held while its app was learned: an app of its own no more, the departed leaf. Held
            // while the bus was asked whether it reads: it keeps the identity it was charged as.
            if peers[peer] == nil { peers[peer] = Peer(pid: 0, identity: .departed) }
            for job in waiting { job(true) }
        }
        for handler in departureHandlers { handler(peer) }
        peers[peer] = nil
        if lastKnown == peer { lastKnown = nil }
        recentCallers.remove(peer)
        unconfirmed[peer] = nil
        if silencedBackoff[peer] != nil { unsilence(peer) }
    }

    public func onDeparture(_ handler: @escaping (String) -> Void) {
        departureHandlers.append(handler)
    }

    public func app(of peer: String) -> String { peers[peer]?.identity.leaf ?? peer }

    public func identity(of peer: String) -> ClientIdentity {
        peers[peer]?.identity ?? ClientIdentity(app: ClientIdentity.unscopedApp, leaf: ClientIdentity.unscopedApp + "/" + peer)
    }

    public func isKnown(_ peer: String) -> Bool {
        // The peer that called last is usually the one calling now: a comparison, not a hash.
        if peer == lastKnown { return true }
        // Held (its app not known yet, or what it was sent being checked): its calls wait.
        guard peers[peer] != nil, resolving[peer] == nil else { return false }
        lastKnown = peer
        recentCallers.insert(peer)
        return true
    }

    // MARK: peers that do not read

    /// Bytes the bus may hold for one peer (sent by us, not yet read by it) before replies and
    /// unicast signals to it are dropped; below `readAgainBelow` they flow again.
    static let unreadAllowance: UInt32 = 8 << 20
    static let readAgainBelow: UInt32 = 2 << 20
    /// Large messages (`Connection.largeMessageBytes` and more) sent to one peer since the bus
    /// last showed it reading: past `checkAfter`, its calls wait while the bus is asked.
    private var unconfirmed: [String: Int] = [:]
    static let checkAfter = 4 << 20
    /// Bytes of ours the bus may hold in all before the peers we answered lately are inspected.
    static let backlogToInspect: UInt32 = 24 << 20
    /// Peers that called since the last inspection (added when the caller changes: no hashing
    /// per call in a burst from one peer).
    private var recentCallers: Set<String> = []
    private var inspecting = false
    /// Silenced peers and the delay before their queue is looked at again (milliseconds).
    private var silencedBackoff: [String: UInt64] = [:]
    /// Set when the bus has no Debug.Stats interface (dbus-broker): nothing more is asked.
    private var statsUnavailable = false

    /// Set when more was sent while an inspection was under way: another follows it.
    private var inspectAgain = false

    /// A large reply or signal goes to `peer`: past `checkAfter` bytes since the bus last showed
    /// it reading, its calls wait (as a new peer's do) until the bus says how much it holds for
    /// it. So a client that asks for large replies and never reads gets at most about
    /// `checkAfter` + `unreadAllowance` queued, however fast it asks.
    func sentLarge(to peer: String, bytes: Int) {
        guard peers[peer] != nil, !statsUnavailable else { return }
        let total = unconfirmed[peer, default: 0] + bytes
        unconfirmed[peer] = total
        guard total >= Self.checkAfter, resolving[peer] == nil, silencedBackoff[peer] == nil else { return }
        resolving[peer] = []
        if lastKnown == peer { lastKnown = nil }
        inspect(peer)
    }

    /// Lets a held peer's calls go, in order.
    private func release(_ peer: String) {
        guard peers[peer] != nil, let waiting = resolving.removeValue(forKey: peer) else { return }
        for job in waiting { job(false) }
    }

    /// Every `volumeStep` bytes we send: asks the daemon how many of ours it still holds, and
    /// when that is much, how much each recent caller has not read. DESIGN "Nothing piles up for
    /// a peer": the daemon stops reading us for everyone once it holds 1 GB of ours (the session
    /// bus's max_incoming_bytes), which one client that never reads its socket could cause.
    func inspectBacklog() {
        guard !statsUnavailable else { return }
        guard !inspecting else { return inspectAgain = true }
        inspecting = true
        inspectAgain = false
        // Every caller from now on is noted again.
        lastKnown = nil
        queued(of: connection.uniqueName, field: "IncomingBytes") { [self] held in
            self.inspecting = false
            let callers = self.recentCallers
            self.recentCallers.removeAll()
            self.logger.debug("The bus holds \(held.map(String.init) ?? "?") bytes of ours; \(callers.count) recent callers")
            if let held, held >= Self.backlogToInspect {
                for peer in callers where self.peers[peer] != nil && self.silencedBackoff[peer] == nil && self.resolving[peer] == nil {
                    self.inspect(peer)
                }
            }
            if self.inspectAgain { self.inspectBacklog() }
        }
    }

    /// Silences `peer` while the daemon holds more than `unreadAllowance` bytes for it; looks
    /// again after a delay that doubles up to 2 s (no polling while nobody is silenced).
    private func inspect(_ peer: String) {
        queued(of: peer, field: "OutgoingBytes") { [self] answer in
            guard self.peers[peer] != nil else { return }
            // No answer in time (the daemon itself is stuck) counts as not reading.
            let unread = answer ?? (self.statsUnavailable ? 0 : UInt32.max)
            self.unconfirmed[peer] = Int(min(unread, Self.unreadAllowance))
            defer { self.release(peer) }
            let silenced = self.silencedBackoff[peer] != nil
            if unread > Self.unreadAllowance || (silenced && unread > Self.readAgainBelow) {
                if !silenced {
                    self.connection.silenced.insert(peer)
                    self.logger.warning(
                        "Client \(peer) (\(self.app(of: peer))) does not read: the bus holds \(unread) bytes for it; replies and signals to it are dropped until it reads")
                }
                let delay = min(2000, (self.silencedBackoff[peer] ?? 50) * 2)
                self.silencedBackoff[peer] = delay
                _ = self.scheduler.schedule(afterNanoseconds: delay * 1_000_000) { [weak self] in self?.inspect(peer) }
            } else if silenced {
                self.unsilence(peer)
                self.logger.notice("Client \(peer) reads again (\(unread) bytes unread)")
            }
        }
    }

    private func unsilence(_ peer: String) {
        silencedBackoff[peer] = nil
        connection.silenced.remove(peer)
    }

    /// A u32 of Debug.Stats.GetConnectionStats for `name`; nil when it cannot be had.
    private func queued(of name: String, field: String, _ done: @escaping (UInt32?) -> Void) {
        connection.busCallAsync(
            interface: "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", timeoutMilliseconds: 5000, { w in w.append(name) }
        ) { [self] result in
            switch result {
            case .success(let reply):
                var r = reply.reader()
                if case .uint32(let n)? = (try? r.readVardict())?[field] { return done(n) }
                done(nil)
            case .failure(let error):
                if error.name.hasSuffix(".UnknownInterface") || error.name.hasSuffix(".UnknownMethod") || error.name.hasSuffix(".AccessDenied") {
                    self.statsUnavailable = true
                    self.logger.notice(
                        "The bus has no usable Debug.Stats (\(error.message)): clients that do not read cannot be told apart")
                }
                done(nil)
            }
        }
    }

    /// Learns `peer`'s process and app, then runs `then` (at once when already known; jobs queued
    /// meanwhile run in the order they came). `leaving` is true when the peer left first: the jobs
    /// then run just before the departure handlers.
    public func resolve(_ peer: String, then: @escaping (_ leaving: Bool) -> Void) {
        if resolving[peer] != nil {
            resolving[peer]!.append(then)
            return
        }
        if peers[peer] != nil { return then(false) }
        resolving[peer] = [then]
        // The process that connected started before its first message reached us: one that
        // started later holds a recycled pid, and is not the peer.
        let firstSeen = ProcessIdentity.bootTicks()
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
            // A peer whose process cannot be known (it left meanwhile) joins the departed leaf.
            let identity = pid == 0 ? nil : ProcessIdentity.read(pid: pid, startedBy: firstSeen)
            self.peers[peer] = Peer(pid: identity == nil ? 0 : pid, identity: identity ?? .departed)
            for job in waiting { job(false) }
        }
    }

    public func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void) {
        resolve(peer) { [self] _ in
            guard let found = self.peers[peer], found.pid != 0 else { return known("") }
            let name = self.appNames.entry(forApp: found.identity.app)?.name ?? ServiceProcess.processName(pid: found.pid)
            // Later, as the protocol promises: on the next turn of the loop.
            self.scheduler.schedule(afterNanoseconds: 0) { known(name) }
        }
    }

}

/// A process's identity read from procfs, pinned to one process: every file is opened through one
/// `/proc/PID` directory descriptor (a pid reused after that fails to read, ESRCH), and the process
/// must have started before `startedBy` (so a pid recycled before we opened it does not pass).
enum ProcessIdentity {
    static func read(pid: UInt32, startedBy: UInt64) -> ClientIdentity? {
        let dir = open("/proc/\(pid)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return nil }
        defer { close(dir) }
        guard let stat = readSmall(at: dir, "stat"), let started = AppIdentity.startTime(stat: stat), started <= startedBy
        else { return nil }
        let cgroup = readSmall(at: dir, "cgroup") ?? ""
        let label = readSmall(at: dir, "attr/current") ?? ""
        // Through the process's own root: the file a Flatpak sandbox has at "/" (a regular file,
        // never one a FUSE server could hold up).
        let info = readSmall(at: dir, "root/.flatpak-info", regularOnly: true)
        let identity = AppIdentity.identify(pid: pid, uid: getuid(), cgroup: cgroup, flatpakInfo: info, securityLabel: label)
        // Read once more: a process that exited meanwhile (its files read empty) is not trusted.
        guard let again = readSmall(at: dir, "stat"), AppIdentity.startTime(stat: again) == started else { return nil }
        return identity
    }

    /// CLOCK_BOOTTIME in clock ticks, the unit of /proc/PID/stat's start time (rounded up).
    static func bootTicks() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        let hz = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return UInt64(ts.tv_sec) * hz + (UInt64(ts.tv_nsec) * hz + 999_999_999) / 1_000_000_000
    }

    /// A file of at most 64 KiB under `dir`, read without blocking; nil when absent or refused.
    static func readSmall(at dir: Int32, _ path: String, regularOnly: Bool = false) -> String? {
        let fd = openat(dir, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if regularOnly {
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size <= 65536, !Files.isOnFUSE(fd) else { return nil }
        }
        var buf = [UInt8](repeating: 0, count: 65536)
        var count = 0
        while count < buf.count {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            count += n
        }
        return String(decoding: buf[..<count], as: UTF8.self)
    }
}
