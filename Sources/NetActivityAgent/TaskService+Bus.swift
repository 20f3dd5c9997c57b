// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import NetActivityContract
import NetActivityCore

/// `org.example.NetActivity.Task` (dbus/org.example.NetActivity.Task.xml): the table every task
/// object serves, and its handlers: the owner's, and the requests panels pass to the owner.
extension TaskService: BusService {
    typealias Member = TaskMember
    typealias P = TaskMember.Property

    // MARK: the Task interface table

    func handle(_ method: Member.Method, _ call: inout MethodCall) throws {
        switch method {
        case .suspend: try suspend(&call)
        case .resume: try resume(&call)
        case .complete: try complete(&call)
        case .setProgress: try setProgress(&call)
        case .setFraction: try setFraction(&call)
        case .requestCancel: try requestCancel(&call)
        case .requestSuspend: try requestSuspend(&call)
        }
    }

    static func property(_ property: Member.Property) -> BusProperty<TaskService> {
        switch property {
        case .version: .version
        case .state: task { w, t in w.append(t.record.state.rawValue) }
        case .cancellable: task { w, t in w.append(t.offers.cancellable) }
        case .suspendable: task { w, t in w.append(t.offers.suspendable) }
        case .description: task { w, t in w.append(t.record.description) }
        case .owner: task { w, t in w.append(t.record.owner) }
        case .countOfBytesSent: task { w, t in w.append(t.record.progress.sent) }
        case .countOfBytesExpectedToSend: task { w, t in w.append(t.record.progress.expectedToSend) }
        case .countOfBytesReceived: task { w, t in w.append(t.record.progress.received) }
        case .countOfBytesExpectedToReceive: task { w, t in w.append(t.record.progress.expectedToReceive) }
        case .fractionCompleted: task { w, t in w.append(t.record.fractionCompleted) }
        case .error: task { w, t in w.append(t.record.error) }
        }
    }

    /// A property of the task at the object's path.
    private static func task(_ get: @escaping (inout MessageWriter, TaskEntry) -> Void) -> BusProperty<TaskService> {
        .read(atPath: { s, w, path in get(&w, try s.task(at: path)) })
    }

    // MARK: handlers

    func suspend(_ call: inout MethodCall) throws {
        let entry = try ownedTask(call, .suspend)
        apply(entry.record.suspend(), to: entry)
    }

    func resume(_ call: inout MethodCall) throws {
        let entry = try ownedTask(call, .resume)
        apply(entry.record.resume(), to: entry)
    }

    func complete(_ call: inout MethodCall) throws {
        let entry = try ownedTask(call, .complete)
        let error = try call.args.read(String.self)
        guard error.utf8.count <= NetActivityLimits.maxTaskErrorBytes else {
            throw NetActivityError.invalidArgs(
                "Error is \(error.utf8.count) bytes long; the limit is \(NetActivityLimits.maxTaskErrorBytes)")
        }
        apply(entry.record.complete(error: error), to: entry)
    }

    func setProgress(_ call: inout MethodCall) throws {
        let entry = try ownedTask(call, .setProgress)
        let next = TaskProgress(
            sent: try call.args.read(), expectedToSend: try call.args.read(),
            received: try call.args.read(), expectedToReceive: try call.args.read())
        do {
            if try entry.record.setProgress(next) { progressChanged(entry) }
        } catch {
            throw NetActivityError.invalidArgs(error.message)
        }
    }

    func setFraction(_ call: inout MethodCall) throws {
        let entry = try ownedTask(call, .setFraction)
        let fraction = try call.args.read(Double.self)
        do {
            if try entry.record.setFraction(fraction) { progressChanged(entry) }
        } catch {
            throw NetActivityError.invalidArgs(error.message)
        }
    }

    // MARK: requests from panels

    func requestCancel(_ call: inout MethodCall) throws {
        try request(.cancel, task: call.path, by: call.sender)
    }

    func requestSuspend(_ call: inout MethodCall) throws {
        try request(.suspend(try call.args.read(Bool.self)), task: call.path, by: call.sender)
    }

    /// Passes a panel's request for the task at `path` to its owner alone, if `caller` may ask it
    /// (host callers for any task, a sandboxed app for its own app's, a caller not known for its
    /// connection's) and the task offers it. Asking for the state the task is in, asking of a
    /// completed task, or the same request again within `TaskOffers.repeatAfter`, tells nobody.
    func request(_ request: TaskRequest, task path: String, by caller: String) throws {
        let entry = try task(at: path)
        let member: TaskMember.Method = request == .cancel ? .requestCancel : .requestSuspend
        let identity = context.peers.identity(of: caller)
        if identity.isSandboxed, entry.app.map({ ClientIdentity.scope(ofLeaf: $0) }) != identity.scope {
            throw NetActivityError.accessDenied(
                "\(path) is not \(identity.isUnknown ? "this connection's" : "this app's"); \(identity.refusedAs) may call \(member.rawValue) only on its own tasks"
            )
        }
        let offered = request == .cancel ? entry.offers.cancellable : entry.offers.suspendable
        guard offered else {
            let option = request == .cancel ? "cancellable" : "suspendable"
            throw NetActivityError(
                .notSupported, "\(path) was not begun \(option): its owner does not take \(member.rawValue)")
        }
        if case .suspend(let suspended) = request, suspended == (entry.record.state == .suspended) { return }
        guard entry.record.state != .completed else { return }
        let now = context.now
        if let last = entry.passed[request], now < last + TaskOffers.repeatAfter { return }
        entry.passed[request] = now
        // A pause after a resume (or the other way) is a new request, however soon it comes.
        if case .suspend(let suspended) = request { entry.passed[.suspend(!suspended)] = nil }
        if entry.record.owner == context.uniqueName {
            if request == .cancel { entry.onCancelRequest?() }
            return
        }
        context.logger.debug("\(member.rawValue) for \(path) from \(caller) to \(entry.record.owner)")
        let signal: TaskMember.Signal = request == .cancel ? .cancelRequested : .suspendRequested
        context.sink.emitSignal(
            path: path, interface: NetActivityInterface.task.rawValue, member: signal.rawValue,
            destination: entry.record.owner
        ) { w in
            if case .suspend(let suspended) = request { w.append(suspended) }
        }
    }
}
