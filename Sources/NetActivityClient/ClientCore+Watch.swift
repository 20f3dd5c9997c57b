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

enum WatchPlace {
    case remote(String)
    case local(Int)
}

extension ClientCore {
    /// Follows the task at `path` (any client's). The watcher gets the task's current snapshot,
    /// then each change, and stops being called after `completed` or nil.
    func watchTask(path: String, _ watcher: @escaping TaskWatcher) -> Int {
        let key = nextID
        nextID += 1
        guard !isClosed, DBusNames.isValidObjectPath(path) else {
            watcher(nil)
            return key
        }
        if let watch = remoteWatches[path] {
            watch.watchers[key] = watcher
            watchIndex[key] = .remote(path)
            if let snapshot = watch.snapshot { watcher(snapshot) }
            return key
        }
        let changed = SignalMatch(path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        let watch = RemoteWatch(rule: changed.rule + ",sender='\(Self.busName)',arg0='\(Self.taskInterface)'")
        watch.watchers[key] = watcher
        remoteWatches[path] = watch
        watchIndex[key] = .remote(path)
        // The bus handles our messages in order: the rule is in place before the agent sees the
        // GetAll, so every change after its answer reaches us.
        connection?.busCallAsync("AddMatch", { w in w.append(watch.rule) }) { _ in }
        query("GetAll", path: path, interface: "org.freedesktop.DBus.Properties", { w in w.append(Self.taskInterface) },
             reply: { [unowned self] result in
            guard self.remoteWatches[path] === watch else { return }
            var r = (try? result.get())?.reader()
            guard let props = try? r?.readVardict(), props[TaskMember.Property.state.rawValue] != nil else { return self.endRemoteWatch(path) }
            let snapshot = TaskSnapshot(path: path, properties: props)
            self.deliver(snapshot, to: watch, path: path)
        })
        return key
    }

    /// Follows one of this client's own tasks (it survives agent restarts, unlike a path).
    func watchTask(id: Int, _ watcher: @escaping TaskWatcher) -> Int {
        let key = nextID
        nextID += 1
        guard !isClosed, let entry = tasks[id] else {
            watcher(nil)
            return key
        }
        entry.watchers[key] = watcher
        watchIndex[key] = .local(id)
        watcher(entry.snapshot)
        return key
    }

    func unwatchTask(_ key: Int) {
        switch watchIndex.removeValue(forKey: key) {
        case .local(let id)?:
            tasks[id]?.watchers[key] = nil
        case .remote(let path)?:
            guard let watch = remoteWatches[path] else { return }
            watch.watchers[key] = nil
            if watch.watchers.isEmpty { dropRemoteWatch(path) }
        case nil:
            break
        }
    }

    /// PropertiesChanged of watched tasks, from the agent.
    func subscribeToTasks(_ c: Connection) {
        let changed = SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
        c.onSignal(changed) { [unowned self] message in
            guard !self.remoteWatches.isEmpty, let path = message.path, let watch = self.remoteWatches[path],
                  var snapshot = watch.snapshot, message.sender == self.owner
            else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.taskInterface, let props = try? r.readVardict() else { return }
            snapshot.apply(props)
            self.deliver(snapshot, to: watch, path: path)
        }
    }

    private func deliver(_ snapshot: TaskSnapshot, to watch: RemoteWatch, path: String) {
        guard snapshot != watch.snapshot else { return }
        watch.snapshot = snapshot
        for w in watch.watchers.values { w(snapshot) }
        if snapshot.state == .completed { dropRemoteWatch(path) }
    }

    /// The watch ends: its watchers hear nil.
    private func endRemoteWatch(_ path: String) {
        guard let watch = remoteWatches[path] else { return }
        dropRemoteWatch(path)
        for w in watch.watchers.values { w(nil) }
    }

    private func dropRemoteWatch(_ path: String) {
        guard let watch = remoteWatches.removeValue(forKey: path) else { return }
        for key in watch.watchers.keys { watchIndex[key] = nil }
        connection?.busCallAsync("RemoveMatch", { w in w.append(watch.rule) }) { _ in }
    }

    func endRemoteWatches() {
        for path in Array(remoteWatches.keys) { endRemoteWatch(path) }
    }
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

extension ClientCore {
    static let objectManager = "org.freedesktop.DBus.ObjectManager"

    /// The agent's match rules for the task list (the agent's signals come from its unique name;
    /// the bus resolves the well-known one in `sender`).
    static var taskListRules: [String] {
        [
            SignalMatch(path: path, interface: objectManager, member: "InterfacesAdded").rule + ",sender='\(busName)'",
            SignalMatch(path: path, interface: objectManager, member: "InterfacesRemoved").rule + ",sender='\(busName)'",
            SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged").rule
                + ",sender='\(busName)',path_namespace='\(path)/tasks',arg0='\(taskInterface)'",
        ]
    }

    /// Follows every task at the agent: `added` for each one there now, then one event per
    /// change, `removed` when a task leaves (all of them when the agent goes). A new agent's
    /// tasks are read whole. No polling.
    func watchAllTasks(_ observer: Observer<TaskEvent>) -> Int {
        let key = nextID
        nextID += 1
        guard !isClosed else {
            observer.finish()
            return key
        }
        let watch = TaskListWatch(observer)
        let first = taskListWatches.isEmpty
        taskListWatches[key] = watch
        if first, let connection { addTaskListRules(connection) }
        // After the rules: no change falls between the list and the signals.
        reloadTaskList(for: [watch])
        return key
    }

    func unwatchAllTasks(_ key: Int) {
        guard taskListWatches.removeValue(forKey: key) != nil, taskListWatches.isEmpty, let connection else { return }
        for rule in Self.taskListRules { connection.busCallAsync("RemoveMatch", { w in w.append(rule) }) { _ in } }
    }

    func addTaskListRules(_ c: Connection) {
        for rule in Self.taskListRules { c.busCallAsync("AddMatch", { w in w.append(rule) }) { _ in } }
    }

    /// Reads the agent's whole task list (none with no agent) for `watches`.
    func reloadTaskList(for watches: [TaskListWatch]) {
        guard !watches.isEmpty else { return }
        guard owner != nil else {
            for w in watches { w.reconcile([]) }
            return
        }
        let owner = self.owner
        taskList { [unowned self] result in
            guard owner == self.owner else { return }  // a newer agent's reload follows
            let now = (try? result.get()) ?? []
            for w in watches { w.reconcile(now) }
        }
    }

    /// The agent's tasks (GetManagedObjects), by task number.
    func taskList(destination: String? = nil, _ done: @escaping Completion<[TaskSnapshot]>) {
        request("GetManagedObjects", interface: Self.objectManager, destination: destination, decode: Self.readManagedTasks) { result in
            done(result.map { $0.values.sorted(by: Self.taskOrder) })
        }
    }

    /// The task list's signals, from the agent.
    func subscribeToTaskList(_ c: Connection) {
        if !taskListWatches.isEmpty { addTaskListRules(c) }
        c.onSignal(SignalMatch(path: Self.path, interface: Self.objectManager, member: "InterfacesAdded")) { [unowned self] message in
            guard !self.taskListWatches.isEmpty, message.sender == self.owner else { return }
            var r = message.reader()
            guard let path = try? r.readObjectPath(), let props = (try? Self.readInterfaces(&r))?[Self.taskInterface] else { return }
            let t = TaskSnapshot(path: path, properties: props)
            for w in self.taskListWatches.values where w.known[path] != t {
                w.known[path] = t
                w.observer.yield(.added(t))
            }
        }
        c.onSignal(SignalMatch(path: Self.path, interface: Self.objectManager, member: "InterfacesRemoved")) { [unowned self] message in
            guard !self.taskListWatches.isEmpty, message.sender == self.owner else { return }
            var r = message.reader()
            guard let path = try? r.readObjectPath() else { return }
            for w in self.taskListWatches.values where w.known.removeValue(forKey: path) != nil {
                w.observer.yield(.removed(path: path))
            }
        }
        c.onSignal(SignalMatch(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")) { [unowned self] message in
            guard !self.taskListWatches.isEmpty, message.sender == self.owner, let path = message.path else { return }
            var r = message.reader()
            guard (try? r.read(String.self)) == Self.taskInterface, let props = try? r.readVardict() else { return }
            for w in self.taskListWatches.values {
                guard var t = w.known[path] else { continue }
                t.apply(props)
                guard t != w.known[path] else { continue }
                w.known[path] = t
                w.observer.yield(.changed(t))
            }
        }
    }

    // MARK: decoding the task list

    static func taskOrder(_ a: TaskSnapshot, _ b: TaskSnapshot) -> Bool {
        let (x, y) = (a.path ?? "", b.path ?? "")
        return x.count != y.count ? x.count < y.count : x < y
    }

    /// GetManagedObjects' `a{oa{sa{sv}}}`: the tasks by path.
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
}
