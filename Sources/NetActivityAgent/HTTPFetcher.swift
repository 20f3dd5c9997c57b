// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CCurl
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// HTTP(S) for the downloader: libcurl's multi interface driven by the agent's own event loop
/// (its sockets are loop watches, its timeout a loop timer), so downloads add no thread and an
/// idle agent still wakes zero times. libcurl gives redirects, TLS, compression, timeouts and a
/// size limit that are proven in the field; only http and https are allowed, also on redirects.
///
/// This file holds the multi handle and its glue to the loop (socket and timer callbacks, turns,
/// the watch on idle connections, whose rule is `IdleConnectionGuard`) and the routing of each
/// request (`ProxyRoutes`); one transfer's easy handle, its callbacks and what its end means are
/// `HTTPTransfer`.
final class HTTPFetcher {
    struct Limits {
        var maxBytes: Int
        var maxRedirects = 5
        var connectTimeout = 10
        var totalTimeout = 120
        /// A transfer that moves less than 1 byte/s for this long is a timeout.
        var stallSeconds = 30
    }

    struct Response {
        let status: Int
        let headers: HTTPCachePolicy.Headers
        /// Sealed: the bytes' final home (see `ImageBody`).
        let body: ImageBody
        /// Where a redirect leads, for a transfer that does not follow its own (`ProxyRoutes`).
        var redirect: String? = nil
    }

    typealias Completion = (Result<Response, ImageDownloader.Failure>) -> Void

    /// libcurl's read buffer per transfer.
    static let readBuffer = 64 * 1024
    private var yieldedCount = 0
    /// Idle connections kept for reuse.
    static let pooledConnections = 16
    /// How long a host's addresses are reused before it is resolved again.
    static let dnsCacheSeconds = 120

    private let loop: EventLoop
    /// libcurl's multi handle, made at the first fetch (libcurl is loaded then, not at start-up).
    private var multi: UnsafeMutableRawPointer!
    /// The libcurl to load (a test can name a missing one).
    private let library: String?
    /// Which connections sit idle in libcurl's pool (`IdleConnectionGuard`), keyed by socket and
    /// by the transfer's easy handle.
    private var connections = IdleConnectionGuard<curl_socket_t, UnsafeMutableRawPointer>()
    private var timer: EventLoop.TimerID?
    private var live: [ObjectIdentifier: HTTPTransfer] = [:]

    /// A body stopped part-way as the system went to sleep, kept for the next fetch of its URL to
    /// continue with Range and If-Range (`keepPartialBodies`).
    struct Partial {
        let body: ImageBody
        /// The 200's headers: they describe the whole body, and are what a continued one answers with.
        let headers: HTTPCachePolicy.Headers
        let validator: String
        /// The whole body's length the 200 announced, if it did.
        let total: Int?
    }
    /// By URL; dropped when not asked for within `partialLifetime` of being kept.
    private var partials: [String: Partial] = [:]
    private var partialsExpiry: EventLoop.TimerID?
    /// Seconds of the loop's clock (which stands still while the system sleeps).
    static let partialLifetime: UInt64 = 600
    private var serials: UInt64 = 0
    /// Which response bytes go in when (`TransferAdmission`: a quota per turn of the loop, so a
    /// Ping waits for at most one turn's copying; and the bytes in flight, `Limits.bodiesInFlight`
    /// in all, apps' shares past 40 % of that). Made at the first transfer, from the limits.
    lazy var admission = TransferAdmission(
        inFlightLimit: NetActivityLimits.bodiesInFlight(largestBody: limits.maxBytes))
    var limits: Limits
    /// Whether bodies the disk tier may keep get their checksum as they arrive (`ImageBody`): set
    /// when there is a disk tier.
    var sumsBodies = false

    /// Which proxy each request goes through; nil: libcurl's own reading of the environment, and
    /// libcurl follows redirects itself.
    let routes: ProxyRoutes?

    init(loop: EventLoop, limits: Limits, library: String? = nil, routes: ProxyRoutes? = nil) {
        self.loop = loop
        self.limits = limits
        self.library = library
        self.routes = routes
    }

