// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityClient
import Testing

/// Collects what a binding or slot reports (from the client's thread) for the test to read.
final class Recorder<T: Sendable>: @unchecked Sendable {
    private var lock = pthread_mutex_t()
    private var items: [T] = []

    init() { pthread_mutex_init(&lock, nil) }
    deinit { pthread_mutex_destroy(&lock) }

    func append(_ item: T) {
        pthread_mutex_lock(&lock)
        items.append(item)
        pthread_mutex_unlock(&lock)
    }

    var values: [T] {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return items
    }

    /// Waits until `count` values have been recorded (or 5 s), and returns them all.
    func wait(for count: Int, within seconds: Double = 5) async throws -> [T] {
        let deadline = EventLoop.now() + UInt64(seconds * 1e9)
        while values.count < count, EventLoop.now() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        return values
    }

    /// Waits until the values recorded satisfy `done` (or 5 s), and returns them all.
    func wait(within seconds: Double = 5, until done: ([T]) -> Bool) async throws -> [T] {
        let deadline = EventLoop.now() + UInt64(seconds * 1e9)
        while !done(values), EventLoop.now() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        return values
    }
}

/// Every process the tests start, from its start until it is reaped. At exit whatever is left (a
/// test that leaked its bus, agent or server) is killed and named on stderr: a leaked child keeps
/// `swift test`'s output pipe open, and the run would hang after its last test.
/// The children of a test process that crashes (a fatal error: a trap, an abort) are killed in the
/// crash's signal handler, before Swift's own backtracer runs: left alone they would keep the test
/// runner's output pipes open, and `swift test` would wait for them for ever. Their pids are in a
/// fixed table, which a signal handler may read.
enum CrashGuard {
    static let slots = 1024
    nonisolated(unsafe) static let pids = UnsafeMutablePointer<pid_t>.allocate(capacity: slots)
    nonisolated(unsafe) static var previous: [Int32: sigaction] = [:]
    static let signals = [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV]

    static func install() {
        pids.initialize(repeating: 0, count: slots)
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_sigaction = { signal, info, context in
                for i in 0..<CrashGuard.slots where CrashGuard.pids[i] > 0 { kill(CrashGuard.pids[i], SIGKILL) }
                // Then what was there before (Swift's backtracer, or the default: the crash itself).
                var old = CrashGuard.previous[signal] ?? sigaction()
                sigaction(signal, &old, nil)
                raise(signal)
                _ = (info, context)
            }
            action.sa_flags = SA_SIGINFO | SA_ONSTACK
            var old = sigaction()
            sigaction(signal, &action, &old)
            previous[signal] = old
        }
    }

    /// Called with Children's lock held.
    static func note(_ pid: pid_t) {
        for i in 0..<slots where pids[i] == 0 {
            pids[i] = pid
            return
        }
    }

    static func forget(_ pid: pid_t) {
        for i in 0..<slots where pids[i] == pid { pids[i] = 0 }
    }
}

final class Children: @unchecked Sendable {
    static let shared = Children()
    private var lock = pthread_mutex_t()
    private var running: [pid_t: String] = [:]

    private init() {
        pthread_mutex_init(&lock, nil)
        atexit { Children.shared.killLeftovers() }
        CrashGuard.install()
    }

    /// Starts a child (`ServiceProcess.spawn`) and keeps it until `reap`.
    func spawn(_ arguments: [String], environment: [String: String] = [:]) throws -> pid_t {
        let pid = try ServiceProcess.spawn(arguments, environment: environment)
        add(pid, arguments.first ?? "")
        return pid
    }

    func add(_ pid: pid_t, _ what: String) {
        let test = Test.current?.name ?? "?"
        pthread_mutex_lock(&lock)
        running[pid] = "\(what) (started by \"\(test)\")"
        CrashGuard.note(pid)
        pthread_mutex_unlock(&lock)
    }

    func remove(_ pid: pid_t) {
        pthread_mutex_lock(&lock)
        running[pid] = nil
        CrashGuard.forget(pid)
        pthread_mutex_unlock(&lock)
    }

    /// Sends `signal` to a child of ours and waits for it; its wait status.
    @discardableResult
    func reap(_ pid: pid_t, _ signal: Int32) -> Int32 {
        kill(pid, signal)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        remove(pid)
        return status
    }

