// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract

/// A task binding's view of its task: each snapshot as it changes, then nil if the task can no
/// longer be followed (unknown, its agent gone, or the connection closed). Called on the
/// client's thread.
typealias TaskWatcher = (TaskSnapshot?) -> Void

/// A task at the agent that bindings follow by path: one match rule and one GetAll per path,
/// however many bindings share it.
final class RemoteWatch {
    /// Nil until GetAll answers; signals before that are older than its answer and are dropped.
    var snapshot: TaskSnapshot?
    var watchers: [Int: TaskWatcher] = [:]
    let rule: String
    init(rule: String) { self.rule = rule }
}

/// Other processes' tasks (and our own, by path) followed for the task bindings: one match rule
/// and one GetAll per path, however many bindings share it. They end with the agent that holds
/// them.
final class TaskFollowers: AgentParticipant {
    private unowned let core: ClientCore
    private var watches: [String: RemoteWatch] = [:]
    /// The path each binding's watch key follows.
    private var watchIndex: [Int: String] = [:]

    init(core: ClientCore) { self.core = core }

    /// Follows the task at `path` (any client's). The watcher gets the task's current snapshot,
    /// then each change, and stops being called after `completed` or nil.
    func watch(path: String, _ watcher: @escaping TaskWatcher) -> Int {
        let key = core.makeID()
        guard !core.isClosed, DBusNames.isValidObjectPath(path) else {
            watcher(nil)
            return key
        }
        if let watch = watches[path] {
            watch.watchers[key] = watcher
            watchIndex[key] = path
            if let snapshot = watch.snapshot { watcher(snapshot) }
            return key
        }
        let taskInterface = ClientCore.taskInterface
        let changed = SignalMatch(path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let watch = RemoteWatch(rule: changed.rule + ",sender='\(ClientCore.busName)',arg0='\(taskInterface)'")
        watch.watchers[key] = watcher
        watches[path] = watch
        watchIndex[key] = path
        // The bus handles our messages in order: the rule is in place before the agent sees the
        // GetAll, so every change after its answer reaches us.
        core.connection?.busCallAsync("AddMatch", { w in w.append(watch.rule) }) { _ in }
        core.query(
            "GetAll", path: path, interface: "org.freedesktop.DBus.Properties", { w in w.append(taskInterface) },
            reply: { [unowned self] result in
                guard self.watches[path] === watch else { return }
                var r = (try? result.get())?.reader()
                guard let props = try? r?.readVardict(), props[TaskMember.Property.state.rawValue] != nil else {
                    return self.end(path)
                }
                let snapshot = TaskSnapshot(path: path, properties: props)
                self.deliver(snapshot, to: watch, path: path)
            })
        return key
    }

    /// Ends watch `key`; false if it is not one of ours.
    func unwatch(_ key: Int) -> Bool {
        guard let path = watchIndex.removeValue(forKey: key) else { return false }
        guard let watch = watches[path] else { return true }
        watch.watchers[key] = nil
        if watch.watchers.isEmpty { drop(path) }
        return true
    }

    private func deliver(_ snapshot: TaskSnapshot, to watch: RemoteWatch, path: String) {
        guard snapshot != watch.snapshot else { return }
        watch.snapshot = snapshot
        for w in watch.watchers.values { w(snapshot) }
        if snapshot.state == .completed { drop(path) }
    }

    /// The watch ends: its watchers hear nil.
    private func end(_ path: String) {
        guard let watch = watches[path] else { return }
        drop(path)
        for w in watch.watchers.values { w(nil) }
    }

    private func drop(_ path: String) {
        guard let watch = watches.removeValue(forKey: path) else { return }
        for key in watch.watchers.keys { watchIndex[key] = nil }
        core.connection?.busCallAsync("RemoveMatch", { w in w.append(watch.rule) }) { _ in }
    }

    private func endAll() {
        for path in Array(watches.keys) { end(path) }
    }

    // MARK: the bus and the agent

    /// PropertiesChanged of watched tasks, from the agent.
    func connected(_ c: Connection) {
        let changed = SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        c.onSignal(changed) { [unowned self] message in
            guard !self.watches.isEmpty, let path = message.path, let watch = self.watches[path],
                var snapshot = watch.snapshot, message.sender == self.core.owner
            else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == ClientCore.taskInterface, let props = try? r.readVardict() else {
                return
            }
            snapshot.apply(props)
            self.deliver(snapshot, to: watch, path: path)
        }
    }

    /// Tasks at the old agent are gone with it.
    func agentLeft() { endAll() }

    func shutDown() { endAll() }
}

/// Where a follower's values go on the client's thread: a closure, or an AsyncStream.
struct Observer<T> {
    let yield: (T) -> Void
    let finish: () -> Void

