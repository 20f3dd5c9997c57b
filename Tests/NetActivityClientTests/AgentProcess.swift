// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityClient
import NetActivityContract
import Testing

/// A private dbus-daemon and the real netactivityd on it, for the library's tests.
final class TestBus: @unchecked Sendable {
    private(set) var bus: PrivateBus
    private(set) var agentPID: pid_t = 0
    private let listen: String
    /// The agents' XDG_CACHE_HOME.
    private var cacheHome = ""

    /// `listen`: a fixed `unix:path=` for a bus that restarts at the same address.
    init(listen: String = "unix:tmpdir=/tmp") throws {
        self.listen = listen
        var folder = Array("/tmp/netactivity-busconf-XXXXXX".utf8CString)
        guard let made = mkdtemp(&folder) else { throw SystemError("mkdtemp", errno: errno) }
        let configFolder = String(cString: made)
        config = try Self.writeConfig(in: configFolder)
        bus = try PrivateBus(config: "--config-file=" + config, listen: listen)
        Children.shared.add(bus.pid, "dbus-daemon")
        temporaryFolders.append(configFolder)
        // Agents started here keep their disk cache in a temporary folder of this bus's own, not
        // in ~/.cache (passed to the agent alone: tests run in parallel, and setenv would race
        // with other threads reading the environment, and hand one test's folder to another's agent).
        var template = Array("/tmp/netactivity-cache-XXXXXX".utf8CString)
        if let dir = mkdtemp(&template) {
            cacheHome = String(cString: dir)
            temporaryFolders.append(cacheHome)
        }
        // A folder `fixedAddress` made for this bus goes with it too.
        if listen.hasPrefix("unix:path=/tmp/netactivity-bus-"), listen.hasSuffix("/bus") {
            temporaryFolders.append(String(listen.dropFirst("unix:path=".count).dropLast("/bus".count)))
        }
    }

    /// Made for this bus and removed with it: `make test` leaves nothing behind in /tmp.
    private var temporaryFolders: [String] = []
    /// The bus's configuration file (`writeConfig`).
    private let config: String

