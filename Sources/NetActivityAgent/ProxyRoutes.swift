// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CCurl
import Glibc
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore

/// Which proxy each request of a download goes through, decided the way the desktop decides it
/// for its apps. When the agent's environment names a proxy (`http_proxy`, `https_proxy`,
/// `all_proxy`, with `no_proxy`), the environment decides, as it does for curl and wget.
/// Otherwise GIO's `GProxyResolver` does: the one every GLib app asks (GNOME's settings read
/// in-process, PAC files through the session's PAC runner, libproxy for KDE's settings and the
/// rest), loaded at the first download, asked on worker threads (a PAC lookup asks another
/// process), never on the loop.
///
/// Answers are kept per origin for `lifetime`, and forgotten when the settings change (dconf's
/// change signal for `/system/proxy/`, KDE's for its proxy settings, the agent's reload).
final class ProxyRoutes {
    enum Source: Equatable {
        case environment
        /// GIO's resolver (every request goes direct when it cannot be loaded).
        case desktop
    }

    struct Route {
        /// The proxy's URI as libcurl takes it (credentials and all), or nil: straight to the server.
        let proxy: String?
    }

    static let lifetime: UInt64 = 30_000_000_000
    static let maxAnswers = 512
    /// How long a lookup may take (a PAC runner that never answers) before the download fails.
    static let lookupTimeout: UInt64 = 10_000_000_000

    let source: Source
    private let environment: ProxyEnvironment
    private let loop: EventLoop
    private let logger: Logger
    private let library: String?
    private var answers: [URLOrigin: (route: Route, expires: UInt64)] = [:]
    /// When the settings last changed. GIO hears of a change on a thread of its own, at about the
    /// time the agent does: an answer is kept only when its lookup started `settling` after that,
    /// so that one looked up before GIO took the change in is not kept for a lifetime.
    private var changedAt: UInt64?
    static let settling: UInt64 = 1_000_000_000
    private let threads = StallTolerantWorker(
        name: "netactivity-proxy", maxThreads: 4, stuckAfterNanoseconds: 250_000_000)
    /// The proxy the latest request went through, as it may be shown ("" before any, "direct").
    private(set) var latest = ""

    init(loop: EventLoop, logger: Logger, environment: [String: String], library: String? = nil) {
        self.loop = loop
        self.logger = logger
        self.library = library
        self.environment = ProxyEnvironment(environment)
        source = self.environment.namesProxy ? .environment : .desktop
    }

    /// What the settings say for `url` (also what a sandboxed app's request through a proxy must
    /// pass: `reach` for the URL's host, whose addresses the proxy, not the agent, connects to).
    /// Calls `then` on the loop, at once when the answer is known; returns what stops waiting.
    func route(
        url: String, reach: NetworkReach?, then: @escaping (Result<Route, NetActivityError>) -> Void
    ) -> () -> Void {
        guard let origin = URLOrigin(url) else {
            then(.success(Route(proxy: nil)))
            return {}
        }
        let known: Route? =
            switch source {
            case .environment: Route(proxy: environment.proxy(for: origin))
            case .desktop: answers[origin].flatMap { $0.expires > loop.nowNanoseconds ? $0.route : nil }
            }
        if let known, known.proxy == nil || reach == nil {
            then(.success(used(known)))
            return {}
        }
        var waiting = true
        let started = loop.nowNanoseconds
        let timer = loop.schedule(afterNanoseconds: Self.lookupTimeout) {
            guard waiting else { return }
            waiting = false
            then(
                .failure(
                    NetActivityError(
                        .network,
                        "\(PublishedURL.redact(url)): the desktop's proxy settings gave no answer within \(Self.lookupTimeout / 1_000_000_000) s"
                    )))
        }
        let job = UncheckedSendable { [library] () -> Lookup in
            Lookup.run(url: url, host: origin.host, known: known, resolveHost: reach != nil, library: library)
        }
        let mailbox = loop.mailbox
        let deliver = UncheckedSendable { [weak self] (lookup: Lookup) in
            guard waiting else { return }
            waiting = false
            self?.loop.cancel(timer)
            guard let self else { return }
            then(self.finish(lookup, known: known, origin: origin, url: url, reach: reach, started: started))
        }
        threads.run {
            let lookup = UncheckedSendable(job.value())
            mailbox.post { deliver.value(lookup.value) }
        }
        return { [weak self] in
            guard waiting else { return }
            waiting = false
            self?.loop.cancel(timer)
        }
    }

    /// The settings changed: every origin is looked up again.
    func forget() {
        answers.removeAll()
        changedAt = loop.nowNanoseconds
    }

    /// The resolver's answer for one URL, and the host's addresses when a sandboxed app's request
    /// is to go through a proxy. Runs on a worker thread.
    private struct Lookup {
        var proxies: [String]?
        var failure: String?
        /// GIO could not be loaded (else `failure` is one lookup's).
        var unavailable = false
        var resolver = ""
        var addresses: [NetworkAddress]?

