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
/// (One file for one libcurl multi handle: its socket and timer callbacks, the per-transfer
/// state they reach through libcurl's private pointers, and the watch on idle connections share
/// invariants that are easier to check side by side than across files.)
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

    private final class Transfer {
        let url: String
        /// The URL asked for, which led here (itself, but for a redirect the fetcher follows).
        var first = ""
        let limit: Int
        /// The app the bytes are charged to, and the order the transfer started in.
        let app: String
        let serial: UInt64
        unowned let fetcher: HTTPFetcher
        /// Made at the first byte (sized by Content-Length, when the server sent one).
        var body: ImageBody?
        var received: Int { body?.count ?? 0 }
        /// Why the body could not take more bytes (errno), if it could not.
        var storeError: Int32 = 0
        /// Waiting for room among the bytes in flight (`TransferAdmission`).
        var paused = false
        /// Waiting for the next turn of the loop (`TransferAdmission`).
        var yielded = false
        var headers: [(String, String)] = []
        /// What the progress callback last passed on (received, expected).
        var lastProgress: (UInt64, UInt64) = (0, 0)
        /// The bytes this transfer continues (`Partial`): until the answer is known, then kept
        /// (`continuing`) or dropped.
        var partial: Partial?
        /// The kept body this request asked for the rest of, as it was taken (`partial` may drop it).
        var resuming: Partial?
        /// The answer was a 206 with the rest of `partial`'s body (`RangeResume.continues`).
        var continuing = false
        /// The answer was a 206 that is not the rest asked for (why).
        var wrongRange: String?

        /// One line of the response's head, as libcurl hands it over (with its CRLF): a status
        /// line starts a new response (after a redirect or a 100); a field is kept with its
        /// value trimmed. Read as bytes: this runs for every line of every response.
        func noteHeaderLine(_ line: UnsafeRawBufferPointer) {
            if line.starts(with: Self.statusPrefix) {
                headers.removeAll()
                return
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
            func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
            var start = colon + 1
            var end = line.count
            while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
            while end > start, isSpace(line[end - 1]) { end -= 1 }
            headers.append(
                (
                    String(decoding: UnsafeRawBufferPointer(rebasing: line[..<colon]), as: UTF8.self),
                    String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
                ))
        }

        static let statusPrefix = Array("HTTP/".utf8)

        /// Whether the body may take this answer's bytes. Decided once, at the first byte (or at
        /// the end when none came), for a transfer that continues a `partial` body: the rest of
        /// it continues the body; a whole body starts a new one; a wrong range is refused.
        func answered() -> Bool {
            if wrongRange != nil { return false }
            guard let partial, !continuing, let easy else { return true }
            let status = ccurl_info_long(easy, CURLINFO_RESPONSE_CODE)
            switch RangeResume.answer(
                status: status, headers: .init(headers), offset: partial.body.count, expectedTotal: partial.total)
            {
            case .continues:
                continuing = true
                body = partial.body
            case .startsOver:
                self.partial = nil
            case .wrongRange(let why):
                wrongRange = why
                self.partial = nil
                return false
            }
            return true
        }

        /// The Content-Length of the response under way (0 when not sent or not a number).
        var announcedLength: Int {
            HTTPCachePolicy.Headers(headers)["Content-Length"].flatMap { Int($0) }.map { max(0, $0) } ?? 0
        }
        var tooLarge = false
        /// Where it may connect (nil: anywhere), and why a connection was refused, if one was.
        var reach: NetworkReach?
        var refused: String?
        /// The proxy it goes through, as it may be shown (nil: straight to the server), and
        /// libcurl's words for a failure there.
        var proxy: String?
        var errorBuffer: UnsafeMutablePointer<CChar>?
        var proxyDetail: String?
        /// Where the response redirects to, when the fetcher follows redirects.
        var redirect: String?
        /// Whether libcurl follows redirects itself (else the fetcher routes each one).
        var followsRedirects = true
        var headerList: UnsafeMutablePointer<curl_slist>?
        let progress: (UInt64, UInt64) -> Void
        let completion: Completion
        var easy: UnsafeMutableRawPointer?
        init(
            url: String, limit: Int, app: String, serial: UInt64, fetcher: HTTPFetcher,
            progress: @escaping (UInt64, UInt64) -> Void, completion: @escaping Completion
        ) {
            self.url = url
            self.limit = limit
            self.app = app
            self.serial = serial
            self.fetcher = fetcher
            self.progress = progress
            self.completion = completion
        }
    }

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
    /// Sockets libcurl asked us to watch for a transfer now.
    private var busySockets: Set<curl_socket_t> = []
    /// HTTP/1 connections idle in libcurl's pool, watched by us: see `idleSocketReadable`.
    private var idleSockets: Set<curl_socket_t> = []
    /// The transfer (easy handle) libcurl last named for each socket in the socket callback.
    private var socketOwners: [curl_socket_t: UnsafeMutableRawPointer] = [:]
    private var timer: EventLoop.TimerID?
    private var live: [ObjectIdentifier: Transfer] = [:]

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
    private lazy var admission = TransferAdmission(
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
        loop.addPrepareHook { [unowned self] in self.newTurn() }
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
        hops.reach = reach
        hop(hops, url: url, first: url, number: 0, routes: routes) { [unowned self] url, proxy, completion in
            transfer(
                url: url, first: hops.first, proxy: proxy, app: app, headers: headers, reach: reach, progress: progress,
                completion: completion)
        } completion: { result in
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
        var first = ""
        /// Where a sandboxed app's download may lead (`NetworkReach`), nil for others.
        var reach: NetworkReach?
        var stop: (() -> Void)?
        var cancelled = false
    }

    /// Where a transfer goes: as libcurl reads the environment, straight to the server, or
    /// through a proxy (its URI).
    private enum Way {
        case environment
        case direct
        case proxy(String)
    }

    /// Routes `url` (the `number`th redirect of `first`), starts it, and follows where it
    /// redirects to, each hop routed again, up to `Limits.maxRedirects`.
    private func hop(
        _ hops: Hops, url: String, first: String, number: Int, routes: ProxyRoutes,
        start: @escaping (String, Way, @escaping Completion) -> (() -> Void),
        completion: @escaping Completion
    ) {
        hops.first = first
        var routed = false
        let stopRouting = routes.route(url: url, reach: hops.reach) { [weak self, weak hops] result in
            routed = true
            guard let self, let hops, !hops.cancelled else { return }
            switch result {
            case .failure(let error):
                completion(.failure(.failed(error)))
            case .success(let route):
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
                        hops, url: next, first: first, number: number + 1, routes: routes, start: start,
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
        let t = Transfer(
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
        let user = Unmanaged.passUnretained(t).toOpaque()
        switch way {
        case .environment:
            break
        case .direct:
            _ = ccurl_set_str(easy, CURLOPT_PROXY, "")  // none: not the environment's either
            t.followsRedirects = false
        case .proxy(let uri):
            _ = ccurl_set_str(easy, CURLOPT_PROXY, uri)
            _ = ccurl_set_str(easy, CURLOPT_NOPROXY, "")  // the routes decided: no second opinion
            t.followsRedirects = false
            t.proxy = ProxyChoice.shown(uri)
            t.errorBuffer = .allocate(capacity: Int(CCURL_ERROR_SIZE))
            t.errorBuffer?.initialize(to: 0)
            _ = ccurl_set_ptr(easy, CURLOPT_ERRORBUFFER, t.errorBuffer)
        }
        // A sandboxed app's connections are checked at the socket, but for one to a proxy: the
        // desktop's choice, while the URL's host was checked as the routes resolved it.
        t.reach = t.proxy == nil ? reach : nil
        if t.reach != nil { restrictConnections(of: easy, user) }
        _ = ccurl_set_str(easy, CURLOPT_URL, url)
        _ = ccurl_set_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_set_str(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = ccurl_set_long(easy, CURLOPT_FOLLOWLOCATION, t.followsRedirects ? 1 : 0)
        _ = ccurl_set_long(easy, CURLOPT_MAXREDIRS, limits.maxRedirects)
        _ = ccurl_set_long(easy, CURLOPT_CONNECTTIMEOUT, limits.connectTimeout)
        _ = ccurl_set_long(easy, CURLOPT_TIMEOUT, limits.totalTimeout)
        _ = ccurl_set_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        _ = ccurl_set_long(easy, CURLOPT_LOW_SPEED_TIME, limits.stallSeconds)
        _ = ccurl_set_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limits.maxBytes))
        _ = ccurl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        // Bigger reads: a 4 MiB image in 64 reads, not 256 (each read also costs libcurl a poll).
        _ = ccurl_set_long(easy, CURLOPT_BUFFERSIZE, Self.readBuffer)
        // HTTP/2 where the server offers it (ALPN, libcurl's default for https), and a transfer
        // to a host whose TLS connection is still being set up waits to learn whether it can
        // share it (multiplexing) rather than opening another. Not for plain http: there
        // libcurl would wait for a whole HTTP/1.1 response and run the transfers one by one.
        if url.utf8.prefix(6).map({ $0 | 0x20 }) == Array("https:".utf8) {
            _ = ccurl_set_long(easy, CURLOPT_PIPEWAIT, 1)
        }
        _ = ccurl_set_long(easy, CURLOPT_DNS_CACHE_TIMEOUT, Self.dnsCacheSeconds)
        // Identity only, and no decoding at all: images are compressed already, and a gzip body
        // would let a 92 KB response decode into 90 MiB on the loop (a decompression bomb). A
        // server that encodes anyway delivers bytes that are not an image (NotAnImage), never more
        // than maxBytes of them. (CURLOPT_ACCEPT_ENCODING stays unset: set, libcurl decodes.)
        _ = ccurl_set_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0)
        _ = ccurl_set_str(easy, CURLOPT_USERAGENT, "netactivity/1 (+libcurl)")
        _ = ccurl_set_private(easy, user)
        _ = ccurl_set_prereq_fn(
            easy,
            { user, primaryIP, _, _, localPort in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                // A reused connection opened no socket: its address is checked here too.
                if let reach = t.reach {
                    let ip = primaryIP.map { String(cString: $0) } ?? ""
                    let why = NetworkAddress(ip[...]).map { reach.refusal($0) } ?? "not an address"
                    if let why {
                        t.refused = "\(ip) (\(why))"
                        return 1  // CURL_PREREQFUNC_ABORT
                    }
                }
                t.fetcher.connectionChosen(localPort: localPort, by: t)
                return 0  // CURL_PREREQFUNC_OK
            }, user)
        _ = ccurl_set_close_fn(
            easy,
            { user, fd in
                Unmanaged<HTTPFetcher>.fromOpaque(user!).takeUnretainedValue().socketClosing(fd)
                return close(fd)
            }, Unmanaged.passUnretained(self).toOpaque())
        _ = ccurl_set_write_fn(
            easy,
            { data, size, count, user in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                let n = size * count
                guard t.answered() else { return 0 }  // a wrong range: its bytes are never used
                guard t.received + n <= t.limit else {
                    t.tooLarge = true
                    return 0  // anything but n ends the transfer with CURLE_WRITE_ERROR
                }
                switch t.fetcher.admission.offer(t.serial, bytes: n) {
                case .take: break
                case .nextTurn:
                    t.fetcher.yield(t)
                    return CCURL_WRITEFUNC_PAUSE  // libcurl keeps this chunk for the next turn
                case .waitForRoom:
                    t.paused = true
                    return CCURL_WRITEFUNC_PAUSE  // libcurl keeps this chunk and stops reading
                }
                // The one copy: from libcurl's buffer into the body's final home.
                let body =
                    t.body
                    ?? ImageBody(
                        expected: min(t.announcedLength, t.limit),
                        summing: t.fetcher.sumsBodies
                            && HTTPCachePolicy.store(status: 200, headers: .init(t.headers), now: 0) != nil)
                t.body = body
                guard body.append(UnsafeRawBufferPointer(start: data, count: n)) else {
                    t.storeError = errno
                    return 0
                }
                return n
            })
        _ = ccurl_set_ptr(easy, CURLOPT_WRITEDATA, user)
        _ = ccurl_set_header_fn(
            easy,
            { data, size, count, user in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                let n = size * count
                t.noteHeaderLine(UnsafeRawBufferPointer(start: data, count: n))
                return n
            })
        _ = ccurl_set_ptr(easy, CURLOPT_HEADERDATA, user)
        _ = ccurl_set_long(easy, CURLOPT_NOPROGRESS, 0)
        _ = ccurl_set_progress_fn(
            easy,
            { user, total, now, _, _ in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                // libcurl calls this on every turn of its own, most often with nothing new.
                let base = t.continuing ? UInt64(t.partial!.body.count) : 0
                let progress = (base + UInt64(max(0, now)), total > 0 ? base + UInt64(total) : 0)
                if progress != t.lastProgress {
                    t.lastProgress = progress
                    t.progress(progress.0, progress.1)
                }
                return 0
            })
        _ = ccurl_set_ptr(easy, CURLOPT_XFERINFODATA, user)
        for (name, value) in [("Accept-Encoding", "identity")] + headers {
            t.headerList = ccurl_slist_append(t.headerList, "\(name): \(value)")
        }
        _ = ccurl_set_slist(easy, CURLOPT_HTTPHEADER, t.headerList)
        live[ObjectIdentifier(t)] = t
        admission.started(t.serial, app: t.app, holding: t.partial?.body.count ?? 0)
        ccurl_multi_add_handle(multi, easy)
        return { [weak self, weak t] in
            guard let self, let t, self.live.removeValue(forKey: ObjectIdentifier(t)) != nil else { return }
            self.release(t)
        }
    }

    private func release(_ t: Transfer) {
        if admission.ended(t.serial) { scheduleResume() }
        if let easy = t.easy {
            // Its address may be a new transfer's soon: no socket names it any more.
            for (fd, owner) in socketOwners where owner == easy { socketOwners[fd] = nil }
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

    private func yield(_ t: Transfer) {
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
    private func resume(_ reason: ReferenceWritableKeyPath<Transfer, Bool>) {
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

    private lazy var resumeNextTurn = NextTurn(loop) { [unowned self] in resume(\.paused) }

    // MARK: libcurl <-> the event loop

    private func socketChanged(fd: curl_socket_t, what: Int32, easy: UnsafeMutableRawPointer?) {
        // The transfer on the socket now (kept while it is paused: libcurl then removes its interest).
        if what != CCURL_POLL_REMOVE, let easy { socketOwners[fd] = easy }
        if what == CCURL_POLL_REMOVE {
            busySockets.remove(fd)
            loop.unwatch(fd: fd)
            return
        }
        busySockets.insert(fd)
        idleSockets.remove(fd)
        var events: UInt32 = 0
        if what & CCURL_POLL_IN != 0 { events |= EventLoop.readable }
        if what & CCURL_POLL_OUT != 0 { events |= EventLoop.writable }
        loop.watch(fd: fd, events: events) { [unowned self] revents in
            var flags: Int32 = 0
            if revents & EventLoop.readable != 0 { flags |= CCURL_CSELECT_IN }
            if revents & EventLoop.writable != 0 { flags |= CCURL_CSELECT_OUT }
            if revents & (EventLoop.error | EventLoop.hangup) != 0 { flags |= CCURL_CSELECT_ERR }
            self.act(fd: fd, flags: flags)
        }
    }

    private func timerChanged(milliseconds: Int) {
        if let t = timer { loop.cancel(t) }
        timer = nil
        guard milliseconds >= 0 else { return }
        timer = loop.schedule(afterNanoseconds: UInt64(milliseconds) * 1_000_000) { [unowned self] in
            self.timer = nil
            self.act(fd: CCURL_SOCKET_TIMEOUT, flags: 0)
        }
    }

    private func act(fd: curl_socket_t, flags: Int32) {
        var running: Int32 = 0
        _ = ccurl_multi_socket_action(multi, fd, flags, &running)
        var result = CURLE_OK
        while let easy = ccurl_next_done(multi, &result) {
            guard let user = ccurl_info_private(easy) else { continue }
            let t = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
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
            if let buffer = t.errorBuffer, buffer.pointee != 0 { t.proxyDetail = String(cString: buffer) }
            release(t)
            t.completion(Self.outcome(result, status: status, transfer: t))
        }
    }

    // MARK: idle connections

    /// An HTTP/1 connection back in libcurl's pool must stay silent until it is used again. A
    /// server that sent more than its response's framing (bytes past Content-Length: a whole
    /// forged response) would otherwise answer the next request to the same origin from them, as
    /// libcurl checks an idle connection only after a second. So the fetcher watches idle HTTP/1
    /// sockets itself, and one that turns readable (stray bytes, or the server's FIN) is made
    /// dead: libcurl's next send on it fails and it reconnects, its own retry for a reused
    /// connection that died. (HTTP/2 connections carry frames while idle and frame their own data.)
    ///
    /// A socket with no libcurl interest is not idle for that: a transfer that libcurl gave the
    /// connection to in the same call as the one that finished, and that paused at once (the
    /// bytes in flight are full, or it yielded its turn), has none either, and its response is on
    /// the way. So each socket's last transfer is remembered (libcurl names it in the socket
    /// callback, and PREREQFUNCTION when a pooled connection is taken), and a socket is idle only
    /// when the transfer that finished is the last one on it.
    private func keepWatchingIdle(socket fd: curl_socket_t, finishedBy easy: UnsafeMutableRawPointer, http2: Bool) {
        guard fd >= 0 else { return }
        if let owner = socketOwners[fd], owner != easy { return }  // another transfer has it now
        socketOwners[fd] = nil
        guard !busySockets.contains(fd), !http2 else { return }
        if hasStrayBytes(fd) { return neutralize(fd) }
        idleSockets.insert(fd)
        loop.watch(fd: fd, events: EventLoop.readable) { [unowned self] _ in
            guard self.idleSockets.contains(fd) else { return }
            self.neutralize(fd)
        }
    }

    /// A transfer has its connection and sends its request now. The connection's socket is this
    /// transfer's, also when the transfer pauses at once and libcurl names the socket in no
    /// callback (its interest never changed), and also when the transfer that had it has not been
    /// told done yet (libcurl gave it over within one call). A pooled socket is no longer idle;
    /// stray bytes on it (a forged answer that came after the watch last looked) make it dead
    /// first, as the watch would.
    private func connectionChosen(localPort: Int32, by t: Transfer) {
        guard let easy = t.easy else { return }
        let known = idleSockets.union(busySockets).union(socketOwners.keys)
        guard let fd = known.first(where: { Self.localPort($0) == localPort }) else { return }
        if idleSockets.contains(fd) {
            if hasStrayBytes(fd) { return neutralize(fd) }
            idleSockets.remove(fd)
            loop.unwatch(fd: fd)
        }
        socketOwners[fd] = easy
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
        idleSockets.remove(fd)
        loop.unwatch(fd: fd)
        let dead = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard dead >= 0 else { return shutdownBoth(fd) }
        dup2(dead, fd)
        close(dead)
    }

    private func shutdownBoth(_ fd: curl_socket_t) {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func socketClosing(_ fd: curl_socket_t) {
        socketOwners[fd] = nil
        idleSockets.remove(fd)
        busySockets.remove(fd)
        loop.unwatch(fd: fd)
    }

    /// A transfer for a sandboxed or unknown caller opens only sockets to addresses its `reach`
    /// allows, checked on the address libcurl is about to connect to (after DNS, for every
    /// redirect: a name that resolves to this machine is refused as its address is).
    private func restrictConnections(of easy: UnsafeMutableRawPointer, _ user: UnsafeMutableRawPointer) {
        _ = ccurl_set_opensocket_fn(
            easy,
            { user, _, address in
                let t = Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
                guard let address, let reach = t.reach else { return CCURL_SOCKET_BAD }
                var raw = [UInt8](repeating: 0, count: 16)
                let n = Int(ccurl_sockaddr_bytes(address, &raw))
                guard let ip = NetworkAddress(bytes: Array(raw.prefix(n))) else {
                    t.refused = "an address of family \(address.pointee.family)"
                    return CCURL_SOCKET_BAD
                }
                if let why = reach.refusal(ip) {
                    t.refused = "\(ip) (\(why))"
                    return CCURL_SOCKET_BAD
                }
                return socket(
                    address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue),
                    address.pointee.protocol)
            }, user)
    }

    private static func outcome(_ code: CURLcode, status: Int, transfer t: Transfer) -> Result<
        Response, ImageDownloader.Failure
    > {
        // Errors are published (the task's Error, notifications): no userinfo, no query. Redacted
        // only for an error: a success never names the URL. It is the URL asked for, also when a
        // redirect the fetcher followed failed.
        let url = PublishedURL.redact(t.first)
        if code != CURLE_OK, let refused = t.refused {
            return .failure(
                .failed(
                    NetActivityError(
                        .accessDenied,
                        "\(url): a sandboxed app's download may reach public addresses only, and this one led to \(refused)"
                    )))
        }
        if let why = t.wrongRange, code == CURLE_OK || code == CURLE_WRITE_ERROR {
            return .failure(
                .failed(
                    NetActivityError(.http, "\(url): the server answered a range other than the rest asked for: \(why)")
                ))
        }
        if code == CURLE_OK {
            let body = t.body ?? ImageBody()
            guard body.seal() else {
                let reason = String(cString: strerror(errno))
                return .failure(
                    .failed(NetActivityError(.failed, "\(url): the agent could not keep the body (\(reason))")))
            }
            // The rest of a body: the answer is the whole one's, as its first 200 described it.
            if t.continuing, let partial = t.partial {
                return .success(Response(status: 200, headers: partial.headers, body: body))
            }
            if status == 407, let proxy = t.proxy {
                return .failure(
                    .failed(NetActivityError(.network, "\(url): the proxy \(proxy) asks for credentials (HTTP 407)")))
            }
            return .success(Response(status: status, headers: .init(t.headers), body: body, redirect: t.redirect))
        }
        let detail = String(cString: ccurl_easy_strerror(code))
        // Through a proxy, libcurl's own words say more ("CONNECT tunnel failed, response 403").
        let via = t.proxy.map { " through the proxy \($0)" } ?? ""
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(.failed(NetActivityError(.timeout, "\(url): \(t.proxyDetail ?? detail)\(via)")))
        case CURLE_FILESIZE_EXCEEDED:
            return .failure(.failed(NetActivityError(.tooLarge, "\(url) is larger than the limit of \(t.limit) bytes")))
        case CURLE_WRITE_ERROR where t.tooLarge:
            return .failure(.failed(NetActivityError(.tooLarge, "\(url) is larger than the limit of \(t.limit) bytes")))
        case CURLE_WRITE_ERROR where t.storeError != 0:
            return .failure(
                .failed(
                    NetActivityError(
                        .failed,
                        "\(url): the agent had no memory for the body (\(String(cString: strerror(t.storeError))))")))
        case CURLE_TOO_MANY_REDIRECTS:
            return .failure(.failed(NetActivityError(.http, "\(url): too many redirects")))
        case CURLE_UNSUPPORTED_PROTOCOL where t.headers.isEmpty:
            // libcurl refuses an answer with no status line (HTTP/0.9) with this code too; a
            // redirect to another scheme comes after a response's headers.
            return .failure(
                .failed(NetActivityError(.http, "\(url): the server answered without an HTTP status line (HTTP/0.9)")))
        case CURLE_UNSUPPORTED_PROTOCOL:
            return .failure(.failed(NetActivityError(.invalidURL, "\(url) led to a scheme other than http or https")))
        default:
            return .failure(.failed(NetActivityError(.network, "\(url): \(t.proxyDetail ?? detail)\(via)")))
        }
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