    /// A session bus's configuration (its type, authentication, policy and limits are the stock
    /// session.conf's) whose only service directory is an empty folder of its own: nothing is ever
    /// activated, so a netactivity installed on this machine (whose service file the stock
    /// directories would hold) never answers where a test expects no agent, or takes the name
    /// from the test's own.
    private static func writeConfig(in folder: String) throws -> String {
        let services = folder + "/services"
        guard mkdir(services, 0o700) == 0 else { throw SystemError("mkdir", errno: errno) }
        let limits = [
            ("max_incoming_bytes", 1_000_000_000), ("max_incoming_unix_fds", 250_000_000),
            ("max_outgoing_bytes", 1_000_000_000), ("max_outgoing_unix_fds", 250_000_000),
            ("max_message_size", 1_000_000_000), ("service_start_timeout", 120_000), ("auth_timeout", 240_000),
            ("pending_fd_timeout", 150_000), ("max_completed_connections", 100_000),
            ("max_incomplete_connections", 10_000), ("max_connections_per_user", 100_000),
            ("max_pending_service_starts", 10_000), ("max_names_per_connection", 50_000),
            ("max_match_rules_per_connection", 50_000), ("max_replies_per_connection", 50_000),
        ]
        let text = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <keep_umask/>
              <listen>unix:tmpdir=/tmp</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(services)</servicedir>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            \(limits.map { "  <limit name=\"\($0.0)\">\($0.1)</limit>" }.joined(separator: "\n"))
            </busconfig>

            """
        let path = folder + "/session.conf"
        guard let file = fopen(path, "w") else { throw SystemError("fopen", errno: errno) }
        defer { fclose(file) }
        guard fputs(text, file) >= 0 else { throw SystemError("fputs", errno: errno) }
        return path
    }

    var address: String { bus.address }

    /// netactivityd beside the test binary (`swift build` puts both in one folder), or $NETACTIVITYD.
    static let agentBinary: String = {
        if let path = getenv("NETACTIVITYD") { return String(cString: path) }
        let exe = ServiceProcess.executablePath ?? ""
        // The test bundle (.../debug/netactivityPackageTests.xctest) sits beside the executables.
        return String(exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)]) + "/netactivityd"
    }()

    /// Starts the agent and waits until it answers.
    func startAgent(_ extra: [String] = ["--activation-delay", "0", "--completion-delay", "0"]) async throws {
        precondition(
            access(Self.agentBinary, X_OK) == 0,
            "no netactivityd at \(Self.agentBinary): run `swift build` first (make test does)")
        let args = [Self.agentBinary, "--address", address, "--log-level", "warning"] + extra
        let pid = try Children.shared.spawn(args, environment: cacheHome.isEmpty ? [:] : ["XDG_CACHE_HOME": cacheHome])
        agentPID = pid
        let probe = try BlockingNetActivity(address: address)
        // Bounded by time, not by tries: a call to an agent that hangs waits for its reply.
        let deadline = EventLoop.now() + 10_000_000_000
        while EventLoop.now() < deadline {
            if (try? probe.status()) != nil { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw NetActivityError(name: "test.Timeout", message: "the agent did not answer within 10 s of its start")
    }

    /// Sets the downloader's MaximumActiveDownloads with busctl, as a user would; returns busctl's
    /// exit status.
    func setMaximumActiveDownloads(_ n: UInt32) throws -> Int32 {
        let set = try Children.shared.spawn([
            "/usr/bin/busctl", "--address=\(address)", "set-property", NetActivityBus.name, NetActivityBus.objectPath,
            NetActivityInterface.downloader.rawValue, DownloaderMember.Property.maximumActiveDownloads.rawValue, "u",
            String(n),
        ])
        return Children.shared.reap(set, 0)
    }

    /// Kills the bus daemon (SIGKILL: every client loses it at once) and starts a new one at the
    /// same address (use a fixed `listen`).
    func restartBus() throws {
        Children.shared.reap(bus.pid, SIGKILL)
        if listen.hasPrefix("unix:path=") { unlink(String(listen.dropFirst("unix:path=".count))) }
        bus = try PrivateBus(config: "--config-file=" + config, listen: listen)
        Children.shared.add(bus.pid, "dbus-daemon")
    }

    /// A fresh `unix:path=` address in a new temporary folder (no bus listens there yet).
    static func fixedAddress() -> String {
        var template = Array("/tmp/netactivity-bus-XXXXXX".utf8CString)
        return "unix:path=" + String(cString: mkdtemp(&template)!) + "/bus"
    }

    /// Sends `sig` to the agent and reaps it. An agent that had already died of another signal
    /// (a crash nobody asked for), that exits with an error on SIGTERM, or that is still there 10 s
    /// after SIGTERM (then killed), fails the test that owns it: no such fault passes unseen, and
    /// none hangs the run.
    func killAgent(_ sig: Int32 = SIGKILL) {
        guard agentPID > 0 else { return }
        let pid = agentPID
        agentPID = 0
        kill(pid, sig)
        var status: Int32 = 0
        let deadline = EventLoop.now() + 10_000_000_000
        while waitpid(pid, &status, WNOHANG) == 0 {
            guard EventLoop.now() < deadline else {
                Issue.record("netactivityd (pid \(pid)) was still running 10 s after signal \(sig); killed")
                Children.shared.reap(pid, SIGKILL)
                return
            }
            usleep(5_000)
        }
        Children.shared.remove(pid)
        let signal = status & 0x7f  // WTERMSIG; 0 for an exit
        if signal != 0, signal != sig {
            Issue.record("netactivityd (pid \(pid)) had died of signal \(signal)")
        } else if signal == 0, sig == SIGTERM, (status >> 8) & 0xff != 0 {
            Issue.record("netactivityd (pid \(pid)) exited with status \((status >> 8) & 0xff) on SIGTERM")
        }
    }

    /// A second client's view of the agent (a blocking call from outside the library).
    func status() throws -> ActivityStatus {
        try BlockingNetActivity(address: address).status()
    }

    /// Reads a property of an object at the agent with a raw connection.
    func property(_ path: String, _ interface: String, _ name: String) throws -> DBusValue {
        let c = try Connection(address: address)
        defer { c.close() }
        let m = try Message.methodCall(
            destination: "org.example.NetActivity", path: path, interface: "org.freedesktop.DBus.Properties",
            member: "Get")
        var w = m.writer()
        w.append(interface)
        w.append(name)
        var r = try c.call(m, timeoutMilliseconds: 5000).reader()
        return try r.readValue().unwrapped
    }

    /// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
    func eventually(within seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = EventLoop.now() + UInt64(seconds * 1e9)
        while EventLoop.now() < deadline {
            if (try? await condition()) == true { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    deinit {
        killAgent(SIGTERM)
        bus.stop()
        Children.shared.remove(bus.pid)
        for folder in temporaryFolders {
            guard let pid = try? ServiceProcess.spawn(["/bin/rm", "-rf", "--", folder]) else { continue }
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}
