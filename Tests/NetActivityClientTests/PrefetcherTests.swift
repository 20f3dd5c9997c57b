// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityClient
import NetActivityContract
import NetActivityTesting
import Testing

/// `Prefetcher` against the real agent: what a list does with it.
@Suite("Prefetcher", .serialized, .timeLimit(.minutes(1)))
struct PrefetcherTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let activity: NetActivity
    let image = TestImages.png(width: 2, height: 2)

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: [
            "r1.png": image, "r2.png": image, "r3.png": image, "s1.png": image, "s2.png": image, "g.png": image,
        ])
        activity = await NetActivity.connect(address: bus.address)
    }

    @Test("rows prefetched ahead are fetched once, and then shown from the shared cache")
    func prefetchedRowsComeFromTheCache() async throws {
        let prefetcher = Prefetcher(activity)
        let rows = ["r1.png", "r2.png", "r3.png"].map { server.url($0) }
        prefetcher.startPrefetching(rows)
        prefetcher.startPrefetching(rows)  // asked again while under way: once
        await prefetcher.waitUntilIdle()
        #expect(server.requests().sorted() == ["/r1.png", "/r2.png", "/r3.png"])
        for url in rows {
            let fetched = try await activity.fetchImage(url: url)
            #expect(fetched.source == .cache)
            #expect(fetched.file.readAll() == image)
        }
        #expect(server.requests().count == 3)
        activity.close()
    }

    @Test("rows scrolled past before their turn are never fetched")
    func stoppedRowsAreNotFetched() async throws {
        // One slot: prefetch takes it, and the rows wait behind the gated one.
        #expect(try bus.setMaximumActiveDownloads(1) == 0)
        let prefetcher = Prefetcher(activity)
        prefetcher.startPrefetching([server.url("gate/g.png"), server.url("s1.png"), server.url("s2.png")])
        for _ in 0..<500 where server.count("/gate/g.png") == 0 { try await Task.sleep(for: .milliseconds(10)) }
        prefetcher.stopPrefetching([server.url("s1.png")])
        prefetcher.stopPrefetching([server.url("s2.png")])
        // A call on the same connection after the CancelPrefetch calls: when it is answered, the agent has them.
        _ = try await activity.image(url: server.url("none.png"))
        server.openGate("g.png")
        await prefetcher.waitUntilIdle()
        let fetched = try await activity.fetchImage(url: server.url("gate/g.png"))
        #expect(fetched.source == .cache)
        #expect(server.requests() == ["/gate/g.png"])
        activity.close()
    }
}
