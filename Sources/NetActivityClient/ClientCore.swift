// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import Synchronization

/// The client's bus connection, owned by one thread of its own ("netactivity-cl" in `top -H`):
/// attaching (Hello, match rules and the lookup of the agent, none of them waited for), the
/// agent's unique name, and sending to it. What the app holds and follows lives in participants
/// (`Holdings`, `OwnTasks`, `TaskFollowers`, `TaskListFollowers`, `ClientDownloads`,
/// `StatusMirror`), each told of every new connection and of the agent's comings and goings, in
/// the one order `participants` gives.
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
    private(set) var generation = 0
    /// Ids for holdings, streams and watches; unique for the life of the client.
    private var nextID = 1

    func makeID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    /// Waiting for the next agent (image slots that found none).
    private var agentWaiters: [() -> Void] = []

    // The participants: what the app holds and follows, each mirrored to the agent.
    private(set) lazy var holdings = Holdings(core: self)
    private(set) lazy var ownTasks = OwnTasks(core: self)
    private(set) lazy var taskFollowers = TaskFollowers(core: self)
    private(set) lazy var taskListFollowers = TaskListFollowers(core: self)
    private(set) lazy var downloads = ClientDownloads(core: self)
    private(set) lazy var statusMirror = StatusMirror(core: self)

    /// The order in which participants hear of a new connection and of the agent: holdings and
    /// tasks are re-asserted first (a new agent counts them before anyone asks it), then the
    /// followers read what it has, and the status last (it shows what was just asserted).
    private var participants: [any AgentParticipant] {
        [holdings, ownTasks, taskFollowers, taskListFollowers, downloads, statusMirror]
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
        let rc = pthread_create(
            &thread, nil,
            { raw in
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
            done(
                self.connection != nil
                    ? .success(()) : .failure(self.attachError ?? NetActivityError(.disconnected, "No bus")))
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
            c = try Connection(
                address: (address ?? Connection.sessionBusAddress()).map(Self.withoutGUID), registering: .later)
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
                for p in self.participants { p.registered(as: name) }
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
                break  // refused, or the connection is going (connectionLost follows): no agent known
            }
            self.ownerLookupEnded()
        }
    }

    /// True between opening a connection and the bus's answer to GetNameOwner: whether the agent
    /// is there is not known yet, so queries wait (`whenOwnerKnown`) rather than fail.
    private var lookingUp = false
    var isLookingUp: Bool { lookingUp }
    private var lookupWaiters: [() -> Void] = []

    /// Runs `body` once the bus has said whether the agent is there (at once if it has, or with
    /// no bus), or after `nanoseconds` at most.
    func whenOwnerKnown(within nanoseconds: UInt64? = nil, _ body: @escaping () -> Void) {
        guard lookingUp else { return body() }
        guard let nanoseconds else { return lookupWaiters.append(body) }
        let once = answerOnce(within: nanoseconds, otherwise: {}, body)
        lookupWaiters.append { once(()) }
    }

    /// `done`, called once: by the first call of the closure returned, or with `otherwise()`
    /// after `nanoseconds` (the timer is cancelled by an answer in time).
    func answerOnce<T>(within nanoseconds: UInt64, otherwise: @escaping () -> T, _ done: @escaping (T) -> Void) -> (T)
        -> Void
    {
        var answered = false
        var timer: TimerID?
        let answer = { [loop] (value: T) in
            guard !answered else { return }
            answered = true
            if let timer { loop.cancel(timer) }
            done(value)
        }
        timer = loop.schedule(afterNanoseconds: nanoseconds) { answer(otherwise()) }
        return answer
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
        for p in participants { p.connected(c) }
        c.onDisconnect = { [unowned self] in self.connectionLost() }
    }

    /// Follows a task for a binding: by path (any client's), or one of this client's own by id.
    func watchTask(path: String, _ watcher: @escaping TaskWatcher) -> Int { taskFollowers.watch(path: path, watcher) }
    func watchTask(id: Int, _ watcher: @escaping TaskWatcher) -> Int { ownTasks.watch(id, watcher) }

    func unwatchTask(_ key: Int) {
        if !ownTasks.unwatch(key) { _ = taskFollowers.unwatch(key) }
    }

    /// Whether this client holds anything the agent counts: a count, a lease or a live task.
    var holdsActivity: Bool { holdings.holdsActivity || ownTasks.holdsActivity }

    /// Asks the bus to start an activatable agent; its arrival shows up as an owner change.
    private func startAgent(_ c: Connection) {
        activationFailed = false
        c.busCallAsync(
            "StartServiceByName",
            { w in
                w.append(Self.busName)
                w.append(UInt32(0))
            }
        ) { [unowned self] result in
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
        for p in participants { p.shutDown() }
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
        _ body: (inout MessageWriter) throws -> Void = { _ in }, timeout: Int32 = 25_000,
        reply: Completion<Message>? = nil
    ) {
        send(
            member, path: path, interface: interface, destination: destination, body, timeout: timeout, waits: false,
            reply: reply)
    }

    /// A query: like `send`, but made before the bus has said whether the agent is there, it
    /// waits for that answer (`whenOwnerKnown`) instead of failing with "not running". Holdings
    /// never wait: the agent's arrival re-asserts them whole.
    func query(
        _ member: String, path: String = ClientCore.path, interface: String = ClientCore.interface,
        destination: String? = nil,
        _ body: (inout MessageWriter) throws -> Void = { _ in }, timeout: Int32 = 25_000,
        reply: @escaping Completion<Message>
    ) {
        send(
            member, path: path, interface: interface, destination: destination, body, timeout: timeout, waits: true,
            reply: reply)
    }

    private func send(
        _ member: String, path: String, interface: String, destination: String?,
        _ body: (inout MessageWriter) throws -> Void, timeout: Int32, waits: Bool, reply: Completion<Message>?
    ) {
        guard connection != nil else {
            reply?(
                .failure(destination == nil ? Self.noBus : NetActivityError(.disconnected, "Not connected to the bus")))
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
            guard let owner = self.owner, (try? m.setDestination(owner)) != nil else {
                return reply(.failure(Self.notRunning))
            }
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
    static func isAbsence(_ e: NetActivityError) -> Bool {
        e.code == .agentNotRunning || e.code == .disconnected
    }

    /// Success, or success when the agent is away, or the agent's refusal.
    static func settle(_ result: Result<Message, NetActivityError>, _ done: Completion<Void>) {
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
        let hadAgent = owner != nil
        generation += 1
        owner = newOwner
        if hadAgent {
            for p in participants { p.agentLeft() }
        }
        guard owner != nil else {
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
        // Everything still held, afresh (counts, leases, live tasks), then what is followed.
        for p in participants { p.agentAppeared() }
        for waiter in waiting { waiter() }
    }

    /// Calls `done` once the agent has answered a call sent after everything this client has
    /// sent, and no task has newer progress than the agent was sent (or at once with no agent).
    /// Not Peer.Ping: libdbus answers that before the agent's own queue, where calls may wait.
    func whenCaughtUp(rounds: Int, _ done: @escaping () -> Void) {
        query(
            "Get", interface: "org.freedesktop.DBus.Properties",
            { w in
                w.append(Self.interface)
                w.append("Version")
            }, timeout: 1000,
            reply: { [unowned self] result in
                if case .success = result, self.ownTasks.isBehind, rounds > 1 {
                    return self.whenCaughtUp(rounds: rounds - 1, done)
                }
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
        let answer = answerOnce(within: nanoseconds, otherwise: { false }, done)
        whenAgentAppears { answer(true) }
        activationWaiters.append { answer(false) }
    }
}
