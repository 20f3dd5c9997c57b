// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import AsyncHTTPClient
import DBusKit
import Glibc
import NetActivityAsyncHTTPClient
import NetActivityClient
import NetActivityURLSession
import Testing

#if canImport(FoundationNetworking)
    import Foundation
    import FoundationNetworking
#else
    import Foundation
#endif

/// TrackedHTTPClient against the real agent on a private bus and a local HTTP server.
@Suite("Tracked HTTP requests", .serialized, .timeLimit(.minutes(1)))
struct TrackingTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let body = (0..<64_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: ["big.bin": body])
    }

    /// The only task at the agent, once it is there.
    func onlyTask(_ observer: BlockingNetActivity) async throws -> TaskSnapshot {
        #expect(try await bus.eventually(within: 5) { try observer.tasks().count == 1 })
        return try #require(try observer.tasks().first)
    }

    /// Waits for the task at `path` to complete and returns it as it completed.
    func completed(_ observer: BlockingNetActivity, _ path: String?) async throws -> TaskSnapshot {
        #expect(
            try await bus.eventually(within: 5) {
                try observer.tasks().first { $0.path == path }?.state == .completed
            })
        return try #require(try observer.tasks().first { $0.path == path })
    }

    func expectNoActivityLeft() async throws {
        #expect(
            try await bus.eventually(within: 5) {
                let s = try bus.status()
                return s.activityCount == 0 && s.clients.allSatisfy { $0.count == 0 }
            })
    }

    @Test("a request is a task with byte progress that completes when the body is read")
    func success() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let http = TrackedHTTPClient(.shared, activity: activity)
        let observer = try BlockingNetActivity(address: bus.address)
        let url = server.url("slow/big.bin")
        let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        var task = try await onlyTask(observer)
        #expect(task.description == "GET \(url)")
        #expect(task.owner == activity.uniqueName)
        #expect(task.state == .running)
        #expect(try bus.status().activityCount == 1)
        // The size from the response's head reaches the agent on its own (the library's thread).
        #expect(
            try await bus.eventually(within: 10) {
                task = try await onlyTask(observer)
                return task.countOfBytesExpectedToReceive == 64_000
            })

        // Another client's progress bar follows it: its first report (0 of 64,000, from the task's
        // state when the binding read it) comes before the body is read, so the binding cannot
        // read the task only once it completed, however late its thread runs.
        let watcher = await NetActivity.connect(address: bus.address)
        let seen = Recorder<TransferProgress>()
        let bar = ProgressBinding(watcher, direction: .download, callbacks: watcher.callbacks) { seen.append($0) }
        bar.bind(toTaskAt: try #require(task.path))
        #expect(try await seen.wait(for: 1, within: 10).first == TransferProgress(completed: 0, expected: 64_000))

        let got = try await response.body.collect(upTo: 1 << 20)
        #expect(Array(got.readableBytesView) == body)
        let done = try await completed(observer, task.path)
        #expect(done.error == "")
        #expect(done.countOfBytesReceived == 64_000)
        #expect(done.countOfBytesExpectedToReceive == 64_000)
        #expect(done.fractionCompleted == 1)
        // The watcher's last report may trail the completion the observer saw: wait for it.
        let final = TransferProgress(completed: 64_000, expected: 64_000)
        let reports = try await seen.wait { $0.last == final }
        #expect(reports.last == final)
        #expect(reports.count >= 2, "the first report at binding, the last with the completion: \(reports)")
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.completed < $1.completed })
        try await expectNoActivityLeft()
        watcher.close()
        activity.close()
    }

    @Test("failures complete the task with the error: an HTTP status, a dropped connection, a refused one")
    func failure() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let http = TrackedHTTPClient(.shared, activity: activity)
        let observer = try BlockingNetActivity(address: bus.address)

        let notFound = try await http.execute(HTTPClientRequest(url: server.url("status/404")), timeout: .seconds(10))
        #expect(notFound.status.code == 404)
        var task = try await onlyTask(observer)
        task = try await completed(observer, task.path)
        #expect(task.error == "HTTP 404 Not Found")

        let dropped = try await http.execute(HTTPClientRequest(url: server.url("drop/big.bin")), timeout: .seconds(10))
        await #expect(throws: (any Error).self) { _ = try await dropped.body.collect(upTo: 1 << 20) }
        #expect(
            try await bus.eventually(within: 5) { try observer.tasks().filter { $0.state == .completed }.count == 2 })
        let second = try #require(try observer.tasks().first { $0.path != task.path })
        #expect(second.error != "")
        #expect(second.countOfBytesReceived <= 64_000)

        let closed = try RefusingPort()
        defer { closed.close() }
        let deadURL = closed.url("x")
        await #expect(throws: (any Error).self) {
            _ = try await http.execute(HTTPClientRequest(url: deadURL), timeout: .seconds(10))
        }
        #expect(
            try await bus.eventually(within: 5) {
                try observer.tasks().filter {
                    $0.state == .completed && $0.description == "GET \(deadURL)" && $0.error != ""
                }.count == 1
            })
        try await expectNoActivityLeft()
        activity.close()
    }

    @Test("a cancelled request, or a response dropped unread, completes as Cancelled")
    func cancellation() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let http = TrackedHTTPClient(.shared, activity: activity)
        let observer = try BlockingNetActivity(address: bus.address)

        // Cancelled while waiting for the head (the server holds /gate/ until opened).
        let gated = HTTPClientRequest(url: server.url("gate/big.bin"))
        let request = Task { try await http.execute(gated, timeout: .seconds(30)) }
        let waiting = try await onlyTask(observer)
        #expect(waiting.state == .running)
        request.cancel()
        await #expect(throws: (any Error).self) { _ = try await request.value }
        #expect(try await completed(observer, waiting.path).error == TrackedTransfer.cancelled)

        // Dropped after the head, with the body still coming.
        do {
            let response = try await http.execute(
                HTTPClientRequest(url: server.url("slow/big.bin")), timeout: .seconds(30))
            #expect(response.status.code == 200)
        }
        #expect(try await bus.eventually(within: 5) { try observer.tasks().count == 2 })
        let dropped = try #require(try observer.tasks().first { $0.path != waiting.path })
        #expect(try await completed(observer, dropped.path).error == TrackedTransfer.cancelled)
        try await expectNoActivityLeft()
        server.openGate("big.bin")
        activity.close()
    }

    @Test("withTransfer completes with the body's outcome; long errors are cut to the agent's limit")
    func withTransfer() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let observer = try BlockingNetActivity(address: bus.address)
        let value = try await activity.withTransfer("custom stack", expectedToReceive: 10) {
            (transfer: TrackedTransfer) async throws -> Int in
            transfer.didReceive(4)
            transfer.suspend()
            #expect(try await bus.eventually(within: 5) { try observer.tasks().first?.state == .suspended })
            #expect(try bus.status().activityCount == 0, "a suspended transfer is not activity")
            transfer.resume()
            transfer.didReceive(16)  // more than announced: the expected size grows with it
            return 42
        }
        #expect(value == 42)
        let first = try await completed(observer, try await onlyTask(observer).path)
        #expect(first.error == "")
        #expect(first.countOfBytesReceived == 20)
        #expect(first.countOfBytesExpectedToReceive == 20)

        struct Long: Error, CustomStringConvertible { var description: String { String(repeating: "é", count: 2000) } }
        await #expect(throws: Long.self) {
            try await activity.withTransfer("fails") { _ in throw Long() }
        }
        #expect(
            try await bus.eventually(within: 5) {
                try observer.tasks().first { $0.description == "fails" }?.state == .completed
            })
        let failed = try #require(try observer.tasks().first { $0.description == "fails" })
        #expect(failed.error.utf8.count <= 1024)
        #expect(failed.error.hasPrefix("éé"))
        #expect(failed.error.hasSuffix("…"))
        try await expectNoActivityLeft()
        activity.close()
    }

    @Test("URLSession: a request is a task that completes with its outcome; failures and cancellation too")
    func urlSession() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let web = TrackedURLSession(activity: activity)
        defer { web.invalidate() }
        let observer = try BlockingNetActivity(address: bus.address)

        let url = server.url("slow/big.bin")
        let (data, response) = try await web.data(for: URLRequest(url: try #require(URL(string: url))))
        #expect(Array(data) == body)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let done = try await completed(observer, try await onlyTask(observer).path)
        #expect(done.description == "GET \(url)")
        #expect(done.error == "")
        #expect(done.countOfBytesReceived == 64_000)
        #expect(done.countOfBytesExpectedToReceive == 64_000)

        let missing = server.url("status/404")
        _ = try await web.data(for: URLRequest(url: try #require(URL(string: missing))))
        #expect(
            try await bus.eventually(within: 5) {
                try observer.tasks().first { $0.description == "GET \(missing)" }?.error == "HTTP 404 Not Found"
            })

        let gated = URLRequest(url: try #require(URL(string: server.url("gate/big.bin"))))
        let request = Task { try await web.data(for: gated) }
        #expect(try await bus.eventually(within: 5) { server.count("/gate/big.bin") == 1 })
        request.cancel()
        await #expect(throws: (any Error).self) { _ = try await request.value }
        #expect(
            try await bus.eventually(within: 5) {
                try observer.tasks().first { $0.description == "GET \(server.url("gate/big.bin"))" }?.error
                    == TrackedTransfer.cancelled
            })
        try await expectNoActivityLeft()
        server.openGate("big.bin")
        activity.close()
    }

    @Test("URLSession: a data task starts suspended and follows the app's resume and suspend")
    func urlSessionSuspendResume() async throws {
        let activity = await NetActivity.connect(address: bus.address)
        let web = TrackedURLSession(activity: activity)
        defer { web.invalidate() }
        let observer = try BlockingNetActivity(address: bus.address)
        let finished = Recorder<Int>()
        let task = await web.dataTask(with: URLRequest(url: try #require(URL(string: server.url("gate/big.bin"))))) {
            data, _, error in finished.append(error == nil ? data.count : -1)
        }
        let path = try #require(try await onlyTask(observer).path)
        func state() throws -> DBusValue { try bus.property(path, "org.example.NetActivity.Task", "State") }
        #expect(try state() == .string("suspended"))
        #expect(try bus.status().activityCount == 0)
        task.resume()
        #expect(
            try await bus.eventually(within: 5) { try state() == .string("running") && bus.status().activityCount == 1 }
        )
        // Foundation starts the transfer once its cache lookup answers, and queues a stop or a start
        // made before then behind it: a suspend and a resume both queued so make the stop run on a
        // running task, which fails a fatal check (swift-corelibs-foundation's
        // NativeProtocol.stopLoading). The request at the server says the transfer has started; from
        // then on suspend() queues its stop on the task's serial queue at once, and resume() waits
        // behind it.
        #expect(try await bus.eventually(within: 5) { server.count("/gate/big.bin") == 1 })
        task.suspend()
        #expect(
            try await bus.eventually(within: 5) {
                try state() == .string("suspended") && bus.status().activityCount == 0
            })
        task.resume()
        #expect(try await bus.eventually(within: 5) { try state() == .string("running") })
        server.openGate("big.bin")
        #expect(try await finished.wait(for: 1) == [64_000])
        #expect(try await bus.eventually(within: 5) { try state() == .string("completed") })
        #expect(try bus.property(path, "org.example.NetActivity.Task", "Error") == .string(""))
        try await expectNoActivityLeft()
        activity.close()
    }
}
