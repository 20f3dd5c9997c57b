// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
import DequeModule
import LinuxKit
public import NetActivityContract
import NetActivityCore

/// Every task object the agent serves, live and lingering.
struct TaskTable {
    var byPath: [String: TaskEntry] = [:]
    /// Live (running or suspended) task paths per owner, for departures. Each app's are charged
    /// to it in the accounts (`.tasks`); the agent's own download tasks are bounded by the
    /// downloads' budget instead.
    var liveByOwner: [String: Set<String>] = [:]
    /// Live task paths per desktop id (dock progress).
    var liveByDesktopID: [String: Set<String>] = [:]
    var nextNumber: UInt64 = 1
    /// Completed tasks in completion order (they leave in this order, since the linger is fixed).
    var lingering: Deque<String> = []
    var lingeringCount = 0

    mutating func makePath() -> String {
        defer { nextNumber += 1 }
        return NetActivityBus.taskPathPrefix + String(nextNumber)
    }

    mutating func noteCompleted(_ entry: TaskEntry, accounts: AgentAccounts) {
        let owner = entry.record.owner
        if liveByOwner[owner]?.remove(entry.path) != nil, let app = entry.app {
            accounts.release(.tasks, connection: owner, leaf: app)
        }
        if liveByOwner[owner]?.isEmpty == true { liveByOwner[owner] = nil }
        if let id = entry.desktopID {
            liveByDesktopID[id]?.remove(entry.path)
            if liveByDesktopID[id]?.isEmpty == true { liveByDesktopID[id] = nil }
        }
        lingering.append(entry.path)
        lingeringCount += 1
    }

    /// The oldest lingering path still present, taken off the queue.
    mutating func popOldestLingering() -> String? {
        while let path = lingering.popFirst() {
            if byPath[path] != nil { return path }
        }
        return nil
    }

    mutating func forget(_ entry: TaskEntry) {
        byPath[entry.path] = nil
        if entry.record.state == .completed {
            lingeringCount -= 1
            if lingering.first == entry.path { lingering.removeFirst() }
        }
    }
}

/// Makes and drives tasks for another service (the downloader's transfers are the agent's own tasks).
public protocol TaskFactory: AnyObject {
    /// A new task owned by the agent itself: suspended (a queued transfer), or running (one that
    /// starts as it is asked for, announced so in one InterfacesAdded). With `onCancelRequest`, it
    /// is cancellable: a host panel's RequestCancel runs it.
    func makeAgentTask(
        description: String, running: Bool, progress: TaskProgress, readers: Set<String>,
        onCancelRequest: (() -> Void)?
    ) -> TaskEntry
    func resume(_ entry: TaskEntry)
    /// A download's transfer stopped and waits again (the system went to sleep).
    func suspend(_ entry: TaskEntry)
    /// New byte counts (refused silently when they break the progress rule).
    func setProgress(_ entry: TaskEntry, _ progress: TaskProgress)
    func complete(_ entry: TaskEntry, error: String)
}

/// The task objects (`org.example.NetActivity.Task` at `/org/example/NetActivity/tasks/<n>`): their
/// table, their progress signals (coalesced to one per 100 ms per task), their linger after
/// completion, and dock progress. A running task adds 1 to its owner's activity through the
/// `ActivitySink`.
public final class TaskService: TaskBeginning, TaskFactory {
    let context: AgentContext
    private let activity: any ActivitySink
    var tasks = TaskTable()
    let taskLinger: Duration
    /// One table serves every task object; handlers find the task by the call's path.
    private lazy var taskInterface = makeInterface()
    /// Told when a task comes, announces a change, or leaves (the tray's menu follows).
    public var onTasksChanged: (() -> Void)?
    /// KDE Plasma's job tracker, while the agent (which owns it) follows one.
    weak var jobs: JobTracker?
    /// The desktop ids whose dock progress the agent shows now (LauncherEntry).
    private var launcherShown: Set<String> = []

    /// Who sees which task, and which tasks are in the object tree.
    public private(set) lazy var audience = TaskAudience(context: context, entry: bound(self) { $0.tasks.byPath[$1] })

