// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityClient
import NetActivityTesting
import Testing

/// fetchImage's cacheKey and maxAge, and removeImages, against the real agent.
@Suite("Cache keys, max-age and removal in the library", .serialized, .timeLimit(.minutes(1)))
struct CacheKeyTests {
    let bus: TestBus
    let server: LocalHTTPServer
    let activity: NetActivity
    let first = TestImages.png(width: 2, height: 2)
    let second = TestImages.png(width: 3, height: 2)

    init() async throws {
        bus = try TestBus()
        try await bus.startAgent()
        server = try LocalHTTPServer(files: ["signed-1.png": first, "signed-2.png": second, "other.png": second])
        activity = await NetActivity.connect(address: bus.address)
    }

    @Test("one cache key answers for every URL of the image; maxAge zero asks the server; removeImages takes them")
    func cacheKeyMaxAgeAndRemoval() async throws {
        let a = try await activity.fetchImage(url: server.url("signed-1.png"), cacheKey: "avatar/7")
        #expect(a.source == .download && a.file.readAll() == first)
        let b = try await activity.fetchImage(url: server.url("signed-2.png"), cacheKey: "avatar/7")
        #expect(b.source == .cache && b.file.readAll() == first, "the key's image, not the second URL's")
        #expect(server.requests() == ["/signed-1.png"])
        let other = try await activity.downloadImage(url: server.url("other.png"))
        #expect(other == second)
        let cached = try await activity.fetchImage(url: server.url("other.png"), maxAge: .seconds(3600))
        #expect(cached.source == .cache)
        let asked = try await activity.fetchImage(url: server.url("other.png"), maxAge: .zero)
        #expect(asked.source == .download && server.count("/other.png") == 2)
        #expect(try await activity.removeImages(prefix: "avatar/") == 1)
        #expect(try await activity.removeImages(prefix: server.url("other")) == 1)
        #expect(try await activity.removeImages(prefix: "") == 0)
        let again = try await activity.fetchImage(url: server.url("signed-2.png"), cacheKey: "avatar/7")
        #expect(again.source == .download && again.file.readAll() == second, "removed: the URL asked now is fetched")
        activity.close()
    }
}
