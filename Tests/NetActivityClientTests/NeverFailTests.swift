// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import AsyncHTTPClient
import DBusKit
import Dispatch
import Glibc
import LinuxKit
import NetActivityAsyncHTTPClient
import NetActivityClient
import NetActivityTesting
import Testing

/// The most a call that must not wait may take, in seconds. The waits it tells apart take a second
/// or more (a bus call's 25 s timeout, a callback's 2 s sleep, a reconnect attempt); the calls
/// themselves take microseconds, and the scheduler alone took 134 ms once, with the whole suite
/// running on 2 cores.
private let neverWaits = 0.5

/// Seconds since `start` (a monotonic clock).
private func seconds(since start: UInt64) -> Double { Double(EventLoop.now() - start) / 1e9 }

/// The longest any of `calls` took, each timed on its own.
private func slowest(_ calls: [(String, () async throws -> Void)]) async throws -> (String, Double) {
    var worst = ("", 0.0)
    for (name, call) in calls {
        let start = EventLoop.now()
        try await call()
        let took = seconds(since: start)
        if took > worst.1 { worst = (name, took) }
    }
    return worst
}

/// A GObject-style image class: a reference type that is not Sendable.
final class Picture {
    var bytes: [UInt8]
    /// Called when the picture goes (a test's marker that a slot has let go of it).
    private let onRelease: (@Sendable () -> Void)?
    init(_ bytes: [UInt8], onRelease: (@Sendable () -> Void)? = nil) {
        self.bytes = bytes
        self.onRelease = onRelease
    }
    deinit { onRelease?() }
}

/// "Monitoring must never break the app it monitors": no bus, a bus that goes away, a hung agent,
/// slow callbacks, cancellation.
@Suite("The library never fails or delays its app", .serialized, .timeLimit(.minutes(1)))
struct NeverFailTests {
    @Test(
        "no bus: connect returns, every call answers at once and the work runs; the bus and agent come later and get it all"
    )
    func noBus() async throws {
        let address = TestBus.fixedAddress()
        var activity: NetActivity?
        var lease: NetActivityLease?
        var task: NetActivityTask?
        var ran = 0
        let (name, worst) = try await slowest([
            ("connect", { activity = await NetActivity.connect(address: address) }),
            ("incrementActivityCount", { try await activity!.incrementActivityCount() }),
            ("beginActivity", { lease = try await activity!.beginActivity(reason: "offline") }),
            ("beginTask", { task = try await activity!.beginTask("offline task", expectedToSend: 100) }),
            ("setProgress", { try await task!.setProgress(sent: 10) }),
            ("withActivity", { ran = try await activity!.withActivity(reason: "work") { 42 } }),
        ])
        #expect(ran == 42)
        #expect(worst < neverWaits, "\(name) took \(worst) s with no bus")
        guard let activity, let lease, let task else { return }
        do {
            _ = try await activity.status()
            Issue.record("status() answered with no bus")
        } catch {
            #expect(error.isAgentNotRunning)
            #expect(
                error.description.hasPrefix("there is no session bus"),
                "offline, the error names what is missing: \(error.description)")
            #expect(!error.description.contains("make run"), "an app user is told to run make: \(error.description)")
        }
        #expect(await task.path == nil)

