import DBusKit
import NetActivityCore

/// One task object: the pure record plus what the agent needs to announce it.
final class TaskEntry {
    let path: String
    var record: TaskRecord
    /// Progress signals: at most one per 100 ms, the latest values always sent (DESIGN.md).
    var coalescer = ChangeCoalescer(interval: .milliseconds(100))
    var progressTimer: EventLoop.TimerID?
    var lingerTimer: EventLoop.TimerID?
    /// What observers were last told.
    var announced: TaskProgress
    var announcedFraction: Double
    /// The app's desktop entry, for dock progress (com.canonical.Unity.LauncherEntry).
    let desktopID: String?

    init(path: String, record: TaskRecord, desktopID: String? = nil) {
        self.path = path
        self.record = record
        self.desktopID = desktopID
        announced = record.progress
        announcedFraction = record.fractionCompleted
    }
}

/// Every task object the agent serves, live and lingering.
struct TaskTable {
    var byPath: [String: TaskEntry] = [:]
    /// Live (running or suspended) task paths per owner, for the per-client cap and departures.
    var liveByOwner: [String: Set<String>] = [:]
    /// Live task paths per desktop id (dock progress).
    var liveByDesktopID: [String: Set<String>] = [:]
    var nextNumber: UInt64 = 1
    /// Completed tasks in completion order (they leave in this order, since the linger is fixed).
    var lingering: [String] = []
    var lingeringHead = 0
    var lingeringCount = 0

    mutating func makePath() -> String {
        defer { nextNumber += 1 }
        return NetActivityNames.taskPathPrefix + String(nextNumber)
    }

    mutating func noteCompleted(_ entry: TaskEntry) {
        let owner = entry.record.owner
        liveByOwner[owner]?.remove(entry.path)
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
        while lingeringHead < lingering.count {
            let path = lingering[lingeringHead]
            lingeringHead += 1
            if byPath[path] != nil { compact(); return path }
        }
        compact()
        return nil
    }

    mutating func forget(_ entry: TaskEntry) {
        byPath[entry.path] = nil
        if entry.record.state == .completed {
            lingeringCount -= 1
            if lingeringHead < lingering.count, lingering[lingeringHead] == entry.path { lingeringHead += 1 }
            compact()
        }
    }

    private mutating func compact() {
        if lingeringHead > 256, lingeringHead * 2 > lingering.count {
            lingering.removeFirst(lingeringHead)
            lingeringHead = 0
        }
    }
}

extension Agent {
    // MARK: BeginTask

    func beginTask(for owner: String, description: String, options: [String: DBusValue]) throws -> String {
        guard description.utf8.count <= AgentLimits.maxDescriptionBytes else {
            throw DBusError.invalidArgs(
                "Description is \(description.utf8.count) bytes long; the limit is \(AgentLimits.maxDescriptionBytes)")
        }
        let (state, progress, desktopID) = try Self.taskOptions(options)
        let live = tasks.liveByOwner[owner]?.count ?? 0
        guard live < AgentLimits.maxLiveTasksPerClient else {
            throw DBusError.limitsExceeded(
                "Client \(owner) already has \(live) tasks running or suspended, the most one client may have")
        }
        if state == .running { try add(.task, for: owner) }
        let entry = createTask(owner: owner, description: description, state: state, progress: progress, desktopID: desktopID)
        logger.debug("Task \(entry.path) for \(owner): \(description)")
        return entry.path
    }

    /// A new task object, exported and announced; the caller has checked limits and added a
    /// running task's activity.
    func createTask(
        owner: String, description: String, state: TaskState, progress: TaskProgress = TaskProgress(), desktopID: String? = nil
    ) -> TaskEntry {
        let entry = TaskEntry(
            path: tasks.makePath(), record: TaskRecord(owner: owner, description: description, state: state, progress: progress),
            desktopID: desktopID)
        tasks.byPath[entry.path] = entry
        tasks.liveByOwner[owner, default: []].insert(entry.path)
        server.export(path: entry.path, interfaces: [taskInterface])
        if let desktopID {
            tasks.liveByDesktopID[desktopID, default: []].insert(entry.path)
            updateLauncher(desktopID)
        }
        return entry
    }

    static let taskOptionTypes = ["suspended": "b", "expected-to-send": "t", "expected-to-receive": "t", "desktop-id": "s"]