    /// Loads libcurl and makes the multi handle, once; else why not (each fetch fails with it).
    private func start() -> NetActivityError? {
        if multi != nil { return nil }
        if let failure = ccurl_load(library) { return NetActivityError(.failed, String(cString: failure)) }
        guard let made = ccurl_multi_init() else { return NetActivityError(.failed, "libcurl could not start") }
        multi = made
        loop.addPrepareHook(bound(self) { $0.newTurn() })
        // Connections stay open for the next transfer to the same host (libcurl's pool, and
        // its DNS cache, belong to the multi handle): room for every transfer that may run.
        _ = ccurl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, Self.pooledConnections)
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_multi_set_socket_fn(
            multi,
            { easy, fd, what, user, _ in
                Unmanaged<HTTPFetcher>.fromOpaque(user!).takeUnretainedValue().socketChanged(
                    fd: fd, what: what, easy: easy)
                return 0
            }, me)
        _ = ccurl_multi_set_timer_fn(
            multi,
            { _, ms, user in
                Unmanaged<HTTPFetcher>.fromOpaque(user!).takeUnretainedValue().timerChanged(milliseconds: ms)
                return 0
            }, me)
        return nil
    }

    deinit {
        for t in live.values { release(t) }
        if let multi { ccurl_multi_cleanup(multi) }
    }

    var activeCount: Int { live.count }

    /// The system is about to sleep, and every transfer is about to be cancelled: each body under
    /// way that its server can continue (a 200 with a strong validator, `RangeResume.validator`,
    /// and at least `RangeResume.minimumBytes` of it here) is kept for the next fetch of its URL,
    /// which asks for only the rest. What is not asked for again within `partialLifetime` goes.
    func keepPartialBodies() {
        for t in live.values {
            guard let easy = t.easy, let body = t.body, body.count >= RangeResume.minimumBytes, body.count < t.limit,
                t.wrongRange == nil, t.storeError == 0, !t.tooLarge
            else { continue }
            let first = t.continuing ? t.partial : nil
            let headers = first?.headers ?? HTTPCachePolicy.Headers(t.headers)
            let status = first == nil ? ccurl_info_long(easy, CURLINFO_RESPONSE_CODE) : 200
            guard let validator = RangeResume.validator(status: status, headers: headers) else { continue }
            let total = first.map(\.total) ?? headers["Content-Length"].flatMap { Int($0) }
            partials[t.first] = Partial(body: body, headers: headers, validator: validator, total: total)
        }
        guard !partials.isEmpty else { return }
        if let expiry = partialsExpiry { loop.cancel(expiry) }
        partialsExpiry = loop.schedule(afterNanoseconds: Self.partialLifetime * 1_000_000_000) { [weak self] in
            self?.partialsExpiry = nil
            self?.partials.removeAll()
        }
    }

    /// Starts a GET of `url` with extra request headers, its body charged to `app`; returns how to
    /// cancel it (the completion is then never called). The completion comes on the loop's thread.
    func fetch(
        url: String, app: String = "", headers: [(String, String)] = [], reach: NetworkReach? = nil,
        progress: @escaping (UInt64, UInt64) -> Void, completion: @escaping Completion
    ) -> () -> Void {
        if let failure = start() {
            completion(.failure(.failed(failure)))
            return {}
        }
        guard let routes else {
            return transfer(
                url: url, first: url, proxy: .environment, app: app, headers: headers, reach: reach, progress: progress,
                completion: completion)
        }
        let hops = Hops()
        hop(
            hops, url: url, first: url, number: 0, routes: routes, reach: reach,
            start: bound(self) { me, hopURL, way, done in
                me.transfer(
                    url: hopURL, first: url, proxy: way, app: app, headers: headers, reach: reach, progress: progress,
                    completion: done)
            }
        ) { result in
            guard !hops.cancelled else { return }
            completion(result)
        }
        return {
            hops.cancelled = true
            hops.stop?()
        }
    }

    /// One download's requests when the fetcher routes each (`ProxyRoutes`): the one under way.
    private final class Hops {
        var stop: (() -> Void)?
        var cancelled = false
    }

    /// Where a transfer goes: as libcurl reads the environment, straight to the server, or
    /// through a proxy (its URI).
    enum Way {
        case environment
        case direct
        case proxy(String)
    }

    /// Routes `url` (the `number`th redirect of `first`; `reach`: where a sandboxed app's
    /// download may lead), starts it, and follows where it redirects to, each hop routed again,
    /// up to `Limits.maxRedirects`.
    private func hop(
        _ hops: Hops, url: String, first: String, number: Int, routes: ProxyRoutes, reach: NetworkReach?,
        start: @escaping (String, Way, @escaping Completion) -> (() -> Void),
        completion: @escaping Completion
    ) {
        var routed = false
        let stopRouting = routes.route(url: url, reach: reach) { [weak self, weak hops] result in
            routed = true
            guard let self, let hops, !hops.cancelled else { return }
            switch result {
            case .failure(let error):
                completion(.failure(.failed(error)))
            case .success(let route):
                // A proxy setting libcurl would refuse is refused here, in words that never quote
                // its user name or password (libcurl's own quote the whole setting).
                if let proxy = route.proxy, let problem = ProxyURI.problem(proxy) {
                    let shown = PublishedURL.redact(url)
                    return completion(
                        .failure(
                            .failed(
                                NetActivityError(
                                    .network,
                                    "\(shown): the proxy setting \(ProxyURI.shown(proxy)) cannot be used: \(problem)")))
                    )
                }
                let way = route.proxy.map(Way.proxy) ?? .direct
                hops.stop = start(url, way) { [weak self, weak hops] result in
                    guard let self, let hops, !hops.cancelled else { return }
                    guard case .success(let response) = result, let next = response.redirect else {
                        return completion(result)
                    }
                    let shown = PublishedURL.redact(first)
                    guard number < self.limits.maxRedirects else {
                        return completion(.failure(.failed(NetActivityError(.http, "\(shown): too many redirects"))))
                    }
                    guard URLOrigin(next) != nil else {
                        return completion(
                            .failure(
                                .failed(
                                    NetActivityError(.invalidURL, "\(shown) led to a scheme other than http or https")))
                        )
                    }
                    self.hop(
                        hops, url: next, first: first, number: number + 1, routes: routes, reach: reach, start: start,
                        completion: completion)
                }
            }
        }
        if !routed { hops.stop = stopRouting }
    }

    /// Starts one request of `url` (which `first` led to), going `way`.
    private func transfer(
        url: String, first: String, proxy way: Way, app: String, headers: [(String, String)], reach: NetworkReach?,
        progress: @escaping (UInt64, UInt64) -> Void, completion: @escaping Completion
    ) -> () -> Void {
        serials &+= 1
        let t = HTTPTransfer(
            url: url, limit: limits.maxBytes, app: app, serial: serials, fetcher: self, progress: progress,
            completion: completion)
        t.first = first
        var headers = headers
        if let partial = partials.removeValue(forKey: first), partial.body.count < t.limit {
            t.partial = partial
            t.resuming = partial
            headers += RangeResume.request(from: partial.body.count, validator: partial.validator)
        }
        guard let easy = ccurl_easy_init() else {
            completion(.failure(.failed(NetActivityError(.network, "Could not start a transfer"))))
            return {}
        }
        t.easy = easy
        t.configure(easy: easy, url: url, way: way, reach: reach, headers: headers, limits: limits)
        live[ObjectIdentifier(t)] = t
        admission.started(t.serial, app: t.app, holding: t.partial?.body.count ?? 0)
        ccurl_multi_add_handle(multi, easy)
        return { [weak self, weak t] in
            guard let self, let t, self.live.removeValue(forKey: ObjectIdentifier(t)) != nil else { return }
            self.release(t)
        }
    }

    private func release(_ t: HTTPTransfer) {
        if admission.ended(t.serial) { scheduleResume() }
        if let easy = t.easy {
            connections.released(easy)
            ccurl_multi_remove_handle(multi, easy)
            ccurl_easy_cleanup(easy)
            t.easy = nil
        }
        if let list = t.headerList { ccurl_slist_free_all(list) }
        t.headerList = nil
        t.errorBuffer?.deallocate()
        t.errorBuffer = nil
    }

    // MARK: turns

    func yield(_ t: HTTPTransfer) {
        t.yielded = true
        yieldedCount += 1
    }

    /// A new turn of the loop: the quota is fresh, and the transfers that reached it last turn
    /// go first (oldest first), each taking the chunk libcurl kept for it.
    private func newTurn() {
        // A turn that took its whole quota of response bytes lets the other threads of this CPU
        // go first (the bus daemon with a message for us, above all): bytes that keep arriving
        // would otherwise keep the loop running for whole scheduler slices while a Ping waits in
        // the daemon. (A light turn does not: a syscall per small image is not worth it.)
        if admission.newTurn() { sched_yield() }
        guard yieldedCount > 0 else { return }
        yieldedCount = 0
        resume(\.yielded)
    }

    /// Lets the transfers waiting for `reason` go on, oldest first (outside libcurl's callbacks):
    /// each takes the chunk libcurl kept for it, and pauses again if it still may not. One that
    /// also waits for the other reason stays paused.
    private func resume(_ reason: ReferenceWritableKeyPath<HTTPTransfer, Bool>) {
        for t in live.values.filter({ $0[keyPath: reason] }).sorted(by: { $0.serial < $1.serial }) {
            guard let easy = t.easy, t[keyPath: reason] else { continue }
            t[keyPath: reason] = false
            if !t.paused, !t.yielded { _ = ccurl_easy_pause(easy, CCURL_PAUSE_CONT) }
        }
    }

    /// Bytes were freed: paused transfers try again, oldest first, on the next turn of the loop
    /// (never inside libcurl's callbacks). One that still does not fit pauses again.
    private func scheduleResume() {
        guard !resumeNextTurn.isScheduled, live.values.contains(where: \.paused) else { return }
        resumeNextTurn.request()
    }

    private lazy var resumeNextTurn = NextTurn(loop, bound(self) { $0.resume(\.paused) })

    // MARK: libcurl <-> the event loop

    private func socketChanged(fd: curl_socket_t, what: Int32, easy: UnsafeMutableRawPointer?) {
        if what == CCURL_POLL_REMOVE {
            connections.unwanted(fd)
            loop.unwatch(fd: fd)
            return
        }
        connections.wanted(fd, by: easy)
        var events: UInt32 = 0
        if what & CCURL_POLL_IN != 0 { events |= EventLoop.readable }
        if what & CCURL_POLL_OUT != 0 { events |= EventLoop.writable }
        loop.watch(
            fd: fd, events: events,
            handler: bound(self) { me, revents in
                var flags: Int32 = 0
                if revents & EventLoop.readable != 0 { flags |= CCURL_CSELECT_IN }
                if revents & EventLoop.writable != 0 { flags |= CCURL_CSELECT_OUT }
                if revents & (EventLoop.error | EventLoop.hangup) != 0 { flags |= CCURL_CSELECT_ERR }
                me.act(fd: fd, flags: flags)
            })
    }

    private func timerChanged(milliseconds: Int) {
        if let t = timer { loop.cancel(t) }
        timer = nil
        guard milliseconds >= 0 else { return }
        timer = loop.schedule(
            afterNanoseconds: UInt64(milliseconds) * 1_000_000,
            bound(self) { me in
                me.timer = nil
                me.act(fd: CCURL_SOCKET_TIMEOUT, flags: 0)
            })
    }

    private func act(fd: curl_socket_t, flags: Int32) {
        var running: Int32 = 0
        _ = ccurl_multi_socket_action(multi, fd, flags, &running)
        var result = CURLE_OK
        while let easy = ccurl_next_done(multi, &result) {
            guard let user = ccurl_info_private(easy) else { continue }
            let t = Unmanaged<HTTPTransfer>.fromOpaque(user).takeUnretainedValue()
            let status = ccurl_info_long(easy, CURLINFO_RESPONSE_CODE)
            keepWatchingIdle(
                socket: ccurl_info_socket(easy), finishedBy: easy,
                http2: ccurl_info_long(easy, CURLINFO_HTTP_VERSION) >= CCURL_HTTP_VERSION_2_0)
            guard live.removeValue(forKey: ObjectIdentifier(t)) != nil else { continue }
            _ = t.answered()  // a continuing transfer that ended before its first byte
            if !t.followsRedirects {
                t.redirect = ccurl_info_string(easy, CURLINFO_REDIRECT_URL).map { String(cString: $0) }
                // The body kept for the URL is for the request the redirect leads to.
                if t.redirect != nil, let kept = t.resuming { partials[t.first] = kept }
            }
            if let buffer = t.errorBuffer, buffer.pointee != 0 {
                t.proxyDetail = ProxyURI.scrub(String(cString: buffer), proxy: t.proxyURI ?? "")
            }
            release(t)
            t.completion(t.outcome(result, status: status))
        }
    }

    // MARK: idle connections (the rule: `IdleConnectionGuard`)

    /// A transfer finished on `fd`: an idle HTTP/1 connection is watched, and one that turns
    /// readable (stray bytes, or the server's FIN) is made dead: libcurl's next send on it fails
    /// and it reconnects, its own retry for a reused connection that died.
    private func keepWatchingIdle(socket fd: curl_socket_t, finishedBy easy: UnsafeMutableRawPointer, http2: Bool) {
        guard fd >= 0, connections.finished(fd, by: easy, http2: http2) else { return }
        if hasStrayBytes(fd) { return neutralize(fd) }
        connections.becameIdle(fd)
        loop.watch(
            fd: fd, events: EventLoop.readable,
            handler: bound(self) { me, _ in
                guard me.connections.isIdle(fd) else { return }
                me.neutralize(fd)
            })
    }

    /// A transfer has its connection and sends its request now (libcurl names the connection by
    /// its local port). A pooled socket is no longer idle; stray bytes on it (a forged answer that
    /// came after the watch last looked) make it dead first, as the watch would.
    func connectionChosen(localPort: Int32, by t: HTTPTransfer) {
        guard let easy = t.easy else { return }
        guard let fd = connections.known.first(where: { Self.localPort($0) == localPort }) else { return }
        if connections.isIdle(fd) {
            if hasStrayBytes(fd) { return neutralize(fd) }
            connections.leftIdle(fd)
            loop.unwatch(fd: fd)
        }
        connections.taken(fd, by: easy)
    }

    private static func localPort(_ fd: curl_socket_t) -> Int32? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafePointer(to: &address) { p -> Int32? in
            switch Int32(p.pointee.ss_family) {
            case AF_INET:
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int32(UInt16(bigEndian: $0.pointee.sin_port)) }
            case AF_INET6:
                p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int32(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            default: nil
            }
        }
    }

    private func hasStrayBytes(_ fd: curl_socket_t) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) >= 0
    }

    /// Puts an unconnected socket in place of `fd` (same number, so libcurl's bookkeeping holds):
    /// whatever was queued on the old connection is dropped with it.
    private func neutralize(_ fd: curl_socket_t) {
        connections.dead(fd)
        loop.unwatch(fd: fd)
        let dead = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard dead >= 0 else { return shutdownBoth(fd) }
        dup2(dead, fd)
        close(dead)
    }

    private func shutdownBoth(_ fd: curl_socket_t) {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    func socketClosing(_ fd: curl_socket_t) {
        connections.closed(fd)
        loop.unwatch(fd: fd)
    }

}

extension HTTPFetcher: HTTPTransport {
    func fetch(
        url: String, app: String, headers: [(String, String)], maxBytes: Int, reach: NetworkReach?,
        progress: @escaping (UInt64, UInt64) -> Void,
        completion: @escaping (Result<HTTPResponse, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        limits.maxBytes = maxBytes
        return fetch(url: url, app: app, headers: headers, reach: reach, progress: progress) { result in
            completion(result.map { HTTPResponse(status: $0.status, headers: $0.headers, body: $0.body) })
        }
    }
}
