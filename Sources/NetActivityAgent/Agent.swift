public import DBusKit
public import Logging
import Glibc
import NetActivityCore

/// Options the agent starts with.
public struct AgentOptions: Sendable {
    public var activationDelay: Double = 1.0
    public var completionDelay: Double = 0.17
    /// Seconds a completed task stays on the bus for observers before it leaves.
    public var completedTaskLinger: Double = 5.0
    /// Where LowMemoryMonitor is looked for: nil is the system bus, "" turns it off.
    public var systemBusAddress: String?
    /// Register a StatusNotifierItem with org.kde.StatusNotifierWatcher when one is on the bus.
    public var tray = true
    /// Post org.freedesktop.Notifications when activity stays visible this long (nil: never).
    public var notifyAfter: Double?
    /// The open-file limit the agent runs with (after raising it). Fd-hungry holdings scale with
    /// it, so that no one client can run the agent out of descriptors.
    public var fileLimit: UInt64 = 1024
    public init() {}
}

/// Serves `org.example.NetActivity` at `/org/example/NetActivity`: per-client counts and fd leases
/// feed the ledger, the ledger's total drives the delayed state machine, and the machine's
/// actions become timers, PropertiesChanged and the `Visible` signal.
///
/// Everything here runs on the event loop's thread; nothing is locked.
public final class Agent {
    let loop: EventLoop
    let connection: Connection
    let server: ObjectServer
    let logger: Logger

    var machine: ActivityIndicatorStateMachine
    var ledger = ActivityLedger()
    private var indicatorTimer: EventLoop.TimerID?

    /// Open leases: our read end of the pipe -> the holder.
    private var leases: [Int32: String] = [:]
    private var leasesByClient: [String: Set<Int32>] = [:]

    var tasks = TaskTable()
    var imageCache = AutoPurgingImageCache<CachedImage>()
    lazy var downloads = Downloads(agent: self)
    private var pressure: MemoryPressureMonitor?
    private let options: AgentOptions
    let taskLinger: Duration
    /// One table serves every task object; handlers find the task by the call's path.
    lazy var taskInterface = makeTaskInterface()

    /// ActivityCount and Clients change on every call; their signal is coalesced (DESIGN.md).
    private var countCoalescer = ChangeCoalescer(interval: .milliseconds(50))
    private var emittedCount: UInt32 = 0
    private var emittedClients: [ClientEntry] = []

    /// The tray icon and notifications follow the indicator through these.
    var desktopObservers: [any DesktopObserver] = []

    /// Called when the agent should stop (bus lost, name lost).
    public var onStop: (() -> Void)?

    struct ClientEntry: Equatable {
        let name: String
        let processName: String
        let count: UInt32
    }

    public init(connection: Connection, loop: EventLoop, options: AgentOptions, logger: Logger) {
        self.connection = connection
        self.loop = loop
        self.logger = logger
        server = ObjectServer(connection: connection)
        taskLinger = .seconds(double: options.completedTaskLinger)
        self.options = options
        ledger.limits[.task] = UInt32(AgentLimits.maxLiveTasksPerClient)
        ledger.limits[.lease] = AgentLimits.leasesPerClient(fileLimit: options.fileLimit)
        CachedImage.maxMemfds = AgentLimits.memfdImages(fileLimit: options.fileLimit)
        machine = ActivityIndicatorStateMachine(
            activationDelay: .seconds(double: options.activationDelay),
            completionDelay: .seconds(double: options.completionDelay))
    }

    var now: Instant { Instant(nanoseconds: EventLoop.now()) }

