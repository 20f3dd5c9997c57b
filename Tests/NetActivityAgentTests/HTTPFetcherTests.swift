// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore
import Testing

@testable import NetActivityAgent

/// A loopback HTTP server in a Python process of its own, for the fetcher: each path says what it
/// answers. It logs every request's path and Accept-Encoding (`log()`).
///
/// - `/ok`: 200, "hello" with an ETag and Cache-Control;
/// - `/etag`: 304 when If-None-Match is "v1", else 200 "fresh" with that ETag;
/// - `/redirect/N`: a 302 to `/redirect/N-1`, and `/redirect/0` to `/ok`;
/// - `/to-ftp`: a 302 to an ftp URL;
/// - `/big/N`: N bytes with a Content-Length; `/chunked/N`: N bytes, chunked, with none;
/// - `/gzip`: a gzip body with Content-Encoding: gzip, whatever was asked;
/// - `/status/CODE`: that status, empty.
final class FetcherTestServer {
    private var pid: Int32 = 0
    let port: Int
    let dir: String

    init() throws {
        var template = Array("/tmp/netactivity-fetcher-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError("mkdtemp") }
        dir = String(cString: made)
        let script = """
            import gzip, http.server, sys
            root = sys.argv[1]
            class H(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *a): pass
                def answer(self, status, body=b"", headers=()):
                    self.send_response(status)
                    for k, v in headers: self.send_header(k, v)
                    if ("Transfer-Encoding", "chunked") not in headers: self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if ("Transfer-Encoding", "chunked") in headers:
                        for i in range(0, len(body), 1000):
                            part = body[i:i + 1000]
                            self.wfile.write(b"%x\\r\\n" % len(part) + part + b"\\r\\n")
                        self.wfile.write(b"0\\r\\n\\r\\n")
                    else:
                        self.wfile.write(body)
                def do_GET(self):
                    with open(root + "/log", "a") as log:
                        log.write("%s %s\\n" % (self.path, self.headers.get("Accept-Encoding", "-")))
                    p = self.path.strip("/").split("/")
                    if p[0] == "ok":
                        self.answer(200, b"hello", [("ETag", '"v1"'), ("Cache-Control", "max-age=60")])
                    elif p[0] == "etag":
                        if self.headers.get("If-None-Match") == '"v1"': self.answer(304, b"", [("ETag", '"v1"')])
                        else: self.answer(200, b"fresh", [("ETag", '"v1"')])
                    elif p[0] == "redirect":
                        n = int(p[1])
                        self.answer(302, b"", [("Location", "/redirect/%d" % (n - 1) if n > 0 else "/ok")])
                    elif p[0] == "to-ftp":
                        self.answer(302, b"", [("Location", "ftp://127.0.0.1/x")])
                    elif p[0] == "big":
                        self.answer(200, b"x" * int(p[1]))
                    elif p[0] == "chunked":
                        self.answer(200, b"x" * int(p[1]), [("Transfer-Encoding", "chunked")])
                    elif p[0] == "gzip":
                        self.answer(200, gzip.compress(b"y" * 100000, mtime=0), [("Content-Encoding", "gzip")])
                    elif p[0] == "status":
                        self.answer(int(p[1]))
                    else:
                        self.answer(404)
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            s.daemon_threads = True
            open(root + "/port.tmp", "w").write(str(s.server_address[1]))
            import os; os.rename(root + "/port.tmp", root + "/port")
            s.serve_forever()
            """
        pid = try ServiceProcess.spawn(["/usr/bin/python3", "-c", script, dir])
        var found = 0
        // The server says its port by renaming a file into place: wait for that file.
        for _ in 0..<1000 where found == 0 {
            if let text = Self.read(dir + "/port"), let p = Int(text) { found = p } else { usleep(10_000) }
        }
        guard found > 0 else {
            kill(pid, SIGKILL)
            throw SystemError("the test HTTP server did not start", errno: 0)
        }
        port = found
    }

    deinit {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        for name in ["log", "port"] { unlink(dir + "/" + name) }
        rmdir(dir)
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Each request so far: its path and its Accept-Encoding ("-" for none).
    func log() -> [String] { (Self.read(dir + "/log") ?? "").split(separator: "\n").map(String.init) }

    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while case let n = Glibc.read(fd, &buf, buf.count), n > 0 { bytes += buf[0..<n] }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// `HTTPFetcher` (libcurl's multi interface on the agent's event loop) against a loopback server:
/// what it follows, refuses and hands over, with the limits the downloader gives it.
@Suite("HTTP fetcher", .serialized, .timeLimit(.minutes(1)))
struct HTTPFetcherTests {
    let server: FetcherTestServer

    init() throws { server = try FetcherTestServer() }

    struct Outcome {
        var result: Result<HTTPFetcher.Response, ImageDownloader.Failure>
        var progress: [(UInt64, UInt64)]
        var status: Int? { try? result.get().status }
        var body: [UInt8] { (try? result.get().body.withUnsafeBytes { Array($0) }) ?? [] }
        var error: NetActivityError? {
            if case .failure(.failed(let e)) = result { return e }
            return nil
        }
    }

    /// Runs one fetch on a loop of its own until it completes. `routed`: each request routed by
    /// `ProxyRoutes` (no proxy: the environment names none, GIO is missing), redirects followed by
    /// the fetcher itself; else libcurl follows them.
    func fetch(_ path: String, headers: [(String, String)] = [], maxBytes: Int = 1 << 20, routed: Bool = false)
        -> Outcome
    {
        let loop = EventLoop()
        let routes =
            routed
            ? ProxyRoutes(
                loop: loop, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), environment: [:],
                library: "libnetactivity-missing-gio.so.0") : nil
        let fetcher = HTTPFetcher(loop: loop, limits: .init(maxBytes: maxBytes), routes: routes)
        var outcome: Outcome?
        var progress: [(UInt64, UInt64)] = []
        _ = fetcher.fetch(url: server.url(path), headers: headers, progress: { progress.append(($0, $1)) }) { result in
            outcome = Outcome(result: result, progress: progress)
            loop.stop()
        }
        if outcome == nil { loop.run() }
        return outcome!
    }

    @Test("a 200 hands over its status, headers and body, and progress ends at the body's size")
    func ok() throws {
        let o = fetch("/ok")
        #expect(o.status == 200)
        #expect(o.body == Array("hello".utf8))
        let response = try o.result.get()
        #expect(response.headers["etag"] == "\"v1\"")
        #expect(response.headers["cache-control"] == "max-age=60")
        #expect(o.progress.last?.0 == 5)
        #expect(server.log() == ["/ok identity"], "identity asked for, explicitly")
    }

    @Test("conditional headers go out; a 304 comes back as itself, with no body")
    func notModified() {
        let o = fetch("/etag", headers: [("If-None-Match", "\"v1\"")])
        #expect(o.status == 304)
        #expect(o.body.isEmpty)
        #expect(fetch("/etag").body == Array("fresh".utf8))
    }

    @Test(
        "redirects are followed up to five; a sixth is an HTTP error, and a redirect to another scheme InvalidURL",
        arguments: [false, true])
    func redirects(routed: Bool) {
        let log = server.log().count
        let five = fetch("/redirect/4", routed: routed)
        #expect(five.status == 200)
        #expect(five.body == Array("hello".utf8))
        #expect(server.log().count - log == 6, "four redirects, then /redirect/0 to /ok")
        let six = fetch("/redirect/5", routed: routed)
        #expect(six.error?.name == NetActivityError.Name.http.rawValue)
        #expect(six.error?.message.hasSuffix("too many redirects") == true)
        #expect(six.error?.message.contains("/redirect/5") == true, "named for the URL asked for")
        let ftp = fetch("/to-ftp", routed: routed)
        #expect(ftp.error?.name == NetActivityError.Name.invalidURL.rawValue)
    }

    @Test("a body over the limit is TooLarge, announced or not; at the limit it is whole")
    func sizeLimit() {
        #expect(fetch("/big/4000", maxBytes: 4000).body.count == 4000)
        let announced = fetch("/big/4001", maxBytes: 4000)
        #expect(announced.error?.name == NetActivityError.Name.tooLarge.rawValue)
        let chunked = fetch("/chunked/50000", maxBytes: 4000)
        #expect(chunked.error?.name == NetActivityError.Name.tooLarge.rawValue)
        #expect(chunked.error?.message.contains("4000 bytes") == true)
        #expect(fetch("/chunked/3000", maxBytes: 4000).body.count == 3000)
    }

    @Test("a gzip body the server sends anyway is handed over as it came, never decoded")
    func gzipIsNotDecoded() throws {
        let o = fetch("/gzip", maxBytes: 2000)
        #expect(o.status == 200)
        #expect(o.body.count < 2000, "100,000 bytes of y compress to a few hundred; decoded, they would be TooLarge")
        #expect(Array(o.body.prefix(2)) == [0x1F, 0x8B], "the gzip magic: the bytes as sent")
        #expect(try o.result.get().headers["content-encoding"] == "gzip")
    }

    @Test("an error status is a response, not a failure: the downloader decides what it means")
    func errorStatus() {
        #expect(fetch("/status/404").status == 404)
        #expect(fetch("/status/503").status == 503)
    }

    @Test("transfers started as others finish reuse their connections, paused ones too: every one completes")
    func reusedConnectionsWhilePaused() {
        // As the downloader does: a few transfers at once, the next started from a finished one's
        // completion, bodies large enough that transfers pause for the bytes in flight. A socket
        // that libcurl gives a paused transfer has no libcurl interest, yet is no idle socket.
        let loop = EventLoop()
        let fetcher = HTTPFetcher(loop: loop, limits: .init(maxBytes: 1 << 20))
        let total = 160
        var started = 0
        var failures: [String] = []
        var done = 0
        func next() {
            guard started < total else { return }
            started += 1
            _ = fetcher.fetch(url: server.url("/big/300000"), progress: { _, _ in }) { result in
                if case .failure(let f) = result { failures.append("\(f)") }
                done += 1
                if done == total { loop.stop() } else { next() }
            }
        }
        for _ in 0..<4 { next() }
        loop.run()
        #expect(done == total)
        #expect(failures.isEmpty, "\(failures.count) failed: \(failures.prefix(2))")
    }

    @Test("a refused connection is a Network error naming the URL")
    func refused() {
        let loop = EventLoop()
        let fetcher = HTTPFetcher(loop: loop, limits: .init(maxBytes: 1000))
        var error: NetActivityError?
        // Port 9 (discard) on the loopback: nothing listens there in the test machine.
        _ = fetcher.fetch(url: "http://127.0.0.1:9/x", progress: { _, _ in }) { result in
            if case .failure(.failed(let e)) = result { error = e }
            loop.stop()
        }
        if error == nil { loop.run() }
        #expect(error?.name == NetActivityError.Name.network.rawValue)
        #expect(error?.message.contains("127.0.0.1:9/x") == true)
    }
}
