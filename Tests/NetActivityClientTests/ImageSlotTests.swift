// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Dispatch
import FoundationEssentials
import Glibc
import NetActivityClient
import NetActivityTesting
import Testing

/// What a slot showed or reported, in order.
enum Shown: Equatable, Sendable {
    case applied([UInt8]?)
    case success([UInt8], ImageSource)
    case failure(NetActivityError.Code)
}

/// ImageSlot against the real agent, its shared cache and downloader, and a local HTTP server.
@Suite("Image slots", .serialized, .timeLimit(.minutes(1)))
struct ImageSlotTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let activity: NetActivity
    let a = TestImages.png(width: 1, height: 1)
    let b = TestImages.png(width: 2, height: 2)
    let placeholder = TestImages.png(width: 9, height: 9)
    /// The slots' decodes, in the order their answers came (see `delivered`).
    let decodes = DispatchQueue(label: "image-slot-tests.decode")

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: ["a.png": a, "b.png": b])
        activity = await NetActivity.connect(address: bus.address)
    }

    func slot(_ shown: Recorder<Shown>) -> ExecutorImageSlot<[UInt8]> {
        ExecutorImageSlot(activity, callbacks: activity.callbacks, decodeQueue: decodes) { shown.append(.applied($0)) }
    }

    /// Everything the agent has sent this app so far has reached the slots: a round trip to the
    /// agent (its replies come in order, after whatever it sent before), then the slots' decode
    /// queue, then their callbacks' executor. What a slot shows after this is all that it will
    /// show for those messages: the marker that "nothing more happens" waits for.
    func delivered() async {
        await activity.settled()
        decodes.sync {}
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in activity.callbacks { c.resume() } }
    }

    func downloaderIdle() async throws -> Bool {
        try await bus.eventually(within: 5) {
            try bus.property("/org/example/NetActivity", "org.example.NetActivity.Downloader", "ActiveDownloads")
                == .uint32(0)
        }
    }

    @Test("a miss shows the placeholder, then the downloaded image; a hit answers from the cache with no download")
    func missThenHit() async throws {
        let shown = Recorder<Shown>()
        let view = slot(shown)
        view.setImage(url: server.url("gate/a.png"), placeholder: placeholder)
        #expect(try await shown.wait(for: 1) == [.applied(placeholder)], "no answer yet: the placeholder")
        server.openGate("a.png")
        #expect(try await shown.wait(for: 2) == [.applied(placeholder), .applied(a)])
        #expect(server.count("/gate/a.png") == 1)

        // A memory hit answers in well under a millisecond; a slot that would wait 10 s before its
        // placeholder makes "no placeholder" certain however loaded the machine is.
        let other = Recorder<Shown>()
        let second = ExecutorImageSlot<[UInt8]>(activity, callbacks: activity.callbacks, placeholderDelay: .seconds(10))
        { other.append(.applied($0)) }
        second.setImage(
            url: server.url("gate/a.png"), placeholder: placeholder, success: { other.append(.success($0, $1)) })
        #expect(try await other.wait(for: 1) == [.success(a, .cache)], "no placeholder, no download")
        #expect(server.count("/gate/a.png") == 1)
    }

    @Test("a large image comes through the agent's shared file, whole, by URL; openImage(url:) reads the same")
    func largeImageByURL() async throws {
        let big = TestImages.png(width: 64, height: 64, padding: 3 << 20)
        let large = try LocalHTTPServer(files: ["big.png": big])
        let shown = Recorder<Shown>()
        let view = slot(shown)
        let url = try #require(URL(string: large.url("big.png")))
        view.setImage(url: url, success: { shown.append(.success($0, $1)) })
        #expect(try await shown.wait(for: 1) == [.success(big, .download)])
        let file = try await activity.openImage(url: url)
        #expect(file.size == UInt64(big.count))
        #expect(file.readAll() == big)
        let fetched = try await activity.fetchImage(url: url.absoluteString)
        #expect((fetched.source, fetched.contentType) == (.cache, "image/png"))
        do {
            _ = try await activity.openImage(url: large.url("missing.png"))
            Issue.record("a missing image is an error")
        } catch {
            #expect(error.code == .agent("HTTP"))
        }
        #expect(try await activity.downloadImage(url: url) == big)
        view.setImage(url: nil as URL?, placeholder: placeholder)
        #expect(try await shown.wait(for: 2).last == .applied(placeholder))
    }

    @Test("a request for the URL the slot is loading does nothing; its handlers are never called")
    func sameURLInFlight() async throws {
        let shown = Recorder<Shown>()
        let view = slot(shown)
        let url = server.url("gate/a.png")
        view.setImage(url: url, placeholder: placeholder, success: { shown.append(.success($0, $1)) })
        view.setImage(url: url, placeholder: b, success: { _, _ in shown.append(.failure(.other)) })
        #expect(try await bus.eventually(within: 5) { server.count("/gate/a.png") == 1 })
        #expect(try await shown.wait(for: 1) == [.applied(placeholder)])
        server.openGate("a.png")
        #expect(try await shown.wait(for: 2) == [.applied(placeholder), .success(a, .download)])
        await delivered()
        #expect(shown.values.count == 2, "the second request's handler was never called")
        #expect(server.count("/gate/a.png") == 1)
    }

    @Test("a new URL cancels the slot's previous receipt; the old request's handlers are never called")
    func newURLCancelsPrevious() async throws {
        let shown = Recorder<Shown>()
        let view = slot(shown)
        view.setImage(
            url: server.url("gate/a.png"), placeholder: placeholder,
            success: { _, _ in shown.append(.failure(.other)) },
            failure: { shown.append(.failure($0.code)) })
        #expect(try await bus.eventually(within: 5) { server.count("/gate/a.png") == 1 })
        #expect(try await shown.wait(for: 1) == [.applied(placeholder)])
        view.setImage(url: server.url("b.png"))
        #expect(try await shown.wait(for: 2) == [.applied(placeholder), .applied(b)])
        // Nobody else wanted a.png: its transfer stopped with its last receipt.
        #expect(try await downloaderIdle())
        server.openGate("a.png")
        #expect(try await activity.image(url: server.url("gate/a.png")) == nil)
        // The cancelled transfer is gone: asking again makes a second request, whose answer comes
        // after anything the old receipt could still have had.
        #expect(try await activity.downloadImage(url: server.url("gate/a.png")) == a)
        #expect(server.count("/gate/a.png") == 2)
        await delivered()
        #expect(shown.values == [.applied(placeholder), .applied(b)])
    }

    @Test("a late answer for an old URL never overwrites a newer image")
    func lateAnswerForOldURL() async throws {
        // Another app wants a.png too, so its transfer goes on after the slot lets go of it,
        // and finishes after the slot's newer image.
        let otherApp = await NetActivity.connect(address: bus.address)
        let urlA = server.url("gate/a.png")
        let slowA = Task { try await otherApp.downloadImage(url: urlA) }
        #expect(try await bus.eventually(within: 5) { server.count("/gate/a.png") == 1 })

        let shown = Recorder<Shown>()
        let view = slot(shown)
        view.setImage(url: server.url("gate/a.png"), placeholder: placeholder)
        // A miss: the placeholder shows, and the slot joins the other app's transfer.
        #expect(try await shown.wait(for: 1) == [.applied(placeholder)])
        view.setImage(url: server.url("gate/b.png"))
        #expect(try await bus.eventually(within: 5) { server.count("/gate/b.png") == 1 })
        server.openGate("b.png")
        #expect(try await shown.wait(for: 2) == [.applied(placeholder), .applied(b)])
        server.openGate("a.png")
        #expect(try await slowA.valueOrCancel == a)
        #expect(try await activity.image(url: server.url("gate/a.png")) == a, "a.png did arrive, for the other app")
        // The agent answered every receipt of a.png's transfer at once, before this round trip.
        await delivered()
        #expect(shown.values == [.applied(placeholder), .applied(b)])
        otherApp.close()
    }

    @Test("custom handlers replace the default apply; failures keep the placeholder")
    func customHandlersAndFailure() async throws {
        let shown = Recorder<Shown>()
        let view = slot(shown)
        view.setImage(
            url: server.url("missing.png"), placeholder: placeholder, failure: { shown.append(.failure($0.code)) })
        #expect(try await shown.wait(for: 2) == [.applied(placeholder), .failure(.agent("HTTP"))])
        view.setImage(url: server.url("b.png"), success: { shown.append(.success($0, $1)) })
        #expect(try await shown.wait(for: 3).last == .success(b, .download))
        view.setImage(url: "")  // clears to the placeholder (none)
        #expect(try await shown.wait(for: 4).last == .applied(nil))
        view.setImage(url: "ftp://example.com/a.png", failure: { shown.append(.failure($0.code)) })
        #expect(try await shown.wait(for: 5).last == .failure(.agent("InvalidURL")))

        let decoding = Recorder<Shown>()
        let strict = ExecutorImageSlot<[UInt8]>(activity, callbacks: activity.callbacks, decode: { _ in nil }) {
            decoding.append(.applied($0))
        }
        strict.setImage(url: server.url("a.png"), failure: { decoding.append(.failure($0.code)) })
        #expect(try await decoding.wait(for: 1) == [.failure(.agent("NotAnImage"))])
    }

    @Test("a slot the app lets go cancels its receipt")
    func releasedSlotCancels() async throws {
        let shown = Recorder<Shown>()
        do {
            let view = slot(shown)
            view.setImage(url: server.url("gate/a.png"), placeholder: placeholder)
            #expect(try await bus.eventually(within: 5) { server.count("/gate/a.png") == 1 })
            #expect(try await shown.wait(for: 1) == [.applied(placeholder)])
        }
        #expect(try await downloaderIdle())
        server.openGate("a.png")
        #expect(try await activity.downloadImage(url: server.url("gate/a.png")) == a)
        #expect(server.count("/gate/a.png") == 2, "the released slot's transfer was gone: a new one ran")
        await delivered()
        #expect(shown.values == [.applied(placeholder)])
    }

    @Test("decode runs off the slot's executor; apply and the handlers on it")
    func decodeOffTheExecutor() async throws {
        let key = DispatchSpecificKey<Bool>()
        let queue = DispatchQueue(label: "ui")
        queue.setSpecific(key: key, value: true)
        let where_ = Recorder<String>()
        let view = ExecutorImageSlot<[UInt8]>(
            activity, callbacks: .dispatch(queue),
            decode: { bytes in
                where_.append(DispatchQueue.getSpecific(key: key) == true ? "decode on ui" : "decode off ui")
                return bytes
            }
        ) { _ in where_.append(DispatchQueue.getSpecific(key: key) == true ? "apply on ui" : "apply off ui") }
        view.setImage(url: server.url("b.png"))
        #expect(try await where_.wait(for: 2) == ["decode off ui", "apply on ui"])
    }
}