    init(yield: @escaping (T) -> Void, finish: @escaping () -> Void) {
        self.yield = yield
        self.finish = finish
    }

    init(_ continuation: AsyncStream<T>.Continuation) where T: Sendable {
        self.init(yield: { continuation.yield($0) }, finish: { continuation.finish() })
    }
}

/// One change of the agent's task list.
public enum TaskEvent: Sendable, Equatable {
    case added(TaskSnapshot)
    case changed(TaskSnapshot)
    case removed(path: String)
}

/// A follower of every task at the agent: what it has been told, to tell it only differences.
final class TaskListWatch {
    var known: [String: TaskSnapshot] = [:]
    let observer: Observer<TaskEvent>
    init(_ observer: Observer<TaskEvent>) { self.observer = observer }

    func finish() { observer.finish() }

    /// `now` is the whole list: removals, then additions and changes.
    func reconcile(_ now: [TaskSnapshot]) {
        let paths = Set(now.compactMap(\.path))
        for path in known.keys.sorted() where !paths.contains(path) {
            known[path] = nil
            observer.yield(.removed(path: path))
        }
        for t in now {
            guard let path = t.path, known[path] != t else { continue }
            let isNew = known[path] == nil
            known[path] = t
            observer.yield(isNew ? .added(t) : .changed(t))
        }
    }
}

/// Followers of every task at the agent (panels, `netactivity watch --tasks`): one set of match
/// rules for all of them, and the whole list read again whenever the agent changes.
final class TaskListFollowers: AgentParticipant {
    private unowned let core: ClientCore
    private var watches: [Int: TaskListWatch] = [:]

    init(core: ClientCore) { self.core = core }

    static let objectManager = "org.freedesktop.DBus.ObjectManager"

    /// The agent's match rules for the task list (the agent's signals come from its unique name;
    /// the bus resolves the well-known one in `sender`).
    static var rules: [String] {
        let path = ClientCore.path
        let busName = ClientCore.busName
        return [
            SignalMatch(path: path, interface: objectManager, member: "InterfacesAdded").rule + ",sender='\(busName)'",
            SignalMatch(path: path, interface: objectManager, member: "InterfacesRemoved").rule
                + ",sender='\(busName)'",
            SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged").rule
                + ",sender='\(busName)',path_namespace='\(path)/tasks',arg0='\(ClientCore.taskInterface)'",
        ]
    }

    /// Follows every task at the agent: `added` for each one there now, then one event per
    /// change, `removed` when a task leaves (all of them when the agent goes). A new agent's
    /// tasks are read whole. No polling.
    func watch(_ observer: Observer<TaskEvent>) -> Int {
        let key = core.makeID()
        guard !core.isClosed else {
            observer.finish()
            return key
        }
        let watch = TaskListWatch(observer)
        let first = watches.isEmpty
        watches[key] = watch
        if first, let connection = core.connection { addRules(connection) }
        // After the rules: no change falls between the list and the signals.
        reload(for: [watch])
        return key
    }

    func unwatch(_ key: Int) {
        guard watches.removeValue(forKey: key) != nil, watches.isEmpty, let connection = core.connection else { return }
        for rule in Self.rules { connection.busCallAsync("RemoveMatch", { w in w.append(rule) }) { _ in } }
    }