    /// Exports the object and subscribes to the bus signals the agent follows. Call before
    /// requesting the name, so the first call that arrives finds the object.
    public func start() throws {
        server.addObjectManager(at: NetActivityNames.objectPath)
        server.export(path: NetActivityNames.objectPath, interfaces: [makeActivityInterface(), makeImageCacheInterface(), makeDownloaderInterface()])
        startMemoryPressure()
        if options.tray { desktopObservers.append(TrayIcon(agent: self)) }
        if let after = options.notifyAfter { desktopObservers.append(ActivityNotifier(agent: self, after: after)) }
        // The desktop extras are optional: one that cannot start is logged, never fatal.
        desktopObservers.removeAll { observer in
            do {
                try observer.start()
                return false
            } catch {
                logger.warning("\(type(of: observer)) is off: \(error)")
                return true
            }
        }
        // Only disappearances (new owner empty) matter: fewer wake-ups on a busy bus.
        let vanished = SignalMatch.nameOwnerChanged
        try connection.addMatch(vanished.rule + ",arg2=''")
        connection.onSignal(vanished) { [unowned self] message in
            guard let change = SignalMatch.nameOwnerChange(message), change.newOwner.isEmpty, change.name.hasPrefix(":")
            else { return }
            self.clientVanished(change.name)
        }
        connection.onSignal(SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameLost")) {
            [unowned self] message in
            var r = message.reader()
            if (try? r.read(String.self)) == NetActivityNames.busName {
                self.logger.notice("Lost the name \(NetActivityNames.busName) (replaced by another instance); exiting")
                self.onStop?()
            }
        }
    }

    private func startMemoryPressure() {
        let monitor = MemoryPressureMonitor(loop: loop, logger: logger) { [unowned self] critical, source in
            self.memoryPressure(critical: critical, source: source)
        }
        let triggers = monitor.startPSI()
        var lowMemory = false
        if let address = options.systemBusAddress ?? MemoryPressureMonitor.systemBusAddress(), !address.isEmpty {
            lowMemory = monitor.startLowMemoryMonitor(address: address)
        }
        logger.info("Memory pressure: \(triggers) PSI triggers, LowMemoryMonitor \(lowMemory ? "followed" : "not available")")
        pressure = monitor
    }

    // MARK: activity

    /// Applies a change of the ledger's total to the machine, and notes it for the coalesced signal.
    func totalChanged() {
        perform(machine.countChanged(to: ledger.total, now: now))
        noteCountChange()
    }

    func perform(_ actions: [ActivityIndicatorStateMachine.Action]) {
        guard !actions.isEmpty else { return }
        var changed: [String] = []
        var visibleChanged = false
        for action in actions {
            switch action {
            case .scheduleTimer(let deadline, let generation):
                if let t = indicatorTimer { loop.cancel(t) }
                indicatorTimer = loop.schedule(at: deadline.nanoseconds) { [unowned self] in
                    self.indicatorTimer = nil
                    self.perform(self.machine.timerFired(generation: generation, now: self.now))
                }
            case .cancelTimer:
                if let t = indicatorTimer { loop.cancel(t) }
                indicatorTimer = nil
            case .publishState:
                if !changed.contains("State") { changed.append("State") }
            case .publishVisible:
                visibleChanged = true
                if !changed.contains("Visible") { changed.insert("Visible", at: 0) }
            }
        }
        if visibleChanged {
            let visible = machine.isVisible
            logger.debug("Visible=\(visible) state=\(machine.state.rawValue) count=\(ledger.total)")
            connection.emitSignal(path: NetActivityNames.objectPath, interface: NetActivityNames.interface, member: "Visible") {
                w in w.append(visible)
            }
        }
        emitChanged(changed)
        if visibleChanged { for observer in desktopObservers { observer.visibleChanged(machine.isVisible) } }
    }

    func emitChanged(_ names: [String]) {
        guard !names.isEmpty else { return }
        // A signal that goes out anyway carries the coalesced values too when the interval allows,
        // so observers rarely see a state that disagrees with the count.
        let names = countCoalescer.mayEmit(now: now) ? names + takeCoalescedChanges() : names
        server.emitPropertiesChanged(path: NetActivityNames.objectPath, interface: NetActivityNames.interface, changed: names)
    }

    private func noteCountChange() {
        switch countCoalescer.noteChange(now: now) {
        case .emitNow:
            emitCountAndClients()
        case .schedule(let deadline):
            loop.schedule(at: deadline.nanoseconds) { [unowned self] in
                self.countCoalescer.timerFired()
                self.emitCountAndClients()
            }
        case .wait:
            break
        }
    }

    private func emitCountAndClients() {
        let names = takeCoalescedChanges()
        guard !names.isEmpty else { return }
        server.emitPropertiesChanged(path: NetActivityNames.objectPath, interface: NetActivityNames.interface, changed: names)
    }

