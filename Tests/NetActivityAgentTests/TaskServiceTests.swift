// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// Task progress coalescing, completion and linger, driven through the real TaskService (its
/// table, the object server, the ObjectManager signals) on a manual scheduler.
@Suite("TaskService on a manual scheduler")
struct TaskServiceTests {
    typealias P = TaskMember.Property

    func ms(_ seconds: Double) -> Int { Int((seconds * 1000).rounded()) }

    func begin(_ h: DriverHarness, _ owner: String, expectedToSend: UInt64 = 0) throws -> String {
        let reply = try h.call(owner, ActivityMember.Method.beginTask.rawValue) { w in
            w.append("upload")
            try w.appendVardict(
                expectedToSend > 0
                    ? [ActivityMember.BeginTaskOption.expectedToSend.rawValue: .uint64(expectedToSend)] : [:])
        }
        var r = try #require(reply).reader()
        return try r.readObjectPath()
    }

    func setProgress(_ h: DriverHarness, _ owner: String, _ path: String, sent: UInt64, expected: UInt64) throws
        -> Message?
    {
        try h.call(owner, TaskMember.Method.setProgress.rawValue, path: path, interface: .task) { w in
            w.append(sent)
            w.append(expected)
            w.append(UInt64(0))
            w.append(UInt64(0))
        }
    }

    @Test("progress: the first change at once, one signal per 100 ms after, and the final values ride on completion")
    func progressCoalescing() throws {
        let h = DriverHarness()
        let path = try begin(h, ":1.7", expectedToSend: 1000)
        #expect(path == NetActivityBus.taskPathPrefix + "1")
        h.at(0.01)
        _ = try setProgress(h, ":1.7", path, sent: 100, expected: 1000)
        for (i, sent) in [200, 300, 400, 500].enumerated() {
            h.at(0.02 + Double(i) / 100)
            _ = try setProgress(h, ":1.7", path, sent: UInt64(sent), expected: 1000)
        }
        h.at(0.15)
        _ = try setProgress(h, ":1.7", path, sent: 600, expected: 1000)
        h.at(0.16)
        try h.call(":1.7", TaskMember.Method.complete.rawValue, path: path, interface: .task) { w in w.append("") }
        h.at(1)
        let sent = h.changes(.task, at: path).compactMap { c in
            c.values[P.countOfBytesSent.rawValue]?.unwrapped.uint64Value.map { [ms(c.at), Int($0)] }
        }
        #expect(sent == [[10, 100], [110, 500], [160, 600]])
        let last = try #require(h.changes(.task, at: path).last)
        #expect(last.values[P.state.rawValue]?.unwrapped.stringValue == "completed")
        #expect(last.values[P.fractionCompleted.rawValue]?.unwrapped.doubleValue == 1.0)
    }

    @Test("a download's task: progress within 100 ms of its start rides on completion; a slower one's goes out at once")
    func downloadTaskProgress() throws {
        let h = DriverHarness()
        let quick = h.tasks.makeAgentTask(description: "Download quick", running: false)
        h.at(0.2)
        h.tasks.resume(quick)
        h.at(0.21)
        h.tasks.setProgress(quick, TaskProgress(received: 900, expectedToReceive: 900))
        h.at(0.22)
        h.tasks.complete(quick, error: "")
        h.at(1)
        let changes = h.changes(.task, at: quick.path)
        #expect(changes.map { ms($0.at) } == [200, 220], "running, then completed with the final bytes: two signals")
        #expect(changes.last?.values[P.countOfBytesReceived.rawValue]?.unwrapped.uint64Value == 900)
        #expect(changes.last?.values[P.state.rawValue]?.unwrapped.stringValue == "completed")

        let slow = h.tasks.makeAgentTask(description: "Download slow", running: false)
        h.at(2)
        h.tasks.resume(slow)
        h.at(2.15)
        h.tasks.setProgress(slow, TaskProgress(received: 10, expectedToReceive: 1000))
        let received = h.changes(.task, at: slow.path).compactMap { c in
            c.values[P.countOfBytesReceived.rawValue]?.unwrapped.uint64Value.map { [ms(c.at), Int($0)] }
        }
        #expect(received == [[2150, 10]], "past the first 100 ms, progress goes out at once")
    }

