// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

/// How the environment's proxy variables and a resolver's answers become the proxy a request takes
/// (pure: the names and addresses below are only compared).
@Suite("Proxy rules")
struct ProxyRulesTests {
    @Test("an origin is scheme, lowercase host and port, with the scheme's port by default")
    func origins() throws {
        let plain = try #require(URLOrigin("HTTP://User:pw@Images.Example.ORG./a.png?x#y"))
        #expect(plain.scheme == "http" && plain.host == "images.example.org" && plain.port == 80)
        let secure = try #require(URLOrigin("https://[2001:db8::1]:8443/x"))
        #expect(secure.scheme == "https" && secure.host == "2001:db8::1" && secure.port == 8443)
        #expect(URLOrigin("https://example.org")?.port == 443)
        for bad in [
            "ftp://example.org/", "http:///x", "http://example.org:99999/", "http://example.org:http/", "http://[::1/",
        ] {
            #expect(URLOrigin(bad) == nil, "\(bad)")
        }
    }

    @Test("each scheme takes its own variable, then all_proxy; never HTTP_PROXY")
    func variables() {
        let http = URLOrigin("http://example.org/")!
        let https = URLOrigin("https://example.org/")!
        let env = ProxyEnvironment(["http_proxy": "proxy:3128", "HTTPS_PROXY": "http://secure:3129"])
        #expect(env.namesProxy)
        #expect(env.proxy(for: http) == "http://proxy:3128", "a bare host:port is an http proxy")
        #expect(env.proxy(for: https) == "http://secure:3129")
        let upper = ProxyEnvironment(["HTTP_PROXY": "http://from-a-request:1"])
        #expect(!upper.namesProxy && upper.proxy(for: http) == nil, "what a CGI program gets from a request header")
        let all = ProxyEnvironment(["all_proxy": "socks5h://s:1080", "https_proxy": ""])
        #expect(all.proxy(for: https) == "socks5h://s:1080", "an empty variable names nothing")
        #expect(!ProxyEnvironment(["no_proxy": "*"]).namesProxy)
    }

    @Test(
        "no_proxy sends a host direct by name, subdomain, address, range or *",
        arguments: [
            ("example.org", "example.org", true), ("example.org", "img.example.org", true),
            (".example.org", "img.example.org", true), (".example.org", "example.org", true),
            ("example.org", "badexample.org", false), ("example.org.", "example.org", true),
            ("127.0.0.1", "127.0.0.1", true), ("10.0.0.0/8", "10.2.3.4", true), ("10.0.0.0/8", "11.2.3.4", false),
            ("[::1]", "::1", true), ("::1", "::1", true), ("*", "anything.example", true),
            ("10.0.0.0/8", "ten.example", false), ("", "example.org", false),
        ])
    func exceptions(_ list: String, _ host: String, _ direct: Bool) {
        let env = ProxyEnvironment(["http_proxy": "http://p:1", "no_proxy": "other.example, \(list)"])
        #expect(env.bypasses(host) == direct)
        #expect((env.proxy(for: URLOrigin("http://\(host.contains(":") ? "[\(host)]" : host)/")!) == nil) == direct)
    }

    @Test("the first proxy libcurl can use wins; direct:// or none usable is straight to the server")
    func choices() {
        #expect(ProxyChoice.first(["http://p:3128", "direct://"]) == "http://p:3128")
        #expect(ProxyChoice.first(["direct://", "http://p:3128"]) == nil)
        #expect(ProxyChoice.first(["socks://s:1080"]) == "socks5h://s:1080", "any SOCKS: 5, names resolved by it")
        #expect(ProxyChoice.first(["ftp://f:21", "HTTPS://p:443"]) == "HTTPS://p:443")
        #expect(ProxyChoice.first(["gopher://g:70"]) == nil)
        #expect(ProxyChoice.first([]) == nil)
    }

    @Test("a proxy is shown without its credentials")
    func shown() {
        #expect(ProxyURI.shown("http://school:s3cret@proxy.lan:3128") == "http://proxy.lan:3128")
        #expect(ProxyURI.shown("http://proxy.lan:3128/") == "http://proxy.lan:3128")
        #expect(!ProxyURI.shown("http://a:b@c@proxy:1").contains("b@"))
    }

    @Test("a proxy setting libcurl would refuse is refused, in words without its credentials")
    func proxySettings() {
        for good in [
            "http://proxy.lan:3128", "http://proxy.lan:3128/", "HTTPS://p:443", "socks5h://s:1080",
            "http://[2001:db8::1]:8080",
            "http://school:s3cr%2Ft@proxy.lan:3128", "http://a:b!$&'()*+,;=~-._@p:1", "http://p",
        ] {
            #expect(ProxyURI.problem(good) == nil, "\(good)")
        }
        let secret = "pa55w0rd"
        let cases: [(String, String)] = [
            ("http://school:\(secret)@proxy.lan:312888", "port"),  // a port typo
            ("http://school:\(secret)@proxy.lan:31x8", "port"),
            ("http://school:\(secret)@proxy.lan:0", "port"),
            ("http://school:\(secret)@proxy.lan:+80", "port"),
            ("http://school:pa55 w0rd@proxy.lan:3128", "percent-encoded"),  // a space in the password
            ("http://school:pa55/w0rd@proxy.lan:3128", "percent-encoded"),  // a '/' in the password
            ("http://school:pa55#w0rd@proxy.lan:3128", "percent-encoded"),
            ("ftp://school:\(secret)@proxy.lan:21", "scheme"),
            ("gopher://school:\(secret)@proxy.lan:70", "scheme"),
            ("school:\(secret)@proxy.lan:3128", "not a URI"),
            ("http://school:\(secret)@proxy.lan:3128/path", "path"),
            ("http://school:\(secret)@pro xy.lan:3128", "host"),
            ("http://school:\(secret)@:3128", "host"),
            ("http://school:\(secret)@[::1:3128", "host"),
        ]
        for (uri, why) in cases {
            let problem = ProxyURI.problem(uri)
            #expect(problem?.contains(why) == true, "\(uri): \(problem ?? "accepted")")
            for part in ["pa55", "w0rd", "school"] {
                #expect(problem?.contains(part) != true, "\(uri)")
                #expect(!ProxyURI.shown(uri).contains(part), "\(uri) shown as \(ProxyURI.shown(uri))")
            }
        }
        #expect(ProxyURI.shown("http://school:pa55/w0rd@proxy.lan:3128") == "http://proxy.lan:3128")
        let quoted = "Unsupported proxy syntax in 'http://school:\(secret)@proxy.lan:3128': bad port"
        #expect(
            ProxyURI.scrub(quoted, proxy: "http://school:\(secret)@proxy.lan:3128")
                == "Unsupported proxy syntax in 'http://proxy.lan:3128': bad port")
        #expect(!ProxyURI.scrub("proxy said \(secret)", proxy: "http://school:\(secret)@p:1").contains(secret))
    }
}
