// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import NetActivityContract
import NetActivityCore

/// `org.example.NetActivity.Task` (dbus/org.example.NetActivity.Task.xml): the table every task
/// object serves, and its handlers, which only the task's owner may call.
extension TaskService {
    // MARK: the Task interface table

    typealias P = TaskMember.Property

    /// `org.example.NetActivity.Task` (documented in dbus/org.example.NetActivity.Task.xml).
    func makeInterface() -> DBusInterface {
        typealias M = TaskMember.Method
        return DBusInterface(
            NetActivityInterface.task.rawValue,
            methods: [
                DBusMethod(M.suspend.rawValue) { [unowned self] in try self.suspend(&$0) },
                DBusMethod(M.resume.rawValue) { [unowned self] in try self.resume(&$0) },
                DBusMethod(M.complete.rawValue, in: [DBusArgument("error", "s")]) { [unowned self] in
                    try self.complete(&$0)
                },
                DBusMethod(
                    M.setProgress.rawValue,
                    in: [
                        DBusArgument("sent", "t"), DBusArgument("expected_to_send", "t"),
                        DBusArgument("received", "t"), DBusArgument("expected_to_receive", "t"),
                    ]
                ) { [unowned self] in try self.setProgress(&$0) },
                DBusMethod(M.setFraction.rawValue, in: [DBusArgument("fraction", "d")]) { [unowned self] in
                    try self.setFraction(&$0)
                },
            ],
            properties: [
                .contractVersion,
                taskProperty(.state, "s") { w, t in w.append(t.record.state.rawValue) },
                taskProperty(.description, "s", emitsChanged: .const) { w, t in w.append(t.record.description) },
                taskProperty(.owner, "s", emitsChanged: .const) { w, t in w.append(t.record.owner) },
                taskProperty(.countOfBytesSent, "t") { w, t in w.append(t.record.progress.sent) },
                taskProperty(.countOfBytesExpectedToSend, "t") { w, t in w.append(t.record.progress.expectedToSend) },
                taskProperty(.countOfBytesReceived, "t") { w, t in w.append(t.record.progress.received) },
                taskProperty(.countOfBytesExpectedToReceive, "t") { w, t in
                    w.append(t.record.progress.expectedToReceive)
                },
                taskProperty(.fractionCompleted, "d") { w, t in w.append(t.record.fractionCompleted) },
                taskProperty(.error, "s") { w, t in w.append(t.record.error) },
            ]
        )
    }

    private func taskProperty(
        _ property: TaskMember.Property, _ signature: String, emitsChanged: DBusProperty.EmitsChanged = .true,
        _ get: @escaping (inout MessageWriter, TaskEntry) -> Void
    ) -> DBusProperty {
        DBusProperty(property.rawValue, signature, emitsChanged: emitsChanged) { [unowned self] w, path in
            get(&w, try self.task(at: path))
        }
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
}