    public init(context: AgentContext, activity: any ActivitySink, linger: Double) {
        self.context = context
        self.activity = activity
        taskLinger = .seconds(double: linger)
        context.server.audience = audience
    }

    // MARK: BeginTask

    public func beginTask(for owner: String, description: String, options: [String: DBusValue]) throws -> String {
        guard description.utf8.count <= NetActivityLimits.maxDescriptionBytes else {
            throw NetActivityError.invalidArgs(
                "Description is \(description.utf8.count) bytes long; the limit is \(NetActivityLimits.maxDescriptionBytes)"
            )
        }
        let (state, progress, desktopID, offers) = try Self.taskOptions(options)
        let caller = context.peers.identity(of: owner)
        if let desktopID, let refusal = Self.desktopIDRefusal(desktopID, for: caller) {
            throw NetActivityError.accessDenied(refusal)
        }
        let app = caller.leaf
        if let refusal = context.accounts.check(.tasks, connection: owner, leaf: app) {
            throw NetActivityError.limitsExceeded(
                context.accounts.refusalMessage(refusal, .tasks, connection: owner, leaf: app))
        }
        if state == .running { try activity.acquire(.task, for: owner) }
        let entry = createTask(
            owner: owner, description: description, state: state, progress: progress, desktopID: desktopID,
            offers: offers)
        context.logger.debug("Task \(entry.path) for \(owner): \(description)")
        return entry.path
    }

    // MARK: TaskFactory

    /// A download's task: suspended while queued; a transfer that starts at once is announced
    /// running, and that announcement opens its progress window as `resume` does.
    public func makeAgentTask(
        description: String, running: Bool, progress: TaskProgress = TaskProgress(), readers: Set<String> = [],
        onCancelRequest: (() -> Void)? = nil
    )
        -> TaskEntry
    {
        // Cannot hit the ledger's limit: it equals the cap on live tasks.
        if running { try? activity.acquire(.task, for: context.uniqueName) }
        let entry = createTask(
            owner: context.uniqueName, description: description, state: running ? .running : .suspended,
            progress: progress,
            readers: readers, offers: TaskOffers(cancellable: onCancelRequest != nil))
        entry.onCancelRequest = onCancelRequest
        if running { entry.coalescer.didEmit(now: context.now) }
        return entry
    }

    /// A download's transfer starts. Its `running` PropertiesChanged counts as an announcement
    /// of its progress, so progress in the next 100 ms waits for the coalescer: a small image's
    /// one progress step goes out with `completed` (one PropertiesChanged, not two).
    public func resume(_ entry: TaskEntry) {
        apply(entry.record.resume(), to: entry)
        entry.coalescer.didEmit(now: context.now)
    }

    public func suspend(_ entry: TaskEntry) {
        apply(entry.record.suspend(), to: entry)
    }

    public func setProgress(_ entry: TaskEntry, _ progress: TaskProgress) {
        if (try? entry.record.setProgress(progress)) == true { progressChanged(entry) }
    }

    public func complete(_ entry: TaskEntry, error: String) {
        apply(entry.record.complete(error: error), to: entry)
    }

    /// A new task object, exported and announced; the caller has checked limits and added a
    /// running task's activity.
    func createTask(
        owner: String, description: String, state: TaskState, progress: TaskProgress = TaskProgress(),
        desktopID: String? = nil,
        readers: Set<String> = [], offers: TaskOffers = TaskOffers()
    ) -> TaskEntry {
        let entry = TaskEntry(
            path: tasks.makePath(),
            record: TaskRecord(owner: owner, description: description, state: state, progress: progress),
            desktopID: desktopID, app: owner == context.uniqueName ? nil : context.peers.app(of: owner),
            offers: offers)
        entry.readers = readers
        entry.created = context.now
        tasks.byPath[entry.path] = entry
        audience.created(entry)
        if tasks.liveByOwner[owner, default: []].insert(entry.path).inserted, let app = entry.app {
            context.accounts.charge(.tasks, connection: owner, leaf: app)
        }
        context.server.export(path: entry.path, interfaces: [taskInterface])
        onTasksChanged?()
        if let desktopID {
            tasks.liveByDesktopID[desktopID, default: []].insert(entry.path)
            updateLauncher(desktopID)
        }
        jobs?.taskCreated(entry)
        return entry
    }