    @Test(
        "a download that starts as it is asked for: one InterfacesAdded saying running, activity at once, its bytes with completed"
    )
    func downloadTaskStartedAtOnce() throws {
        let h = DriverHarness()
        h.at(0.1)
        let task = h.tasks.makeAgentTask(description: "Download now", running: true)
        let added = try #require(h.signals.last { $0.message.member == "InterfacesAdded" })
        var r = added.message.reader()
        #expect(try r.readObjectPath() == task.path)
        guard case .dict(_, _, let interfaces) = try r.readValue(),
            case .dict(_, _, let properties)? = interfaces.first(where: {
                $0.0 == .string(NetActivityInterface.task.rawValue)
            })?.1
        else {
            Issue.record("InterfacesAdded without the Task interface")
            return
        }
        let state = properties.first { $0.0 == .string(P.state.rawValue) }?.1.unwrapped.stringValue
        #expect(state == "running", "announced running, not suspended and then resumed")
        let counts = h.changes(.activity).compactMap { c in
            c.values[ActivityMember.Property.activityCount.rawValue]?.unwrapped.uint32Value
        }
        #expect(counts == [1], "the agent's own download counts at once")
        h.at(0.15)
        h.tasks.setProgress(task, TaskProgress(received: 900, expectedToReceive: 900))
        h.at(0.16)
        h.tasks.complete(task, error: "")
        h.at(1)
        let changes = h.changes(.task, at: task.path)
        #expect(changes.map { ms($0.at) } == [160], "one PropertiesChanged in all: completed, with the final bytes")
        #expect(changes.last?.values[P.countOfBytesReceived.rawValue]?.unwrapped.uint64Value == 900)
        #expect(changes.last?.values[P.state.rawValue]?.unwrapped.stringValue == "completed")
        #expect(
            h.changes(.activity).compactMap { c in
                c.values[ActivityMember.Property.activityCount.rawValue]?.unwrapped.uint32Value
            }.last == 0)
    }

    @Test("a completed task lingers 5 s, then leaves with InterfacesRemoved and answers UnknownObject")
    func linger() throws {
        let h = DriverHarness()
        let path = try begin(h, ":1.7")
        h.at(2)
        try h.call(":1.7", TaskMember.Method.complete.rawValue, path: path, interface: .task) { w in w.append("") }
        h.at(7.0 - 0.001)
        #expect(h.objectManagerSignals(for: path).map(\.member) == ["InterfacesAdded"])
        h.at(7.5)
        #expect(
            h.objectManagerSignals(for: path).map { "\($0.member)@\(ms($0.at))" } == [
                "InterfacesAdded@0", "InterfacesRemoved@7000",
            ])
        let reply = try h.call(":1.7", TaskMember.Method.suspend.rawValue, path: path, interface: .task)
        #expect(reply?.errorName == "org.freedesktop.DBus.Error.UnknownObject")
    }

    @Test("only the owner drives a task; a running task counts for its owner until it is suspended")
    func ownershipAndActivity() throws {
        let h = DriverHarness(activation: 0, completion: 0)
        let path = try begin(h, ":1.7")
        h.at(0.5)
        let denied = try setProgress(h, ":1.8", path, sent: 1, expected: 0)
        #expect(denied?.errorName == NetActivityError.Name.accessDenied.rawValue)
        try h.call(":1.7", TaskMember.Method.suspend.rawValue, path: path, interface: .task)
        h.at(1)
        #expect(h.visible.map { [ms($0.at), $0.value ? 1 : 0] } == [[0, 1], [500, 0]])
        #expect(h.activity.total == 0)
    }

    @Test("the owner leaves: its live tasks complete with ClientVanished before its activity is dropped")
    func ownerLeaves() throws {
        let h = DriverHarness(activation: 0, completion: 0.17)
        let path = try begin(h, ":1.7")
        h.at(1)
        h.peers.depart(":1.7")
        h.at(2)
        let completed = try #require(h.changes(.task, at: path).last)
        #expect(ms(completed.at) == 1000)
        #expect(
            completed.values[P.error.rawValue]?.unwrapped.stringValue == NetActivityError.Name.clientVanished.rawValue)
        #expect(h.visible.map { [ms($0.at), $0.value ? 1 : 0] } == [[0, 1], [1170, 0]])
        // Order on the bus: the task's completion, then the indicator's delaying-end.
        let order = h.signals.compactMap { entry -> String? in
            guard entry.message.member == "PropertiesChanged", ms(entry.at) == 1000 else { return nil }
            return entry.message.path
        }
        #expect(order == [path, NetActivityBus.objectPath])
    }

    @Test("a panel's request reaches the owner alone, once a second at most; a task changes only when its owner acts")
    func requests() throws {
        let h = DriverHarness(activation: 0, completion: 0)
        let reply = try h.call(":1.7", ActivityMember.Method.beginTask.rawValue) { w in
            w.append("backup")
            try w.appendVardict([
                ActivityMember.BeginTaskOption.cancellable.rawValue: .bool(true),
                ActivityMember.BeginTaskOption.suspendable.rawValue: .bool(true),
            ])
        }
        var r = try #require(reply).reader()
        let path = try r.readObjectPath()
        func heard() -> [String] {
            h.signals.compactMap { entry in
                guard entry.message.interface == NetActivityInterface.task.rawValue else { return nil }
                #expect(entry.message.destination == ":1.7", "the owner alone")
                return "\(ms(entry.at)) \(entry.message.member ?? "")"
            }
        }
        func ask(_ member: TaskMember.Method, _ suspended: Bool? = nil, from caller: String = DriverHarness.panel)
            throws -> Message?
        {
            try h.call(caller, member.rawValue, path: path, interface: .task) { w in
                if let suspended { w.append(suspended) }
            }
        }
        try ask(.requestCancel)
        h.at(0.5)
        try ask(.requestCancel)
        try ask(.requestSuspend, false)  // running already
        try ask(.requestSuspend, true)
        h.at(1.0)
        try ask(.requestCancel)
        #expect(heard() == ["0 CancelRequested", "500 SuspendRequested", "1000 CancelRequested"])
        #expect(try h.property(path, .task, TaskMember.Property.state.rawValue) == .string("running"))
        // The owner pauses; a resume, then a pause again within a second of the first: both new.
        try h.call(":1.7", TaskMember.Method.suspend.rawValue, path: path, interface: .task)
        try ask(.requestSuspend, false)
        try h.call(":1.7", TaskMember.Method.resume.rawValue, path: path, interface: .task)
        try ask(.requestSuspend, true)
        #expect(heard().suffix(2) == ["1000 SuspendRequested", "1000 SuspendRequested"])
        try h.call(":1.7", TaskMember.Method.complete.rawValue, path: path, interface: .task) { w in w.append("") }
        h.at(3)
        #expect(try ask(.requestCancel)?.kind == .methodReturn, "a completed task: a no-op")
        #expect(heard().count == 5)
        // A task that offers nothing.
        let plain = try begin(h, ":1.7")
        let refused = try h.call(
            DriverHarness.panel, TaskMember.Method.requestCancel.rawValue, path: plain, interface: .task)
        #expect(refused?.errorName == NetActivityError.Name.notSupported.rawValue)
    }

    @Test("a download's task is cancellable: a host's request runs its cancel, a sandboxed caller's is refused")
    func agentTaskCancel() throws {
        let h = DriverHarness(activation: 0, completion: 0)
        var cancelled = 0
        let entry = h.tasks.makeAgentTask(
            description: "Download x", running: true, progress: TaskProgress(), readers: ["flatpak:org.example.App"],
            onCancelRequest: { cancelled += 1 })
        #expect(entry.offers == TaskOffers(cancellable: true, suspendable: false))
        h.peers.identities[":1.50"] = ClientIdentity(app: "flatpak:org.example.App", isSandboxed: true)
        #expect(throws: NetActivityError.self) { try h.tasks.request(.cancel, task: entry.path, by: ":1.50") }
        try h.tasks.request(.cancel, task: entry.path, by: DriverHarness.panel)
        try h.tasks.request(.cancel, task: entry.path, by: DriverHarness.panel)
        #expect(cancelled == 1)
        #expect(throws: NetActivityError.self) {
            try h.tasks.request(.suspend(true), task: entry.path, by: DriverHarness.panel)
        }
        #expect(h.signals.allSatisfy { $0.message.member != TaskMember.Signal.cancelRequested.rawValue })
    }
}

