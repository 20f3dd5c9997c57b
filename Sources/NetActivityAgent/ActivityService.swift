// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
import Glibc
public import LinuxKit
public import NetActivityContract
public import NetActivityCore

/// Where activity is counted: other services (tasks) add and release theirs through this.
public protocol ActivitySink: AnyObject {
    /// One more of `source` for `client`, or `LimitsExceeded` naming the limit.
    func acquire(_ source: ActivityLedger.Source, for client: String) throws(NetActivityError)
    /// One less of `source` for `client` (never below zero).
    func release(_ source: ActivityLedger.Source, for client: String)
}

/// What the desktop observers read of the indicator.
public protocol IndicatorSource: AnyObject {
    var isVisible: Bool { get }
    /// The activity count now (during the completion delay the indicator is visible with 0).
    var total: UInt64 { get }
    /// "firefox (2), thunderbird (1)": who holds the activity, for tooltips and notifications.
    var clientsSummary: String { get }
    /// The same, one entry per client ("firefox (2)"), for menus.
    var clientRows: [String] { get }
    /// Whether the indicator is enabled (the `Enabled` property), and a way to change it.
    var isEnabled: Bool { get }
    func setEnabled(_ enabled: Bool)
}

/// Something on the desktop that follows the indicator (the tray icon, notifications).
public protocol DesktopObserver: AnyObject {
    func start() throws
    func visibleChanged(_ visible: Bool)
    /// The coalesced client list, or a client's lease reasons, changed (at most every 50 ms).
    func clientsChanged()
    /// `Enabled` changed.
    func enabledChanged()
}

extension DesktopObserver {
    public func enabledChanged() {}
}

/// Begins a task for a client (the `BeginTask` method lives on this service's interface, the
/// tasks in `TaskService`).
public protocol TaskBeginning: AnyObject {
    func beginTask(for owner: String, description: String, options: [String: DBusValue]) throws -> String
}

/// `org.example.NetActivity`: per-client counts and fd leases feed the ledger, the ledger's total
/// drives the delayed state machine, and the machine's actions become timers, PropertiesChanged
/// and the `Visible` signal. ActivityCount and Clients change on every call, so their signal is
/// coalesced (docs/contract.md). Everything runs on the loop's thread; nothing is locked.
public final class ActivityService: ActivitySink, IndicatorSource {
    let context: AgentContext
    /// Lease fds are watched here (the production loop; tests pass one they never run).
    private let loop: EventLoop
    // Every activity call touches these, only on the loop's thread and never across a call back
    // into this service: the runtime's exclusivity checks are off for them.
    @exclusivity(unchecked) private(set) var machine: ActivityIndicatorStateMachine
    @exclusivity(unchecked) private(set) var ledger = ActivityLedger()
    private var indicatorTimer: TimerID?

    /// An open lease: its holder, the reason it gave, and when it began (the order reasons are
    /// listed in).
    private struct Lease {
        let client: String
        let reason: String
        let serial: UInt64
    }
    /// Open leases: our read end of the pipe -> the lease.
    private var leases: [Int32: Lease] = [:]
    private var nextLeaseSerial: UInt64 = 0
    /// Bumped when a lease with a reason begins or ends; `Reasons` is invalidated when it moved.
    private var reasonsGeneration: UInt64 = 0
    private var emittedReasonsGeneration: UInt64 = 0
    /// Leases by holder. Each is charged to the holder's app in the accounts (`.leases`); an app
    /// is known from its first call until its departure has been handled, so charging and
    /// releasing always agree on it.
    private var leasesByClient: [String: Set<Int32>] = [:]

    @exclusivity(unchecked) private var countCoalescer = ChangeCoalescer(interval: .milliseconds(50))
    private var emittedCount: UInt32 = 0
    private var emittedClients: [ClientEntry] = []

    /// The tray icon and notifications follow the indicator through these.
    public var observers: [any DesktopObserver] = []
    /// Serves `BeginTask`.
    public weak var tasks: (any TaskBeginning)?

