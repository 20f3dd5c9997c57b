// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract
import NetActivityCore
import Testing

@Suite("Download URLs: http or https with a host, as bytes")
struct DownloadURLTests {
    private func problem(_ url: String) -> String? {
        do throws(NetActivityError) {
            try DownloadURL.check(url)
            return nil
        } catch {
            #expect(error.name == NetActivityError.Name.invalidURL.rawValue)
            return error.message
        }
    }

    @Test("http and https URLs with a host pass, in any case of the scheme, with userinfo, port or IPv6 literal")
    func accepted() {
        for url in [
            "http://example.com", "https://example.com/a.png?x=1#f", "HTTPS://Example.com/",
            "http://user:pw@host:8080/",
            "http://[::1]:8080/a", "https://127.0.0.1/",
        ] {
            #expect(problem(url) == nil, "\(url)")
        }
    }

    @Test("other schemes, no host, spaces, control characters and over-long URLs are refused, saying why")
    func refused() throws {
        #expect(try #require(problem("ftp://example.com/")).hasSuffix("is not an http or https URL"))
        #expect(try #require(problem("file:///etc/passwd")).hasSuffix("is not an http or https URL"))
        #expect(try #require(problem("http:///path")).hasSuffix("has no host"))
        #expect(try #require(problem("http://user@/path")).hasSuffix("has no host"))
        #expect(try #require(problem("http://:80/")).hasSuffix("has no host"))
        #expect(try #require(problem("http://exa mple.com/")).hasSuffix("contains spaces or control characters"))
        #expect(try #require(problem("http://example.com/\u{7F}")).hasSuffix("contains spaces or control characters"))
        let long = "http://example.com/" + String(repeating: "a", count: NetActivityLimits.maxImageKeyBytes)
        let message = try #require(problem(long))
        #expect(message.hasSuffix("is longer than \(NetActivityLimits.maxImageKeyBytes) bytes"))
        #expect(message.utf8.count < 300, "the message quotes the URL cut short")
    }
}
