// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract

/// The app's own tasks: the truth is kept here (with the streams and bindings that follow each
/// one) and mirrored to the agent, one task object there per live task here.
final class OwnTasks: AgentParticipant {
    private unowned let core: ClientCore
    private(set) var tasks: [Int: TaskEntry] = [:]
    /// Which task each binding's watch key follows.
    private var watchIndex: [Int: Int] = [:]

    final class TaskEntry {
        var record: TaskRecord
        var path: String?
        /// What the agent holds for this task (nil until BeginTask answers).
        var agentState: TaskState?
        var agentProgress = TaskProgress()
        var progressInFlight = false
        var streams: [Int: AsyncStream<TaskSnapshot>.Continuation] = [:]
        /// Task bindings following this task (see `watch`).
        var watchers: [Int: TaskWatcher] = [:]
        /// The app's desktop file name, for docks (BeginTask's `desktop-id`).
        let desktopID: String?
        /// What panels may ask (BeginTask's `cancellable` and `suspendable`).
        let offers: NetActivityTask.Offers
        /// Who hears panels' requests (`NetActivityTask.requests`).
        var listeners: [Int: AsyncStream<NetActivityTask.Request>.Continuation] = [:]
        init(record: TaskRecord, desktopID: String? = nil, offers: NetActivityTask.Offers = .init()) {
            self.record = record
            self.desktopID = desktopID
            self.offers = offers
        }

        var snapshot: TaskSnapshot { TaskSnapshot(record: record, path: path) }
    }

    init(core: ClientCore) { self.core = core }

    /// Whether a live task holds activity for us.
    var holdsActivity: Bool { tasks.values.contains { $0.record.state != .completed } }

    /// Whether the agent has not been sent some task's latest progress yet.
    var isBehind: Bool {
        tasks.values.contains { $0.path != nil && ($0.progressInFlight || $0.record.progress != $0.agentProgress) }
    }

    func begin(
        description: String, state: TaskState, progress: TaskProgress, desktopID: String? = nil,
        offers: NetActivityTask.Offers = .init()
    ) -> Int {
        let id = core.makeID()
        tasks[id] = TaskEntry(
            record: TaskRecord(owner: core.uniqueName, description: description, state: state, progress: progress),
            desktopID: desktopID, offers: offers)
        assert(id) { [unowned self] result in
            if case .failure = result { self.finish(id) }
        }
        return id
    }

