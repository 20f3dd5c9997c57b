// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// A download request's checks, as DownloadImage, FetchImage and FetchPixels make them: a table of
/// options in, the request or the error's name and words out.
@Suite("DownloadRequest: a request's URL and options, checked")
struct DownloadRequestTests {
    typealias O = DownloaderMember.FetchPixelsOption
    static let url = "https://images.example.org/a.png"

    func request(_ options: [O: DBusValue], url: String = Self.url, scope: Substring = "flatpak:org.example.A")
        throws(NetActivityError) -> DownloadRequest
    {
        try DownloadRequest(
            url: url, options: Dictionary(uniqueKeysWithValues: options.map { ($0.rawValue, $1) }), scope: scope,
            method: .fetchPixels, O.self)
    }

    @Test("no options: the URL's key, normal priority, no reload, no max-age")
    func plain() throws {
        let r = try request([:])
        #expect(r == (try request([.priority: .string("normal")])))
        #expect(r.key == ImageRequestKey.make(url: Self.url, additional: ""))
        #expect(r.priority == .normal && !r.reload && r.maxAge == nil)
    }

    @Test("each option lands where it belongs; a cache-key is the app's own")
    func options() throws {
        let r = try request([
            .priority: .string("very-high"), .reload: .bool(true), .maxAge: .double(60),
            .additionalIdentifier: .string("64x64"),
        ])
        #expect(r.priority == .veryHigh && r.reload && r.maxAge == 60)
        #expect(r.key == ImageRequestKey.make(url: Self.url, additional: "64x64"))
        let a = try request([.cacheKey: .string("avatar/7")], scope: "flatpak:org.example.A")
        let b = try request([.cacheKey: .string("avatar/7")], scope: "flatpak:org.example.B")
        #expect(a.key != b.key, "another app's same cache-key is another entry")
        #expect(ImageRequestKey.isScoped(a.key))
        #expect(try request([.cacheKey: .string("avatar/7")], url: "https://other.example.org/x.png").key == a.key)
    }

    @Test(
        "every bad value is refused with its name",
        arguments: [
            ([O.priority: DBusValue.string("urgent")], "very-low, low, normal, high, very-high"),
            ([.priority: .uint32(1)], "'priority' must have type 's'"),
            ([.maxAge: .double(-1)], "max-age must be 0 to"),
            ([.maxAge: .double(Double(NetActivityLimits.maxRequestMaxAge) + 1)], "max-age must be 0 to"),
            ([.cacheKey: .string("")], "cache-key must be 1 to"),
            (
                [.cacheKey: .string(String(repeating: "k", count: NetActivityLimits.maxImageKeyBytes + 1))],
                "cache-key must be"
            ),
            (
                [.additionalIdentifier: .string(String(repeating: "a", count: NetActivityLimits.maxImageKeyBytes + 1))],
                "additional-identifier is"
            ),
        ])
    func refused(options: [O: DBusValue], words: String) {
        do {
            _ = try request(options)
            Issue.record("taken: \(options)")
        } catch {
            #expect(error.name == NetActivityError.Name.invalidArgs.rawValue)
            #expect(error.message.contains(words), "\(error.message)")
        }
    }

    @Test("an unknown option and a bad URL are refused before anything else")
    func unknownAndURL() {
        #expect(throws: NetActivityError.self) {
            try DownloadRequest(
                url: Self.url, options: ["colour": .string("red")], scope: "app:x", method: .fetchPixels, O.self)
        }
        for url in ["ftp://a/b.png", "https://", "https://a b/c.png", ""] {
            #expect(throws: NetActivityError.self, "\(url)") { try request([:], url: url) }
        }
    }
}