    /// BeginTask's options: unknown keys and wrong types are refused by name, so typos surface.
    static func taskOptions(_ options: [String: DBusValue]) throws(NetActivityError) -> (
        TaskState, TaskProgress, String?, TaskOffers
    ) {
        typealias Option = ActivityMember.BeginTaskOption
        try checkOptions(options, of: ActivityMember.Method.beginTask.rawValue, Option.self)
        let state: TaskState = options[Option.suspended.rawValue]?.boolValue == true ? .suspended : .running
        var progress = TaskProgress()
        progress.expectedToSend = options[Option.expectedToSend.rawValue]?.uint64Value ?? 0
        progress.expectedToReceive = options[Option.expectedToReceive.rawValue]?.uint64Value ?? 0
        let desktopID = options[Option.desktopID.rawValue]?.stringValue
        if let desktopID, let problem = ActivityMember.desktopIDProblem(desktopID) { throw .invalidArgs(problem) }
        let offers = TaskOffers(
            cancellable: options[Option.cancellable.rawValue]?.boolValue == true,
            suspendable: options[Option.suspendable.rawValue]?.boolValue == true)
        return (state, progress, desktopID, offers)
    }

    /// Why `caller` may not publish for `desktopID`, or nil when it may: a sandboxed app speaks
    /// only for itself (its Flatpak id's desktop file, or one of its Snap's, `NAME_APP.desktop`),
    /// a caller not known for no app; host apps for any.
    static func desktopIDRefusal(_ desktopID: String, for caller: ClientIdentity) -> String? {
        guard caller.isSandboxed else { return nil }
        let file = desktopID.dropLast(".desktop".count)
        if caller.app.hasPrefix("flatpak:"), file == caller.app.dropFirst("flatpak:".count) { return nil }
        if caller.app.hasPrefix("snap:"), file.hasPrefix(caller.app.dropFirst("snap:".count) + "_") { return nil }
        return
            "desktop-id '\(desktopID)' names another app; \(caller.refusedAs) may publish only for its own desktop file"
    }

    // MARK: docks

    static let launcherInterface = "com.canonical.Unity.LauncherEntry"
    static let launcherPath = "/com/canonical/unity/launcherentry/netactivity"

    /// Tells docks the combined progress and the number of live tasks of one app
    /// (com.canonical.Unity.LauncherEntry.Update); hides both when its last task ends. Tasks KDE
    /// Plasma's job tracker shows are left to Plasma, which sends its own.
    func updateLauncher(_ desktopID: String) {
        let all = (tasks.liveByDesktopID[desktopID] ?? []).compactMap { tasks.byPath[$0] }
        let live = jobs.map { jobs in all.filter { !jobs.tracks($0.path) } } ?? all
        if live.isEmpty, all.count > live.count {
            // Every live task is Plasma's: hide ours once, then say nothing.
            guard launcherShown.contains(desktopID) else { return }
        }
        if live.isEmpty { launcherShown.remove(desktopID) } else { launcherShown.insert(desktopID) }
        // Tasks in bytes weigh by their sizes; once one task counts in a fraction only, the units
        // no longer add up, and each measured task weighs the same.
        let measured = live.map(\.record.progress).filter(\.isMeasured)
        var total = 0.0
        var done = 0.0
        if measured.allSatisfy(\.hasKnownSize) {
            for p in measured {
                if p.expectedToSend > 0 {
                    total += Double(p.expectedToSend)
                    done += Double(min(p.sent, p.expectedToSend))
                }
                if p.expectedToReceive > 0 {
                    total += Double(p.expectedToReceive)
                    done += Double(min(p.received, p.expectedToReceive))
                }
            }
        } else {
            total = Double(measured.count)
            done = measured.reduce(0) { $0 + $1.fraction }
        }
        let properties: [String: DBusValue] = [
            "progress": .double(total > 0 ? done / total : 0), "progress-visible": .bool(total > 0),
            "count": .int64(Int64(live.count)), "count-visible": .bool(!live.isEmpty),
        ]
        try? context.sink.emitSignal(path: Self.launcherPath, interface: Self.launcherInterface, member: "Update") {
            w in
            w.append("application://" + desktopID)
            try w.appendVardict(properties)
        }
    }

