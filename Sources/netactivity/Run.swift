// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import ArgumentParser
import Dispatch
import Glibc
import LinuxKit
import NetActivityClient
import NetActivityContract
import Synchronization

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: tr("Run a command while holding an activity lease (or as a task); exit with its status."),
        discussion: tr(
            "The lease ends when the command ends (or when this process dies). If the agent is not running the command still runs, with a warning: the indicator must never stop your work. Exit status: the command's; 128+N if it died of signal N; 127 if it was not found.\n\nWith --task, the command is a task that panels list and docks draw on the app's icon (--desktop-id): it completes when the command exits, with an error unless the status is 0. With --progress-from, lines of the command's stdout or stderr that are a percentage (\"42\", \"42.5%\", as `pv -n` prints) or \"DONE/TOTAL\" bytes set its progress and are not shown; other lines pass through. Example: netactivity run --task backup --desktop-id org.example.Backup.desktop --progress-from stderr -- sh -c 'pv -n big.tar > /mnt/backup/big.tar'"
        ))

    enum Stream: String, ExpressibleByArgument, CaseIterable {
        case stdout, stderr
        var fd: Int32 { self == .stdout ? 1 : 2 }
    }

    @OptionGroup var bus: BusOptions

    @Option(help: ArgumentHelp(tr("Publish the command as a task with this description (instead of a lease).")))
    var task: String?

    @Option(
        name: .customLong("desktop-id"), help: ArgumentHelp(tr("The app's desktop file name, for docks (with --task)."))
    )
    var desktopID: String?

    @Flag(
        help: ArgumentHelp(
            tr("Panels may cancel the task (with --task): the command gets SIGTERM, and the task ends cancelled.")))
    var cancellable = false

    @Flag(
        help: ArgumentHelp(
            tr("Panels may pause and resume the task (with --task): the command gets SIGSTOP, then SIGCONT.")))
    var suspendable = false

    @Option(
        name: .customLong("progress-from"),
        help: ArgumentHelp(tr("Read the task's progress from the command's stdout or stderr (with --task).")))
    var progressFrom: Stream?

    // Everything from the first word that is not one of our options is the command's, options
    // included; `--help` there (before any command) is ours, not a command.
    @Argument(parsing: .captureForPassthrough, help: ArgumentHelp(tr("The command and its arguments (after --).")))
    var command: [String] = []

    func validate() throws {
        if let first = command.first, first == "--help" || first == "-h" { throw CleanExit.helpRequest(self) }
        guard !command.drop(while: { $0 == "--" }).isEmpty else {
            throw ValidationError("Missing command: netactivity run -- CMD [ARGS...]")
        }
        if task == nil, desktopID != nil || progressFrom != nil || cancellable || suspendable {
            throw ValidationError(
                "--desktop-id, --progress-from, --cancellable and --suspendable need --task DESCRIPTION")
        }
    }

    func run() throws {
        let argvStrings = command.first == "--" ? Array(command.dropFirst()) : command
        // Before the task or lease exists: a SIGTERM from then on is passed to the command and
        // reported in the task, never the end of `run` itself. (The library's threads, started
        // below, inherit the blocked set.)
        let signals = TerminationSignals(includeChild: true)
        // The library's never-failing core, as apps use it: the lease or task is held here and
        // asserted at whichever agent runs, for as long as the command runs. An agent that
        // restarts (or is started by D-Bus activation, which the library asks for when the agent
        // leaves while something is held) gets it again; the agent ends it when this process dies.
        let activity = blocking { await NetActivity.connect(address: bus.address) }
        defer { activity.close() }
        var lease: NetActivityLease?
        var published: NetActivityTask?
        let (desktopID, cancellable, suspendable) = (self.desktopID, self.cancellable, self.suspendable)
        do {
            if let task {
                published = try blocking { () async throws(NetActivityError) in
                    try await activity.beginTask(
                        task, desktopID: desktopID, cancellable: cancellable, suspendable: suspendable)
                }.get()
            } else {
                let reason = argvStrings.joined(separator: " ")
                lease = try blocking { () async throws(NetActivityError) in
                    try await activity.beginActivity(reason: reason)
                }.get()
            }
        } catch {
            printError(
                task == nil
                    ? tr("warning: {1}; running the command without a lease", error.description)
                    : tr("warning: {1}; running the command without a task", error.description))
        }
        if lease != nil || published != nil, !blocking({ await activity.waitForAgent(timeout: .seconds(2)) }) {
            printError(
                task == nil
                    ? tr("warning: the netactivity agent is not running; the lease reaches it if it starts")
                    : tr("warning: the netactivity agent is not running; the task reaches it if it starts"))
        }
        var reader: ProgressReader?
        if let progressFrom {
            reader = ProgressReader(passThroughTo: progressFrom.fd, task: published)
            if reader == nil {
                printError(tr("warning: could not read progress: {1}", String(cString: strerror(errno))))
            }
        }
        let requests = PanelRequests()
        let status = spawnAndWait(
            argvStrings, signals: signals, progress: reader.map { ($0.writeEnd, progressFrom!.fd) },
            spawned: { pid in if let published, cancellable || suspendable { requests.follow(published, command: pid) }
            })
        requests.settle()
        reader?.finish()
        lease?.end()
        if let published {
            let error: String =
                switch status {
                case _ where requests.cancelled.load(ordering: .acquiring): NetActivityError.Name.cancelled.rawValue
                case 0: ""
                case 127: "command not found: \(argvStrings[0])"
                case 129...: "killed by signal \(status - 128)"
                default: "exit status \(status)"
                }
            _ = blocking { () async throws(NetActivityError) in try await published.complete(error: error) }
        }
        // What ended reaches the agent before this connection closes (at once with no agent).
        blocking { await activity.settled() }
        throw ExitCode(status)
    }

    /// Spawns the command with default signal handling and waits for it. SIGINT goes to the whole
    /// foreground group from the terminal, so it is not forwarded; SIGTERM and SIGHUP are.
    private func spawnAndWait(
        _ args: [String], signals: TerminationSignals, progress: (fd: Int32, as: Int32)?, spawned: (pid_t) -> Void
    ) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The pipe is close-on-exec: only the copy at `as` reaches the command. When the pipe
        // already sits at `as`, the flag is cleared on that descriptor instead (a dup2 onto itself
        // would keep it).
        if let progress {
            if progress.fd == progress.as {
                _ = fcntl(progress.fd, F_SETFD, 0)
            } else {
                posix_spawn_file_actions_adddup2(&actions, progress.fd, progress.as)
            }
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = signals.mask
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, args[0], &actions, &attr, &argv, environ)
        if let progress { close(progress.fd) }  // the child has it; EOF when it (and its children) exit
        guard rc == 0 else {
            printError("\(args[0]): \(rc == ENOENT ? tr("command not found") : String(cString: strerror(rc)))")
            return rc == ENOENT ? 127 : 126
        }
        spawned(pid)
        while true {
            var status: Int32 = 0
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid {
                let sig = status & 0x7f
                return sig == 0 ? (status >> 8) & 0xff : 128 + sig
            }
            let sig = signals.wait()
            if sig == SIGTERM || sig == SIGHUP { kill(pid, sig) }
        }
    }
}