    /// BeginTask for a live task, then whatever changed while the call was out.
    private func assert(_ id: Int, _ done: @escaping ClientCore.Completion<Void>) {
        guard let entry = tasks[id] else { return done(.success(())) }
        let record = entry.record
        let generation = core.generation
        let begun = record.state == .suspended ? TaskState.suspended : .running
        let expected = TaskProgress(
            expectedToSend: record.progress.expectedToSend, expectedToReceive: record.progress.expectedToReceive)
        var options: [String: DBusValue] = [
            ActivityMember.BeginTaskOption.suspended.rawValue: .bool(begun == .suspended),
            ActivityMember.BeginTaskOption.expectedToSend.rawValue: .uint64(expected.expectedToSend),
            ActivityMember.BeginTaskOption.expectedToReceive.rawValue: .uint64(expected.expectedToReceive),
        ]
        if let desktopID = entry.desktopID {
            options[ActivityMember.BeginTaskOption.desktopID.rawValue] = .string(desktopID)
        }
        if entry.offers.cancellable { options[ActivityMember.BeginTaskOption.cancellable.rawValue] = .bool(true) }
        if entry.offers.suspendable { options[ActivityMember.BeginTaskOption.suspendable.rawValue] = .bool(true) }
        core.send(
            ActivityMember.Method.beginTask.rawValue,
            { w in
                w.append(record.description)
                try w.appendVardict(options)
            },
            reply: { [unowned self] result in
                guard case .success(let reply) = result else { return ClientCore.settle(result, done) }
                var r = reply.reader()
                guard generation == self.core.generation, let entry = self.tasks[id], let path = try? r.readObjectPath()
                else {
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
    private func sync(_ id: Int, _ done: ClientCore.Completion<Void>? = nil) {
        guard let entry = tasks[id], let path = entry.path, let agentState = entry.agentState, core.owner != nil else {
            done?(.success(()))
            return
        }
        let record = entry.record
        let taskInterface = ClientCore.taskInterface
        if record.progress != entry.agentProgress, !entry.progressInFlight || record.state == .completed {
            entry.progressInFlight = true
            let p = record.progress
            let before = entry.agentProgress
            entry.agentProgress = p
            let generation = core.generation
            let answered: ClientCore.Completion<Message> = { [unowned self] _ in
                guard generation == self.core.generation, let entry = self.tasks[id] else { return }
                entry.progressInFlight = false
                self.sync(id)
            }
            // Byte counts and a reported fraction are separate calls; the last one sent hears the answer.
            var bytes = p
            bytes.reportedFraction = before.reportedFraction
            let fractionChanged = p.reportedFraction != before.reportedFraction
            if bytes != before {
                core.send(
                    TaskMember.Method.setProgress.rawValue, path: path, interface: taskInterface,
                    { w in
                        w.append(p.sent)
                        w.append(p.expectedToSend)
                        w.append(p.received)
                        w.append(p.expectedToReceive)
                    }, reply: fractionChanged ? nil : answered)
            }
            if fractionChanged {
                core.send(
                    TaskMember.Method.setFraction.rawValue, path: path, interface: taskInterface,
                    { w in
                        w.append(p.reportedFraction)
                    }, reply: answered)
            }
        }
        guard record.state != agentState else {
            done?(.success(()))
            return
        }
        entry.agentState = record.state
        let member =
            switch record.state {
            case .running: TaskMember.Method.resume.rawValue
            case .suspended: TaskMember.Method.suspend.rawValue
            case .completed: TaskMember.Method.complete.rawValue
            }
        core.send(
            member, path: path, interface: taskInterface,
            { w in
                if record.state == .completed { w.append(record.error) }
            }, reply: { result in ClientCore.settle(result, done ?? { _ in }) })
        if record.state == .completed { finish(id) }
    }

    /// Applies `change` to task `id` locally, tells the streams, and syncs with the agent (without
    /// waiting for it).
    func update(_ id: Int, _ change: (inout TaskRecord) throws(NetActivityError) -> Void) throws(NetActivityError) {
        guard let entry = tasks[id] else { return }  // completed already: a harmless no-op
        try change(&entry.record)
        publish(entry)
        if entry.path == nil, entry.record.state == .completed, core.owner == nil { finish(id) }
        sync(id)
    }

    func snapshot(of id: Int) -> TaskSnapshot? { tasks[id]?.snapshot }

    func observe(_ id: Int, _ continuation: AsyncStream<TaskSnapshot>.Continuation) {
        guard !core.isClosed, let entry = tasks[id] else { return continuation.finish() }
        let key = core.makeID()
        entry.streams[key] = continuation
        continuation.yield(entry.snapshot)
        continuation.onTermination = { [weak core, mailbox = core.mailbox] _ in
            mailbox.post { [weak core] in core?.ownTasks.tasks[id]?.streams[key] = nil }
        }
    }

    func listen(_ id: Int, _ continuation: AsyncStream<NetActivityTask.Request>.Continuation) {
        guard !core.isClosed, let entry = tasks[id] else { return continuation.finish() }
        let key = core.makeID()
        entry.listeners[key] = continuation
        continuation.onTermination = { [weak core, mailbox = core.mailbox] _ in
            mailbox.post { [weak core] in core?.ownTasks.tasks[id]?.listeners[key] = nil }
        }
    }

    /// Follows task `id` for a binding (it survives agent restarts, unlike a path): the current
    /// snapshot, then each change; nil if the task is unknown.
    func watch(_ id: Int, _ watcher: @escaping TaskWatcher) -> Int {
        let key = core.makeID()
        guard !core.isClosed, let entry = tasks[id] else {
            watcher(nil)
            return key
        }
        entry.watchers[key] = watcher
        watchIndex[key] = id
        watcher(entry.snapshot)
        return key
    }

    /// Ends watch `key`; false if it is not one of ours.
    func unwatch(_ key: Int) -> Bool {
        guard let id = watchIndex.removeValue(forKey: key) else { return false }
        tasks[id]?.watchers[key] = nil
        return true
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
        for l in entry.listeners.values { l.finish() }
        for key in entry.watchers.keys { watchIndex[key] = nil }
    }

    // MARK: the bus and the agent

    /// Panels' requests (CancelRequested, SuspendRequested) come from the agent to this connection
    /// alone (unicast: no match rule) and go to the task's listeners.
    func connected(_ c: Connection) {
        let task = ClientCore.taskInterface
        for signal in [TaskMember.Signal.cancelRequested, .suspendRequested] {
            c.onSignal(SignalMatch(interface: task, member: signal.rawValue)) { [unowned self] message in
                guard message.sender == self.core.owner, let path = message.path,
                    let entry = self.tasks.values.first(where: { $0.path == path })
                else { return }
                let request: NetActivityTask.Request
                if signal == .cancelRequested {
                    guard entry.offers.cancellable else { return }
                    request = .cancel
                } else {
                    var r = message.reader()
                    guard entry.offers.suspendable, let suspended = try? r.read(Bool.self) else { return }
                    request = suspended ? .suspend : .resume
                }
                for l in entry.listeners.values { l.yield(request) }
            }
        }
    }

    /// The app's tasks are this connection's (those begun offline, or before the bus answered,
    /// had none; those from before a reconnection, the old one).
    func registered(as name: String) {
        for entry in tasks.values where entry.record.owner != name {
            entry.record.owner = name
            publish(entry)
        }
    }

    /// The old agent's task objects are gone with it.
    func agentLeft() {
        for entry in tasks.values {
            entry.path = nil
            entry.agentState = nil
            entry.progressInFlight = false
            publish(entry)
        }
    }

    /// Each live task afresh; those completed meanwhile are done with.
    func agentAppeared() {
        for id in tasks.keys.sorted() {
            guard let entry = tasks[id] else { continue }
            if entry.record.state == .completed {
                finish(id)
            } else {
                assert(id) { _ in }
            }
        }
    }

    func shutDown() {
        for entry in tasks.values {
            for s in entry.streams.values { s.finish() }
            for l in entry.listeners.values { l.finish() }
            for w in entry.watchers.values { w(nil) }
        }
        tasks = [:]
        watchIndex = [:]
    }
}
