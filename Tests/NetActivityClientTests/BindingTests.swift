// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityClient
import Testing

/// Spinner, refresh and progress bindings against the real agent, following tasks of another
/// process (python3-dbus) and of this app.
@Suite("Task bindings", .serialized, .timeLimit(.minutes(1)))
struct BindingTests {
    let bus: TestBus
    let activity: NetActivity

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        activity = await NetActivity.connect(address: bus.address)
    }

    @Test("a spinner follows another process's task: running, suspended, running, completed; then nothing")
    func spinnerFollowsForeignTask() async throws {
        let task = try ForeignTask(address: bus.address)
        let seen = Recorder<Bool>()
        let spinner = TaskSpinnerBinding(activity, callbacks: activity.callbacks) { seen.append($0) }
        spinner.bind(toTaskAt: task.path)
        #expect(try await seen.wait(for: 1) == [true])
        task.send("suspend")
        #expect(try await seen.wait(for: 2) == [true, false])
        task.send("progress 0 0 10 100")  // progress alone moves no spinner
        task.send("resume")
        #expect(try await seen.wait(for: 3) == [true, false, true])
        task.send("complete")
        #expect(try await seen.wait(for: 4) == [true, false, true, false])
        _ = spinner
    }

    @Test("rebinding drops the old task: its later changes reach nobody")
    func rebindingDropsTheOldTask() async throws {
        let first = try ForeignTask(address: bus.address, description: "first")
        let second = try ForeignTask(address: bus.address, description: "second", suspended: true)
        let seen = Recorder<Bool>()
        let spinner = TaskSpinnerBinding(activity, callbacks: activity.callbacks) { seen.append($0) }
        spinner.bind(toTaskAt: first.path)
        #expect(try await seen.wait(for: 1) == [true])
        spinner.bind(toTaskAt: second.path)
        #expect(try await seen.wait(for: 2) == [true, false])
        // The first task changes before the second; the agent's signals arrive in that order,
        // so once the second's change is seen, the first's would have been too.
        first.send("suspend")
        first.send("resume")
        first.send("complete")
        #expect(
            try await bus.eventually(within: 5) {
                try bus.property(first.path, "org.example.NetActivity.Task", "State") == .string("completed")
            })
        second.send("resume")
        #expect(try await seen.wait(for: 3) == [true, false, true])
        spinner.unbind()
        _ = await activity.isAgentRunning()  // a round trip through the client's thread: the unbind has run
        second.send("suspend")
        second.send("complete")
        #expect(
            try await bus.eventually(within: 5) {
                try bus.property(second.path, "org.example.NetActivity.Task", "State") == .string("completed")
            })
        // One more bound task, to be sure everything before it has been delivered.
        let third = try ForeignTask(address: bus.address, description: "third")
        spinner.bind(toTaskAt: third.path)
        #expect(try await seen.wait(for: 4) == [true, false, true, true])
    }

    @Test("a completed or unknown task is not followed; a spinner left going stops")
    func completedTaskIsIgnored() async throws {
        let done = try ForeignTask(address: bus.address)
        done.send("complete")
        #expect(
            try await bus.eventually(within: 5) {
                try bus.property(done.path, "org.example.NetActivity.Task", "State") == .string("completed")
            })
        let running = try ForeignTask(address: bus.address)
        let seen = Recorder<Bool>()
        let spinner = TaskSpinnerBinding(activity, callbacks: activity.callbacks) { seen.append($0) }
        spinner.bind(toTaskAt: running.path)
        #expect(try await seen.wait(for: 1) == [true])
        spinner.bind(toTaskAt: done.path)
        #expect(try await seen.wait(for: 2) == [true, false])
        spinner.bind(toTaskAt: "/org/example/NetActivity/tasks/999999")
        #expect(try await seen.wait(for: 3) == [true, false, false])
        spinner.bind(toTaskAt: "not a path")
        #expect(try await seen.wait(for: 4) == [true, false, false, false])

        let progress = Recorder<TransferProgress>()
        let bar = ProgressBinding(activity, direction: .download, callbacks: activity.callbacks) { progress.append($0) }
        bar.bind(toTaskAt: done.path)
        bar.bind(toTaskAt: running.path)
        running.send("progress 0 0 5 10")
        #expect(
            try await progress.wait(for: 1) == [TransferProgress(completed: 5, expected: 10)],
            "nothing from the completed task")
    }

    @Test("a refresh binding attaches only to a running task; otherwise it ends at once")
    func refreshAttachesOnlyToRunning() async throws {
        let suspended = try ForeignTask(address: bus.address, suspended: true)
        let seen = Recorder<Bool>()
        let refresh = RefreshControlBinding(activity, callbacks: activity.callbacks) { seen.append($0) }
        refresh.bind(toTaskAt: suspended.path)
        #expect(try await seen.wait(for: 1) == [false])
        suspended.send("resume")  // not attached: no begin
        #expect(
            try await bus.eventually(within: 5) {
                try bus.property(suspended.path, "org.example.NetActivity.Task", "State") == .string("running")
            })

        let running = try ForeignTask(address: bus.address)
        refresh.bind(toTaskAt: running.path)
        #expect(try await seen.wait(for: 2) == [false, true])
        running.send("suspend")
        running.send("resume")
        running.send("complete oops")
        #expect(try await seen.wait(for: 5) == [false, true, false, true, false])
        let mine = try await activity.beginTask("mine")
        try await mine.complete()
        refresh.bind(to: mine)
        #expect(try await seen.wait(for: 6) == [false, true, false, true, false, false])
    }

    @Test("a progress bar reports done/expected only while expected > 0, and stops at completion")
    func progressReportsKnownSizes() async throws {
        let task = try ForeignTask(address: bus.address)
        let down = Recorder<TransferProgress>()
        let up = Recorder<TransferProgress>()
        let downBar = ProgressBinding(activity, direction: .download, callbacks: activity.callbacks) { down.append($0) }
        let upBar = ProgressBinding(activity, direction: .upload, callbacks: activity.callbacks) { up.append($0) }
        downBar.bind(toTaskAt: task.path)
        upBar.bind(toTaskAt: task.path)
        task.send("progress 10 0 20 0")  // sizes unknown: nothing to show
        task.send("progress 10 40 20 80")
        #expect(try await down.wait(for: 1) == [TransferProgress(completed: 20, expected: 80)])
        #expect(try await up.wait(for: 1) == [TransferProgress(completed: 10, expected: 40)])
        task.send("progress 40 40 80 80")
        task.send("complete")
        #expect(try await down.wait(for: 2).last == TransferProgress(completed: 80, expected: 80))
        #expect(try await up.wait(for: 2).last == TransferProgress(completed: 40, expected: 40))
        #expect(down.values.allSatisfy { $0.expected > 0 })
        #expect(down.values.first?.fraction == 0.25)
        _ = (downBar, upBar)
    }

    @Test("the async-sequence forms report what the bindings do, and end when the binding would stop")
    func asyncSequences() async throws {
        let task = try ForeignTask(address: bus.address)
        let spins = activity.spinnerStates(ofTaskAt: task.path)
        let bars = activity.progress(ofTaskAt: task.path, direction: .download)
        let refresh = activity.refreshStates(ofTaskAt: task.path)
        var spinIterator = spins.makeAsyncIterator()
        #expect(await spinIterator.next() == true)
        task.send("suspend")
        #expect(await spinIterator.next() == false)
        task.send("resume")
        task.send("progress 0 0 25 100")
        task.send("progress 0 0 100 100")
        task.send("complete")
        var rest: [Bool] = []
        while let s = await spinIterator.next() { rest.append(s) }
        #expect(rest == [true, false], "ends after completion")
        var fractions: [Double] = []
        for await p in bars { fractions.append(p.fraction) }
        // The agent may coalesce the progress: 25 % may not be seen.
        #expect(fractions.last == 1 && fractions.allSatisfy { $0 == 0.25 || $0 == 1 }, "\(fractions)")
        var refreshing: [Bool] = []
        for await r in refresh { refreshing.append(r) }
        #expect(refreshing == [true, false, true, false])
        // An unknown task: the sequence says so and ends at once.
        var unknown: [Bool] = []
        for await s in activity.spinnerStates(ofTaskAt: "/org/example/NetActivity/tasks/999999") { unknown.append(s) }
        #expect(unknown == [false])
        // This app's own task: followed locally; completion with nothing new ends the sequence.
        let own = try await activity.beginTask("own", expectedToReceive: 10)
        var ownBars = activity.progress(of: own, direction: .download).makeAsyncIterator()
        #expect(await ownBars.next() == TransferProgress(completed: 0, expected: 10))
        try await own.setProgress(received: 5)
        #expect(await ownBars.next() == TransferProgress(completed: 5, expected: 10))
        try await own.complete()
        #expect(await ownBars.next() == nil)
    }

    @Test("the task list: tasks() and taskUpdates() see another process's task come, change and go")
    func taskList() async throws {
        let before = try ForeignTask(address: bus.address, description: "before")
        var updates = activity.taskUpdates().makeAsyncIterator()
        guard case .added(let first)? = await updates.next() else {
            Issue.record("no first task")
            return
        }
        #expect(first.description == "before" && first.path == before.path)
        #expect(try await activity.tasks().map(\.description) == ["before"])
        before.send("progress 0 0 10 100")
        guard case .changed(let changed)? = await updates.next() else {
            Issue.record("no change")
            return
        }
        #expect(changed.countOfBytesReceived == 10)
        before.send("complete")
        var completed = false
        var removed = false
        while !removed, let event = await updates.next() {
            if case .changed(let t) = event, t.state == .completed { completed = true }
            if case .removed(let path) = event { removed = path == before.path }
        }
        #expect(completed && removed)
    }

    @Test("bindings to this app's own task follow it locally, also while the agent restarts")
    func ownTask() async throws {
        let task = try await activity.beginTask("own", expectedToReceive: 100)
        let spin = Recorder<Bool>()
        let bar = Recorder<TransferProgress>()
        let spinner = TaskSpinnerBinding(activity, callbacks: activity.callbacks) { spin.append($0) }
        let progress = ProgressBinding(activity, direction: .download, callbacks: activity.callbacks) { bar.append($0) }
        spinner.bind(to: task)
        progress.bind(to: task)
        #expect(try await spin.wait(for: 1) == [true])
        bus.killAgent()
        try await task.setProgress(received: 50, expectedToReceive: 100)
        // At binding the bar shows where the task stands, then each change.
        #expect(
            try await bar.wait(for: 2) == [
                TransferProgress(completed: 0, expected: 100), TransferProgress(completed: 50, expected: 100),
            ])
        try await bus.startAgent()
        try await task.suspend()
        #expect(try await spin.wait(for: 2) == [true, false])
        try await task.complete()
        #expect(try await spin.wait(for: 2) == [true, false], "suspended to completed: still not running")
        _ = (spinner, progress)
    }
}