/// What panels ask of `run --task`'s task, done to the command: a cancel is SIGCONT then SIGTERM
/// (a paused command runs again to end; the task ends cancelled), a pause SIGSTOP and a resume
/// SIGCONT, each to the command and everything it started (as a terminal's job control signals a
/// whole job), and the task suspends and resumes with it.
final class PanelRequests: Sendable {
    let cancelled = Atomic<Bool>(false)
    /// Held while a request's signals go out. A cancel's SIGTERM ends the command before it
    /// reaches the command's children; `run` takes this before it ends (`settle()`), or its
    /// exit would cut the rest short and leave them running.
    private let signalling = Mutex(())

    func follow(_ task: NetActivityTask, command pid: pid_t) {
        Task.detached { [self] in
            for await request in task.requests {
                switch request {
                case .cancel:
                    cancelled.store(true, ordering: .releasing)
                    // A paused command runs again first: a stopped one would keep its SIGTERM pending.
                    signalling.withLock { _ in Self.signal(pid, SIGCONT, SIGTERM) }
                case .suspend:
                    signalling.withLock { _ in Self.signal(pid, SIGSTOP) }
                    try? await task.suspend()
                case .resume:
                    signalling.withLock { _ in Self.signal(pid, SIGCONT) }
                    try? await task.resume()
                }
            }
        }
    }

    /// Returns once no request's signals are going out.
    func settle() { signalling.withLock { _ in } }

    /// `signals` to `pid` and its descendants: the first as the tree is walked, the command first
    /// and then each generation as /proc shows it (a stopped parent starts no more), the others
    /// after it to the same processes.
    static func signal(_ pid: pid_t, _ signals: Int32...) {
        var tree = [pid]
        var generation = [pid]
        var seen: Set<pid_t> = [pid]
        kill(pid, signals[0])
        while !generation.isEmpty {
            let parents = Set(generation)
            generation = Self.processes().filter { parents.contains($0.parent) && seen.insert($0.pid).inserted }.map(
                \.pid)
            for p in generation { kill(p, signals[0]) }
            tree += generation
        }
        for sig in signals.dropFirst() {
            for p in tree { kill(p, sig) }
        }
    }

