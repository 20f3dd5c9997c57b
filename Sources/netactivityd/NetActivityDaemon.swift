// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Logging
import NetActivityAgent
import NetActivityContract

/// The agent: owns `org.example.NetActivity` on the session bus and serves it until SIGTERM, SIGINT
/// or the loss of the bus, then exits 0.
@main
struct NetActivityDaemon {
    let options: DaemonOptions
    var address: String? { options.address }
    var replace: Bool { options.replace }
    var config: String? { options.config }
    var systemBusAddress: String? { options.systemBusAddress }
    var noPrivateBus: Bool { options.noPrivateBus }

    /// A failure already reported in the log: exits with `code`.
    struct Exit: Error {
        let code: Int32
    }

    static func main() {
        Localization.start()
        let options: DaemonOptions
        switch DaemonOptions.parse(Array(CommandLine.arguments.dropFirst())) {
        case .help:
            print(DaemonOptions.usage)
            exit(0)
        case .version:
            print(NetActivityRelease.version)
            exit(0)
        case .usageError(let message):
            fail(message, code: 64)
        case .run(let parsed):
            options = parsed
        }
        let daemon = NetActivityDaemon(options: options)
        if let problem = daemon.validate() { fail(problem, code: 64) }
        do {
            try daemon.run()
        } catch let error as Exit {
            exit(error.code)
        } catch {
            fail("\(error)", code: 1)
        }
        exit(0)
    }

    static func fail(_ message: String, code: Int32) -> Never {
        var text = "Error: \(message)\n"
        if code == 64 { text += "Usage: netactivityd [<options>]\n  See 'netactivityd --help' for more information.\n" }
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(code)
    }

    /// What is wrong with the command line's values, if anything.
    func validate() -> String? {
        var settings = Settings()
        if let problem = commandLine(over: &settings) { return problem }
        if let address, address.isEmpty { return "--address must not be empty" }
        return nil
    }

    /// Applies the options given on the command line over `settings`; returns the first bad one.
    /// A key an administrator `locked` keeps the files' value (said in `ignored`).
    private func commandLine(
        over settings: inout Settings, locked: [String: String] = [:], ignored: inout [String]
    ) -> String? {
        let o = options
        let given: [(String, String?)] = [
            ("activation-delay", o.activationDelay.map { "\($0)" }),
            ("completion-delay", o.completionDelay.map { "\($0)" }),
            ("completed-task-linger", o.completedTaskLinger.map { "\($0)" }), ("tray", o.tray.map { "\($0)" }),
            ("notify", o.notify.map { "\($0)" }), ("notify-after", o.notifyAfter.map { "\($0)" }),
            ("log-level", o.logLevel),
        ]
        for case let (key, value?) in given {
            if let by = locked[key] {
                ignored.append("--\(key) is locked by \(by); the file's value stays")
                continue
            }
            if let problem = settings.set(key, value) { return "--\(problem)" }
        }
        return nil
    }

    private func commandLine(over settings: inout Settings) -> String? {
        var ignored: [String] = []
        return commandLine(over: &settings, ignored: &ignored)
    }

    /// The system's files and the user's (if any), with the command line over them, and what was
    /// wrong with them; nil settings when a file exists but cannot be used (the settings in force
    /// then stay). `--config` names the user's file; the system's are read either way.
    private func loadSettings() -> Settings.Loaded {
        let path = config.map { $0.isEmpty ? nil : $0 } ?? Settings.defaultPath()
        var loaded = Settings.load(
            system: Settings.systemPaths().map { ($0, Settings.readFile($0)) },
            user: path.map { ($0, Settings.readFile($0)) })
        if var settings = loaded.settings {
            var ignored: [String] = []
            _ = commandLine(over: &settings, locked: loaded.locks, ignored: &ignored)
            loaded.problems += ignored.map { ("the command line", $0) }
            loaded.settings = settings
        }
        return loaded
    }

    /// The locked keys as the agent takes them: each property a key sets, with the lock's words.
    private static func lockedProperties(_ locks: [String: String]) -> [String: String] {
        var properties: [String: String] = [:]
        for (key, path) in locks {
            if let property = Settings.properties[key] { properties[property] = "\(key) in \(path)" }
        }
        return properties
    }

    /// How long the agent does nothing before it gives back what it does not need to wait:
    /// 10 s, or NETACTIVITY_QUIET_SECONDS.
    static var quietNanoseconds: UInt64 {
        let given = getenv("NETACTIVITY_QUIET_SECONDS").flatMap { Double(String(cString: $0)) }
        guard let given, given.isFinite, given > 0, given < 86400 else { return 10_000_000_000 }
        return UInt64(given * 1e9)
    }