    /// BeginTask's options: unknown keys and wrong types are refused by name, so typos surface.
    static func taskOptions(_ options: [String: DBusValue]) throws -> (TaskState, TaskProgress, String?) {
        for (key, value) in options {
            guard let type = taskOptionTypes[key] else {
                throw DBusError.invalidArgs(
                    "Unknown BeginTask option '\(key)'; known options: \(taskOptionTypes.keys.sorted().joined(separator: ", "))")
            }
            guard value.signature == type else {
                throw DBusError.invalidArgs("BeginTask option '\(key)' must have type '\(type)', got '\(value.signature)'")
            }
        }
        let state: TaskState = options["suspended"]?.boolValue == true ? .suspended : .running
        var progress = TaskProgress()
        progress.expectedToSend = options["expected-to-send"]?.uint64Value ?? 0
        progress.expectedToReceive = options["expected-to-receive"]?.uint64Value ?? 0
        let desktopID = options["desktop-id"]?.stringValue
        if let desktopID, !isValidDesktopID(desktopID) {
            throw DBusError.invalidArgs(
                "BeginTask option 'desktop-id' must be a desktop file name like 'org.example.App.desktop' (letters, digits, '.', '_', '-'; at most 255 bytes), got '\(desktopID.prefix(300))'")
        }
        return (state, progress, desktopID)
    }

    static func isValidDesktopID(_ id: String) -> Bool {
        let allowed = { (c: UInt8) in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
        }
        return id.utf8.count <= 255 && id.hasSuffix(".desktop") && id.utf8.count > 8 && id.utf8.allSatisfy(allowed)
    }

    // MARK: docks

    static let launcherInterface = "com.canonical.Unity.LauncherEntry"
    static let launcherPath = "/com/canonical/unity/launcherentry/netactivity"

    /// Tells docks the combined progress and the number of live tasks of one app
    /// (com.canonical.Unity.LauncherEntry.Update); hides both when its last task ends.
    func updateLauncher(_ desktopID: String) {
        let live = (tasks.liveByDesktopID[desktopID] ?? []).compactMap { tasks.byPath[$0] }
        var total = 0.0, done = 0.0
        for entry in live {
            let p = entry.record.progress
            if p.expectedToSend > 0 {
                total += Double(p.expectedToSend)
                done += Double(min(p.sent, p.expectedToSend))
            }
            if p.expectedToReceive > 0 {
                total += Double(p.expectedToReceive)
                done += Double(min(p.received, p.expectedToReceive))
            }
        }
        let properties: [String: DBusValue] = [
            "progress": .double(total > 0 ? done / total : 0), "progress-visible": .bool(total > 0),
            "count": .int64(Int64(live.count)), "count-visible": .bool(!live.isEmpty),
        ]
        try? connection.emitSignal(path: Self.launcherPath, interface: Self.launcherInterface, member: "Update") { w in
            w.append("application://" + desktopID)
            try w.appendVardict(properties)
        }
    }

    // MARK: the Task interface

    /// The task named by a call, if the caller owns it.
    func ownedTask(_ call: MethodCall, _ member: String) throws -> TaskEntry {
        guard let entry = tasks.byPath[call.path] else { throw DBusError.unknownObject("No such task '\(call.path)'") }
        guard entry.record.owner == call.sender else {
            throw DBusError.accessDenied(
                "Only the owner of \(call.path) (\(entry.record.owner)) may call \(member); the caller is \(call.sender)")
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
            try? add(.task, for: owner)
        } else if change.activityDelta < 0, ledger.remove(.task, for: owner) {
            totalChanged()
        }
        var names = ["State"]
        if entry.record.state == .completed {
            if !entry.record.error.isEmpty { names.append("Error") }
            completed(entry)
        }
        announce(entry, with: names)
    }

    func progressChanged(_ entry: TaskEntry) {
        switch entry.coalescer.noteChange(now: now) {
        case .emitNow:
            announce(entry, with: [])
        case .schedule(let deadline):
            entry.progressTimer = loop.schedule(at: deadline.nanoseconds) { [unowned self, unowned entry] in
                entry.progressTimer = nil
                entry.coalescer.timerFired()
                self.announce(entry, with: [])
            }
        case .wait:
            break
        }
    }

    /// Emits `names` with every progress value that changed since the last announcement. A state
    /// change takes pending progress along, so the final values go out with `completed`.
    func announce(_ entry: TaskEntry, with names: [String]) {
        if !names.isEmpty, let t = entry.progressTimer {
            loop.cancel(t)
            entry.progressTimer = nil
            entry.coalescer.timerFired()
        }
        var names = names
        let p = entry.record.progress, old = entry.announced
        if p.sent != old.sent { names.append("CountOfBytesSent") }
        if p.expectedToSend != old.expectedToSend { names.append("CountOfBytesExpectedToSend") }
        if p.received != old.received { names.append("CountOfBytesReceived") }
        if p.expectedToReceive != old.expectedToReceive { names.append("CountOfBytesExpectedToReceive") }
        let fraction = entry.record.fractionCompleted
        if fraction != entry.announcedFraction { names.append("FractionCompleted") }
        guard !names.isEmpty else { return }
        if p != old || fraction != entry.announcedFraction {
            entry.announced = p
            entry.announcedFraction = fraction
            entry.coalescer.didEmit(now: now)
        }
        server.emitPropertiesChanged(path: entry.path, interface: NetActivityNames.taskInterface, changed: names)
        if let desktopID = entry.desktopID { updateLauncher(desktopID) }
    }