        // The bus and then the agent appear: everything held reaches it (count, lease, task).
        let bus = try TestBus(listen: address)
        try await bus.startAgent()
        #expect(try await bus.eventually(within: 10) { try bus.status().activityCount == 3 })
        #expect(
            try await bus.eventually(within: 2) {
                guard let path = await task.path else { return false }
                return try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesSent") == .uint64(10)
                    && bus.property(path, "org.example.NetActivity.Task", "CountOfBytesExpectedToSend") == .uint64(100)
            })
        lease.end()
        activity.close()
    }

    @Test("the bus goes away and comes back: calls keep answering, and the new bus's agent gets what is held")
    func busRestart() async throws {
        let bus = try TestBus(listen: TestBus.fixedAddress())
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        try await activity.incrementActivityCount()
        await activity.settled()
        #expect(try bus.status().activityCount == 1)

        bus.killAgent()
        try bus.restartBus()
        let start = EventLoop.now()
        try await activity.incrementActivityCount()
        let ran = try await activity.withActivity(reason: "during the outage") { "ran" }
        let task = try await activity.beginTask("after the outage")
        #expect(ran == "ran")
        #expect(seconds(since: start) < neverWaits)

        try await bus.startAgent()
        #expect(
            try await bus.eventually(within: 10) { try bus.status().activityCount == 3 },
            "the two counts and the task did not reach the new bus's agent")
        #expect(try await bus.eventually(within: 2) { await task.path != nil })
        #expect(!activity.uniqueName.isEmpty)
        activity.close()
    }

    @Test("a hung agent (SIGSTOP): every call returns within 100 ms; a tracked request keeps its own deadline")
    func hungAgent() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let server = try LocalHTTPServer(files: ["never.bin": [1, 2, 3]])
        defer { server.stop() }
        let activity = await NetActivity.connect(address: bus.address)
        try await activity.incrementActivityCount()
        await activity.settled()
        let pid = bus.agentPID
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }

        var task: NetActivityTask?
        let (name, worst) = try await slowest([
            ("incrementActivityCount", { try await activity.incrementActivityCount() }),
            ("decrementActivityCount", { try await activity.decrementActivityCount() }),
            ("beginActivity", { try await activity.beginActivity(reason: "hung").end() }),
            ("withActivity", { try await activity.withActivity(reason: "hung") {} }),
            ("beginTask", { task = try await activity.beginTask("while hung", expectedToReceive: 10) }),
            ("setProgress", { try await task?.setProgress(received: 5) }),
            ("suspend", { try await task?.suspend() }),
            ("resume", { try await task?.resume() }),
            ("complete", { try await task?.complete() }),
            ("beginTransfer", { _ = await activity.beginTransfer("GET x") }),
            ("isAgentRunning", { _ = await activity.isAgentRunning() }),
        ])
        #expect(worst < neverWaits, "\(name) took \(worst) s with the agent stopped")
        // A query may wait a moment for the agent, then answers with what it last published.
        let start = EventLoop.now()
        let status = try await activity.status()
        #expect(seconds(since: start) < 1)
        #expect(status.activityCount == 1)

        // The app's own deadline holds, however long the agent takes to answer.
        let http = TrackedHTTPClient(.shared, activity: activity)
        let requested = EventLoop.now()
        await #expect(throws: (any Error).self) {
            _ = try await http.execute(HTTPClientRequest(url: server.url("gate/never.bin")), timeout: .seconds(1))
        }
        #expect(seconds(since: requested) < 3, "a 1 s deadline took \(seconds(since: requested)) s")

        kill(pid, SIGCONT)
        // The agent catches up with what happened while it was stopped.
        #expect(try await bus.eventually(within: 5) { try bus.status().activityCount == 1 })
        activity.close()
    }

    @Test("the agent stopped before the app starts: connect and the first status() answer within 250 ms")
    func agentStoppedBeforeStart() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let pid = bus.agentPID
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        let start = EventLoop.now()
        let activity = await NetActivity.connect(address: bus.address)
        let connected = seconds(since: start)
        #expect(connected < Self.answerBound, "connect took \(connected) s")
        #expect(await activity.isAgentRunning(), "the bus knows the agent, stopped or not")
        let asked = EventLoop.now()
        do {
            _ = try await activity.status()
            Issue.record("a stopped agent answered status()")
        } catch {
            #expect(error.code == .disconnected, "\(error)")
            #expect(error.message.contains("did not answer"), "\(error.message)")
        }
        let took = seconds(since: asked)
        #expect(took < Self.answerBound, "the first status() took \(took) s with the agent stopped")
        kill(pid, SIGCONT)
        #expect(try await activity.status().version > 0)
        activity.close()
    }

    @Test(
        "a stalled bus (SIGSTOP dbus-daemon): connect, every call and the first status() return within 250 ms; all of it arrives when the bus resumes"
    )
    func stalledBus() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let before = await NetActivity.connect(address: bus.address)
        try await before.incrementActivityCount()
        await before.settled()
        let published = try await before.status()
        let daemon = bus.bus.pid
        kill(daemon, SIGSTOP)
        defer { kill(daemon, SIGCONT) }

        var activity: NetActivity?
        var task: NetActivityTask?
        var lease: NetActivityLease?
        let (name, worst) = try await slowest([
            ("connect", { activity = await NetActivity.connect(address: bus.address) }),
            ("incrementActivityCount", { try await activity!.incrementActivityCount() }),
            ("beginActivity", { lease = try await activity!.beginActivity(reason: "stalled bus") }),
            ("withActivity", { try await activity!.withActivity(reason: "stalled bus") {} }),
            ("beginTask", { task = try await activity!.beginTask("while the bus is stopped", expectedToSend: 100) }),
            ("setProgress", { try await task!.setProgress(sent: 40) }),
            ("isAgentRunning", { _ = await activity!.isAgentRunning() }),
            (
                "status() of a new connection",
                {
                    do { _ = try await activity!.status() } catch let e as NetActivityError {
                        #expect(e.code == .disconnected, "\(e)")
                    }
                }
            ),
            (
                "status() of a connection from before",
                {
                    let status = try await before.status()
                    // What the agent last published (its signals may lag behind its GetAll a little).
                    #expect(status.activityCount == published.activityCount && status.visible == published.visible)
                }
            ),
            ("incrementActivityCount before", { try await before.incrementActivityCount() }),
        ])
        #expect(worst < Self.answerBound, "\(name) took \(worst) s with the bus stopped")
        guard let activity, let task, let lease else { return }

        // The bus resumes: its Hello is answered, and the agent gets everything held.
        kill(daemon, SIGCONT)
        #expect(
            try await bus.eventually(within: 10) { try bus.status().activityCount == 5 },
            "1 + 1 counts from before, and the new connection's count, lease and task")
        #expect(
            try await bus.eventually(within: 2) {
                guard let path = await task.path else { return false }
                return try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesSent") == .uint64(40)
            })
        #expect(!activity.uniqueName.isEmpty)
        #expect(
            await task.snapshot()?.owner == activity.uniqueName,
            "a task begun before Hello's answer takes the connection's name")
        lease.end()
        activity.close()
        before.close()
    }

    /// 250 ms, with room for a loaded machine's scheduling (the deadlines inside are 200 ms).
    static let answerBound = 0.35

    @Test("a callback that blocks delays neither the library's calls nor other apps' work")
    func slowCallback() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("watched", expectedToReceive: 100)
        let entered = Recorder<Bool>()
        let spinner = TaskSpinnerBinding(activity, callbacks: activity.callbacks) { animating in
            entered.append(animating)
            usleep(2_000_000)  // an app that blocks in its callback
        }
        spinner.bind(to: task)
        #expect(try await entered.wait(for: 1) == [true])
        let (name, worst) = try await slowest([
            ("setProgress", { try await task.setProgress(received: 50) }),
            ("incrementActivityCount", { try await activity.incrementActivityCount() }),
            ("status", { _ = try await activity.status() }),
            ("suspend", { try await task.suspend() }),
        ])
        #expect(worst < neverWaits, "\(name) took \(worst) s while a callback slept")
        spinner.unbind()
        activity.close()
    }

    @Test("callbacks run on the executor the app gives, never on the library's thread")
    func executors() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "app-ui")
        queue.setSpecific(key: key, value: "app-ui")
        let jobs = Recorder<Int>()
        let ui = CallbackExecutor { job in
            jobs.append(1)
            queue.async(execute: job)
        }
        let activity = await NetActivity.connect(address: bus.address, callbacks: ui)
        let task = try await activity.beginTask("progress", expectedToReceive: 100)
        let seen = Recorder<String?>()
        let bar = ProgressBinding(activity, direction: .download, callbacks: activity.callbacks) { _ in
            seen.append(DispatchQueue.getSpecific(key: key))
        }
        bar.bind(to: task)
        try await task.setProgress(received: 40)
        #expect(try await seen.wait(for: 2) == ["app-ui", "app-ui"])
        #expect(jobs.values.count >= 2)
        // An executor given to one binding wins over the activity's.
        let other = Recorder<String?>()
        let spinner = TaskSpinnerBinding(activity, callbacks: .serialQueue(label: "elsewhere")) { _ in
            other.append(DispatchQueue.getSpecific(key: key))
        }
        spinner.bind(to: task)
        #expect(try await other.wait(for: 1) == [nil])
        activity.close()
    }

    @Test("setProgress leaves the sizes it is not given alone")
    func partialProgress() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("upload", expectedToSend: 1000, expectedToReceive: 50)
        try await task.setProgress(sent: 100)
        try await task.setProgress(received: 20)
        let s = try #require(await task.snapshot())
        #expect(
            [s.countOfBytesSent, s.countOfBytesExpectedToSend, s.countOfBytesReceived, s.countOfBytesExpectedToReceive]
                == [100, 1000, 20, 50])
        await activity.settled()
        let path = try #require(await task.path)
        #expect(try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesExpectedToSend") == .uint64(1000))
        #expect(try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesSent") == .uint64(100))
        activity.close()
    }

    @Test("downloadImage stops when its Swift task is cancelled, and the shared transfer with it")
    func cancellableDownload() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let server = try LocalHTTPServer(files: ["slow.png": TestImages.png(width: 4, height: 4)])
        defer { server.stop() }
        let activity = await NetActivity.connect(address: bus.address)
        let url = server.url("gate/slow.png")
        let download = Task { try await activity.downloadImage(url: url) }
        #expect(try await bus.eventually(within: 5) { server.count("/gate/slow.png") == 1 })
        let cancelledAt = EventLoop.now()
        download.cancel()
        do {
            _ = try await download.value
            Issue.record("a cancelled download succeeded")
        } catch let error as NetActivityError {
            #expect(error.code == .agent("Cancelled"))
        }
        #expect(seconds(since: cancelledAt) < 1)
        #expect(
            try await bus.eventually(within: 5) {
                try bus.property("/org/example/NetActivity", "org.example.NetActivity.Downloader", "ActiveDownloads")
                    == .uint32(0)
            }, "the transfer went on with no receipt left")
        activity.close()
    }

    @Test("bind(to:) follows a task begun on another connection of the same app")
    func bindAcrossConnections() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let network = await NetActivity.connect(address: bus.address)
        let ui = await NetActivity.connect(address: bus.address)
        let task = try await network.beginTask("sync")
        let states = Recorder<Bool>()
        let spinner = TaskSpinnerBinding(ui, callbacks: ui.callbacks) { states.append($0) }
        spinner.bind(to: task)
        #expect(try await states.wait(for: 1) == [true])
        try await task.suspend()
        try await task.complete()
        #expect(try await states.wait(for: 2) == [true, false])
        network.close()
        ui.close()
    }

    @Test("an image slot with no agent shows its placeholder, says so once, and loads when the agent comes")
    func slotWithoutAgent() async throws {
        let bus = try TestBus()
        let image = TestImages.png(width: 3, height: 3)
        let server = try LocalHTTPServer(files: ["a.png": image])
        defer { server.stop() }
        let activity = await NetActivity.connect(address: bus.address)
        let shown = Recorder<[UInt8]?>()
        let failures = Recorder<NetActivityError.Code>()
        // A non-Sendable image type: made and used on the slot's executor only.
        let slot = ExecutorImageSlot<Picture>(
            activity, callbacks: activity.callbacks, decode: { Picture($0) }, apply: { shown.append($0?.bytes) })
        slot.setImage(url: server.url("a.png"), placeholder: Picture([9]), failure: { failures.append($0.code) })
        #expect(try await shown.wait(for: 1) == [[9]])
        #expect(try await failures.wait(for: 1) == [.agentNotRunning])
        try await bus.startAgent()
        #expect(try await shown.wait(for: 2).last == image, "the slot did not load when the agent came")
        #expect(failures.values == [.agentNotRunning])
        activity.close()
    }
}
