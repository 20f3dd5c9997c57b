import LinuxKit
import DBusKit
import Glibc
import NetActivityContract
import Synchronization

/// The async client's state and its bus connection, owned by one thread of its own
/// ("netactivity-cl" in `top -H`).
///
/// The app's holdings (counts, leases, tasks) are the truth here, and the agent mirrors them:
/// every change is kept locally first, answered at once, then sent to the agent's *unique* name
/// without waiting for its reply. When the agent leaves, nothing is lost; when an agent appears
/// (a restart, or `--replace`), everything still held is asserted to it afresh. Addressing the
/// unique name means a call that raced with the restart goes to the old agent and fails
/// harmlessly, instead of being counted twice.
///
/// The bus is optional too: with none, or after it goes away, the client is offline and tries
/// again with a growing delay (0.1 s doubling to 5 s); it attaches when the bus is back, and
/// the agent's arrival re-asserts everything as above. Only `close()` ends the client.
///
/// @unchecked Sendable: every property is touched only on `loop`'s thread (jobs arrive through
/// its mailbox); `mailbox` itself is thread-safe.
final class ClientCore: @unchecked Sendable {
    typealias Completion<T> = (Result<T, NetActivityError>) -> Void

    static let busName = NetActivityBus.name
    static let path = NetActivityBus.objectPath
    static let interface = NetActivityInterface.activity.rawValue
    static let taskInterface = NetActivityInterface.task.rawValue

    let loop = EventLoop()
    let mailbox: EventLoop.Mailbox
    private(set) var connection: Connection?
    /// The bus to use (nil: the session bus), and the next delay before trying it again.
    private var address: String?
    private var retryDelay = ClientCore.firstRetry
    private var retryTimer: TimerID?
    /// Why the last try to reach the bus failed.
    private var attachError: NetActivityError?
    static let firstRetry: UInt64 = 100_000_000
    static let lastRetry: UInt64 = 5_000_000_000
    /// This connection's unique name ("" while offline); read from any thread.
    private let identity = Mutex("")
    var uniqueName: String { identity.withLock { $0 } }

    /// The agent's unique name while it is on the bus.
    private(set) var owner: String?
    /// Bumped on every change of owner: replies from an older agent change nothing.
    private var generation = 0

    private var count = 0
    private var leases: [Int: LeaseRecord] = [:]
    private(set) var tasks: [Int: TaskEntry] = [:]
    /// Ids for holdings, streams and watches; unique for the life of the client.
    var nextID = 1

    /// Other processes' tasks (and our own, by path) followed for the task bindings, by path.
    var remoteWatches: [String: RemoteWatch] = [:]
    /// Where each watch id is: a path in `remoteWatches`, or a local task id.
    var watchIndex: [Int: WatchPlace] = [:]

    private var status: ActivityStatus?
    /// Waiting for the next agent (image slots that found none).
    private var agentWaiters: [() -> Void] = []
    private var statusObservers: [Int: Observer<ActivityStatus?>] = [:]
    /// Followers of every task at the agent (panels, `netactivity watch --tasks`).
    var taskListWatches: [Int: TaskListWatch] = [:]

    struct LeaseRecord {
        let reason: String
        var fd: Int32 = -1
    }

    final class TaskEntry {
        var record: TaskRecord
        var path: String?
        /// What the agent holds for this task (nil until BeginTask answers).
        var agentState: TaskState?
        var agentProgress = TaskProgress()
        var progressInFlight = false
        var streams: [Int: AsyncStream<TaskSnapshot>.Continuation] = [:]
        /// Task bindings following this task (see `watchTask`).
        var watchers: [Int: TaskWatcher] = [:]
        /// The app's desktop file name, for docks (BeginTask's `desktop-id`).
        let desktopID: String?
        init(record: TaskRecord, desktopID: String? = nil) {
            self.record = record
            self.desktopID = desktopID
        }

        var snapshot: TaskSnapshot { TaskSnapshot(record: record, path: path) }
    }

    init() {
        mailbox = loop.mailbox
    }

    // MARK: thread and set-up

