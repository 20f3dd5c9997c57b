// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore

/// KDE Plasma's job tracker (`org.kde.JobViewServer`, the interfaces of KDE's kjobwidgets), where
/// Plasma draws each job with Cancel and Pause buttons, a count and a progress pie on its
/// notifications icon, and per-app progress on its task manager. While one is on the bus, each task
/// that names a `desktop-id` (its app's, which a sandboxed app may name only for itself) and is
/// still live after the activation delay gets a job view there (`JobViewServerV2.requestView`):
/// its description, state and bytes go out as `JobViewV3.update`, its end as `terminate`
/// (an error when it failed, was cancelled, or its owner left), and the view's `cancelRequested`,
/// `suspendRequested` and `resumeRequested` come back as the task's requests from a panel (to its
/// owner alone). Tasks Plasma tracks get no LauncherEntry of the agent's: Plasma sends its own.
final class JobTracker {
    static let serverName = "org.kde.JobViewServer"
    static let serverPath = "/JobViewServer"
    static let serverInterface = "org.kde.JobViewServerV2"
    static let viewInterface = "org.kde.JobViewV3"
    /// kjobwidgets' capability bits and error codes (KJob::KilledJobError, KJob::UserDefinedError).
    static let canCancel: Int32 = 0x1
    static let canSuspend: Int32 = 0x2
    static let killedError: UInt32 = 1
    static let otherError: UInt32 = 100

    private let connection: Connection
    private let tasks: TaskService
    private let scheduler: any Scheduler
    private let logger: Logger
    private let activationDelay: () -> Duration

    /// The server's unique name ("" while none runs).
    private(set) var server = ""
    private var unfollow: (() -> Void)?
    private var signalHandlers: [Int] = []
    private var viewRule: String?

    /// One task's job view.
    private struct View {
        /// Its object at the server (nil while requestView is out).
        var object: String?
        /// What the server was last told.
        var sent: [String: DBusValue] = [:]
        /// The task ended while requestView was out: terminate on its answer.
        var ended: (code: UInt32, message: String)?
    }
    private var views: [String: View] = [:]
    private var taskOfView: [String: String] = [:]
    private var due: [String: TimerID] = [:]

    init(
        connection: Connection, tasks: TaskService, scheduler: any Scheduler, logger: Logger,
        activationDelay: @escaping () -> Duration
    ) {
        self.connection = connection
        self.tasks = tasks
        self.scheduler = scheduler
        self.logger = logger
        self.activationDelay = activationDelay
    }

    func start() {
        unfollow = connection.followOwner(of: Self.serverName, bound(self) { $0.serverChanged($1) })
        for member in ["cancelRequested", "suspendRequested", "resumeRequested"] {
            signalHandlers.append(
                connection.onSignal(
                    SignalMatch(interface: Self.viewInterface, member: member),
                    bound(self) { $0.viewSignal($1, member) }))
        }
    }

    func stop() {
        unfollow?()
        unfollow = nil
        for id in signalHandlers { connection.removeSignalHandler(id) }
        signalHandlers = []
        serverChanged("")
    }

    /// Whether the task at `path` has a view (its LauncherEntry is Plasma's then).
    func tracks(_ path: String) -> Bool { views[path] != nil }

    // MARK: the server

    private func serverChanged(_ owner: String) {
        guard owner != server else { return }
        let hadViews = Set(views.keys)
        if let rule = viewRule { connection.removeMatch(rule) }
        viewRule = nil
        for timer in due.values { scheduler.cancel(timer) }
        due = [:]
        views = [:]
        taskOfView = [:]
        server = owner
        // The tasks Plasma tracked show on docks through the agent again.
        for desktopID in Set(hadViews.compactMap { tasks.tasks.byPath[$0]?.desktopID }) {
            tasks.updateLauncher(desktopID)
        }
        guard !owner.isEmpty else { return }
        logger.info("KDE Plasma's job tracker (\(owner)) is on the bus: tasks with a desktop-id go to it")
        // Only the server's view signals are heard (whoever else sends some).
        let rule = "type='signal',sender='\(owner)',interface='\(Self.viewInterface)'"
        connection.addMatchWithoutWaiting(rule)
        viewRule = rule
        for entry in tasks.tasks.byPath.values where entry.record.state != .completed { taskCreated(entry) }
    }

    // MARK: tasks

    /// A new task, or a live one when the server came: a view once it is older than the
    /// activation delay (a person would not see a task that ends sooner).
    func taskCreated(_ entry: TaskEntry) {
        guard !server.isEmpty, entry.desktopID != nil, views[entry.path] == nil, due[entry.path] == nil else { return }
        let at = entry.created + activationDelay()
        let path = entry.path
        if at <= Instant(nanoseconds: scheduler.nowNanoseconds) {
            requestView(path)
        } else {
            due[path] = scheduler.schedule(
                atNanoseconds: at.nanoseconds,
                bound(self) { me in
                    me.due[path] = nil
                    me.requestView(path)
                })
        }
    }

    /// The task announced a change (its state, its progress, its end).
    func taskChanged(_ entry: TaskEntry) {
        if entry.record.state == .completed, let timer = due.removeValue(forKey: entry.path) {
            scheduler.cancel(timer)
        }
        guard var view = views[entry.path] else { return }
        if entry.record.state == .completed {
            let ending = Self.ending(entry)
            guard let object = view.object else {
                view.ended = ending
                views[entry.path] = view
                return
            }
            sendUpdate(entry, &view, object: object)
            terminate(object, ending)
            forget(entry.path)
            return
        }
        guard let object = view.object else { return }
        sendUpdate(entry, &view, object: object)
        views[entry.path] = view
    }

