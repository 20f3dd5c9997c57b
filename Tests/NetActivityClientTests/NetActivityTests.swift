// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityClient
import NetActivityTesting
import Testing

/// The async library against the real agent on a private bus.
@Suite("NetActivity library against the real agent", .serialized, .timeLimit(.minutes(1)))
struct NetActivityTests {
    @Test("counts and leases add up; withActivity ends its lease however the body ends")
    func countsAndLeases() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        try await activity.incrementActivityCount()
        await activity.settled()  // the calls answer at once; the agent hears of them just after
        #expect(try bus.status().activityCount == 1)
        let inside = try await activity.withActivity(reason: "sync") {
            await activity.settled()
            return try bus.status().activityCount
        }
        #expect(inside == 2)
        #expect(try await bus.eventually(within: 2) { try bus.status().activityCount == 1 })
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await activity.withActivity(reason: "fails") { throw Boom() }
        }
        #expect(try await bus.eventually(within: 2) { try bus.status().activityCount == 1 })
        try await activity.decrementActivityCount()
        try await activity.decrementActivityCount()  // never below zero
        await activity.settled()
        #expect(try bus.status().activityCount == 0)
        activity.close()
    }

    @Test("a task's life as its owner sees it, and as another client sees it")
    func taskLifecycle() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("GET /feed", expectedToReceive: 1000)
        let states = task.states
        // beginTask answers at once; the path comes when the agent has registered the task.
        #expect(try await bus.eventually(within: 2) { await task.path != nil })
        let path = try #require(await task.path)
        #expect(try bus.property(path, "org.example.NetActivity.Task", "Owner") == .string(activity.uniqueName))
        try await task.setProgress(received: 250)  // the expected size, left out, stays 1000
        try await task.suspend()
        await activity.settled()
        #expect(try bus.property(path, "org.example.NetActivity.Task", "State") == .string("suspended"))
        #expect(try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesReceived") == .uint64(250))
        #expect(try bus.status().activityCount == 0)
        try await task.resume()
        try await task.setProgress(received: 1000, expectedToReceive: 1000)
        try await task.complete()
        try await task.complete(error: "too late")  // harmless
        await activity.settled()
        #expect(try bus.property(path, "org.example.NetActivity.Task", "State") == .string("completed"))
        #expect(try bus.property(path, "org.example.NetActivity.Task", "Error") == .string(""))
        #expect(try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesReceived") == .uint64(1000))
        var seen: [TaskSnapshot.State] = []
        for await s in states where seen.last != s.state { seen.append(s.state) }
        #expect(seen == [.running, .suspended, .running, .completed])
        #expect(await task.snapshot() == nil)
        activity.close()
    }

    @Test(
        "a panel's cancel and pause reach the task's requests, from a restarted agent too; the stream ends with the task"
    )
    func panelRequests() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("backup", cancellable: true, suspendable: true)
        let plain = try await activity.beginTask("plain")
        var requests = task.requests.makeAsyncIterator()
        #expect(try await bus.eventually(within: 2) { await task.path != nil })
        #expect(try await bus.eventually(within: 2) { await plain.path != nil })
        let panel = try BlockingNetActivity(address: bus.address)
        try panel.requestSuspend(task: try #require(await task.path), suspended: true)
        #expect(await requests.next() == .suspend)
        try await task.suspend()
        await activity.settled()
        try panel.requestSuspend(task: try #require(await task.path), suspended: false)
        #expect(await requests.next() == .resume)
        #expect(throws: NetActivityError.self) { try panel.requestCancel(task: "/org/example/NetActivity/tasks/999") }
        let plainPath = try #require(await plain.path)
        let refused = #expect(throws: NetActivityError.self) { try panel.requestCancel(task: plainPath) }
        #expect(refused?.name == "org.example.NetActivity.Error.NotSupported")
        // A restarted agent knows the task offers it (the library begins it again with its offers).
        bus.killAgent()
        try await bus.startAgent()
        #expect(try await bus.eventually(within: 2) { await task.path != nil })
        try BlockingNetActivity(address: bus.address).requestCancel(task: try #require(await task.path))
        #expect(await requests.next() == .cancel)
        try await task.complete(error: "org.example.NetActivity.Error.Cancelled")
        #expect(await requests.next() == nil, "the stream ends with the task")
        activity.close()
    }

    @Test("setFraction: a task measured in a fraction reaches the agent with no bytes, and again after it restarts")
    func fractionTask() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("render")
        try await task.setFraction(0.3)
        try await task.setFraction(0.6)
        await activity.settled()
        let path = try #require(await task.path)
        #expect(try bus.property(path, "org.example.NetActivity.Task", "FractionCompleted") == .double(0.6))
        #expect(try bus.property(path, "org.example.NetActivity.Task", "CountOfBytesExpectedToReceive") == .uint64(0))
        #expect(await task.snapshot()?.fractionCompleted == 0.6)
        do {
            try await task.setFraction(2)
            Issue.record("a fraction of 2 was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
        }
        // The agent restarts: the task is asserted again, with its fraction.
        bus.killAgent()
        try await bus.startAgent()
        #expect(
            try await bus.eventually(within: 2) {
                guard let p = await task.path else { return false }
                return try bus.property(p, "org.example.NetActivity.Task", "FractionCompleted") == .double(0.6)
            })
        activity.close()
    }

    @Test("refusals arrive as typed errors")
    func typedErrors() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let task = try await activity.beginTask("t", expectedToReceive: 100)
        try await task.setProgress(received: 50, expectedToReceive: 100)
        await #expect(throws: NetActivityError.self) {
            try await task.setProgress(received: 10, expectedToReceive: 100)
        }
        do {
            _ = try await activity.beginTask(String(repeating: "x", count: 5000))
            Issue.record("a 5000-byte description was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains("5000"))
        }
        do {
            _ = try await activity.beginActivity(reason: String(repeating: "r", count: 2000))
            Issue.record("a 2000-byte reason was accepted")
        } catch {
            #expect(error.code == .invalidArguments)
        }
        await activity.settled()
        #expect(try bus.status().activityCount == 1, "the refused calls left nothing behind")
        activity.close()
    }

    @Test("kill the agent and start it again: the lease, the count and the running task are back at once")
    func reassertion() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        let lease = try await activity.beginActivity(reason: "held across restarts")
        try await activity.incrementActivityCount()
        let task = try await activity.beginTask("long download", expectedToReceive: 4096)
        try await task.setProgress(received: 1024, expectedToReceive: 4096)
        let suspended = try await activity.beginTask("paused", suspended: true)
        await activity.settled()
        let oldPath = try #require(await task.path)
        #expect(try bus.status().activityCount == 3)

        let updates = activity.statusUpdates()
        bus.killAgent()
        #expect(try await bus.eventually(within: 2) { await activity.isAgentRunning() == false })
        try await bus.startAgent()
        // The library re-asserts on the new owner's NameOwnerChanged, with no delay of its own: what
        // this waits for is the scheduling of the library's thread, the bus and the agent, which a
        // loaded machine stretches. The bound tells that from a library that never re-asserts.
        let back = try await bus.eventually(within: 5) {
            let s = try bus.status()
            return s.activityCount == 3 && s.visible
        }
        #expect(back, "the new agent did not get the held activity back")

        #expect(
            try await bus.eventually(within: 2) {
                guard let path = await task.path else { return false }
                return (try? bus.property(path, "org.example.NetActivity.Task", "CountOfBytesReceived"))
                    == .uint64(1024)
            })
        let newPath = try #require(await task.path)
        #expect(newPath.hasPrefix("/org/example/NetActivity/tasks/"))
        _ = oldPath  // The new agent numbers from 1 again; the path may or may not repeat.
        #expect(try bus.property(newPath, "org.example.NetActivity.Task", "Description") == .string("long download"))
        #expect(try bus.property(newPath, "org.example.NetActivity.Task", "CountOfBytesReceived") == .uint64(1024))
        #expect(try bus.property(newPath, "org.example.NetActivity.Task", "State") == .string("running"))
        #expect(try await bus.eventually(within: 2) { await suspended.path != nil })
        let pausedPath = try #require(await suspended.path)
        #expect(try bus.property(pausedPath, "org.example.NetActivity.Task", "State") == .string("suspended"))

        // The status stream saw the agent go (nil) and come back.
        var sawGone = false
        var sawBack = false
        for await s in updates {
            if s == nil {
                sawGone = true
            } else if sawGone, s?.activityCount == 3 {
                sawBack = true
                break
            }
        }
        #expect(sawGone && sawBack)

        lease.end()
        try await task.complete()
        try await activity.decrementActivityCount()
        #expect(try await bus.eventually(within: 2) { try bus.status().activityCount == 0 })
        activity.close()
    }

    @Test("with no agent the calls still succeed, and the holdings reach the agent when it starts")
    func agentStartsLater() async throws {
        let bus = try TestBus()
        let activity = await NetActivity.connect(address: bus.address)
        #expect(await activity.isAgentRunning() == false)
        try await activity.incrementActivityCount()
        let task = try await activity.beginTask("queued before the agent")
        #expect(await task.snapshot()?.path == nil)
        try await bus.startAgent()
        #expect(try await bus.eventually(within: 1) { try bus.status().activityCount == 2 })
        #expect(try await bus.eventually(within: 1) { await task.path != nil })
        activity.close()
    }

    @Test("closing releases everything at the agent, and later calls throw instead of hanging")
    func closing() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let activity = await NetActivity.connect(address: bus.address)
        try await activity.incrementActivityCount()
        let lease = try await activity.beginActivity(reason: "held")
        let task = try await activity.beginTask("open")
        let updates = activity.statusUpdates()
        await activity.settled()
        #expect(try bus.status().activityCount == 3)
        activity.close()
        #expect(try await bus.eventually(within: 2) { try bus.status().activityCount == 0 })
        do {
            try await activity.incrementActivityCount()
            Issue.record("a call on a closed connection succeeded")
        } catch {
            #expect(error.code == .disconnected)
        }
        await #expect(throws: NetActivityError.self) { try await task.suspend() }
        lease.end()
        for await _ in updates {}  // the stream ends
    }

    @Test("the shared image cache through the library: bytes, the fd path, request keys, typed refusals")
    func imageCache() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let app = await NetActivity.connect(address: bus.address)
        let other = await NetActivity.connect(address: bus.address)
        let small = TestImages.png(width: 2, height: 2)
        let large = TestImages.jpeg(width: 800, height: 600, padding: 300_000)
        try await app.addImage(small, identifier: "small")
        try await app.addImage(large, url: "https://example.com/big.jpg", additionalIdentifier: "thumb")
        #expect(try await other.image(identifier: "small") == small)
        #expect(try await other.image(url: "https://example.com/big.jpg", additionalIdentifier: "thumb") == large)
        #expect(try await other.image(url: "https://example.com/big.jpg") == nil)
        let file = try #require(try await other.openImage(identifier: "small"))
        #expect(file.size == UInt64(small.count))
        #expect(file.readAll() == small)
        #expect(try await other.openImage(identifier: "missing") == nil)
        do {
            try await app.addImage(Array("not an image".utf8), identifier: "text")
            Issue.record("text was accepted as an image")
        } catch {
            #expect(error.code == .agent("NotAnImage"))
        }
        #expect(try await app.removeImage(identifier: "small"))
        #expect(try await app.removeImage(identifier: "small") == false)
        #expect(try await app.removeAllImages())
        app.close()
        other.close()
    }

    @Test("downloadImage: one shared transfer into the shared cache; typed errors")
    func download() async throws {
        let bus = try TestBus()
        try await bus.startAgent()
        let server = try LocalHTTPServer(files: ["a.png": TestImages.png(width: 3, height: 3)])
        defer { server.stop() }
        let app = await NetActivity.connect(address: bus.address)
        let bytes = try await app.downloadImage(url: server.url("a.png"))
        #expect(bytes == TestImages.png(width: 3, height: 3))
        #expect(try await app.image(url: server.url("a.png")) == bytes)
        do {
            _ = try await app.downloadImage(url: server.url("missing.png"))
            Issue.record("a 404 succeeded")
        } catch {
            #expect(error.code == .agent("HTTP"))
        }
        do {
            _ = try await app.downloadImage(url: "ftp://example.com/a.png")
            Issue.record("ftp was accepted")
        } catch {
            #expect(error.code == .agent("InvalidURL"))
        }
        app.close()
    }
}
