// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

@Suite("HTTP cache policy for the disk tier")
struct HTTPCachePolicyTests {
    typealias H = HTTPCachePolicy.Headers

    @Test(
        "Cache-Control parsing",
        arguments: [
            ("max-age=60", CacheControl(maxAge: 60)),
            ("public, MAX-AGE=3600, must-revalidate", CacheControl(mustRevalidate: true, maxAge: 3600)),
            ("no-store", CacheControl(noStore: true)),
            ("no-cache=\"Set-Cookie, X-Foo\", max-age=5", CacheControl(noCache: true, maxAge: 5)),
            ("max-age=\"30\"", CacheControl(maxAge: 30)),
            ("max-age=-1, max-age=abc", CacheControl()),
            ("max-age=99999999999999999999", CacheControl(maxAge: 365 * 24 * 3600)),
            ("max-age=10, max-age=20", CacheControl(maxAge: 10)),
            (",,  ,no-cache ,", CacheControl(noCache: true)),
            ("", CacheControl()),
        ])
    func parse(value: String, expected: CacheControl) {
        #expect(CacheControl.parse(value) == expected)
    }

    @Test(
        "only 200 responses without no-store are kept, and only those that could answer again without a full transfer")
    func storable() {
        #expect(HTTPCachePolicy.store(status: 200, headers: H([("Cache-Control", "no-store")]), now: 0) == nil)
        // Never fresh, nothing to revalidate with: it could only be fetched again whole.
        #expect(HTTPCachePolicy.store(status: 200, headers: H([]), now: 0) == nil)
        #expect(HTTPCachePolicy.store(status: 200, headers: H([("Cache-Control", "max-age=0")]), now: 0) == nil)
        #expect(
            HTTPCachePolicy.store(status: 200, headers: H([("Cache-Control", "max-age=60"), ("Age", "60")]), now: 0)
                == nil)
        #expect(HTTPCachePolicy.store(status: 200, headers: H([("Cache-Control", "max-age=1")]), now: 0)?.freshFor == 1)
        #expect(HTTPCachePolicy.store(status: 200, headers: H([("ETag", "\"a\"")]), now: 0)?.etag == "\"a\"")
        #expect(HTTPCachePolicy.store(status: 200, headers: H([("Last-Modified", "x")]), now: 0)?.lastModified == "x")
        #expect(HTTPCachePolicy.store(status: 206, headers: H([]), now: 0) == nil)
        #expect(HTTPCachePolicy.store(status: 404, headers: H([]), now: 0) == nil)
        let info = HTTPCachePolicy.store(
            status: 200,
            headers: H([
                ("etag", "\"v1\""), ("Last-Modified", "Tue, 01 Oct 2024 10:00:00 GMT"),
                ("cache-control", "max-age=100"), ("Age", "30"),
            ]), now: 1000)
        #expect(
            info
                == CachedResponseInfo(
                    etag: "\"v1\"", lastModified: "Tue, 01 Oct 2024 10:00:00 GMT", storedAt: 1000, freshFor: 70))
    }

    @Test("fresh within max-age minus Age; then revalidate with the validators; refetch without them")
    func decisions() {
        let info = CachedResponseInfo(
            etag: "\"v1\"", lastModified: "Tue, 01 Oct 2024 10:00:00 GMT", storedAt: 1000, freshFor: 70)
        #expect(HTTPCachePolicy.decide(info, now: 1000) == .fresh)
        #expect(HTTPCachePolicy.decide(info, now: 1069.9) == .fresh)
        #expect(
            HTTPCachePolicy.decide(info, now: 1070)
                == .revalidate([
                    ("If-None-Match", "\"v1\""), ("If-Modified-Since", "Tue, 01 Oct 2024 10:00:00 GMT"),
                ]))
        #expect(HTTPCachePolicy.decide(info, now: 999) != .fresh, "a clock that went back is not trusted")
        let bare = CachedResponseInfo(storedAt: 0, freshFor: 0)
        #expect(HTTPCachePolicy.decide(bare, now: 1) == .refetch)
    }

    @Test("no-cache and a missing max-age mean revalidate every time")
    func noCache() {
        for headers in [[("Cache-Control", "no-cache, max-age=600"), ("ETag", "x")], [("ETag", "x")]] {
            let info = HTTPCachePolicy.store(status: 200, headers: H(headers), now: 50)!
            #expect(info.freshFor == 0)
            #expect(HTTPCachePolicy.decide(info, now: 50) == .revalidate([("If-None-Match", "x")]))
        }
    }

    @Test("a 304 refreshes the entry, keeping validators the server did not resend")
    func notModified() {
        let info = CachedResponseInfo(etag: "\"v1\"", lastModified: "L", storedAt: 0, freshFor: 0)
        let refreshed = HTTPCachePolicy.refreshed(
            info, notModified: H([("Cache-Control", "max-age=30"), ("ETag", "\"v2\"")]), now: 500)
        #expect(refreshed == CachedResponseInfo(etag: "\"v2\"", lastModified: "L", storedAt: 500, freshFor: 30))
        #expect(HTTPCachePolicy.decide(refreshed, now: 520) == .fresh)
    }

    @Test("hostile header values never crash the parser")
    func hostile() {
        var rng = SplitMix(seed: 99)
        let alphabet = Array("max-age=no-store,\"\\ \t=,;0123456789abcdefX\u{0}\u{FFFF}é".unicodeScalars)
        for _ in 0..<3000 {
            var s = String.UnicodeScalarView()
            for _ in 0..<Int(rng.next() % 40) { s.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
            let c = CacheControl.parse(String(s))
            if let age = c.maxAge { #expect(age >= 0 && age <= 365 * 24 * 3600) }
        }
    }

    @Test("a request's max-age replaces the server's freshness, both ways")
    func requestMaxAge() {
        let info = CachedResponseInfo(etag: "\"v1\"", lastModified: nil, storedAt: 1000, freshFor: 3600)
        #expect(HTTPCachePolicy.decide(info, now: 1100) == .fresh)
        #expect(
            HTTPCachePolicy.decide(info, now: 1100, maxAge: 60) == .revalidate([("If-None-Match", "\"v1\"")]),
            "older than asked")
        #expect(
            HTTPCachePolicy.decide(info, now: 1100, maxAge: 0) == .revalidate([("If-None-Match", "\"v1\"")]),
            "0: always ask")
        let stale = CachedResponseInfo(etag: nil, lastModified: nil, storedAt: 1000, freshFor: 0)
        #expect(HTTPCachePolicy.decide(stale, now: 1100) == .refetch)
        #expect(HTTPCachePolicy.decide(stale, now: 1100, maxAge: 600) == .fresh, "young enough for this request")
        #expect(HTTPCachePolicy.decide(stale, now: 900, maxAge: 600) == .refetch, "from the future: never fresh")
    }
}