        static func run(url: String, host: String, known: Route?, resolveHost: Bool, library: String?) -> Lookup {
            var lookup = Lookup()
            if known == nil {
                if let failure = cproxy_load(library) {
                    lookup.failure = String(cString: failure)
                    lookup.unavailable = true
                } else {
                    lookup.resolver = String(cString: cproxy_resolver_name())
                    var error: UnsafeMutablePointer<CChar>?
                    if let list = cproxy_lookup(url, &error) {
                        var proxies: [String] = []
                        var p = list
                        while let entry = p.pointee {
                            proxies.append(String(cString: entry))
                            p += 1
                        }
                        cproxy_free(list)
                        lookup.proxies = proxies
                    } else {
                        lookup.failure = error.map { String(cString: $0) } ?? "no answer"
                        cproxy_free_string(error)
                    }
                }
            }
            let proxied = known.map { $0.proxy != nil } ?? (lookup.proxies.flatMap(ProxyChoice.first) != nil)
            if resolveHost, proxied { lookup.resolveHost(host) }
            return lookup
        }

        mutating func resolveHost(_ host: String) {
            if let literal = NetworkAddress(host[...]) {
                addresses = [literal]
                return
            }
            // RFC 6761's special-use names, as it asks applications to take them, without asking a
            // resolver: localhost names are this machine, .invalid ones resolve to nothing.
            if host == "localhost" || host.hasSuffix(".localhost") {
                addresses = [NetworkAddress("127.0.0.1"[...])!, NetworkAddress("::1"[...])!]
                return
            }
            if host == "invalid" || host.hasSuffix(".invalid") { return }
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &list) == 0 else { return }  // not known here
            defer { freeaddrinfo(list) }
            var found: [NetworkAddress] = []
            var raw = [UInt8](repeating: 0, count: 16)
            var p = list
            while let info = p {
                if let sa = info.pointee.ai_addr {
                    let n = Int(ccurl_address_bytes(sa, Int(info.pointee.ai_addrlen), &raw))
                    if let a = NetworkAddress(bytes: Array(raw.prefix(n))) { found.append(a) }
                }
                p = info.pointee.ai_next
            }
            addresses = found
        }
    }

    private var announced = false
    /// The last lookup failure logged (the same one is not logged again).
    private var lastFailure = ""

    private func finish(
        _ lookup: Lookup, known: Route?, origin: URLOrigin, url: String, reach: NetworkReach?, started: UInt64
    ) -> Result<Route, NetActivityError> {
        if !announced, lookup.proxies != nil || lookup.unavailable {
            announced = true
            if let failure = lookup.failure {
                logger.warning("Downloads go straight to their servers: \(failure)")
            } else {
                logger.info("Downloads take the proxies the desktop's settings choose (\(lookup.resolver))")
            }
        } else if let failure = lookup.failure, !lookup.unavailable, failure != lastFailure {
            lastFailure = failure
            logger.notice(
                "The desktop's proxy settings gave no answer for \(origin.host) (\(failure)): straight to the server")
        }
        // No resolver, or it failed: straight to the server, as a GLib app would go. A missing GIO
        // is kept as an answer too (not looked for again at every download); a failed lookup is not.
        let route = known ?? Route(proxy: lookup.proxies.flatMap(ProxyChoice.first))
        if known == nil, lookup.proxies != nil || lookup.unavailable,
            changedAt.map({ started >= $0 + Self.settling }) ?? true
        {
            let now = loop.nowNanoseconds
            if answers.count >= Self.maxAnswers {  // a session of many origins keeps only live answers
                answers = answers.filter { $0.value.expires > now }
                if answers.count >= Self.maxAnswers { answers.removeAll() }
            }
            answers[origin] = (route, now + Self.lifetime)
        }
        // Through a proxy, the proxy connects: a sandboxed app's URL may not name this machine or
        // a network its reach excludes, by address or by a name this machine resolves to one. A
        // name only the proxy resolves (a proxy-only network's outside world) is the proxy's to
        // serve: what lies behind it is for its own rules (docs/install.md, a squid example).
        if let reach, let proxy = route.proxy {
            let shown = PublishedURL.redact(url)
            for address in lookup.addresses ?? [] {
                if let why = reach.refusal(address) {
                    return .failure(
                        .accessDenied(
                            "\(shown): a sandboxed app's download may reach public addresses only, and this one led to \(address) (\(why)), through the proxy \(ProxyURI.shown(proxy))"
                        ))
                }
            }
        }
        return .success(used(route))
    }

    private func used(_ route: Route) -> Route {
        if route.proxy != latestURI || latest.isEmpty {
            latestURI = route.proxy
            latest = route.proxy.map(ProxyURI.shown) ?? "direct"
        }
        return route
    }
    private var latestURI: String?
}

extension ProxyRoutes {
    /// The proxy variables of this process's environment.
    static func processEnvironment() -> [String: String] {
        var found: [String: String] = [:]
        for name in ProxyEnvironment.variables {
            if let value = getenv(name) { found[name] = String(cString: value) }
        }
        return found
    }
}
