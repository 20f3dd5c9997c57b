// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityAgent
import NetActivityContract
import NetActivityCore
import NetActivityTesting
import Testing

/// The download service on the agent's own wiring (activity, tasks, image cache), with a manual
/// clock and a gated fake transport: what goes on the bus, and when, without sleeping.
@Suite("Download service")
struct DownloadServiceTests {
    let h = DriverHarness()
    let app = ":1.5"

    func fetch(_ url: String, _ options: [String: DBusValue] = [:]) throws -> Message? {
        try h.call(app, DownloaderMember.Method.fetchImage.rawValue, interface: .downloader) { w in
            w.append(url)
            try w.appendVardict(options)
        }
    }

    /// Replies and errors sent to `app` since message `from`.
    func answers(since from: Int) -> [Message] {
        h.sink.sent[from...].map(\.message).filter { $0.kind == .methodReturn || $0.kind == .error }
    }

    var published: [String] {
        h.signals.compactMap { entry -> String? in
            guard entry.message.member == "InterfacesAdded" else { return nil }
            var r = entry.message.reader()
            return try? r.readObjectPath()
        }
    }

    @Test("a short transfer publishes no task object; its activity counts from its start; its reply carries the image")
    func shortTransfer() throws {
        let url = "http://images.test/a.png"
        #expect(try fetch(url) == nil, "the reply waits for the image")
        #expect(h.transport.running == [url])
        #expect(h.activity.total == 1, "activity from the start")
        h.at(0.5)
        let before = h.sink.sent.count
        h.transport.respond(url)
        #expect(answers(since: before).isEmpty, "answered on the loop's next turn")
        h.at(0.5)  // the next turn of the loop
        let reply = try #require(answers(since: before).first)
        #expect(reply.kind == .methodReturn)
        var r = reply.reader()
        let fd = try r.readFD()
        defer { close(fd) }
        #expect(try r.read(UInt64.self) == UInt64(TestImages.png(width: 1, height: 1).count))
        let info = try r.readVardict()
        #expect(
            info["source"] == .string("network") && info["content-type"] == .string("image/png")
                && info["http-status"] == .uint32(200))
        #expect(published.isEmpty, "no InterfacesAdded for a transfer no one could have seen")
        #expect(h.activity.total == 0)
        h.at(5)
        #expect(published.isEmpty)
        // The second call is a memory hit: answered inside the call.
        let hit = try #require(try fetch(url))
        var hr = hit.reader()
        close(try hr.readFD())
        _ = try hr.read(UInt64.self)
        #expect(try hr.readVardict()["source"] == .string("memory"))
    }

    @Test("a transfer still running after the activation delay is published then, running, with its progress")
    func longTransfer() throws {
        let url = "http://images.test/long.png"
        _ = try fetch(url)
        h.transport.progress(url, received: 100, expected: 1000)
        h.at(0.999)
        #expect(published.isEmpty)
        h.at(1.0)
        let task = try #require(published.first)
        #expect(published.count == 1)
        #expect(h.activity.total == 1, "the task took the transfer's activity over (not 2)")
        #expect(try h.property(task, .task, "State") == .string("running"))
        #expect(try h.property(task, .task, "CountOfBytesReceived") == .uint64(100))
        #expect(h.changes(.task, at: task).isEmpty, "published with its progress in one InterfacesAdded")
        h.transport.respond(url)
        #expect(try h.property(task, .task, "State") == .string("completed"))
        #expect(h.activity.total == 0)
    }

    @Test("announce publishes at once; DownloadImage's reply names its task at once")
    func announced() throws {
        _ = try fetch("http://images.test/shown.png", ["announce": .bool(true)])
        #expect(published.count == 1)
        let reply = try #require(
            try h.call(app, DownloaderMember.Method.downloadImage.rawValue, interface: .downloader) { w in
                w.append("http://images.test/other.png")
                try w.appendVardict([:])
            })
        var r = reply.reader()
        _ = try r.read(String.self)
        #expect(try r.readObjectPath() == published.last)
        #expect(published.count == 2)
    }

    @Test(
        "a transport that fails at once is told after the call's reply: FetchImage's error, DownloadFinished with its receipt"
    )
    func failsAtOnce() throws {
        h.transport.failAtOnce = NetActivityError(.failed, "libcurl is missing")
        let reply = try #require(
            try h.call(app, DownloaderMember.Method.downloadImage.rawValue, interface: .downloader) { w in
                w.append("http://images.test/a.png")
                try w.appendVardict([:])
            })
        var r = reply.reader()
        let receipt = try r.read(String.self)
        #expect(receipt != "")
        #expect(!h.signals.contains { $0.message.member == "DownloadFinished" }, "nothing inside the call")
        let before = h.sink.sent.count
        #expect(try fetch("http://images.test/b.png") == nil, "no answer inside the call")
        #expect(answers(since: before).isEmpty)
        h.at(0)  // the next turn of the loop
        let finished = try #require(h.signals.first { $0.message.member == "DownloadFinished" })
        var f = finished.message.reader()
        #expect(try f.read(String.self) == receipt)
        let error = try #require(answers(since: before).first)
        #expect(error.kind == .error && error.errorName == "org.freedesktop.DBus.Error.Failed")
        #expect(h.activity.total == 0 && published.isEmpty)
    }

    @Test("CancelDownload of a named FetchImage answers it Cancelled; the caller's leaving cancels the rest")
    func cancelAndLeave() throws {
        _ = try fetch("http://images.test/a.png", ["receipt": .string("a")])
        _ = try fetch("http://images.test/b.png")
        let before = h.sink.sent.count
        try h.call(app, DownloaderMember.Method.cancelDownload.rawValue, interface: .downloader) { w in w.append("a") }
        h.at(0)  // the next turn of the loop
        let answered = answers(since: before)
        #expect(
            answered.map(\.kind) == [.methodReturn, .error],
            "CancelDownload's reply, then the cancelled call's, a turn later")
        #expect(answered.last?.errorName == "org.example.NetActivity.Error.Cancelled")
        #expect(h.transport.cancelled == ["http://images.test/a.png"])
        h.peers.depart(app)
        #expect(h.transport.cancelled == ["http://images.test/a.png", "http://images.test/b.png"])
        #expect(h.activity.total == 0)
    }

    @Test("a URL must be http or https with a host, without spaces or control characters; anything else is InvalidURL")
    func urls() throws {
        for good in [
            "http://a", "HTTPS://Example.com/x?y#z", "http://user:pw@host:8080/p", "http://[::1]:80/", "hTtP://h",
        ] {
            #expect(try fetch(good) == nil, "\(good): waits for the transfer")
        }
        #expect(h.transport.requested.count == 4, "four run (MaximumActiveDownloads), the fifth waits")
        let long = "http://h/" + String(repeating: "a", count: NetActivityLimits.maxImageKeyBytes)
        for bad in [
            "ftp://a", "http://", "http://@", "http://:80", "http://u@:80/", "http:/a", "https//a", "http://a b",
            "http://a\u{7F}", "file:///etc", long,
        ] {
            let reply = try #require(try fetch(bad), "\(bad): answered at once")
            #expect(reply.errorName == "org.example.NetActivity.Error.InvalidURL", "\(bad)")
        }
        h.transport.respond("http://a")
        #expect(h.transport.requested.count == 5, "the fifth good one started; no transfer for a bad URL")
    }
}
