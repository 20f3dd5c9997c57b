// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract
import NetActivityCore
import Testing

@Suite("Task records: transitions, activity accounting, progress rules")
struct TaskRecordTests {
    typealias Change = TaskRecord.Change

    func task(_ state: TaskState = .running) -> TaskRecord {
        TaskRecord(owner: ":1.7", description: "GET /feed", state: state)
    }

    static let table: [(TaskState, String, Change?, TaskState)] = [
        // (start, operation, expected change, end)
        (TaskState.running, "suspend", Change(stateChanged: true, activityDelta: -1), TaskState.suspended),
        (.running, "resume", nil, .running),
        (.running, "complete", Change(stateChanged: true, activityDelta: -1), .completed),
        (.suspended, "resume", Change(stateChanged: true, activityDelta: 1), .running),
        (.suspended, "suspend", nil, .suspended),
        (.suspended, "complete", Change(stateChanged: true, activityDelta: 0), .completed),
    ]

    @Test("each transition reports its activity change; no-ops report nil", arguments: table)
    func transitions(start: TaskState, operation: String, expected: Change?, end: TaskState) {
        var t = task(start)
        let change: Change? =
            switch operation {
            case "suspend": t.suspend()
            case "resume": t.resume()
            default: t.complete(error: "")
            }
        #expect(change == expected)
        #expect(t.state == end)
    }

    @Test("suspend then complete releases the activity once (AFNetworking double-decrement)")
    func suspendThenComplete() {
        var t = task()
        var held = t.activity
        for change in [t.suspend(), t.complete(error: "cancelled"), t.complete(error: ""), t.resume(), t.suspend()] {
            held += change?.activityDelta ?? 0
        }
        #expect(held == 0)
        #expect(t.state == .completed)
        #expect(t.error == "cancelled", "the first outcome stands")
    }

    @Test("a completed task never runs again")
    func completedIsFinal() {
        var t = task()
        _ = t.complete(error: "")
        #expect(t.resume() == nil)
        #expect(t.suspend() == nil)
        #expect(t.activity == 0)
    }

    @Test("counters only grow and stay within known expected sizes")
    func progressRules() throws {
        var t = task()
        #expect(try t.setProgress(TaskProgress(sent: 10, expectedToSend: 100, received: 0, expectedToReceive: 0)))
        #expect(throws: TaskProgress.Refusal.self) {
            try t.setProgress(TaskProgress(sent: 5, expectedToSend: 100))
        }
        #expect(throws: TaskProgress.Refusal.self) {
            try t.setProgress(TaskProgress(sent: 101, expectedToSend: 100))
        }
        // An unknown size (0) takes any count; an expected size may change.
        #expect(try t.setProgress(TaskProgress(sent: 10, expectedToSend: 100, received: 5000)))
        #expect(try t.setProgress(TaskProgress(sent: 10, expectedToSend: 50, received: 5000, expectedToReceive: 8000)))
        #expect(
            try t.setProgress(TaskProgress(sent: 10, expectedToSend: 50, received: 5000, expectedToReceive: 8000))
                == false,
            "the same values change nothing")
        #expect(t.progress.received == 5000)
    }

    @Test("the refusal names the value")
    func refusalMessage() {
        let p = TaskProgress(received: 200, expectedToReceive: 300)
        #expect(
            throws: TaskProgress.Refusal(
                message:
                    "CountOfBytesReceived went back from 200 to 100; byte counters only grow (a retry from the start is a new task)"
            )
        ) {
            try p.validate(next: TaskProgress(received: 100, expectedToReceive: 300))
        }
        #expect(
            throws: TaskProgress.Refusal(
                message:
                    "CountOfBytesReceived 400 exceeds CountOfBytesExpectedToReceive 300 (use 0 for an unknown size)")
        ) {
            try p.validate(next: TaskProgress(received: 400, expectedToReceive: 300))
        }
    }

    @Test(
        "fraction over known sizes; 1 after success; kept after failure",
        arguments: [
            (TaskProgress(), 0.0),
            (TaskProgress(received: 50, expectedToReceive: 200), 0.25),
            (TaskProgress(sent: 100, expectedToSend: 100, received: 0, expectedToReceive: 300), 0.25),
            (TaskProgress(sent: 100, expectedToSend: 0, received: 150, expectedToReceive: 300), 0.5),
        ])
    func fraction(progress: TaskProgress, expected: Double) throws {
        var t = task()
        _ = try t.setProgress(progress)
        #expect(t.fractionCompleted == expected)
        var failed = t
        _ = failed.complete(error: "org.example.Error.Timeout")
        #expect(failed.fractionCompleted == expected)
        _ = t.complete(error: "")
        #expect(t.fractionCompleted == 1)
    }

    @Test(
        "a reported fraction counts while no size is known; bytes decide once one is; both survive each other's updates"
    )
    func reportedFraction() throws {
        var t = task()
        #expect(try t.setFraction(0.6))
        #expect(t.fractionCompleted == 0.6)
        #expect(try t.setFraction(0.6) == false, "no change, no signal")
        #expect(try t.setFraction(0.4), "a fraction may go down")
        #expect(t.fractionCompleted == 0.4)
        #expect((t.progress.received, t.progress.expectedToReceive) == (0, 0), "no bytes made up")
        #expect(try t.setProgress(TaskProgress(received: 10)))
        #expect(t.fractionCompleted == 0.4, "bytes of unknown size leave the fraction alone")
        #expect(try t.setProgress(TaskProgress(received: 10, expectedToReceive: 40)))
        #expect(t.fractionCompleted == 0.25, "a known size decides")
        #expect(t.progress.reportedFraction == 0.4, "kept for when the size is unknown again")
        for bad in [-0.1, 1.0001, .nan, .infinity] {
            #expect(throws: TaskProgress.Refusal.self) { _ = try t.setFraction(bad) }
        }
        _ = t.complete(error: "x")
        #expect(try t.setFraction(0.9) == false, "ignored after completion")
        #expect(t.fractionCompleted == 0.25)
    }

    @Test("progress after completion is ignored")
    func frozenAfterCompletion() throws {
        var t = task()
        _ = try t.setProgress(TaskProgress(received: 10))
        _ = t.complete(error: "")
        #expect(try t.setProgress(TaskProgress(received: 20)) == false)
        #expect(t.progress.received == 10)
    }
}