    struct ClientEntry: Equatable {
        let name: String
        let processName: String
        let count: UInt32
    }

    public init(
        context: AgentContext, loop: EventLoop, activationDelay: Double, completionDelay: Double
    ) {
        self.context = context
        self.loop = loop
        machine = ActivityIndicatorStateMachine(
            activationDelay: .seconds(double: activationDelay), completionDelay: .seconds(double: completionDelay))
    }

    public var isVisible: Bool { machine.isVisible }
    public var state: IndicatorState { machine.state }
    public var total: UInt64 { ledger.total }

    public func setEnabled(_ enabled: Bool) {
        guard enabled != machine.isEnabled else { return }
        let actions = machine.setEnabled(enabled, count: ledger.total, now: context.now)
        emitChanged([ActivityMember.Property.enabled.rawValue])
        for observer in observers { observer.enabledChanged() }
        perform(actions)
    }

    /// The delays from the agent's settings (start-up or a reload).
    public func setDelays(activation: Double, completion: Double) throws(NetActivityError) {
        try setDelay(.activationDelay, \.activationDelay, seconds: activation)
        try setDelay(.completionDelay, \.completionDelay, seconds: completion)
    }

    func setDelay(
        _ property: ActivityMember.Property, _ keyPath: WritableKeyPath<ActivityIndicatorStateMachine, Duration>,
        seconds: Double
    ) throws(NetActivityError) {
        guard seconds.isFinite, seconds >= 0, seconds <= NetActivityLimits.maxDelaySeconds else {
            throw .invalidArgs(
                "\(property.rawValue) must be between 0 and \(Int(NetActivityLimits.maxDelaySeconds)) seconds, got \(seconds)"
            )
        }
        let value = Duration.seconds(double: seconds)
        guard value != machine[keyPath: keyPath] else { return }
        machine[keyPath: keyPath] = value
        emitChanged([property.rawValue])
    }

    /// The distinct non-empty reasons of each client's open leases, oldest first, at most
    /// `maxReasonsPerClient` each; clients whose leases gave none are left out.
    func reasonsByClient() -> [String: [String]] {
        var result: [String: [String]] = [:]
        for (client, fds) in leasesByClient {
            let open = fds.compactMap { leases[$0] }.filter { !$0.reason.isEmpty }.sorted { $0.serial < $1.serial }
            var reasons: [String] = []
            for lease in open where !reasons.contains(lease.reason) {
                reasons.append(lease.reason)
                if reasons.count == NetActivityLimits.maxReasonsPerClient { break }
            }
            if !reasons.isEmpty { result[client] = reasons }
        }
        return result
    }

    // MARK: ActivitySink: the one route to the ledger

    public func acquire(_ source: ActivityLedger.Source, for client: String) throws(NetActivityError) {
        let isNew: Bool
        do {
            isNew = try ledger.add(source, for: client)
        } catch {
            throw .limitsExceeded(
                "Client \(client) already holds \(error.limit) \(Self.noun(source)), the most one client may hold")
        }
        if isNew { lookUpProcessName(client) }
        totalChanged()
    }

    public func release(_ source: ActivityLedger.Source, for client: String) {
        if ledger.remove(source, for: client) { totalChanged() }
    }

    static func noun(_ source: ActivityLedger.Source) -> String {
        switch source {
        case .count: "activity counts"
        case .lease: "activity leases"
        case .task: "running tasks"
        }
    }

    /// What the agent's own activity (the shared downloader's transfers) is called where clients
    /// are listed.
    static var ownName: String { tr("Image downloads") }
    /// A client whose name is not known (yet): never its bus name in text people read.
    static var unknownName: String { tr("An app") }

    private func lookUpProcessName(_ client: String) {
        if client == context.uniqueName {
            ledger.setProcessName(Self.ownName, for: client)
            return
        }
        // Strong: the registry lets go of the callback once it ran (see BusPeerRegistry.resolve).
        context.peers.lookUpProcessName(of: client) { [self] name in
            guard self.ledger.clients[client] != nil else { return }
            self.ledger.setProcessName(name, for: client)
            if self.ledger.count(of: client) > 0 { self.noteCountChange() }
        }
    }