    func run() throws {
        Connection.makeLibdbusChecksNonFatal()
        let loaded = loadSettings()
        var settings =
            loaded.settings
            ?? {
                var s = Settings()
                _ = commandLine(over: &s)
                return s
            }()
        let level = Logger.Level(rawValue: settings.logLevel) ?? .notice
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "netactivityd")
        for (path, problem) in loaded.problems { logger.warning("\(path): \(problem) (skipped)") }
        let fileLimit = ServiceProcess.raiseFileLimit()

        let loop = EventLoop()
        var privateBus: PrivateBus?
        defer { privateBus?.stop() }
        var busAddress = address ?? Connection.sessionBusAddress()
        if busAddress == nil {
            guard !noPrivateBus else {
                logger.critical(
                    "No session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing)")
                throw Exit(code: 1)
            }
            let bus = try PrivateBus()
            privateBus = bus
            busAddress = bus.address
            // For scripts: `eval "$(netactivityd | head -n1)"`-style use, and for humans.
            print("DBUS_SESSION_BUS_ADDRESS=\(bus.address)")
            fflush(nil)
            logger.notice("No session bus: started a private one at \(bus.address)")
        }

        let connection: Connection
        do {
            connection = try Connection(address: busAddress)
        } catch {
            logger.critical("Cannot connect to the bus at \(busAddress ?? ""): \(error.message)")
            throw Exit(code: 1)
        }
        connection.attach(to: loop)

        var options = AgentOptions()
        settings.agentOptions(into: &options)
        options.locks = Self.lockedProperties(loaded.locks)
        options.systemBusAddress = systemBusAddress
        options.fileLimit = fileLimit
        let agent = Agent(connection: connection, loop: loop, options: options, logger: logger)
        agent.onStop = { loop.stop() }
        // Signals are taken (blocked, read through a signalfd) before the name is owned: a SIGTERM
        // that comes between the two must not kill the agent by the default action.
        var nextReload: UInt64 = 0
        var reloadPending = false
        ServiceProcess.onTerminationSignal(loop: loop) { signal in
            guard signal == SIGHUP else {
                logger.notice("Signal \(signal); exiting")
                return loop.stop()
            }
            // SIGHUP: the settings file again (the command line still wins over it). A storm of
            // them costs one reading per 100 ms at most (signals that come meanwhile are one).
            let now = loop.nowNanoseconds
            guard now >= nextReload else {
                if !reloadPending {
                    reloadPending = true
                    _ = loop.schedule(atNanoseconds: nextReload) {
                        reloadPending = false
                        reload()
                    }
                }
                return
            }
            reload()
        }
        func reload() {
            nextReload = loop.nowNanoseconds + 100_000_000
            let loaded = loadSettings()
            for (path, problem) in loaded.problems { logger.warning("\(path): \(problem) (skipped)") }
            guard let reloaded = loaded.settings, !loaded.userFileUnusable else { return }
            if reloaded.logLevel != settings.logLevel { logger.notice("log-level takes effect at the next start") }
            if reloaded.completedTaskLinger != settings.completedTaskLinger {
                logger.notice("completed-task-linger takes effect at the next start")
            }
            settings = reloaded
            var options = options
            reloaded.agentOptions(into: &options)
            options.locks = Self.lockedProperties(loaded.locks)
            agent.reconfigure(options)
            logger.notice("Reloaded the settings")
        }
        try agent.start()

        switch try connection.requestName(NetActivityBus.name, replace: replace, allowReplacement: true) {
        case .primaryOwner, .alreadyOwner:
            break
        case .exists, .inQueue:
            logger.critical(
                "\(NetActivityBus.name) is already owned by another agent on this bus; use --replace to take it over")
            throw Exit(code: 1)
        }
        logger.notice("Serving \(NetActivityBus.name) as \(connection.uniqueName) (file limit \(fileLimit))")

        connection.onDisconnect = {
            logger.notice("The bus went away; exiting")
            loop.stop()
        }
        // After start-up, and after each spell of work, an agent with nothing to do for a while
        // lets go of the code it ran and of malloc's free pages: idle, it maps what waiting takes.
        loop.onQuiet(after: Self.quietNanoseconds) { IdleMemory.release() }
        loop.run()
        connection.close()
        // Disk writes under way finish (the image files are a cache: a cut one is never used).
        agent.downloads.finishDiskWrites(milliseconds: 2000)
    }
}
