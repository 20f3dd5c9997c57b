// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import CCurl
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// One transfer of the fetcher (one libcurl easy handle): what libcurl's callbacks reach through
/// its private pointer, the options it is started with, and what its end means.
final class HTTPTransfer {
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
    var partial: HTTPFetcher.Partial?
    /// The kept body this request asked for the rest of, as it was taken (`partial` may drop it).
    var resuming: HTTPFetcher.Partial?
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
    /// The proxy's URI as libcurl was given it (its words about the proxy are scrubbed of the
    /// credentials it may carry).
    var proxyURI: String?
    /// Where the response redirects to, when the fetcher follows redirects.
    var redirect: String?
    /// Whether libcurl follows redirects itself (else the fetcher routes each one).
    var followsRedirects = true
    var headerList: UnsafeMutablePointer<curl_slist>?
    let progress: (UInt64, UInt64) -> Void
    let completion: HTTPFetcher.Completion
    var easy: UnsafeMutableRawPointer?
    init(
        url: String, limit: Int, app: String, serial: UInt64, fetcher: HTTPFetcher,
        progress: @escaping (UInt64, UInt64) -> Void, completion: @escaping HTTPFetcher.Completion
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

extension HTTPTransfer {
    /// Sets the easy handle's options for one request of `url`, going `way`, and the callbacks
    /// through which libcurl hands this transfer its connection, head, body and progress.
    func configure(
        easy: UnsafeMutableRawPointer, url: String, way: HTTPFetcher.Way, reach: NetworkReach?,
        headers: [(String, String)], limits: HTTPFetcher.Limits
    ) {
        let t = self
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
            t.proxy = ProxyURI.shown(uri)
            t.proxyURI = uri
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
        _ = ccurl_set_long(easy, CURLOPT_BUFFERSIZE, HTTPFetcher.readBuffer)
        // HTTP/2 where the server offers it (ALPN, libcurl's default for https), and a transfer
        // to a host whose TLS connection is still being set up waits to learn whether it can
        // share it (multiplexing) rather than opening another. Not for plain http: there
        // libcurl would wait for a whole HTTP/1.1 response and run the transfers one by one.
        if url.utf8.prefix(6).map({ $0 | 0x20 }) == Array("https:".utf8) {
            _ = ccurl_set_long(easy, CURLOPT_PIPEWAIT, 1)
        }
        _ = ccurl_set_long(easy, CURLOPT_DNS_CACHE_TIMEOUT, HTTPFetcher.dnsCacheSeconds)
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
                let t = Unmanaged<HTTPTransfer>.fromOpaque(user!).takeUnretainedValue()
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
            }, Unmanaged.passUnretained(fetcher).toOpaque())
        _ = ccurl_set_write_fn(
            easy,
            { data, size, count, user in
                let t = Unmanaged<HTTPTransfer>.fromOpaque(user!).takeUnretainedValue()
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
                let t = Unmanaged<HTTPTransfer>.fromOpaque(user!).takeUnretainedValue()
                let n = size * count
                t.noteHeaderLine(UnsafeRawBufferPointer(start: data, count: n))
                return n
            })
        _ = ccurl_set_ptr(easy, CURLOPT_HEADERDATA, user)
        _ = ccurl_set_long(easy, CURLOPT_NOPROGRESS, 0)
        _ = ccurl_set_progress_fn(
            easy,
            { user, total, now, _, _ in
                let t = Unmanaged<HTTPTransfer>.fromOpaque(user!).takeUnretainedValue()
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
    }

    /// A transfer for a sandboxed or unknown caller opens only sockets to addresses its `reach`
    /// allows, checked on the address libcurl is about to connect to (after DNS, for every
    /// redirect: a name that resolves to this machine is refused as its address is).
    fileprivate func restrictConnections(of easy: UnsafeMutableRawPointer, _ user: UnsafeMutableRawPointer) {
        _ = ccurl_set_opensocket_fn(
            easy,
            { user, _, address in
                let t = Unmanaged<HTTPTransfer>.fromOpaque(user!).takeUnretainedValue()
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

    /// What the transfer's end means: its response, or the error to publish.
    func outcome(_ code: CURLcode, status: Int) -> Result<HTTPFetcher.Response, ImageDownloader.Failure> {
        let t = self
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
                return .success(HTTPFetcher.Response(status: 200, headers: partial.headers, body: body))
            }
            if status == 407, let proxy = t.proxy {
                return .failure(
                    .failed(NetActivityError(.network, "\(url): the proxy \(proxy) asks for credentials (HTTP 407)")))
            }
            return .success(
                HTTPFetcher.Response(status: status, headers: .init(t.headers), body: body, redirect: t.redirect))
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