    private func addRules(_ c: Connection) {
        for rule in Self.rules { c.busCallAsync("AddMatch", { w in w.append(rule) }) { _ in } }
    }

    /// Reads the agent's whole task list (none with no agent) for `watches`.
    private func reload(for watches: [TaskListWatch]) {
        guard !watches.isEmpty else { return }
        guard core.owner != nil else {
            for w in watches { w.reconcile([]) }
            return
        }
        let owner = core.owner
        Self.taskList(core) { [unowned self] result in
            guard owner == self.core.owner else { return }  // a newer agent's reload follows
            let now = (try? result.get()) ?? []
            for w in watches { w.reconcile(now) }
        }
    }

    /// The agent's tasks (GetManagedObjects), by task number.
    static func taskList(
        _ core: ClientCore, destination: String? = nil, _ done: @escaping ClientCore.Completion<[TaskSnapshot]>
    ) {
        core.request("GetManagedObjects", interface: objectManager, destination: destination, decode: readManagedTasks)
        { result in
            done(result.map { $0.values.sorted(by: Self.taskOrder) })
        }
    }

    // MARK: the bus and the agent

    /// The task list's signals, from the agent.
    func connected(_ c: Connection) {
        if !watches.isEmpty { addRules(c) }
        let path = ClientCore.path
        let objectManager = Self.objectManager
        c.onSignal(SignalMatch(path: path, interface: objectManager, member: "InterfacesAdded")) {
            [unowned self] message in
            guard !self.watches.isEmpty, message.sender == self.core.owner else { return }
            var r = message.reader()
            guard let path = try? r.readObjectPath(),
                let props = (try? Self.readInterfaces(&r))?[ClientCore.taskInterface]
            else { return }
            let t = TaskSnapshot(path: path, properties: props)
            for w in self.watches.values where w.known[path] != t {
                w.known[path] = t
                w.observer.yield(.added(t))
            }
        }
        c.onSignal(SignalMatch(path: path, interface: objectManager, member: "InterfacesRemoved")) {
            [unowned self] message in
            guard !self.watches.isEmpty, message.sender == self.core.owner else { return }
            var r = message.reader()
            guard let path = try? r.readObjectPath() else { return }
            for w in self.watches.values where w.known.removeValue(forKey: path) != nil {
                w.observer.yield(.removed(path: path))
            }
        }
        c.onSignal(SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")) {
            [unowned self] message in
            guard !self.watches.isEmpty, message.sender == self.core.owner, let path = message.path else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == ClientCore.taskInterface, let props = try? r.readVardict() else {
                return
            }
            for w in self.watches.values {
                guard var t = w.known[path] else { continue }
                t.apply(props)
                guard t != w.known[path] else { continue }
                w.known[path] = t
                w.observer.yield(.changed(t))
            }
        }
    }

    /// Every task leaves with the agent (a replacement's are added when it appears).
    func agentLeft() {
        for w in watches.values { w.reconcile([]) }
    }

    /// A new agent's tasks are read whole.

    func agentAppeared() { reload(for: Array(watches.values)) }

    func shutDown() {
        for w in watches.values { w.finish() }
        watches = [:]
    }

    // MARK: decoding the task list

    static func taskOrder(_ a: TaskSnapshot, _ b: TaskSnapshot) -> Bool {
        let (x, y) = (a.path ?? "", b.path ?? "")
        return x.count != y.count ? x.count < y.count : x < y
    }

    /// GetManagedObjects' `a{oa{sa{sv}}}`: the tasks by path.
    static func readManagedTasks(_ r: inout MessageReader) throws(DBusError) -> [String: TaskSnapshot] {
        let taskInterface = ClientCore.taskInterface
        var out: [String: TaskSnapshot] = [:]
        var objects = try r.enterArray()
        while !objects.isAtEnd() {
            var entry = try objects.enterDictEntry()
            let path = try entry.readObjectPath()
            if let props = try readInterfaces(&entry)[taskInterface] {
                out[path] = TaskSnapshot(path: path, properties: props)
            }
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
}