    /// The client left the bus: everything it held goes at once.
    public func clientVanished(_ client: String) {
        for fd in leasesByClient.removeValue(forKey: client) ?? [] {
            if leases.removeValue(forKey: fd)?.reason.isEmpty == false { reasonsGeneration &+= 1 }
            context.accounts.release(.leases, connection: client, leaf: context.peers.app(of: client))
            loop.unwatch(fd: fd)
            close(fd)
        }
        guard let held = ledger.removeClient(client) else { return }
        if held.total > 0 {
            context.logger.debug("Client \(client) (\(held.processName)) left holding \(held.total)")
            totalChanged()
        }
    }

    // MARK: the indicator

    /// Applies a change of the ledger's total to the machine, and notes it for the coalesced signal.
    private func totalChanged() {
        perform(machine.countChanged(to: ledger.total, now: context.now))
        noteCountChange()
    }

    private func perform(_ actions: [ActivityIndicatorStateMachine.Action]) {
        guard !actions.isEmpty else { return }
        var changed: [String] = []
        var visibleChanged = false
        for action in actions {
            switch action {
            case .scheduleTimer(let deadline, let generation):
                if let t = indicatorTimer { context.scheduler.cancel(t) }
                indicatorTimer = context.schedule(at: deadline, bound(self) { $0.indicatorTimerFired(generation) })
            case .cancelTimer:
                if let t = indicatorTimer { context.scheduler.cancel(t) }
                indicatorTimer = nil
            case .publishState:
                if !changed.contains(ActivityMember.Property.state.rawValue) {
                    changed.append(ActivityMember.Property.state.rawValue)
                }
            case .publishVisible:
                visibleChanged = true
                if !changed.contains(ActivityMember.Property.visible.rawValue) {
                    changed.insert(ActivityMember.Property.visible.rawValue, at: 0)
                }
            }
        }
        if visibleChanged {
            let visible = machine.isVisible
            context.logger.debug("Visible=\(visible) state=\(machine.state.rawValue) count=\(ledger.total)")
            context.sink.emitSignal(
                path: NetActivityBus.objectPath, interface: NetActivityInterface.activity.rawValue,
                member: ActivityMember.Signal.visible.rawValue
            ) { w in w.append(visible) }
        }
        emitChanged(changed)
        if visibleChanged { for observer in observers { observer.visibleChanged(machine.isVisible) } }
    }

    private func emitChanged(_ names: [String]) {
        guard !names.isEmpty else { return }
        // A signal that goes out anyway (State, Visible: a few a second at most, as the delays
        // allow) carries the coalesced values too, whatever the interval: an observer never sees a
        // state that disagrees with the count (active with a count of 0 that is already 1).
        let coalesced = takeCoalescedChanges()
        context.emitPropertiesChanged(.activity, names + coalesced.changed, invalidated: coalesced.invalidated)
    }

    private func indicatorTimerFired(_ generation: UInt64) {
        indicatorTimer = nil
        perform(machine.timerFired(generation: generation, count: ledger.total, now: context.now))
    }

    private func noteCountChange() {
        switch countCoalescer.noteChange(now: context.now) {
        case .emitNow:
            emitCountAndClients()
        case .schedule(let deadline):
            context.schedule(
                at: deadline,
                bound(self) { me in
                    me.countCoalescer.timerFired()
                    me.emitCountAndClients()
                })
        case .wait:
            break
        }
    }

    private func emitCountAndClients() {
        let coalesced = takeCoalescedChanges()
        context.emitPropertiesChanged(.activity, coalesced.changed, invalidated: coalesced.invalidated)
    }