    /// The coalesced properties whose values differ from what was last sent, marked as sent.
    private func takeCoalescedChanges() -> [String] {
        var names: [String] = []
        let count = UInt32(clamping: ledger.total)
        if count != emittedCount {
            emittedCount = count
            names.append("ActivityCount")
        }
        let clients = currentClients()
        if clients != emittedClients {
            emittedClients = clients
            names.append("Clients")
            for observer in desktopObservers { observer.clientsChanged() }
        }
        if !names.isEmpty { countCoalescer.didEmit(now: now) }
        return names
    }

    func currentClients() -> [ClientEntry] {
        ledger.activeClients.map { ClientEntry(name: $0.name, processName: $0.processName, count: $0.count) }
    }

    /// Adds one of `source` for `client`, or throws LimitsExceeded naming the limit.
    func add(_ source: ActivityLedger.Source, for client: String) throws {
        let isNew = ledger.touch(client)
        do {
            try ledger.add(source, for: client)
        } catch {
            throw DBusError.limitsExceeded(
                "Client \(client) already holds \(error.limit) \(Self.noun(source)), the most one client may hold")
        }
        if isNew { lookUpProcessName(client) }
        totalChanged()
    }

    static func noun(_ source: ActivityLedger.Source) -> String {
        switch source {
        case .count: "activity counts"
        case .lease: "activity leases"
        case .task: "running tasks"
        }
    }

    /// Asks the bus for the client's pid (without blocking the loop) and records its process name.
    private func lookUpProcessName(_ client: String) {
        connection.busCallAsync("GetConnectionUnixProcessID", timeoutMilliseconds: 5000, { w in w.append(client) }) {
            [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            var r = reply.reader()
            guard let pid = try? r.read(UInt32.self), self.ledger.clients[client] != nil else { return }
            self.ledger.setProcessName(ServiceProcess.processName(pid: pid), for: client)
            if self.ledger.count(of: client) > 0 { self.noteCountChange() }
        }
    }

    /// Everything the client held goes at once.
    func clientVanished(_ client: String) {
        for fd in leasesByClient.removeValue(forKey: client) ?? [] {
            leases[fd] = nil
            loop.unwatch(fd: fd)
            close(fd)
        }
        ownerVanished(client)
        downloads.ownerVanished(client)
        guard let held = ledger.removeClient(client) else { return }
        if held.total > 0 {
            logger.debug("Client \(client) (\(held.processName)) left holding \(held.total)")
            totalChanged()
        }
    }

    // MARK: leases

    func beginLease(for client: String, reason: String, reply: inout MessageWriter) throws {
        guard reason.utf8.count <= AgentLimits.maxReasonBytes else {
            throw DBusError.invalidArgs("Reason is \(reason.utf8.count) bytes long; the limit is \(AgentLimits.maxReasonBytes)")
        }
        guard let (readEnd, writeEnd) = makeLeasePipe() else {
            throw DBusError.limitsExceeded("Could not create a lease: \(String(cString: strerror(errno)))")
        }
        // libdbus sends its own duplicate; ours closes at once, so only the client's copies count.
        defer { close(writeEnd) }
        do {
            try reply.appendFD(writeEnd)
            try add(.lease, for: client)
        } catch {
            close(readEnd)
            throw error
        }
        leases[readEnd] = client
        leasesByClient[client, default: []].insert(readEnd)
        loop.watch(fd: readEnd, events: EventLoop.readable) { [unowned self] events in
            self.leaseEvent(fd: readEnd, events: events)
        }
        logger.debug("Lease \(readEnd) for \(client): \(reason)")
    }

    private func leaseEvent(fd: Int32, events: UInt32) {
        // Anything a holder writes is drained and ignored; EOF means every copy is closed.
        var buf = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while true {
            let n = withUnsafeMutableBytes(of: &buf) { read(fd, $0.baseAddress, $0.count) }
            if n > 0 { continue }
            if n == 0 || (errno != EAGAIN && errno != EINTR) || events & EventLoop.hangup != 0 { break }
            return
        }
        endLease(fd: fd)
    }

    private func endLease(fd: Int32) {
        guard let client = leases.removeValue(forKey: fd) else { return }
        leasesByClient[client]?.remove(fd)
        if leasesByClient[client]?.isEmpty == true { leasesByClient[client] = nil }
        loop.unwatch(fd: fd)
        close(fd)
        if ledger.remove(.lease, for: client) { totalChanged() }
    }
}