    private func killLeftovers() {
        pthread_mutex_lock(&lock)
        let left = running
        running = [:]
        pthread_mutex_unlock(&lock)
        for (pid, what) in left.sorted(by: { $0.key < $1.key }) {
            let line = "test leak: pid \(pid), \(what), was still running at exit; killed\n"
            _ = line.withCString { write(2, $0, strlen($0)) }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}

/// A task owned by another process: python3-dbus begins it and then obeys lines written to a
/// FIFO ("suspend", "resume", "progress S ES R ER", "complete [ERROR]").
final class ForeignTask {
    let pid: Int32
    let path: String
    private let commands: Int32
    private let dir: String

    init(address: String, description: String = "foreign", expectedToReceive: UInt64 = 0, suspended: Bool = false)
        throws
    {
        var template = Array("/tmp/netactivity-foreign-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw NetActivityError(name: "test.Failed", message: "mkdtemp") }
        dir = String(cString: made)
        guard mkfifo(dir + "/commands", 0o600) == 0 else {
            throw NetActivityError(name: "test.Failed", message: "mkfifo")
        }
        let script = """
            import os, sys, dbus
            bus = dbus.bus.BusConnection(sys.argv[1])
            name, path_file = "org.example.NetActivity", sys.argv[2] + "/path"
            agent = dbus.Interface(bus.get_object(name, "/org/example/NetActivity"), "org.example.NetActivity")
            options = {"expected-to-receive": dbus.UInt64(int(sys.argv[4])), "suspended": sys.argv[5] == "1"}
            path = agent.BeginTask(sys.argv[3], dbus.Dictionary(options, signature="sv"))
            open(path_file + ".tmp", "w").write(str(path))
            os.rename(path_file + ".tmp", path_file)
            task = dbus.Interface(bus.get_object(name, path), "org.example.NetActivity.Task")
            for line in open(sys.argv[2] + "/commands"):
                word, _, rest = line.rstrip("\\n").partition(" ")
                if word == "suspend": task.Suspend()
                elif word == "resume": task.Resume()
                elif word == "complete": task.Complete(rest)
                elif word == "progress": task.SetProgress(*[dbus.UInt64(int(v)) for v in rest.split()])
            """
        pid = try Children.shared.spawn([
            "/usr/bin/python3", "-c", script, address, dir, description, String(expectedToReceive),
            suspended ? "1" : "0",
        ])
        var found: String?
        for _ in 0..<500 {
            let fd = open(dir + "/path", O_RDONLY)
            if fd >= 0 {
                var buf = [UInt8](repeating: 0, count: 256)
                let n = read(fd, &buf, 256)
                close(fd)
                if n > 0 { found = String(decoding: buf[0..<n], as: UTF8.self) }
                break
            }
            usleep(10_000)
        }
        guard let found else {
            Children.shared.reap(pid, SIGKILL)
            throw NetActivityError(name: "test.Failed", message: "the foreign task did not start")
        }
        path = found
        commands = open(dir + "/commands", O_WRONLY)
    }

    /// Sends one command; python3 runs them in order, each a blocking D-Bus call.
    func send(_ line: String) {
        let text = line + "\n"
        _ = text.withCString { write(commands, $0, strlen($0)) }
    }

    deinit {
        close(commands)
        Children.shared.reap(pid, SIGKILL)
        // Its folder goes too: make test leaves nothing behind in /tmp.
        unlink(dir + "/commands")
        unlink(dir + "/path")
        rmdir(dir)
    }
}

/// python3 on 127.0.0.1 with a port of its own choosing. Serves:
/// - `/NAME`: files[NAME], with Content-Length;
/// - `/slow/NAME`: the same in 8 parts 60 ms apart;
/// - `/gate/NAME`: the same once `openGate(NAME)` was called for NAME;
/// - `/drop/NAME`: a Content-Length of twice the file, half of it, then a closed connection;
/// - `/status/CODE`: an empty answer with that status.
/// Every request's path is logged; `count(_:)` reads the log.
/// A loopback port that refuses every connection: a TCP socket bound to it and never listening,
/// held until `close()`, so no other process (another suite's server, say) can take the port and
/// answer in the meantime, as it could after a server on it stopped.
final class RefusingPort {
    private let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard fd >= 0, bound else { throw NetActivityError(name: "test.Failed", message: "no loopback port to hold") }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func url(_ name: String) -> String { "http://127.0.0.1:\(port)/\(name)" }

    func close() { Glibc.close(fd) }
}

final class LocalHTTPServer {
    private var pid: Int32
    let port: Int
    let dir: String

    init(files: [String: [UInt8]]) throws {
        var template = Array("/tmp/netactivity-http-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw NetActivityError(name: "test.Failed", message: "mkdtemp") }
        dir = String(cString: made)
        for (name, bytes) in files {
            let fd = open(dir + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        let script = """
            import http.server, os, sys, time
            root = sys.argv[1]
            class H(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def log_message(self, *a): pass
                def do_GET(self):
                    with open(root + "/.log", "a") as log: log.write(self.path + "\\n")
                    parts = self.path.strip("/").split("/")
                    if parts[0] == "status":
                        self.send_response(int(parts[1])); self.send_header("Content-Length", "0"); self.end_headers(); return
                    mode, name = (parts[0], parts[1]) if len(parts) == 2 else ("plain", parts[0])
                    try: data = open(root + "/" + name, "rb").read()
                    except OSError:
                        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
                    if mode == "gate":
                        while not os.path.exists(root + "/.open-" + name): time.sleep(0.01)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(data) * (2 if mode == "drop" else 1)))
                    self.end_headers()
                    if mode == "drop":
                        self.wfile.write(data); self.wfile.flush(); self.close_connection = True; return
                    if mode == "slow":
                        step = max(1, len(data) // 8)
                        for i in range(0, len(data), step):
                            self.wfile.write(data[i:i + step]); self.wfile.flush(); time.sleep(0.06)
                        return
                    self.wfile.write(data)
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
            s.daemon_threads = True
            open(root + "/.port.tmp", "w").write(str(s.server_address[1]))
            os.rename(root + "/.port.tmp", root + "/.port")
            s.serve_forever()
            """
        pid = try Children.shared.spawn(["/usr/bin/python3", "-c", script, dir])
        var found = 0
        for _ in 0..<500 {
            let fd = Glibc.open(dir + "/.port", O_RDONLY)
            if fd >= 0 {
                var buf = [UInt8](repeating: 0, count: 16)
                let n = read(fd, &buf, 16)
                close(fd)
                if n > 0, let p = Int(String(decoding: buf[0..<n], as: UTF8.self)) {
                    found = p
                    break
                }
            }
            usleep(10_000)
        }
        guard found > 0 else {
            Children.shared.reap(pid, SIGKILL)
            throw NetActivityError(name: "test.Failed", message: "the HTTP server did not start")
        }
        port = found
    }

    func url(_ name: String) -> String { "http://127.0.0.1:\(port)/\(name)" }

    /// Lets requests for /gate/NAME through.
    func openGate(_ name: String) {
        close(Glibc.open(dir + "/.open-" + name, O_WRONLY | O_CREAT, 0o644))
    }

    /// How many requests asked for `path` (e.g. "/gate/a.png").
    func count(_ path: String) -> Int { requests().filter { $0 == path }.count }

    /// Every request's path so far, in the order they came.
    func requests() -> [String] {
        let fd = Glibc.open(dir + "/.log", O_RDONLY)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func stop() {
        guard pid > 0 else { return }
        Children.shared.reap(pid, SIGTERM)
        pid = 0
    }

    deinit {
        stop()
        // Its folder (the files it served, its log) goes too: make test leaves nothing in /tmp.
        if let rm = try? ServiceProcess.spawn(["/bin/rm", "-rf", "--", dir]) {
            var status: Int32 = 0
            waitpid(rm, &status, 0)
        }
    }
}

extension Task where Failure == any Error {
    /// The task's value; a waiter that is cancelled (a test over its time limit) cancels the task
    /// too, where `value` alone would wait on.
    var valueOrCancel: Success {
        get async throws {
            try await withTaskCancellationHandler {
                try await value
            } onCancel: {
                cancel()
            }
        }
    }
}
