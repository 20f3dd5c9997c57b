// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
import DequeModule
import NetActivityContract
import NetActivityCore

/// Who sees which task object (docs/contract.md, "Trust and isolation"), for the object server:
///
/// - **A sandboxed app reads only its own work.** A Flatpak or Snap, or a caller whose app is not
///   known, reads the tasks its app began and the agent's download tasks of transfers it asked
///   for; every other task does not exist for it (GetManagedObjects, Properties, Introspect). Host
///   apps read every task, as before.
/// - **Task signals are never broadcast**, since a Flatpak given `--talk-name` receives the
///   agent's broadcasts: InterfacesAdded/Removed and a task's PropertiesChanged go, unicast, to
///   the peers that read the object tree (GetManagedObjects: panels, the GNOME extension,
///   `netactivity watch`, any ObjectManager client) and may read that task, and to the peers that
///   read that task itself (a progress binding). `Visible` and the indicator's state stay broadcasts.
/// - **The tree one reply carries is bounded**: at most `listedBudget` tasks are in the tree (up
///   to `listedLimit` while apps under their fair share still list theirs), shared between apps as
///   every budget is (`FairQuota`); an app's other tasks wait, live and answering their owner, and
///   enter the tree as earlier ones leave. The worst GetManagedObjects reply is about 1 MB,
///   whatever apps do.
public final class TaskAudience: ObjectAudience {
    private let context: AgentContext
    private let entry: (String) -> TaskEntry?

    /// Peers that read the tree, with who they are. A reader keeps hearing while it is connected;
    /// a new one is admitted as every budget admits (the accounts' `.treeReaders`: past the
    /// budget, only an app under its share, and the unscoped pool as one app), so no crowd of
    /// readers takes the view from a panel that comes later.
    private var treeReaders: [String: ClientIdentity] = [:]
    /// Tasks each peer follows directly.
    private var followed: [String: Set<String>] = [:]
    private var refusedReaderLogged = false
    /// The listed tasks of each leaf, in the order they were listed.
    private var listedByLeaf: [String: [String]] = [:]

    /// Tasks in the tree, charged to their leaf (the agent's own to the agent) in the accounts.
    private var listing: FairQuota { context.accounts[.listedTasks] }
    /// Live tasks not in the tree, per leaf, oldest first (paths that left or were listed are
    /// skipped when met).
    private var waiting: [String: Deque<String>] = [:]

    init(context: AgentContext, entry: @escaping (String) -> TaskEntry?) {
        self.context = context
        self.entry = entry
    }

    private static func isTask(_ path: String) -> Bool { path.hasPrefix(NetActivityBus.taskPathPrefix) }

    /// Whether a caller who is `identity` may read `task`.
    static func may(_ identity: ClientIdentity, read task: TaskEntry) -> Bool {
        guard identity.isSandboxed else { return true }
        // A sandboxed app's leaf is its app; a caller not known has a leaf of its own.
        return task.app.map { $0 == identity.leaf } ?? task.readers.contains(identity.leaf)
    }

    // MARK: ObjectAudience

    public func mayRead(_ path: String, caller: String) -> Bool {
        guard Self.isTask(path), let task = entry(path) else { return true }
        return Self.may(context.peers.identity(of: caller), read: task)
    }

    public func restricts(_ path: String) -> Bool { Self.isTask(path) }

    public func isListed(_ path: String) -> Bool {
        guard Self.isTask(path), let task = entry(path) else { return true }
        return task.listed
    }

    public func signalDestinations(for path: String, tree: Bool) -> [String]? {
        guard Self.isTask(path), let task = entry(path) else { return nil }
        var out: [String] = []
        if task.listed {
            for (peer, identity) in treeReaders where Self.may(identity, read: task) { out.append(peer) }
        }
        if !tree {
            for peer in task.followers where !(task.listed && treeReaders[peer] != nil) { out.append(peer) }
        }
        return out
    }

    public func didRead(_ path: String, caller: String, tree: Bool) {
        if tree {
            guard treeReaders[caller] == nil, caller != context.uniqueName else { return }
            addTreeReader(caller)
        } else if Self.isTask(path), let task = entry(path), !task.followers.contains(caller) {
            task.followers.append(caller)
            followed[caller, default: []].insert(path)
            if task.followers.count > NetActivityLimits.maxFollowersPerTask {
                let oldest = task.followers.removeFirst()
                followed[oldest]?.remove(path)
            }
        }
    }