    private func requestView(_ path: String) {
        guard !server.isEmpty, let entry = tasks.tasks.byPath[path], entry.record.state != .completed,
            let desktopID = entry.desktopID,
            let m = try? Message.methodCall(
                destination: server, path: Self.serverPath, interface: Self.serverInterface, member: "requestView")
        else { return }
        var capabilities: Int32 = 0
        if entry.offers.cancellable { capabilities |= Self.canCancel }
        if entry.offers.suspendable { capabilities |= Self.canSuspend }
        var hints = Self.state(entry)
        // The delay is the agent's (as kjobwidgets' own trackers say).
        hints["immediate"] = .bool(true)
        var w = m.writer()
        w.append(String(desktopID.dropLast(".desktop".count)))
        w.append(capabilities)
        guard (try? w.appendVardict(hints)) != nil else { return }
        views[path] = View(sent: Self.state(entry))
        let server = self.server
        // A reply may come after the tracker stopped (a reload): weak.
        connection.callAsync(m, timeoutMilliseconds: 5000) { [weak self] result in
            guard let self, server == self.server, var view = self.views[path] else { return }
            var r = (try? result.get())?.reader()
            guard let object = try? r?.readObjectPath() else {
                if case .failure(let e) = result { self.logger.notice("The job tracker refused a view: \(e.message)") }
                self.forget(path)
                // Its dock progress is the agent's again.
                if let desktopID = self.tasks.tasks.byPath[path]?.desktopID { self.tasks.updateLauncher(desktopID) }
                return
            }
            view.object = object
            self.taskOfView[object] = path
            if let ended = view.ended {
                self.terminate(object, ended)
                self.forget(path)
                return
            }
            if let entry = self.tasks.tasks.byPath[path] { self.sendUpdate(entry, &view, object: object) }
            self.views[path] = view
            if let desktopID = self.tasks.tasks.byPath[path]?.desktopID { self.tasks.updateLauncher(desktopID) }
        }
    }

    private func forget(_ path: String) {
        guard let view = views.removeValue(forKey: path) else { return }
        if let object = view.object { taskOfView[object] = nil }
    }

    /// `update` with what changed since the server was last told (nothing: no call).
    private func sendUpdate(_ entry: TaskEntry, _ view: inout View, object: String) {
        let now = Self.state(entry)
        let changed = now.filter { view.sent[$0.key] != $0.value }
        guard !changed.isEmpty else { return }
        view.sent = now
        send(object, "update") { w in try w.appendVardict(changed) }
    }

    private func terminate(_ object: String, _ ending: (code: UInt32, message: String)) {
        send(object, "terminate") { w in
            w.append(ending.code)
            w.append(ending.message)
            try w.appendVardict([:])
        }
    }

    /// A call the server does not answer (kjobwidgets marks update and terminate NoReply).
    private func send(_ object: String, _ member: String, _ body: (inout MessageWriter) throws -> Void) {
        guard
            let m = try? Message.methodCall(
                destination: server, path: object, interface: Self.viewInterface, member: member)
        else { return }
        m.setNoReply(true)
        var w = m.writer()
        guard (try? body(&w)) != nil else { return }
        connection.send(m)
    }

    /// The job's state as JobViewV3.update's keys have it.
    static func state(_ entry: TaskEntry) -> [String: DBusValue] {
        let r = entry.record
        let p = r.progress
        var out: [String: DBusValue] = [
            "title": .string(DisplayText.line(r.description, maxCharacters: 200)),
            "suspended": .bool(r.state == .suspended),
        ]
        let receiving = p.received > 0 || p.expectedToReceive > 0
        let (done, total) = receiving ? (p.received, p.expectedToReceive) : (p.sent, p.expectedToSend)
        if total > 0 { out["totalBytes"] = .uint64(total) }
        if done > 0 { out["processedBytes"] = .uint64(done) }
        if p.isMeasured { out["percent"] = .uint32(UInt32((min(1, max(0, r.fractionCompleted)) * 100).rounded(.down))) }
        return out
    }

    /// terminate's error code and message for a completed task: 0 for success, the killed-job code
    /// for a cancelled one, another for any other error (its text shown).
    static func ending(_ entry: TaskEntry) -> (code: UInt32, message: String) {
        let error = entry.record.error
        if error.isEmpty { return (0, "") }
        if error == NetActivityError.Name.cancelled.rawValue
            || error.hasPrefix(NetActivityError.Name.cancelled.rawValue + ":")
        {
            return (killedError, "")
        }
        if error == NetActivityError.Name.clientVanished.rawValue {
            return (otherError, tr("The app quit before the task ended"))
        }
        return (otherError, DisplayText.line(error, maxCharacters: 200))
    }

    // MARK: Plasma's buttons

    private func viewSignal(_ message: Message, _ member: String) {
        guard !server.isEmpty, message.sender == server, let object = message.path, let path = taskOfView[object]
        else { return }
        let request: TaskRequest =
            switch member {
            case "cancelRequested": .cancel
            case "suspendRequested": .suspend(true)
            default: .suspend(false)
            }
        do {
            try tasks.request(request, task: path, by: server)
        } catch {
            logger.debug("The job tracker's \(member) for \(path): \(error)")
        }
    }
}
