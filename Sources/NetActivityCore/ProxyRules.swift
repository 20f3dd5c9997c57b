// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// The origin of an http(s) URL: what proxy choices and their cache are keyed by.
public struct URLOrigin: Hashable, Sendable {
    /// "http" or "https", lowercase.
    public let scheme: String
    /// Lowercase; an IPv6 literal without its brackets.
    public let host: String
    public let port: Int

    /// The origin of an http or https URL (one `DownloadURL.check` passed), else nil.
    public init?(_ url: String) {
        var url = url
        let found: (https: Bool, host: String, port: String?)? = url.withUTF8 { b in
            guard let parts = DownloadURL.parts(b) else { return nil }
            func text(_ range: Range<Int>) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: b[range]), as: UTF8.self)
            }
            return (parts.https, text(parts.host).lowercased(), parts.port.map(text))
        }
        guard let found else { return nil }
        var host = found.host[...]
        if host.hasPrefix("[") {
            guard host.hasSuffix("]") else { return nil }
            host = host.dropFirst().dropLast()
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        guard !host.isEmpty else { return nil }
        let port = found.port.map { Int($0) } ?? (found.https ? 443 : 80)
        guard let port, (1...65535).contains(port) else { return nil }
        self.scheme = found.https ? "https" : "http"
        self.host = String(host)
        self.port = port
    }
}

/// The proxy the environment names for a URL, read as curl and wget read it: `https_proxy` (or
/// `HTTPS_PROXY`) for https, `http_proxy` for http (never `HTTP_PROXY`, which a CGI program
/// gets from a request's `Proxy:` header), else `all_proxy` (or `ALL_PROXY`); `no_proxy` (or
/// `NO_PROXY`) lists the hosts that go direct: `*`, names (each also covering its subdomains,
/// with or without a leading dot), addresses and address ranges (`10.0.0.0/8`).
public struct ProxyEnvironment: Sendable {
    let https: String?
    let http: String?
    let all: String?
    let exceptions: [Substring]

    /// Every variable it reads.
    public static let variables = [
        "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    public init(_ environment: [String: String]) {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        }
        https = value("https_proxy", "HTTPS_PROXY")
        http = value("http_proxy")
        all = value("all_proxy", "ALL_PROXY")
        let list = value("no_proxy", "NO_PROXY") ?? ""
        exceptions = list.lowercased().split { $0 == "," || $0 == " " || $0 == "\t" }
    }

    /// Whether the environment names a proxy at all (then it, not the desktop, decides).
    public var namesProxy: Bool { https != nil || http != nil || all != nil }

    /// The proxy for a URL of `origin`, as a URI libcurl takes, or nil: straight to the server.
    public func proxy(for origin: URLOrigin) -> String? {
        guard let named = (origin.scheme == "https" ? https : http) ?? all, !bypasses(origin.host) else { return nil }
        return named.contains("://") ? named : "http://" + named
    }

    /// Whether `no_proxy` sends `host` direct.
    public func bypasses(_ host: String) -> Bool {
        let address = NetworkAddress(host[...])
        for entry in exceptions {
            if entry == "*" { return true }
            if let address,
                let range = NetworkRange(entry.hasPrefix("[") ? entry.dropFirst().prefix { $0 != "]" } : entry),
                range.contains(address)
            {
                return true
            }
            var name = entry.hasPrefix(".") ? entry.dropFirst() : entry
            if name.hasSuffix(".") { name = name.dropLast() }
            guard !name.isEmpty, address == nil else { continue }
            if host == name || host.hasSuffix("." + name) { return true }
        }
        return false
    }
}

/// What the agent makes of a resolver's answer.
public enum ProxyChoice {
    /// The first of the resolver's proxies libcurl can use (nil: straight to the server, which
    /// is also the answer when it gave none libcurl can use). GIO's "socks://" (any SOCKS
    /// version) is SOCKS 5 with the proxy resolving names, as on a network only the proxy sees
    /// out of.
    public static func first(_ proxies: [String]) -> String? {
        for uri in proxies {
            let lower = uri.lowercased()
            if lower.hasPrefix("direct://") { return nil }
            if lower.hasPrefix("socks://") { return "socks5h://" + uri.dropFirst("socks://".count) }
            for scheme in ["http://", "https://", "socks4://", "socks4a://", "socks5://", "socks5h://"]
            where lower.hasPrefix(scheme) {
                return uri
            }
        }
        return nil
    }

}
