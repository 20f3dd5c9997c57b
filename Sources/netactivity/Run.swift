import ArgumentParser
import Glibc
import NetActivityClient

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command while holding an activity lease; exit with its status.",
        discussion: """
            The lease ends when the command ends (or when this process dies). If the agent is not \
            running the command still runs, with a warning: the indicator must never stop your work. \
            Exit status: the command's; 128+N if it died of signal N; 127 if it was not found.
            """)

    @OptionGroup var bus: BusOptions

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).")
    var command: [String] = []

    func validate() throws {
        guard !command.drop(while: { $0 == "--" }).isEmpty else { throw ValidationError("Missing command: netactivity run -- CMD [ARGS...]") }
    }

    func run() throws {
        let argvStrings = command.first == "--" ? Array(command.dropFirst()) : command
        var lease: ActivityLease?
        // The client lives until the command ends: the agent ends a lease when its holder's bus
        // connection goes away.
        var client: NetActivityClient?
        defer { withExtendedLifetime(client) {} }
        do {
            client = try NetActivityClient(address: bus.address)
            lease = try client?.beginActivity(reason: argvStrings.joined(separator: " "))
        } catch {
            printError("warning: \(error.description); running the command without a lease")
        }
        let signals = TerminationSignals(includeChild: true)
        let status = spawnAndWait(argvStrings, signals: signals)
        lease?.end()
        throw ExitCode(status)
    }

    /// Spawns the command with default signal handling and waits for it. SIGINT goes to the whole
    /// foreground group from the terminal, so it is not forwarded; SIGTERM and SIGHUP are.
    private func spawnAndWait(_ args: [String], signals: TerminationSignals) -> Int32 {
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
        let rc = posix_spawnp(&pid, args[0], nil, &attr, &argv, environ)
        guard rc == 0 else {
            printError("\(args[0]): \(rc == ENOENT ? "command not found" : String(cString: strerror(rc)))")
            return rc == ENOENT ? 127 : 126
        }
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