    /// Starts the owner thread, connects there (blocking calls are fine on a thread of our own),
    /// and reports the outcome before serving.
    func start(address: String?, _ done: @escaping @Sendable (Result<Void, NetActivityError>) -> Void) {
        let context = Unmanaged.passRetained(StartContext(core: self, address: address, done: done)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let start = Unmanaged<StartContext>.fromOpaque(raw!).takeRetainedValue()
            setCurrentThreadName("netactivity-cl")
            // The app's signals are the app's: none is ever delivered to the library's thread (an
            // app that sigwaits, like the CLI, would otherwise lose SIGTERM to it).
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            start.core.run(address: start.address, start.done)
            return nil
        }, context)
        if rc != 0 {
            Unmanaged<StartContext>.fromOpaque(context).release()
            done(.failure(NetActivityError(.failed, "Could not start the client thread")))
        } else {
            pthread_detach(thread)
        }
    }

    private final class StartContext {
        let core: ClientCore
        let address: String?
        let done: @Sendable (Result<Void, NetActivityError>) -> Void
        init(core: ClientCore, address: String?, done: @escaping @Sendable (Result<Void, NetActivityError>) -> Void) {
            self.core = core
            self.address = address
            self.done = done
        }
    }

    /// `done` hears whether the first try reached the bus (the client goes on trying either way):
    /// once the bus has said whether the agent is there, or after `firstAnswerDeadline` (a bus
    /// that does not answer, such as a stopped dbus-daemon, never holds the app up).
    private func run(address: String?, _ done: @escaping @Sendable (Result<Void, NetActivityError>) -> Void) {
        self.address = address
        attach()
        var reported = false
        let report = { [unowned self] in
            guard !reported else { return }
            reported = true
            done(self.connection != nil ? .success(()) : .failure(self.attachError ?? NetActivityError(.disconnected, "No bus")))
        }
        if connection == nil {
            report()
        } else {
            whenOwnerKnown(within: Self.firstAnswerDeadline, report)
        }
        loop.run()
        shutDown()
        connection = nil
    }

    /// How long `connect()` and `isAgentRunning()` wait for the bus's first answers (Hello, then
    /// GetNameOwner): 200 ms, so that they return within the 250 ms promised with time to spare.
    static let firstAnswerDeadline: UInt64 = 200_000_000

    /// Connects to the bus and looks for the agent; offline, tries again later. Nothing here
    /// waits for the bus: Hello, the match rules and GetNameOwner are queued in that order (the
    /// bus handles them in order, so no owner change falls between the rules and the lookup),
    /// and their answers arrive through the loop.
    private func attach() {
        retryTimer = nil
        guard !isClosed, connection == nil else { return }
        let c: Connection
        do {
            // Without the bus's guid: a bus that comes back at the same socket has a new one, and
            // libdbus refuses a server whose guid differs from the address's.
            c = try Connection(address: (address ?? Connection.sessionBusAddress()).map(Self.withoutGUID), registering: .later)
        } catch {
            attachError = NetActivityError(error)
            scheduleAttach()
            return
        }
        connection = c
        lookingUp = true
        c.attach(to: loop)
        c.register { [unowned self] result in
            guard self.connection === c else { return }
            switch result {
            case .success(let name):
                self.identity.withLock { $0 = name }
                self.retryDelay = Self.firstRetry
                // The app's tasks are this connection's (those begun offline, or before the bus
                // answered, had none; those from before a reconnection, the old one).
                for entry in self.tasks.values where entry.record.owner != name {
                    entry.record.owner = name
                    self.publish(entry)
                }
            case .failure(let e):
                self.attachError = NetActivityError(e)
                self.connectionLost()
            }
        }
        subscribe(c)
        c.busCallAsync("GetNameOwner", { w in w.append(Self.busName) }) { [unowned self] result in
            guard self.connection === c else { return }
            switch result {
            case .success(let reply):
                var r = reply.reader()
                if let name = try? r.read(String.self) { self.ownerChanged(to: name) }
            case .failure(let e) where e.name == NetActivityError.Name.nameHasNoOwner.rawValue:
                self.startAgent(c)
            case .failure:
                return  // the connection is going: connectionLost ends the lookup
            }
            self.ownerLookupEnded()
        }
    }

    /// True between opening a connection and the bus's answer to GetNameOwner: whether the agent
    /// is there is not known yet, so queries wait (`whenOwnerKnown`) rather than fail.
    private var lookingUp = false
    private var lookupWaiters: [() -> Void] = []

    /// Runs `body` once the bus has said whether the agent is there (at once if it has, or with
    /// no bus), or after `nanoseconds` at most.
    func whenOwnerKnown(within nanoseconds: UInt64? = nil, _ body: @escaping () -> Void) {
        guard lookingUp else { return body() }
        guard let nanoseconds else { return lookupWaiters.append(body) }
        var ran = false
        let timer = loop.schedule(afterNanoseconds: nanoseconds) {
            guard !ran else { return }
            ran = true
            body()
        }
        lookupWaiters.append { [loop] in
            guard !ran else { return }
            ran = true
            loop.cancel(timer)
            body()
        }
    }

    private func ownerLookupEnded() {
        guard lookingUp else { return }
        lookingUp = false
        let waiting = lookupWaiters
        lookupWaiters = []
        for body in waiting { body() }
    }

    /// `address` with every `guid=` key left out.
    static func withoutGUID(_ address: String) -> String {
        address.split(separator: ";", omittingEmptySubsequences: false).map { entry in
            guard let colon = entry.firstIndex(of: ":") else { return String(entry) }
            let keys = entry[entry.index(after: colon)...].split(separator: ",").filter { !$0.hasPrefix("guid=") }
            return entry[...colon] + keys.joined(separator: ",")
        }.joined(separator: ";")
    }

    private func scheduleAttach() {
        guard !isClosed, retryTimer == nil else { return }
        let delay = retryDelay
        retryDelay = min(retryDelay * 2, Self.lastRetry)
        retryTimer = loop.schedule(afterNanoseconds: delay) { [unowned self] in self.attach() }
    }

    /// The bus went away: keep everything, go offline, and try again.
    private func connectionLost() {
        guard connection != nil else { return }
        connection?.close()
        connection = nil
        identity.withLock { $0 = "" }
        ownerChanged(to: "")  // which also ends the watches of tasks at the agent
        ownerLookupEnded()  // what waited for the lookup hears that there is no bus
        scheduleAttach()
    }

    /// The client's signal handlers, and the match rules that route the agent's signals to it
    /// (sent without waiting: the rules are fixed, and the bus handles them before what follows).
    private func subscribe(_ c: Connection) {
        let owner = SignalMatch.nameOwnerChanged
        c.addMatchWithoutWaiting(owner.rule + ",arg0='\(Self.busName)'")
        c.onSignal(owner) { [unowned self] message in
            guard let change = SignalMatch.nameOwnerChange(message), change.name == Self.busName else { return }
            self.ownerChanged(to: change.newOwner)
        }
        // The agent's own signals come from its unique name; the bus resolves the well-known one.
        let changed = SignalMatch(path: Self.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        c.addMatchWithoutWaiting(changed.rule + ",sender='\(Self.busName)',arg0='\(Self.interface)'")
        c.onSignal(changed) { [unowned self] message in
            guard message.sender == self.owner else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.interface, let props = try? r.readVardict() else { return }
            self.statusChanged(props)
            // Reasons is announced without its value (each reader may see different rows).
            let invalidated = (try? r.readValue())?.arrayElements?.compactMap(\.stringValue) ?? []
            for name in invalidated where ActivityMember.Property(rawValue: name) != nil { self.refreshProperty(name) }
        }
        // DownloadFinished is sent to us alone: no match rule, only a handler.
        c.onSignal(SignalMatch(path: Self.path, interface: Self.downloaderInterface, member: DownloaderMember.Signal.downloadFinished.rawValue)) {
            [unowned self] message in
            guard message.sender == self.owner else { return }
            var r = message.reader()
            guard let receipt = try? r.read(String.self), (try? r.read(String.self)) != nil, let ok = try? r.read(Bool.self),
                  let name = try? r.read(String.self), let text = try? r.read(String.self),
                  let done = self.downloads.removeValue(forKey: receipt)
            else { return }
            done(ok ? .success(()) : .failure(NetActivityError(name: name, message: text)))
        }
        subscribeToTasks(c)
        subscribeToTaskList(c)
        c.onDisconnect = { [unowned self] in self.connectionLost() }
    }

    /// Whether this client holds anything the agent counts: a count, a lease or a live task.
    var holdsActivity: Bool {
        count > 0 || !leases.isEmpty || tasks.values.contains { $0.record.state != .completed }
    }

    /// Asks the bus to start an activatable agent; its arrival shows up as an owner change.
    private func startAgent(_ c: Connection) {
        activationFailed = false
        c.busCallAsync("StartServiceByName", { w in
            w.append(Self.busName)
            w.append(UInt32(0))
        }) { [unowned self] result in
            // Not activatable here (or it failed to start): whoever waits for an agent hears now.
            guard case .failure = result, self.owner == nil else { return }
            self.activationFailed = true
            let waiting = self.activationWaiters
            self.activationWaiters = []
            for waiter in waiting { waiter() }
        }
    }

    /// The last request to start the agent failed, and none has appeared since.
    private var activationFailed = false
    /// Told when a request to start the agent fails (see `waitForAgent`).
    private var activationWaiters: [() -> Void] = []

    /// True once the app closed the client.
    private(set) var isClosed = false

    static let closedError = NetActivityError(.disconnected, "This NetActivity was closed by the app")
    static let notRunning = NetActivityError(.serviceUnknown, NetActivityError.agentNotRunningMessage)
    /// No bus at all (none given, or it went away): the same code as no agent, as apps need not
    /// tell the two apart, but a message that says what is missing.
    static let noBus = NetActivityError(.serviceUnknown, NetActivityError.noSessionBusMessage)

    func shutDown() {
        guard !isClosed else { return }
        isClosed = true
        owner = nil
        connection?.close()
        for done in downloads.values { done(.failure(Self.closedError)) }
        downloads = [:]
        for s in statusObservers.values { s.finish() }
        statusObservers = [:]
        for w in taskListWatches.values { w.finish() }
        taskListWatches = [:]
        endRemoteWatches()
        for entry in tasks.values {
            for s in entry.streams.values { s.finish() }
            for w in entry.watchers.values { w(nil) }
        }
        for lease in leases.values where lease.fd >= 0 { close(lease.fd) }
        leases = [:]
        tasks = [:]
        // Jobs that raced the close still run: each finds `isClosed` and fails at once.
        for job in mailbox.close() { job() }
        loop.stop()
    }

    // MARK: calls to the agent

    /// Sends to the agent's unique name, or to `destination` (a well-known name activates the
    /// agent; for one-shot callers such as the CLI, which want the agent's own answer).
    func send(
        _ member: String, path: String = ClientCore.path, interface: String = ClientCore.interface,
        destination: String? = nil,
        _ body: (inout MessageWriter) throws -> Void = { _ in }, timeout: Int32 = 25_000, reply: Completion<Message>? = nil
    ) {
        send(member, path: path, interface: interface, destination: destination, body, timeout: timeout, waits: false, reply: reply)
    }

    /// A query: like `send`, but made before the bus has said whether the agent is there, it
    /// waits for that answer (`whenOwnerKnown`) instead of failing with "not running". Holdings
    /// never wait: the agent's arrival re-asserts them whole.
    func query(
        _ member: String, path: String = ClientCore.path, interface: String = ClientCore.interface,
        destination: String? = nil,
        _ body: (inout MessageWriter) throws -> Void = { _ in }, timeout: Int32 = 25_000, reply: @escaping Completion<Message>
    ) {
        send(member, path: path, interface: interface, destination: destination, body, timeout: timeout, waits: true, reply: reply)
    }

    private func send(
        _ member: String, path: String, interface: String, destination: String?,
        _ body: (inout MessageWriter) throws -> Void, timeout: Int32, waits: Bool, reply: Completion<Message>?
    ) {
        guard connection != nil else {
            reply?(.failure(destination == nil ? Self.noBus : NetActivityError(.disconnected, "Not connected to the bus")))
            return
        }
        let deferred = waits && destination == nil && owner == nil && lookingUp
        guard let destination = destination ?? owner ?? (deferred ? Self.busName : nil) else {
            reply?(.failure(Self.notRunning))
            return
        }
        let m: Message
        do {
            m = try Message.methodCall(destination: destination, path: path, interface: interface, member: member)
            var w = m.writer()
            try body(&w)
        } catch let e as DBusError {
            reply?(.failure(NetActivityError(e)))
            return
        } catch {
            reply?(.failure(NetActivityError(.failed, "\(error)")))
            return
        }
        guard let reply else {
            m.setNoReply(true)
            connection?.send(m)
            return
        }
        guard deferred else { return call(m, timeout: timeout, reply) }
        // Addressed to the agent's unique name once the bus names it (see the type's notes).
        whenOwnerKnown { [unowned self] in
            guard self.connection != nil else { return reply(.failure(Self.noBus)) }
            guard let owner = self.owner, (try? m.setDestination(owner)) != nil else { return reply(.failure(Self.notRunning)) }
            self.call(m, timeout: timeout, reply)
        }
    }

    private func call(_ m: Message, timeout: Int32, _ reply: @escaping Completion<Message>) {
        guard let connection else { return reply(.failure(Self.noBus)) }
        connection.callAsync(m, timeoutMilliseconds: timeout) { result in
            reply(result.mapError { NetActivityError($0) })
        }
    }

    /// Errors that mean "the agent went away": the holding stays and is asserted to the next agent.
    private static func isAbsence(_ e: NetActivityError) -> Bool {
        e.code == .agentNotRunning || e.code == .disconnected
    }

    /// Success, or success when the agent is away, or the agent's refusal.
    private static func settle(_ result: Result<Message, NetActivityError>, _ done: Completion<Void>) {
        switch result {
        case .success: done(.success(()))
        case .failure(let e) where isAbsence(e): done(.success(()))
        case .failure(let e): done(.failure(e))
        }
    }

    // MARK: owner changes and re-assertion

    private func ownerChanged(to new: String) {
        let newOwner: String? = new.isEmpty ? nil : new
        guard newOwner != owner else { return }
        generation += 1
        owner = newOwner
        // The old agent's lease pipes are dead; new ones come with the re-assertion below.
        for (id, lease) in leases where lease.fd >= 0 {
            close(lease.fd)
            leases[id]?.fd = -1
        }
        for entry in tasks.values {
            entry.path = nil
            entry.agentState = nil
            entry.progressInFlight = false
            publish(entry)
        }
        status = nil
        // Tasks at the old agent are gone with it; the new one's are read whole.
        endRemoteWatches()
        reloadTaskList(for: Array(taskListWatches.values))
        // Receipts die with the agent that issued them.
        let orphaned = downloads
        downloads = [:]
        for done in orphaned.values {
            done(.failure(NetActivityError(.noReply, "The agent restarted during the download")))
        }
        guard owner != nil else {
            publishStatus()
            // The agent left while this app holds activity (it crashed, or was stopped): ask the
            // bus to start it again (D-Bus activation, where it is set up), so the holdings reach
            // a new agent instead of waiting for someone to start one.
            if holdsActivity, let connection { startAgent(connection) }
            return
        }
        let waiting = agentWaiters
        agentWaiters = []
        activationFailed = false
        activationWaiters = []
        // Everything still held, afresh: counts, leases, live tasks.
        for _ in 0..<count { send(ActivityMember.Method.incrementActivityCount.rawValue) }
        for id in leases.keys.sorted() { assertLease(id) { _ in } }
        for id in tasks.keys.sorted() {
            guard let entry = tasks[id] else { continue }
            if entry.record.state == .completed {
                finish(id)
            } else {
                assertTask(id) { _ in }
            }
        }
        refreshStatus()
        for waiter in waiting { waiter() }
    }

    /// Calls `done` once the agent has answered a call sent after everything this client has
    /// sent, and no task has newer progress than the agent was sent (or at once with no agent).
    /// Not Peer.Ping: libdbus answers that before the agent's own queue, where calls may wait.
    func whenCaughtUp(rounds: Int, _ done: @escaping () -> Void) {
        query("Get", interface: "org.freedesktop.DBus.Properties", { w in
            w.append(Self.interface)
            w.append("Version")
        }, timeout: 1000, reply: { [unowned self] result in
            let behind = self.tasks.values.contains { $0.path != nil && ($0.progressInFlight || $0.record.progress != $0.agentProgress) }
            if case .success = result, behind, rounds > 1 { return self.whenCaughtUp(rounds: rounds - 1, done) }
            done()
        })
    }

    /// Runs `body` once, the next time an agent appears (after everything held is re-asserted).
    func whenAgentAppears(_ body: @escaping () -> Void) {
        agentWaiters.append(body)
    }

    /// Answers true at once with an agent on the bus, or when one appears (D-Bus activation under
    /// way) within `nanoseconds`; false when the bus says it cannot start one, or after that time.
    func waitForAgent(within nanoseconds: UInt64, _ done: @escaping (Bool) -> Void) {
        guard owner == nil, !isClosed, !activationFailed else { return done(owner != nil) }
        var answered = false
        let timer = loop.schedule(afterNanoseconds: nanoseconds) {
            guard !answered else { return }
            answered = true
            done(false)
        }
        let answer = { [loop] (running: Bool) in
            guard !answered else { return }
            answered = true
            loop.cancel(timer)
            done(running)
        }
        whenAgentAppears { answer(true) }
        activationWaiters.append { answer(false) }
    }

    // MARK: counts

    // Counting, leases and tasks answer at once, from the local truth; the agent hears of them
    // without anyone waiting. If it refuses one (a per-app limit), the holding is dropped here
    // too: tracking is advisory, and the app's own work never depends on it.

    func increment() {
        count += 1
        let generation = self.generation
        send(ActivityMember.Method.incrementActivityCount.rawValue, reply: { [unowned self] result in
            if case .failure(let e) = result, !Self.isAbsence(e), self.count > 0 {
                // Refused (a limit): undo, and take it back from an agent that was told on re-assertion.
                self.count -= 1
                if generation != self.generation { self.send(ActivityMember.Method.decrementActivityCount.rawValue) }
            }
        })
    }

    func decrement() {
        guard count > 0 else { return }
        count -= 1
        send(ActivityMember.Method.decrementActivityCount.rawValue)
    }

    /// The app's own input, checked here so that it fails the same with or without an agent.
    static func checkText(_ text: String, _ what: String, limit: Int) throws(NetActivityError) {
        let bytes = text.utf8.count
        if bytes > limit { throw .invalidArgs("The \(what) is \(bytes) bytes; at most \(limit) are allowed") }
    }

    // MARK: leases

    func beginLease(reason: String) -> Int {
        let id = nextID
        nextID += 1
        leases[id] = LeaseRecord(reason: reason)
        assertLease(id) { [unowned self] result in
            if case .failure = result { self.endLease(id) }
        }
        return id
    }

    private func assertLease(_ id: Int, _ done: @escaping Completion<Void>) {
        guard let reason = leases[id]?.reason else { return done(.success(())) }
        let generation = self.generation
        send(ActivityMember.Method.beginActivity.rawValue, { w in w.append(reason) }, reply: { [unowned self] result in
            guard case .success(let reply) = result else { return Self.settle(result, done) }
            var r = reply.reader()
            guard let fd = try? r.readFD() else { return done(.success(())) }
            // The lease may have ended, or the agent changed, while the call was out.
            if generation == self.generation, self.leases[id] != nil {
                self.leases[id]!.fd = fd
            } else {
                close(fd)
            }
            done(.success(()))
        })
    }

    func endLease(_ id: Int) {
        guard let lease = leases.removeValue(forKey: id) else { return }
        if lease.fd >= 0 { close(lease.fd) }
    }

    // MARK: tasks

    func beginTask(description: String, state: TaskState, progress: TaskProgress, desktopID: String? = nil) -> Int {
        let id = nextID
        nextID += 1
        tasks[id] = TaskEntry(
            record: TaskRecord(owner: uniqueName, description: description, state: state, progress: progress), desktopID: desktopID)
        assertTask(id) { [unowned self] result in
            if case .failure = result { self.finish(id) }
        }
        return id
    }

    /// BeginTask for a live task, then whatever changed while the call was out.
    private func assertTask(_ id: Int, _ done: @escaping Completion<Void>) {
        guard let entry = tasks[id] else { return done(.success(())) }
        let record = entry.record
        let generation = self.generation
        let begun = record.state == .suspended ? TaskState.suspended : .running
        let expected = TaskProgress(expectedToSend: record.progress.expectedToSend, expectedToReceive: record.progress.expectedToReceive)
        var options: [String: DBusValue] = [
            TaskMember.Option.suspended.rawValue: .bool(begun == .suspended),
            TaskMember.Option.expectedToSend.rawValue: .uint64(expected.expectedToSend),
            TaskMember.Option.expectedToReceive.rawValue: .uint64(expected.expectedToReceive),
        ]
        if let desktopID = entry.desktopID { options[TaskMember.Option.desktopID.rawValue] = .string(desktopID) }
        send(ActivityMember.Method.beginTask.rawValue, { w in
            w.append(record.description)
            try w.appendVardict(options)
        }, reply: { [unowned self] result in
            guard case .success(let reply) = result else { return Self.settle(result, done) }
            var r = reply.reader()
            guard generation == self.generation, let entry = self.tasks[id], let path = try? r.readObjectPath() else {
                return done(.success(()))
            }
            entry.path = path
            entry.agentState = begun
            entry.agentProgress = expected
            self.publish(entry)
            self.sync(id, done)
        })
    }

    /// Sends the agent what it does not know yet about task `id`: the latest progress (one
    /// SetProgress out at a time, the final values always), then the state. `done` gets the
    /// state call's answer, or success at once when there is nothing to wait for.
    private func sync(_ id: Int, _ done: Completion<Void>? = nil) {
        guard let entry = tasks[id], let path = entry.path, let agentState = entry.agentState, owner != nil else {
            done?(.success(()))
            return
        }
        let record = entry.record
        if record.progress != entry.agentProgress, !entry.progressInFlight || record.state == .completed {
            entry.progressInFlight = true
            let p = record.progress, before = entry.agentProgress
            entry.agentProgress = p
            let generation = self.generation
            let answered: Completion<Message> = { [unowned self] _ in
                guard generation == self.generation, let entry = self.tasks[id] else { return }
                entry.progressInFlight = false
                self.sync(id)
            }
            // Byte counts and a reported fraction are separate calls; the last one sent hears the answer.
            var bytes = p
            bytes.reportedFraction = before.reportedFraction
            let fractionChanged = p.reportedFraction != before.reportedFraction
            if bytes != before {
                send(TaskMember.Method.setProgress.rawValue, path: path, interface: Self.taskInterface, { w in
                    w.append(p.sent)
                    w.append(p.expectedToSend)
                    w.append(p.received)
                    w.append(p.expectedToReceive)
                }, reply: fractionChanged ? nil : answered)
            }
            if fractionChanged {
                send(TaskMember.Method.setFraction.rawValue, path: path, interface: Self.taskInterface, { w in
                    w.append(p.reportedFraction)
                }, reply: answered)
            }
        }
        guard record.state != agentState else {
            done?(.success(()))
            return
        }
        entry.agentState = record.state
        let member = switch record.state {
        case .running: TaskMember.Method.resume.rawValue
        case .suspended: TaskMember.Method.suspend.rawValue
        case .completed: TaskMember.Method.complete.rawValue
        }
        send(member, path: path, interface: Self.taskInterface, { w in
            if record.state == .completed { w.append(record.error) }
        }, reply: { result in Self.settle(result, done ?? { _ in }) })
        if record.state == .completed { finish(id) }
    }

    /// Applies `change` to task `id` locally, tells the streams, and syncs with the agent (without
    /// waiting for it).
    func updateTask(_ id: Int, _ change: (inout TaskRecord) throws(NetActivityError) -> Void) throws(NetActivityError) {
        guard let entry = tasks[id] else { return }  // completed already: a harmless no-op
        try change(&entry.record)
        publish(entry)
        if entry.path == nil, entry.record.state == .completed, owner == nil { finish(id) }
        sync(id)
    }

    func snapshot(of id: Int) -> TaskSnapshot? { tasks[id]?.snapshot }

    func observeTask(_ id: Int, _ continuation: AsyncStream<TaskSnapshot>.Continuation) {
        guard !isClosed, let entry = tasks[id] else { return continuation.finish() }
        let key = nextID
        nextID += 1
        entry.streams[key] = continuation
        continuation.yield(entry.snapshot)
        continuation.onTermination = { [weak self, mailbox] _ in
            mailbox.post { [weak self] in self?.tasks[id]?.streams[key] = nil }
        }
    }

    private func publish(_ entry: TaskEntry) {
        guard !entry.streams.isEmpty || !entry.watchers.isEmpty else { return }
        let snapshot = entry.snapshot
        for s in entry.streams.values { s.yield(snapshot) }
        for w in entry.watchers.values { w(snapshot) }
    }

    /// The task is done with locally: its streams end after the final snapshot.
    private func finish(_ id: Int) {
        guard let entry = tasks.removeValue(forKey: id) else { return }
        for s in entry.streams.values { s.finish() }
        for key in entry.watchers.keys { watchIndex[key] = nil }
    }

    // MARK: downloads

    static let downloaderInterface = NetActivityInterface.downloader.rawValue
    /// Receipts waiting for their DownloadFinished.
    var downloads: [String: Completion<Void>] = [:]

    /// Asks the agent for a download and calls `done` when it has finished (true: it was cached).
    /// `onReceipt` hears the receipt as soon as the agent gives one (not for a cache hit).
    func download(
        url: String, additionalIdentifier: String, reload: Bool, destination: String? = nil,
        onReceipt: ((_ receipt: String, _ task: String) -> Void)? = nil,
        _ done: @escaping Completion<Bool>
    ) {
        query(DownloaderMember.Method.downloadImage.rawValue, interface: Self.downloaderInterface, destination: destination, { w in
            w.append(url)
            var options: [String: DBusValue] = [:]
            if !additionalIdentifier.isEmpty { options[DownloaderMember.Option.additionalIdentifier.rawValue] = .string(additionalIdentifier) }
            if reload { options[DownloaderMember.Option.reload.rawValue] = .bool(true) }
            try w.appendVardict(options)
        }, reply: { [unowned self] result in
            switch result {
            case .failure(let e):
                done(.failure(e))
            case .success(let reply):
                var r = reply.reader()
                guard let receipt = try? r.read(String.self), let task = try? r.readObjectPath(), let cached = try? r.read(Bool.self)
                else { return done(.failure(NetActivityError(.invalidSignature, "Unexpected reply"))) }
                if cached { return done(.success(true)) }
                // The receipt is the issuing agent's: it must still be the one on the bus.
                guard let sender = reply.sender, sender == self.owner else {
                    return done(.failure(NetActivityError(.noReply, "The agent restarted during the download")))
                }
                self.downloads[receipt] = { result in done(result.map { false }) }
                onReceipt?(receipt, task)
            }
        })
    }

    /// What `FetchImage` answered: the image's shared file, where it came from, its media type.
    struct Fetched {
        let file: SharedImageFile
        let source: DownloaderMember.FetchSource
        let contentType: String
    }

    /// Receipts this connection has named in FetchImage (each unique among its pending calls).
    private var nextFetchReceipt: UInt64 = 0

    func makeFetchReceipt() -> String {
        nextFetchReceipt += 1
        return "f\(nextFetchReceipt)"
    }

    /// One FetchImage: the reply carries the image (from memory, disk or network) or the error.
    /// `receipt` names the call for `cancelFetch`. No timeout of our own: the agent's transfer
    /// limits end every download, and the call with them.
    func fetch(
        url: String, additionalIdentifier: String, reload: Bool, receipt: String?, announce: Bool = false,
        destination: String? = nil, _ done: @escaping Completion<Fetched>
    ) {
        typealias Option = DownloaderMember.FetchOption
        query(DownloaderMember.Method.fetchImage.rawValue, interface: Self.downloaderInterface, destination: destination, { w in
            w.append(url)
            var options: [String: DBusValue] = [:]
            if !additionalIdentifier.isEmpty { options[Option.additionalIdentifier.rawValue] = .string(additionalIdentifier) }
            if reload { options[Option.reload.rawValue] = .bool(true) }
            if let receipt { options[Option.receipt.rawValue] = .string(receipt) }
            if announce { options[Option.announce.rawValue] = .bool(true) }
            try w.appendVardict(options)
        }, timeout: Self.noTimeout, reply: { result in
            done(result.flatMap { reply in
                var r = reply.reader()
                do throws(DBusError) {
                    let fd = try r.readFD()
                    let size: UInt64, info: [String: DBusValue]
                    do throws(DBusError) {
                        size = try r.read(UInt64.self)
                        info = try r.readVardict()
                    } catch {
                        close(fd)
                        throw error
                    }
                    let file = SharedImageFile(fd: fd, size: size)
                    let source = info[DownloaderMember.FetchInfo.source.rawValue]?.stringValue
                        .flatMap(DownloaderMember.FetchSource.init(rawValue:)) ?? .network
                    let type = info[DownloaderMember.FetchInfo.contentType.rawValue]?.stringValue ?? ""
                    return .success(Fetched(file: file, source: source, contentType: type))
                } catch {
                    return .failure(NetActivityError(error))
                }
            })
        })
    }

    /// libdbus's "no timeout" (DBUS_TIMEOUT_INFINITE).
    static let noTimeout: Int32 = 0x7fff_ffff

    /// Cancels the pending FetchImage named `receipt`: it is answered `Cancelled`.
    func cancelFetch(_ receipt: String) {
        send(DownloaderMember.Method.cancelDownload.rawValue, interface: Self.downloaderInterface, { w in w.append(receipt) }, reply: { _ in })
    }

    /// The cached image's bytes for (url, additionalIdentifier), or nil on a miss: read through
    /// its memfd (OpenImageForRequest), which serves images of any size (LookupImage carries at
    /// most 1 MiB).
    func lookupImage(url: String, additionalIdentifier: String, _ done: @escaping Completion<[UInt8]?>) {
        openImage(url: url, additionalIdentifier: additionalIdentifier) { result in done(result.map { $0?.readAll() }) }
    }

    /// AddImage[ForRequest] for an image of at most 1 MiB; AddImageFromFd[ForRequest], with the
    /// bytes in a sealed memfd, for a larger one (the agent keeps that memory, no copy). `key`
    /// writes the identifier, or the url and additional identifier.
    static func addImageCall(_ data: [UInt8], forRequest: Bool, key: @escaping @Sendable (inout MessageWriter) -> Void)
        -> (member: String, body: @Sendable (inout MessageWriter) throws -> Void)
    {
        typealias M = ImageCacheMember.Method
        guard data.count > NetActivityLimits.maxInlineImageBytes else {
            return ((forRequest ? M.addImageForRequest : M.addImage).rawValue, { w in
                key(&w)
                try w.appendBytes(data)
            })
        }
        return ((forRequest ? M.addImageFromFdForRequest : M.addImageFromFd).rawValue, { w in
            key(&w)
            guard let fd = data.withUnsafeBytes({ SealedMemory.make(name: "netactivity-image", bytes: $0) }) else {
                throw DBusError.failed("Could not put the image in a memfd: \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            try w.appendFD(fd)
        })
    }

    /// The cached image for (url, additionalIdentifier) as a shared read-only file, or nil on a
    /// miss: no copy through the bus, whatever its size (the reader copies once, off this thread).
    func openImage(url: String, additionalIdentifier: String, _ done: @escaping Completion<SharedImageFile?>) {
        openImage(.openImageForRequest, { w in
            w.append(url)
            w.append(additionalIdentifier)
        }, done)
    }

    /// OpenImage or OpenImageForRequest: the sealed memfd, or nil on a miss.
    func openImage(
        _ member: ImageCacheMember.Method, _ body: @escaping (inout MessageWriter) throws -> Void,
        _ done: @escaping Completion<SharedImageFile?>
    ) {
        request(member.rawValue, interface: NetActivity.cacheInterface, body, decode: { r throws(DBusError) in
            let fd = try r.readFD()
            return SharedImageFile(fd: fd, size: (try? r.read(UInt64.self)) ?? 0)
        }) { result in
            if case .failure(let e) = result, e.code == .notFound { return done(.success(nil)) }
            done(result.map { $0 })
        }
    }

    /// A lookup's (b found, ay data).
    static func decodeLookup(_ r: inout MessageReader) throws(DBusError) -> [UInt8]? {
        let found = try r.read(Bool.self)
        let data = try r.readBytes()
        return found ? data : nil
    }

    // MARK: plain requests (the image cache, the CLI)

    /// One call whose reply is decoded by `decode`; the agent's absence is an error here.
    func request<T>(
        _ member: String, path: String = ClientCore.path, interface: String, destination: String? = nil,
        _ body: @escaping (inout MessageWriter) throws -> Void = { _ in },
        decode: @escaping (inout MessageReader) throws(DBusError) -> T, _ done: @escaping Completion<T>
    ) {
        query(member, path: path, interface: interface, destination: destination, body, reply: { result in
            done(result.flatMap { reply in
                var r = reply.reader()
                do throws(DBusError) { return .success(try decode(&r)) } catch { return .failure(NetActivityError(error)) }
            })
        })
    }

    // MARK: status

    /// The agent's properties by GetAll. `fallingBack`: answered `statusDeadline` (200 ms) after
    /// the call at the latest, whatever the bus and the agent do: if neither the lookup of the agent
    /// nor its GetAll has answered by then, the last properties it published are the answer, or
    /// with none yet a `noReply` error (a hung agent, or a stalled bus, does not hold the app up).
    func currentStatus(fallingBack: Bool = false, destination: String? = nil, _ done: @escaping Completion<ActivityStatus>) {
        var answered = false
        var deadline: TimerID?
        let answer = { [loop] (result: Result<ActivityStatus, NetActivityError>) in
            guard !answered else { return }
            answered = true
            if let deadline { loop.cancel(deadline) }
            done(result)
        }
        if fallingBack {
            deadline = loop.schedule(afterNanoseconds: Self.statusDeadline) { [unowned self] in
                let who = self.lookingUp ? "The bus" : "The agent"
                answer(self.status.map { .success($0) } ?? .failure(NetActivityError(.noReply, "\(who) did not answer within 200 ms")))
            }
        }
        query("GetAll", interface: "org.freedesktop.DBus.Properties", destination: destination, { w in w.append(Self.interface) },
              reply: { [unowned self] result in
            if case .failure(let e) = result, e.code == .disconnected, fallingBack, let mirror = self.status { return answer(.success(mirror)) }
            answer(result.flatMap { reply in
                var r = reply.reader()
                var s = ActivityStatus()
                do throws(DBusError) { s.apply(try r.readVardict()) } catch { return .failure(NetActivityError(error)) }
                return .success(s)
            })
        })
    }

    static let statusDeadline: UInt64 = 200_000_000

    private func refreshStatus() {
        let generation = self.generation
        currentStatus { [unowned self] result in
            guard generation == self.generation, case .success(let s) = result else { return }
            self.status = s
            self.publishStatus()
        }
    }

    /// Reads one property that a PropertiesChanged named as invalidated, and applies it.
    private func refreshProperty(_ name: String) {
        guard status != nil else { return }  // the GetAll on its way carries it
        let generation = self.generation
        send("Get", interface: "org.freedesktop.DBus.Properties", { w in
            w.append(Self.interface)
            w.append(name)
        }, reply: { [unowned self] result in
            guard generation == self.generation, case .success(let reply) = result else { return }
            var r = reply.reader()
            guard let value = try? r.readValue() else { return }
            self.statusChanged([name: value.unwrapped])
        })
    }

    private func statusChanged(_ props: [String: DBusValue]) {
        guard var s = status else { return }
        s.apply(props)
        guard s != status else { return }
        status = s
        publishStatus()
    }

    private func publishStatus() {
        for o in statusObservers.values { o.yield(status) }
    }

    /// The status now (once known; nil while there is no agent), then on every change.
    @discardableResult
    func observeStatus(_ observer: Observer<ActivityStatus?>) -> Int {
        let key = nextID
        nextID += 1
        guard !isClosed else {
            observer.finish()
            return key
        }
        statusObservers[key] = observer
        if status != nil || owner == nil { observer.yield(status) }
        return key
    }

    func unobserveStatus(_ key: Int) { statusObservers[key] = nil }

    func observeStatus(_ continuation: AsyncStream<ActivityStatus?>.Continuation) {
        let key = observeStatus(Observer(continuation))
        continuation.onTermination = { [weak self, mailbox] _ in
            mailbox.post { [weak self] in self?.unobserveStatus(key) }
        }
    }
}