    // MARK: the Task interface

    /// The task named by a call, if the caller owns it.
    func ownedTask(_ call: MethodCall, _ member: TaskMember.Method) throws -> TaskEntry {
        guard let entry = tasks.byPath[call.path] else { throw DBusError.unknownObject("No such task '\(call.path)'") }
        guard entry.record.owner == call.sender else {
            throw NetActivityError.accessDenied(
                "Only the owner of \(call.path) (\(entry.record.owner)) may call \(member.rawValue); the caller is \(call.sender)"
            )
        }
        return entry
    }

    func task(at path: String) throws -> TaskEntry {
        guard let entry = tasks.byPath[path] else { throw DBusError.unknownObject("No such task '\(path)'") }
        return entry
    }

    /// Applies a transition's effects: the owner's activity, the signals, and the linger after completion.
    func apply(_ change: TaskRecord.Change?, to entry: TaskEntry) {
        guard let change else { return }
        let owner = entry.record.owner
        if change.activityDelta > 0 {
            // Cannot hit the ledger's limit: it equals the cap on live tasks.
            try? activity.acquire(.task, for: owner)
        } else if change.activityDelta < 0 {
            activity.release(.task, for: owner)
        }
        var names = [P.state.rawValue]
        if entry.record.state == .completed {
            if !entry.record.error.isEmpty { names.append(P.error.rawValue) }
            completed(entry)
        }
        announce(entry, with: names)
    }

    func progressChanged(_ entry: TaskEntry) {
        switch entry.coalescer.noteChange(now: context.now) {
        case .emitNow:
            announce(entry, with: [])
        case .schedule(let deadline):
            // The timer holds the entry until it fires or `removeTask` cancels it.
            entry.progressTimer = context.schedule(
                at: deadline,
                bound(self) { me in
                    entry.progressTimer = nil
                    entry.coalescer.timerFired()
                    me.announce(entry, with: [])
                })
        case .wait:
            break
        }
    }

    /// Emits `names` with every progress value that changed since the last announcement. A state
    /// change takes pending progress along, so the final values go out with `completed`.
    func announce(_ entry: TaskEntry, with names: [String]) {
        if !names.isEmpty, let t = entry.progressTimer {
            context.scheduler.cancel(t)
            entry.progressTimer = nil
            entry.coalescer.timerFired()
        }
        var names = names
        let p = entry.record.progress
        let old = entry.announced
        if p.sent != old.sent { names.append(P.countOfBytesSent.rawValue) }
        if p.expectedToSend != old.expectedToSend { names.append(P.countOfBytesExpectedToSend.rawValue) }
        if p.received != old.received { names.append(P.countOfBytesReceived.rawValue) }
        if p.expectedToReceive != old.expectedToReceive { names.append(P.countOfBytesExpectedToReceive.rawValue) }
        let fraction = entry.record.fractionCompleted
        if fraction != entry.announcedFraction { names.append(P.fractionCompleted.rawValue) }
        guard !names.isEmpty else { return }
        if p != old || fraction != entry.announcedFraction {
            entry.announced = p
            entry.announcedFraction = fraction
            entry.coalescer.didEmit(now: context.now)
        }
        context.emitPropertiesChanged(.task, at: entry.path, names)
        jobs?.taskChanged(entry)
        if let desktopID = entry.desktopID { updateLauncher(desktopID) }
        onTasksChanged?()
    }