    /// A completed task stays for `taskLinger`, then leaves (InterfacesRemoved).
    private func completed(_ entry: TaskEntry) {
        tasks.noteCompleted(entry)
        entry.lingerTimer = loop.schedule(afterNanoseconds: taskLinger.nanoseconds) { [unowned self, unowned entry] in
            entry.lingerTimer = nil
            self.removeTask(entry)
        }
        while tasks.lingeringCount > AgentLimits.maxLingeringTasks, let oldest = tasks.popOldestLingering(),
              let victim = tasks.byPath[oldest]
        {
            removeTask(victim)
        }
    }

    func removeTask(_ entry: TaskEntry) {
        for t in [entry.progressTimer, entry.lingerTimer].compactMap({ $0 }) { loop.cancel(t) }
        entry.progressTimer = nil
        entry.lingerTimer = nil
        tasks.forget(entry)
        server.unexport(path: entry.path)
    }

    /// The owner left the bus: its live tasks complete with ClientVanished. The ledger drops its
    /// activity as a whole afterwards, so no per-task decrement happens here.
    func ownerVanished(_ owner: String) {
        guard let paths = tasks.liveByOwner[owner] else { return }
        for path in paths.sorted() {
            guard let entry = tasks.byPath[path], entry.record.complete(error: NetActivityNames.clientVanished) != nil
            else { continue }
            completed(entry)
            announce(entry, with: ["State", "Error"])
        }
        tasks.liveByOwner[owner] = nil
    }

    func makeTaskInterface() -> DBusInterface {
        DBusInterface(
            NetActivityNames.taskInterface,
            methods: [
                DBusMethod("Suspend") { [unowned self] call in
                    let entry = try self.ownedTask(call, "Suspend")
                    self.apply(entry.record.suspend(), to: entry)
                },
                DBusMethod("Resume") { [unowned self] call in
                    let entry = try self.ownedTask(call, "Resume")
                    self.apply(entry.record.resume(), to: entry)
                },
                DBusMethod("Complete", in: [DBusArgument("error", "s")]) { [unowned self] call in
                    let entry = try self.ownedTask(call, "Complete")
                    let error = try call.args.read(String.self)
                    guard error.utf8.count <= AgentLimits.maxTaskErrorBytes else {
                        throw DBusError.invalidArgs(
                            "Error is \(error.utf8.count) bytes long; the limit is \(AgentLimits.maxTaskErrorBytes)")
                    }
                    self.apply(entry.record.complete(error: error), to: entry)
                },
                DBusMethod(
                    "SetProgress",
                    in: [DBusArgument("sent", "t"), DBusArgument("expected_to_send", "t"),
                         DBusArgument("received", "t"), DBusArgument("expected_to_receive", "t")]
                ) { [unowned self] call in
                    let entry = try self.ownedTask(call, "SetProgress")
                    let next = TaskProgress(
                        sent: try call.args.read(), expectedToSend: try call.args.read(),
                        received: try call.args.read(), expectedToReceive: try call.args.read())
                    do {
                        if try entry.record.setProgress(next) { self.progressChanged(entry) }
                    } catch let refusal as TaskProgress.Refusal {
                        throw DBusError.invalidArgs(refusal.message)
                    }
                },
            ],
            properties: [
                DBusProperty("Version", "u", emitsChanged: .const) { w, _ in w.append(NetActivityNames.version) },
                taskProperty("State", "s") { w, t in w.append(t.record.state.rawValue) },
                taskProperty("Description", "s", emitsChanged: .const) { w, t in w.append(t.record.description) },
                taskProperty("Owner", "s", emitsChanged: .const) { w, t in w.append(t.record.owner) },
                taskProperty("CountOfBytesSent", "t") { w, t in w.append(t.record.progress.sent) },
                taskProperty("CountOfBytesExpectedToSend", "t") { w, t in w.append(t.record.progress.expectedToSend) },
                taskProperty("CountOfBytesReceived", "t") { w, t in w.append(t.record.progress.received) },
                taskProperty("CountOfBytesExpectedToReceive", "t") { w, t in w.append(t.record.progress.expectedToReceive) },
                taskProperty("FractionCompleted", "d") { w, t in w.append(t.record.fractionCompleted) },
                taskProperty("Error", "s") { w, t in w.append(t.record.error) },
            ]
        )
    }

    private func taskProperty(
        _ name: String, _ signature: String, emitsChanged: DBusProperty.EmitsChanged = .true,
        _ get: @escaping (inout MessageWriter, TaskEntry) -> Void
    ) -> DBusProperty {
        DBusProperty(name, signature, emitsChanged: emitsChanged) { [unowned self] w, path in
            get(&w, try self.task(at: path))
        }
    }
}
