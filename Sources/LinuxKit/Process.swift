// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CLinux
import Glibc

/// Process-level set-up for a long-running bus service.
public enum ServiceProcess {
    /// Raises the soft open-file limit to the hard one (leases are file descriptors).
    @discardableResult
    public static func raiseFileLimit() -> UInt64 {
        var rl = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return 0 }
        if rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)
        }
        return UInt64(rl.rlim_cur)
    }

    /// Spawn attributes that give a child an empty signal mask and default handlers. Without
    /// them a child inherits the spawning thread's mask: spawned from a thread that blocks
    /// SIGTERM (ours after `onTerminationSignal`, or a libdispatch worker), it could not be stopped.
    static func defaultSignalsSpawnAttributes() -> posix_spawnattr_t {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGXFSZ] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return attr
    }

    /// This process's executable (`/proc/self/exe`, links resolved), or nil when it cannot be read.
    public static var executablePath: String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The prefix this executable runs from: the folder above its own (`/usr` for `/usr/bin/netactivityd`).
    public static var installPrefix: String? {
        guard let exe = executablePath else { return nil }
        let bin = exe[..<(exe.lastIndex(of: "/") ?? exe.startIndex)]
        return String(bin[..<(bin.lastIndex(of: "/") ?? bin.startIndex)])
    }

    /// The kernel's short name of process `pid` (`/proc/<pid>/comm`), or "" when it cannot be read.
    public static func processName(pid: UInt32) -> String {
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 64)
        let n = read(fd, &buf, buf.count)
        guard n > 0 else { return "" }
        var bytes = buf[0..<n]
        while bytes.last == 10 { bytes = bytes.dropLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Starts `arguments[0]` (a path) with `arguments`, the current environment with `environment`'s
    /// variables set (never through setenv: another thread may be reading the environment), an
    /// empty signal mask and default signal handlers; returns its pid.
    /// `standardInput`: a descriptor the child gets as its standard input (else it shares ours).
    public static func spawn(
        _ arguments: [String], environment: [String: String] = [:], standardInput: Int32? = nil
    ) throws(SystemError) -> Int32 {
        var attr = defaultSignalsSpawnAttributes()
        defer { posix_spawnattr_destroy(&attr) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardInput { posix_spawn_file_actions_adddup2(&actions, standardInput, 0) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var envp: [UnsafeMutablePointer<CChar>?] = []
        if !environment.isEmpty {
            var entry = environ
            while let p = entry.pointee {
                let name = String(cString: p).prefix { $0 != "=" }
                if environment[String(name)] == nil { envp.append(strdup(p)) }
                entry += 1
            }
            for (name, value) in environment { envp.append(strdup(name + "=" + value)) }
            envp.append(nil)
        }
        defer { for p in envp { free(p) } }
        var pid: pid_t = 0
        let rc =
            envp.isEmpty
            ? posix_spawn(&pid, arguments[0], &actions, &attr, &argv, environ)
            : posix_spawn(&pid, arguments[0], &actions, &attr, &argv, &envp)
        guard rc == 0 else { throw SystemError("Could not start \(arguments[0])", errno: rc) }
        return pid
    }

    /// Blocks SIGTERM, SIGINT and SIGHUP, ignores SIGPIPE and SIGXFSZ, and calls `handler` from the loop
    /// when one of the three arrives (through a signalfd, so no code runs in signal context).
    public static func onTerminationSignal(loop: EventLoop, _ handler: @escaping (Int32) -> Void) {
        let fd = clinux_block_signals_signalfd()
        guard fd >= 0 else { return }
        loop.watch(fd: fd, events: EventLoop.readable) { _ in
            var info = signalfd_siginfo()
            while withUnsafeMutableBytes(of: &info, { read(fd, $0.baseAddress, $0.count) })
                == MemoryLayout<signalfd_siginfo>.size
            {
                handler(Int32(info.ssi_signo))
            }
        }
    }
}

/// A `dbus-daemon --session` of our own, for machines with no session bus (and for tests).
public final class PrivateBus {
    public let address: String
    public let pid: Int32

    /// Starts `dbus-daemon --session --nofork` listening on `listen` (by default a socket in a
    /// temporary directory) and waits for its address.
    public init(config: String = "--session", listen: String = "unix:tmpdir=/tmp") throws(SystemError) {
        // Both ends close-on-exec from the start: tests start daemons from many threads at once,
        // and a child spawned by another thread must not keep this pipe open. The write end is
        // moved above 3 so that the child's dup2 onto 3 is a real copy (a dup2 of 3 onto itself
        // would keep close-on-exec); the read end closes in the child by itself (an explicit
        // close could hit the 3 just made, when the read end was 3).
        guard let (readEnd, pipeWrite) = makeCloseOnExecPipe() else { throw SystemError("pipe", errno: errno) }
        let writeEnd = fcntl(pipeWrite, F_DUPFD_CLOEXEC, 4)
        close(pipeWrite)
        guard writeEnd >= 0 else {
            close(readEnd)
            throw SystemError("fcntl", errno: errno)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 3)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let args = ["dbus-daemon", config, "--nofork", "--nopidfile", "--address=" + listen, "--print-address=3"]
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var attr = ServiceProcess.defaultSignalsSpawnAttributes()
        defer { posix_spawnattr_destroy(&attr) }
        var child: pid_t = 0
        let rc = posix_spawnp(&child, "dbus-daemon", &actions, &attr, &argv, environ)
        close(writeEnd)
        guard rc == 0 else {
            close(readEnd)
            throw SystemError("Could not start dbus-daemon", errno: rc)
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(readEnd, &byte, 1)
            if n < 0, errno == EINTR { continue }
            guard n == 1, byte != 10 else { break }
            line.append(byte)
        }
        close(readEnd)
        guard !line.isEmpty else {
            kill(child, SIGTERM)
            var status: Int32 = 0
            waitpid(child, &status, 0)
            throw SystemError("dbus-daemon did not print its address")
        }
        pid = child
        address = String(decoding: line, as: UTF8.self)
    }

    /// Stops the daemon.
    public func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

/// The calling thread's name as `top -H`, `ps -L` and debuggers show it (cut to 15 bytes).
public func setCurrentThreadName(_ name: String) {
    _ = clinux_set_thread_name(name)
}
