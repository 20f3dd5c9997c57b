import DBusKit
import NetActivityCore

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
        send("GetAll", path: path, interface: "org.freedesktop.DBus.Properties", { w in w.append(Self.taskInterface) },
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
