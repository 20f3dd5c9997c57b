// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityContract
import NetActivityTesting
import Testing

@testable import NetActivityAgent
@testable import NetActivityCore

/// The downloader's transport seen from the agent (no disk tier here): what a response means, the
/// reach a sandbox's transfer gets, offline and what stops a transfer, on the manual clock.
@Suite("FetchPipeline: responses, reach, offline, stopping")
struct FetchPipelineTests {
    let h = DriverHarness()
    let transport = FakeTransport()
    let pipeline: FetchPipeline
    final class Results { var values: [Result<ImageDownloader.Fetched, ImageDownloader.Failure>] = [] }
    let results = Results()

    init() {
        pipeline = FetchPipeline(
            context: h.context, loop: h.loop, disk: nil, transport: transport, maxBodyBytes: { 1 << 20 },
            prefetchStarted: { _ in nil })
    }

    func request(_ url: String, transfer: UInt64, publicOnly: Bool = false) -> ImageDownloader.Request {
        var r = ImageDownloader.Request(url: url, key: url, reload: false, transfer: transfer)
        r.publicOnly = publicOnly
        return r
    }

    @discardableResult
    func fetch(_ url: String, transfer: UInt64, publicOnly: Bool = false) -> () -> Void {
        let results = results
        return pipeline.fetch(request(url, transfer: transfer, publicOnly: publicOnly), { _, _ in }) {
            results.values.append($0)
        }
    }

    @Test("an image is the body; another status is HTTP naming it, with the URL's secrets left out")
    func responses() throws {
        fetch("https://img.example.org/a.png", transfer: 1)
        fetch("https://user:secret@img.example.org/b.png?token=42", transfer: 2)
        transport.respond("https://img.example.org/a.png")
        transport.respond("https://user:secret@img.example.org/b.png?token=42", status: 404, bytes: [])
        #expect(results.values.count == 2)
        let body = try results.values[0].get().body
        #expect(body.count == TestImages.png(width: 1, height: 1).count)
        guard case .failure(.failed(let error)) = results.values[1] else {
            Issue.record("a 404 was taken")
            return
        }
        #expect(error.name == NetActivityError.Name.http.rawValue)
        #expect(error.message.contains("HTTP 404"))
        #expect(!error.message.contains("secret") && !error.message.contains("42"))
    }

    @Test("a sandbox's transfer is held to the sandbox's reach; a host app's is not")
    func reach() throws {
        pipeline.sandboxReach = NetworkReach(allowed: [try #require(NetworkRange("127.0.0.0/8"))])
        fetch("https://a.example.org/1.png", transfer: 1, publicOnly: true)
        fetch("https://a.example.org/2.png", transfer: 2)
        #expect(transport.reaches == [pipeline.sandboxReach, nil])
    }

    @Test("offline: a new transfer fails Offline on the next turn, never inside the call; stopped first, never")
    func offline() {
        pipeline.offline = true
        fetch("https://img.example.org/a.png", transfer: 1)
        let stop = fetch("https://img.example.org/b.png", transfer: 2)
        #expect(results.values.isEmpty, "not inside the call")
        stop()
        h.at(0.001)
        #expect(results.values.count == 1)
        guard case .failure(.failed(let error)) = results.values.first else { return }
        #expect(error.name == NetActivityError.Name.offline.rawValue)
        #expect(transport.requested.isEmpty, "nothing went out")
    }

    @Test("the network goes away: every transfer under way fails Offline at once and is stopped")
    func failInFlight() {
        fetch("https://img.example.org/a.png", transfer: 1)
        fetch("https://img.example.org/b.png", transfer: 2)
        pipeline.failInFlight()
        #expect(results.values.count == 2)
        #expect(Set(transport.cancelled) == ["https://img.example.org/a.png", "https://img.example.org/b.png"])
        // A late answer from the transport reaches no one.
        #expect(!transport.respond("https://img.example.org/a.png"))
        #expect(results.values.count == 2)
    }

    @Test("stopping a transfer stops the transport's and answers nothing")
    func stop() {
        let stop = fetch("https://img.example.org/a.png", transfer: 1)
        stop()
        #expect(transport.cancelled == ["https://img.example.org/a.png"])
        #expect(results.values.isEmpty)
        pipeline.failInFlight()
        #expect(results.values.isEmpty, "a stopped transfer is no longer in flight")
    }
}