/// What KDE Plasma's job tracker is told of a task (JobViewV3.update's keys, terminate's codes).
@Suite("KDE job views")
struct JobViewTests {
    @Test("a task's state as update's keys, and its end as terminate's code and message")
    func stateAndEnding() throws {
        let h = DriverHarness(activation: 0, completion: 0)
        let entry = h.tasks.makeAgentTask(description: "Download a\nb", running: true)
        #expect(JobTracker.state(entry) == ["title": .string("Download a b"), "suspended": .bool(false)])
        h.tasks.setProgress(entry, TaskProgress(received: 300, expectedToReceive: 1200))
        let measured = JobTracker.state(entry)
        #expect(measured["percent"] == .uint32(25))
        #expect(measured["processedBytes"] == .uint64(300) && measured["totalBytes"] == .uint64(1200))
        h.tasks.suspend(entry)
        #expect(JobTracker.state(entry)["suspended"] == .bool(true))
        h.tasks.complete(entry, error: "")
        #expect(JobTracker.ending(entry) == (0, ""))
        for (error, code) in [
            (NetActivityError.Name.cancelled.rawValue, JobTracker.killedError),
            (NetActivityError.Name.clientVanished.rawValue, JobTracker.otherError),
            ("exit status 3", JobTracker.otherError),
        ] {
            let failed = h.tasks.makeAgentTask(description: "x", running: true)
            h.tasks.complete(failed, error: error)
            #expect(JobTracker.ending(failed).code == code, "\(error)")
        }
    }
}
