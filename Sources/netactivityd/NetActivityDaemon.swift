import ArgumentParser
import DBusKit
import Glibc
import LinuxKit
import Logging
import NetActivityAgent
import NetActivityContract

/// The agent: owns `org.example.NetActivity` on the session bus and serves it until SIGTERM, SIGINT
/// or the loss of the bus, then exits 0.
@main
struct NetActivityDaemon: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netactivityd",
        abstract: "The netactivity agent: one D-Bus place for network activity on the desktop.")

    @Option(help: "Bus address to use instead of the session bus.")
    var address: String?

    @Flag(help: "Take the bus name over from a running agent.")
    var replace = false

    @Option(help: "Seconds of activity before the indicator shows (0...60).")
    var activationDelay: Double = 1.0

    @Option(help: "Seconds the indicator stays after activity ends (0...60).")
    var completionDelay: Double = 0.17

    @Option(help: "Seconds a completed task stays visible to observers before it leaves (0...3600).")
    var completedTaskLinger: Double = 5.0

    @Option(help: "Bus to follow org.freedesktop.LowMemoryMonitor on (default: the system bus; empty: none).")
    var systemBusAddress: String?

    @Flag(help: "Do not show a tray icon (StatusNotifierItem).")
    var noTray = false

    @Flag(help: "Post a desktop notification when activity stays visible (see --notify-after).")
    var notify = false

    @Option(help: "Seconds of visible activity before --notify posts a notification (0...3600).")
    var notifyAfter: Double = 10

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    @Flag(help: "Fail instead of starting a private bus when there is no session bus.")
    var noPrivateBus = false

    func validate() throws {
        for (flag, value) in [("--activation-delay", activationDelay), ("--completion-delay", completionDelay)] {
            guard value.isFinite, value >= 0, value <= NetActivityLimits.maxDelaySeconds else {
                throw ValidationError("\(flag) must be between 0 and 60 seconds, got \(value)")
            }
        }
        guard completedTaskLinger.isFinite, completedTaskLinger >= 0, completedTaskLinger <= 3600 else {
            throw ValidationError("--completed-task-linger must be between 0 and 3600 seconds, got \(completedTaskLinger)")
        }
        guard notifyAfter.isFinite, notifyAfter >= 0, notifyAfter <= 3600 else {
            throw ValidationError("--notify-after must be between 0 and 3600 seconds, got \(notifyAfter)")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("Unknown log level '\(logLevel)'")
        }
        if let address, address.isEmpty { throw ValidationError("--address must not be empty") }
    }

    func run() throws {
        Connection.makeLibdbusChecksNonFatal()
        let level = Logger.Level(rawValue: logLevel) ?? .notice
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "netactivityd")
        let fileLimit = ServiceProcess.raiseFileLimit()

        let loop = EventLoop()
        var privateBus: PrivateBus?
        defer { privateBus?.stop() }
        var busAddress = address ?? Connection.sessionBusAddress()
        if busAddress == nil {
            guard !noPrivateBus else {
                logger.critical("No session bus (DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus is missing)")
                throw ExitCode(1)
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
            throw ExitCode(1)
        }
        connection.attach(to: loop)

        var options = AgentOptions()
        options.activationDelay = activationDelay
        options.completionDelay = completionDelay
        options.completedTaskLinger = completedTaskLinger
        options.systemBusAddress = systemBusAddress
        options.tray = !noTray
        options.notifyAfter = notify ? notifyAfter : nil
        options.fileLimit = fileLimit
        let agent = Agent(connection: connection, loop: loop, options: options, logger: logger)
        agent.onStop = { loop.stop() }
        try agent.start()

        switch try connection.requestName(NetActivityBus.name, replace: replace, allowReplacement: true) {
        case .primaryOwner, .alreadyOwner:
            break
        case .exists, .inQueue:
            logger.critical("\(NetActivityBus.name) is already owned by another agent on this bus; use --replace to take it over")
            throw ExitCode(1)
        }
        logger.notice("Serving \(NetActivityBus.name) as \(connection.uniqueName) (file limit \(fileLimit))")

        connection.onDisconnect = {
            logger.notice("The bus went away; exiting")
            loop.stop()
        }
        ServiceProcess.onTerminationSignal(loop: loop) { signal in
            logger.notice("Signal \(signal); exiting")
            loop.stop()
        }
        loop.run()
        connection.close()
    }
}