    /// A completed task stays for `taskLinger`, then leaves (InterfacesRemoved).
    private func completed(_ entry: TaskEntry) {
        tasks.noteCompleted(entry, accounts: context.accounts)
        entry.lingerTimer = context.schedule(
            after: taskLinger,
            bound(self) { me in
                entry.lingerTimer = nil
                me.removeTask(entry)
            })
        while tasks.lingeringCount > NetActivityLimits.maxLingeringTasks, let oldest = tasks.popOldestLingering(),
            let victim = tasks.byPath[oldest]
        {
            removeTask(victim)
        }
    }

    func removeTask(_ entry: TaskEntry) {
        for t in [entry.progressTimer, entry.lingerTimer].compactMap({ $0 }) { context.scheduler.cancel(t) }
        entry.progressTimer = nil
        entry.lingerTimer = nil
        // Unexported while the audience still knows it: its InterfacesRemoved go where its
        // InterfacesAdded went.
        context.server.unexport(path: entry.path)
        tasks.forget(entry)
        audience.removed(entry)
        onTasksChanged?()
    }

    /// The oldest `limit` live tasks as a menu shows them ("backup — 40 %", "sync — 1.5 MB —
    /// paused"), and how many are live. One pass that keeps the oldest few: thousands of queued
    /// downloads cost the menu no sort and no text of rows it does not show.
    func menuRows(limit: Int) -> MenuRows {
        var oldest: [TaskEntry] = []
        var total = 0
        // Paths number tasks in creation order: a shorter one is older.
        func older(_ a: TaskEntry, _ b: TaskEntry) -> Bool {
            a.path.utf8.count != b.path.utf8.count ? a.path.utf8.count < b.path.utf8.count : a.path < b.path
        }
        for paths in tasks.liveByOwner.values {
            for path in paths {
                guard let entry = tasks.byPath[path] else { continue }
                total += 1
                guard limit > 0, oldest.count < limit || older(entry, oldest[oldest.count - 1]) else { continue }
                oldest.insert(entry, at: oldest.firstIndex { older(entry, $0) } ?? oldest.count)
                if oldest.count > limit { oldest.removeLast() }
            }
        }
        let offers = oldest.map { entry -> MenuTaskOffers? in
            guard entry.offers != TaskOffers() else { return nil }
            return MenuTaskOffers(path: entry.path, offers: entry.offers, suspended: entry.record.state == .suspended)
        }
        return MenuRows(first: oldest.map(Self.menuRow), total: total, offers: offers)
    }

    private static func menuRow(_ entry: TaskEntry) -> String {
        let r = entry.record
        let p = r.progress
        var parts = [DisplayText.line(r.description)]
        let done = p.received > 0 || p.expectedToReceive > 0 ? p.received : p.sent
        if p.isMeasured {
            parts.append("\(Int((min(1, r.fractionCompleted) * 100).rounded(.down))) %")
        } else if done > 0 {
            parts.append(Self.siBytes(done))
        }
        if r.state == .suspended { parts.append(tr("paused")) }
        return parts.joined(separator: " — ")
    }

    /// Bytes as the desktop writes them: 512 B, 1.5 kB, 12 MB.
    static func siBytes(_ n: UInt64) -> String {
        if n < 1000 { return "\(n) B" }
        var value = Double(n)
        var unit = ""
        for u in ["kB", "MB", "GB", "TB"] {
            value /= 1000
            unit = u
            if value < 1000 { break }
        }
        return value < 10 ? "\((value * 10).rounded(.down) / 10) \(unit)" : "\(Int(value)) \(unit)"
    }

    /// The owner left the bus: its live tasks complete with ClientVanished. The ledger drops its
    /// activity as a whole afterwards, so no per-task decrement happens here.
    public func ownerVanished(_ owner: String) {
        audience.peerLeft(owner)
        guard let paths = tasks.liveByOwner[owner] else { return }
        for path in paths.sorted() {
            guard let entry = tasks.byPath[path],
                entry.record.complete(error: NetActivityError.Name.clientVanished.rawValue) != nil
            else { continue }
            completed(entry)
            announce(entry, with: [P.state.rawValue, P.error.rawValue])
        }
        tasks.liveByOwner[owner] = nil
    }
}