    /// Every process's pid and parent, from /proc/PID/stat.
    private static func processes() -> [(pid: pid_t, parent: pid_t)] {
        guard let dir = opendir("/proc") else { return [] }
        defer { closedir(dir) }
        var out: [(pid_t, pid_t)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = pid_t(name) else { continue }
            let fd = open("/proc/\(name)/stat", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard n > 0 else { continue }
            // "PID (COMM) STATE PPID ...": the command name may hold spaces and ')', so after the last ')'.
            let text = String(decoding: buffer[..<n], as: UTF8.self)
            guard let close = text.lastIndex(of: ")") else { continue }
            let fields = text[text.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = pid_t(fields[1]) { out.append((pid, parent)) }
        }
        return out
    }
}

/// Reads a command's output on a thread of its own: lines that are a percentage ("42", "42.5%")
/// or "DONE/TOTAL" set the task's progress, the rest is written through unchanged. The thread is
/// the only user of the client while the command runs.
final class ProgressReader: @unchecked Sendable {
    let writeEnd: Int32
    private let readEnd: Int32
    private let passThrough: Int32
    private let task: NetActivityTask?
    private var thread = pthread_t()
    private var received: UInt64 = 0

    init?(passThroughTo fd: Int32, task: NetActivityTask?) {
        // Close-on-exec: only the command's dup of the write end reaches it (nothing else spawns
        // while the pipe is made).
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readEnd = fds[0]
        writeEnd = fds[1]
        passThrough = fd
        self.task = task
        let me = Unmanaged.passRetained(self).toOpaque()
        guard
            pthread_create(
                &thread, nil,
                { raw in
                    let reader = Unmanaged<ProgressReader>.fromOpaque(raw!).takeRetainedValue()
                    reader.pump()
                    return nil
                }, me) == 0
        else {
            Unmanaged<ProgressReader>.fromOpaque(me).release()
            close(readEnd)
            close(writeEnd)
            return nil
        }
    }

    /// Waits until the command's side of the pipe is closed (the command and anything it left
    /// running with the descriptor have exited) and every line is handled.
    func finish() {
        pthread_join(thread, nil)
        close(readEnd)
    }

    private func pump() {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            pending += buffer[0..<n]
            while let newline = pending.firstIndex(of: 10) {
                handle(Array(pending[...newline]))
                pending.removeSubrange(...newline)
            }
            // A progress line never gets this long; pass anything longer through as it is.
            if pending.count > 65536 {
                writeThrough(pending)
                pending = []
            }
        }
        if !pending.isEmpty { handle(pending) }
    }

    private func handle(_ line: [UInt8]) {
        guard let progress = Self.parse(String(decoding: line, as: UTF8.self)) else { return writeThrough(line) }
        guard let task else { return }
        // The library answers at once (the agent hears the latest values without anyone waiting),
        // so each line is applied in order before the next is read.
        switch progress {
        case .fraction(let fraction):
            _ = blocking { () async throws(NetActivityError) in try await task.setFraction(fraction) }
        case .bytes(let done, let total):
            guard done >= received else { return }
            received = done
            _ = blocking { () async throws(NetActivityError) in
                try await task.setProgress(received: done, expectedToReceive: total)
            }
        }
    }

    private func writeThrough(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { write(passThrough, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            off += n
        }
    }

    /// A line of progress: a percentage (no sizes: the task's fraction) or bytes of a known total.
    enum Progress: Equatable {
        case fraction(Double)
        case bytes(done: UInt64, total: UInt64)
    }

    /// "42", "42.5%", " 7 " (a percentage) or "DONE/TOTAL" (bytes); nil otherwise.
    static func parse(_ line: String) -> Progress? {
        let text = trimmed(Substring(line))
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 2, let done = UInt64(trimmed(parts[0])), let total = UInt64(trimmed(parts[1])), done <= total
        {
            return .bytes(done: done, total: total)
        }
        let number = text.hasSuffix("%") ? trimmed(text.dropLast()) : text
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let percent = Double(number), percent >= 0, percent <= 100
        else { return nil }
        return .fraction(percent / 100)
    }

    private static func trimmed(_ s: Substring) -> Substring {
        let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = s.firstIndex(where: { !space($0) }), let last = s.lastIndex(where: { !space($0) }) else {
            return ""
        }
        return s[first...last]
    }
}

/// Runs `body` to its end from synchronous code (the command's own threads, never a Swift task):
/// the library's async API for a command that waits on signals and child processes.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: T?
    Task.detached {
        result = await body()
        done.signal()
    }
    done.wait()
    return result!
}

/// The same for a body that throws: its outcome.
func blocking<T: Sendable, E: Error>(_ body: @escaping @Sendable () async throws(E) -> T) -> Result<T, E> {
    blocking { () async -> Result<T, E> in
        do throws(E) {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}