    /// A peer reads the tree: it receives the tree's signals from now on, while it is connected,
    /// if its app (the unscoped pool whole) is within its share of the readers.
    private func addTreeReader(_ peer: String) {
        let identity = context.peers.identity(of: peer)
        if let refusal = context.accounts.check(.treeReaders, connection: peer, leaf: identity.leaf) {
            if !refusedReaderLogged {
                refusedReaderLogged = true
                context.logger.warning(
                    "\(peer) (\(identity.app)) gets no task signals: \(context.accounts.refusalMessage(refusal, .treeReaders, connection: peer, leaf: identity.leaf))"
                )
            }
            return
        }
        context.accounts.charge(.treeReaders, connection: peer, leaf: identity.leaf)
        treeReaders[peer] = identity
    }

    // MARK: the task table's events

    /// A new task: in the tree if its leaf's share allows, else waiting for room. An app under its
    /// share is listed even when the tree is full: the app furthest above its share gives way (its
    /// newest listed task leaves the tree, alive, and waits for room again).
    func created(_ task: TaskEntry) {
        let leaf = task.app ?? Self.agentLeaf
        if case .total = listing.check(connection: task.record.owner, leaf: leaf),
            listing.held(byLeaf: leaf) < listing.share(of: leaf)
        {
            unlistFromFurthestAboveShare(sparing: leaf)
        }
        if listing.check(connection: task.record.owner, leaf: leaf) == nil {
            list(task, leaf: leaf)
        } else {
            waiting[leaf, default: []].append(task.path)
        }
    }

    private func list(_ task: TaskEntry, leaf: String) {
        context.accounts.charge(.listedTasks, connection: task.record.owner, leaf: leaf)
        task.listed = true
        listedByLeaf[leaf, default: []].append(task.path)
    }

    /// The newest listed task of the leaf furthest above its share leaves the tree and waits first
    /// in its queue.
    private func unlistFromFurthestAboveShare(sparing spared: String) {
        var furthest: (leaf: String, excess: Int)?
        for (leaf, paths) in listedByLeaf where leaf != spared && !paths.isEmpty {
            let excess = listing.held(byLeaf: leaf) - listing.share(of: leaf)
            if excess > 0, excess > furthest?.excess ?? 0 { furthest = (leaf, excess) }
        }
        guard let leaf = furthest?.leaf, let path = listedByLeaf[leaf]?.popLast(), let task = entry(path) else {
            return
        }
        context.server.withdraw(path: path)
        task.listed = false
        context.accounts.release(.listedTasks, connection: task.record.owner, leaf: leaf)
        waiting[leaf, default: []].prepend(path)
    }

    /// A task left (after its InterfacesRemoved): its room in the tree goes to the oldest waiting
    /// task of the app that lists the fewest.
    func removed(_ task: TaskEntry) {
        for peer in task.followers { followed[peer]?.remove(task.path) }
        guard task.listed else { return }
        let leaf = task.app ?? Self.agentLeaf
        context.accounts.release(.listedTasks, connection: task.record.owner, leaf: leaf)
        if let i = listedByLeaf[leaf]?.lastIndex(of: task.path) { listedByLeaf[leaf]!.remove(at: i) }
        if listedByLeaf[leaf]?.isEmpty == true { listedByLeaf[leaf] = nil }
        listNextWaiting()
    }

    private func listNextWaiting() {
        var best: (leaf: String, held: Int)?
        for leaf in Array(waiting.keys) {
            while let first = waiting[leaf]!.first,
                entry(first).map({ $0.listed || $0.record.state == .completed }) ?? true
            {
                waiting[leaf]!.removeFirst()
            }
            if waiting[leaf]!.first == nil {
                waiting[leaf] = nil
                continue
            }
            let held = listing.held(byApp: String(ClientIdentity.app(ofLeaf: leaf)))
            if best.map({ held < $0.held }) ?? true { best = (leaf, held) }
        }
        guard let leaf = best?.leaf, let path = waiting[leaf]?.first, let task = entry(path),
            listing.check(connection: task.record.owner, leaf: leaf) == nil
        else { return }
        waiting[leaf]!.removeFirst()
        if waiting[leaf]!.first == nil { waiting[leaf] = nil }
        list(task, leaf: leaf)
        context.server.announce(path: path)
    }

    /// A peer left: it reads nothing more.
    func peerLeft(_ peer: String) {
        if let identity = treeReaders.removeValue(forKey: peer) {
            context.accounts.release(.treeReaders, connection: peer, leaf: identity.leaf)
        }
        for path in followed.removeValue(forKey: peer) ?? [] {
            entry(path)?.followers.removeAll { $0 == peer }
        }
    }

    static let agentLeaf = "agent"
}
