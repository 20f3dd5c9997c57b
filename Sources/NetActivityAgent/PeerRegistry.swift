// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
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
    /// The whole identity of `peer` (a peer the registry never saw is a host process of the
    /// unscoped pool: the agent itself; every caller is resolved before its call runs).
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
    /// peer reads): at most `NetActivityLimits.maxHeldCallBytes`.
    public private(set) var heldBytes = 0

    public func hold(_ bytes: Int) { heldBytes += bytes }

    /// For the log of peers that do not read.
    private let logger: Logger
    /// Apps' names from their desktop files.
    private let appNames = AppNames()

    /// Reads a process's identity off the loop; the answer comes back on the loop's thread.
    public typealias IdentityReader = (_ pid: UInt32, _ startedBy: UInt64, _ done: @escaping (ClientIdentity?) -> Void)
        -> Void
    private let readIdentity: IdentityReader
    /// Reads an app's desktop entry (with `lookUp`) and a process's name off the loop; the answer
    /// comes back on the loop's thread.
    public typealias NameReader = (
        _ app: String, _ pid: UInt32, _ lookUp: @escaping @Sendable (String) -> DesktopEntry?,
        _ done: @escaping (DesktopEntry?, String) -> Void
    ) -> Void
    private let readName: NameReader
    /// When each peer's unique name appeared on the bus (boot-time clock ticks), for peers that
    /// connected while the agent ran: the process that made the connection started before it.
    private var connectedAt: [String: UInt64] = [:]
    /// How long a peer's identity may take to read, once the bus named its process, before its
    /// calls run with the least rights.
    static let identityTimeout: UInt64 = 1_000_000_000

    public convenience init(connection: Connection, loop: EventLoop, logger: Logger) {
        let readers = IdentityReaders(mailbox: loop.mailbox)
        self.init(
            connection: connection, scheduler: loop, logger: logger,
            readIdentity: { readers.read(pid: $0, startedBy: $1, $2) },
            readName: { readers.readName(app: $0, pid: $1, lookUp: $2, $3) })
    }

    public init(
        connection: Connection, scheduler: any Scheduler, logger: Logger, readIdentity: @escaping IdentityReader,
        readName: @escaping NameReader
    ) {
        self.connection = connection
        self.scheduler = scheduler
        self.logger = logger
        self.readIdentity = readIdentity
        self.readName = readName
    }

    /// Subscribes to departures; call before serving.
    public func start() throws(DBusError) {
        connection.onVolume = bound(self) { $0.inspectBacklog() }
        connection.onLargeMessage = bound(self) { $0.sentLarge(to: $1, bytes: $2) }
        // Departures, and arrivals of unique names: the moment a connection appeared pins which
        // process made it (the bus sends the arrival before anything the peer sends after Hello).
        try connection.addMatch(SignalMatch.nameOwnerChanged.rule + ",arg2=''")
        try connection.addMatch(SignalMatch.nameOwnerChanged.rule + ",arg1=''")
        connection.onSignal(SignalMatch.nameOwnerChanged, bound(self) { $0.nameOwnerChanged($1) })
    }

    private func nameOwnerChanged(_ message: Message) {
        guard let change = SignalMatch.nameOwnerChange(message), change.name.hasPrefix(":") else { return }
        if change.newOwner.isEmpty {
            departed(change.name)
        } else if change.oldOwner.isEmpty, peers[change.name] == nil {
            connectedAt[change.name] = ProcessIdentity.bootTicks()
        }
    }

    /// A peer that leaves while its calls wait for its app has them served first, then everything
    /// it held is released. Its app was never known, so they run with the least rights (a
    /// sandboxed app's, charged to the departed leaf): hit and run gains nothing, and a shared
    /// setting sent without waiting for the reply is refused (no one reads the refusal).
    func departed(_ peer: String) {
        if let waiting = resolving.removeValue(forKey: peer) {
            // Held while the bus was asked whether it reads: it keeps the identity it was charged as.
            if peers[peer] == nil { peers[peer] = Peer(pid: 0, identity: .unknown(peer: peer)) }
            for job in waiting { job(true) }
        }
        for handler in departureHandlers { handler(peer) }
        peers[peer] = nil
        connectedAt[peer] = nil
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
        peers[peer]?.identity
            ?? ClientIdentity(app: ClientIdentity.unscopedApp, leaf: ClientIdentity.unscopedApp + "/" + peer)
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
    /// when that is much, how much each recent caller has not read. docs/contract.md, "Nothing piles up for
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
            self.logger.debug(
                "The bus holds \(held.map(String.init) ?? "?") bytes of ours; \(callers.count) recent callers")
            if let held, held >= Self.backlogToInspect {
                for peer in callers
                where self.peers[peer] != nil && self.silencedBackoff[peer] == nil && self.resolving[peer] == nil {
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
            // No answer in time (the daemon itself is stuck) counts as not reading; a bus that
            // cannot say, or a peer that left meanwhile, as reading.
            let unread = answer ?? (self.statsUnavailable || self.peers[peer] == nil ? 0 : UInt32.max)
            self.unconfirmed[peer] = Int(min(unread, Self.unreadAllowance))
            defer { self.release(peer) }
            let silenced = self.silencedBackoff[peer] != nil
            if unread > Self.unreadAllowance || (silenced && unread > Self.readAgainBelow) {
                if !silenced {
                    self.connection.silenced.insert(peer)
                    self.logger.warning(
                        "Client \(peer) (\(self.app(of: peer))) does not read: the bus holds \(unread) bytes for it; replies and signals to it are dropped until it reads"
                    )
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
            "GetConnectionStats", interface: "org.freedesktop.DBus.Debug.Stats", timeoutMilliseconds: 5000,
            { w in w.append(name) }
        ) { [self] result in
            switch result {
            case .success(let reply):
                var r = reply.reader()
                if case .uint32(let n)? = (try? r.readVardict())?[field] { return done(n) }
                done(nil)
            case .failure(let error):
                // No answer in time says the bus is stuck, and a peer that left has no stats; any
                // other refusal (dbus-daemon without the interface, dbus-broker's Error.Failed)
                // says the bus cannot tell: the guard is off, never wrong.
                let gone = error.name == "org.freedesktop.DBus.Error.NameHasNoOwner"
                let timedOut = error.name == "org.freedesktop.DBus.Error.NoReply"  // busCallAsync's timeout
                if !gone, !timedOut { self.statsRefused(error) }
                done(nil)
            }
        }
    }

    /// The bus answers no Debug.Stats: nothing more is asked, peers held for it go on, and no
    /// peer is silenced for what the bus cannot say.
    private func statsRefused(_ error: DBusError) {
        guard !statsUnavailable else { return }
        statsUnavailable = true
        logger.notice(
            "The bus has no usable Debug.Stats (\(error.name): \(error.message)): clients that do not read cannot be told apart; that guard is off"
        )
        for peer in silencedBackoff.keys { unsilence(peer) }
        unconfirmed.removeAll()
    }

    /// Asks the bus once, at start, whether it answers Debug.Stats for our own connection.
    public func probeStats() {
        queued(of: connection.uniqueName, field: "IncomingBytes") { _ in }
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
        // The process that made the connection started before the connection appeared (or, for
        // one older than the agent, before its first call reached us): a process that started
        // later holds a recycled pid, and is not the peer.
        let startedBy = connectedAt.removeValue(forKey: peer) ?? ProcessIdentity.bootTicks()
        // The bus's answer comes behind whatever the peer sent before it (a flood of calls is
        // read first), within the call's timeout.
        connection.busCallAsync("GetConnectionUnixProcessID", timeoutMilliseconds: 5000, { w in w.append(peer) }) {
            [self] result in
            // A strong capture: the call ends (answered or timed out) and lets go of it. A weak
            // one would give the registry a side table, and every call's use of it the slow path.
            guard self.resolving[peer] != nil else { return }
            var pid: UInt32 = 0
            if case .success(let reply) = result {
                var r = reply.reader()
                pid = (try? r.read(UInt32.self)) ?? 0
            }
            guard pid != 0 else { return self.resolved(peer, pid: 0, identity: nil) }
            // Its identity is read off the loop and may never come (a stalled file system): after
            // the timeout, the least rights.
            let timeout = self.scheduler.schedule(afterNanoseconds: Self.identityTimeout) { [weak self] in
                self?.resolved(peer, pid: 0, identity: nil)
            }
            self.readIdentity(pid, startedBy) { [weak self] identity in
                self?.scheduler.cancel(timeout)
                self?.resolved(peer, pid: pid, identity: identity)
            }
        }
    }

    /// The end of `resolve`: a peer whose process cannot be known (it left, its pid was recycled,
    /// its files could not be read safely or in time) has the least rights.
    private func resolved(_ peer: String, pid: UInt32, identity: ClientIdentity?) {
        guard let waiting = resolving.removeValue(forKey: peer) else { return }
        if identity == nil { logger.debug("The app of \(peer) (pid \(pid)) cannot be known: it has the least rights") }
        peers[peer] = Peer(pid: identity == nil ? 0 : pid, identity: identity ?? .unknown(peer: peer))
        for job in waiting { job(false) }
    }

    public func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void) {
        resolve(peer) { [self] _ in
            guard let found = self.peers[peer], found.pid != 0 else { return known("") }
            let app = found.identity.app
            if case .some(let entry) = self.appNames.remembered(forApp: app) {
                // Known (or no desktop file to read): procfs's name at most, which never waits.
                let name = entry?.name ?? ServiceProcess.processName(pid: found.pid)
                // Later, as the protocol promises: on the next turn of the loop.
                self.scheduler.schedule(afterNanoseconds: 0) { known(name) }
                return
            }
            // A desktop file is read off the loop: it can be a link into FUSE.
            self.readName(app, found.pid, self.appNames.lookUp) { [weak self] entry, processName in
                self?.appNames.remember(entry, forApp: app)
                known(entry?.name ?? processName)
            }
        }
    }

}