    /// The coalesced properties whose values differ from what was last sent, marked as sent:
    /// those whose values go in the signal, and `Reasons`, which goes as invalidated.
    private func takeCoalescedChanges() -> (changed: [String], invalidated: [String]) {
        var names: [String] = []
        var invalidated: [String] = []
        let count = UInt32(clamping: ledger.total)
        if count != emittedCount {
            emittedCount = count
            names.append(ActivityMember.Property.activityCount.rawValue)
        }
        let clients = currentClients()
        if clients != emittedClients {
            emittedClients = clients
            names.append(ActivityMember.Property.clients.rawValue)
        }
        if reasonsGeneration != emittedReasonsGeneration {
            emittedReasonsGeneration = reasonsGeneration
            invalidated.append(ActivityMember.Property.reasons.rawValue)
        }
        if !names.isEmpty || !invalidated.isEmpty { countCoalescer.didEmit(now: context.now) }
        // The desktop's rows show who holds activity and why.
        if names.contains(ActivityMember.Property.clients.rawValue) || !invalidated.isEmpty {
            for observer in observers { observer.clientsChanged() }
        }
        return (names, invalidated)
    }

    private func currentClients() -> [ClientEntry] {
        ledger.activeClients.map { ClientEntry(name: $0.name, processName: $0.processName, count: $0.count) }
    }

    public var clientsSummary: String {
        let rows = clientRows
        return rows.isEmpty ? tr("No network activity") : rows.joined(separator: ", ")
    }

    /// "Firefox (2)", or "Firefox (2) — Syncing mail" when its leases gave reasons (people read
    /// these on the user's own desktop, so every app's reasons are shown).
    public var clientRows: [String] {
        let reasons = reasonsByClient()
        return currentClients().map { client in
            let row = "\(client.processName.isEmpty ? Self.unknownName : client.processName) (\(client.count))"
            guard let given = reasons[client.name] else { return row }
            return row + " — " + DisplayText.line(given.joined(separator: ", "))
        }
    }

    public var isEnabled: Bool { machine.isEnabled }

    // MARK: leases

    func beginLease(for client: String, reason: String, reply: inout MessageWriter) throws {
        guard reason.utf8.count <= NetActivityLimits.maxReasonBytes else {
            throw NetActivityError.invalidArgs(
                "Reason is \(reason.utf8.count) bytes long; the limit is \(NetActivityLimits.maxReasonBytes)")
        }
        let app = context.peers.app(of: client)
        if let refusal = context.accounts.check(.leases, connection: client, leaf: app) {
            throw NetActivityError.limitsExceeded(
                context.accounts.refusalMessage(refusal, .leases, connection: client, leaf: app))
        }
        guard let (readEnd, writeEnd) = makeLeasePipe() else {
            throw NetActivityError.limitsExceeded("Could not create a lease: \(String(cString: strerror(errno)))")
        }
        // libdbus sends its own duplicate; ours closes at once, so only the client's copies count.
        defer { close(writeEnd) }
        do {
            try reply.appendFD(writeEnd)
            try acquire(.lease, for: client)
        } catch {
            close(readEnd)
            throw error
        }
        leases[readEnd] = Lease(client: client, reason: reason, serial: nextLeaseSerial)
        nextLeaseSerial += 1
        if !reason.isEmpty { reasonsGeneration &+= 1 }
        leasesByClient[client, default: []].insert(readEnd)
        context.accounts.charge(.leases, connection: client, leaf: app)
        // Watched for the hang-up alone (epoll always reports it): the agent never reads a lease,
        // so a holder that writes into it only fills its own pipe and never wakes the loop.
        loop.watch(fd: readEnd, events: 0, handler: bound(self) { me, _ in me.endLease(fd: readEnd) })
        context.logger.debug("Lease \(readEnd) for \(client): \(reason)")
    }

    private func endLease(fd: Int32) {
        guard let lease = leases.removeValue(forKey: fd) else { return }
        let client = lease.client
        if !lease.reason.isEmpty { reasonsGeneration &+= 1 }
        context.accounts.release(.leases, connection: client, leaf: context.peers.app(of: client))
        leasesByClient[client]?.remove(fd)
        if leasesByClient[client]?.isEmpty == true { leasesByClient[client] = nil }
        loop.unwatch(fd: fd)
        close(fd)
        release(.lease, for: client)
    }
}
