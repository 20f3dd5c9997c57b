// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc

/// netactivityd's command line, read by hand: the agent stays free of swift-argument-parser and
/// the FoundationEssentials it brings, which every running agent would carry in memory (the idle
/// RSS rows of `make bench`; the `netactivity` CLI uses it).
/// `--name value` and `--name=value`; flags have a `--no-` form where they default on or come
/// from the settings file.
struct DaemonOptions {
    var address: String?
    var replace = false
    var config: String?
    var activationDelay: Double?
    var completionDelay: Double?
    var completedTaskLinger: Double?
    var systemBusAddress: String?
    var tray: Bool?
    var notify: Bool?
    var notifyAfter: Double?
    var logLevel: String?
    var noPrivateBus = false

    enum Parsed {
        case run(DaemonOptions)
        case help
        case version
        case usageError(String)
    }

    static let usage = """
        OVERVIEW: The netactivity agent: one D-Bus place for network activity on the desktop.

        USAGE: netactivityd [<options>]

        OPTIONS:
          --address <address>     Bus address to use instead of the session bus.
          --replace               Take the bus name over from a running agent.
          --config <config>       The user's settings file (default: $XDG_CONFIG_HOME/netactivity/netactivityd.conf;
                                  empty: none), read after the system's. Re-read on SIGHUP.
          --activation-delay <seconds>
                                  Seconds of activity before the indicator shows (0...60; default 1).
          --completion-delay <seconds>
                                  Seconds the indicator stays after activity ends (0...60; default 0.17).
          --completed-task-linger <seconds>
                                  Seconds a completed task stays visible to observers before it leaves
                                  (0...3600; default 5).
          --system-bus-address <address>
                                  Bus to follow LowMemoryMonitor, NetworkManager's Metered,
                                  power-profiles-daemon and logind on (default: the system bus;
                                  empty: none).
          --tray/--no-tray        Show a tray icon (StatusNotifierItem) (default: on).
          --notify/--no-notify    Post a desktop notification when activity stays visible (see
                                  --notify-after; default: off).
          --notify-after <seconds>
                                  Seconds of visible activity before --notify posts a notification
                                  (0...3600; default 10).
          --log-level <level>     Log level: trace, debug, info, notice, warning, error, critical (default:
                                  notice).
          --no-private-bus        Fail instead of starting a private bus when there is no session bus.
          --version               Show the version.
          -h, --help              Show help information.

        The delays, the linger, tray, notify and the log level also come from the settings file; given
        here, they win over it.
        """

    static func parse(_ arguments: [String]) -> Parsed {
        var o = DaemonOptions()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "-h" || argument == "--help" { return .help }
            if argument == "--version" { return .version }
            guard argument.hasPrefix("--") else { return .usageError("Unexpected argument '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            func value() -> String? {
                if let inline { return inline }
                return rest.popFirst()
            }
            /// The value as seconds, or what is wrong with it.
            func seconds() -> (Double?, String?) {
                guard let text = value() else { return (nil, "Missing value for '--\(name) <seconds>'") }
                guard let v = Double(text) else {
                    return (nil, "The value '\(text)' is invalid for '--\(name) <seconds>'")
                }
                return (v, nil)
            }
            func flag() -> Parsed? {
                inline == nil ? nil : .usageError("The flag '--\(name)' takes no value")
            }
            switch name {
            case "address", "config", "system-bus-address", "log-level":
                guard let v = value() else { return .usageError("Missing value for '--\(name)'") }
                switch name {
                case "address": o.address = v
                case "config": o.config = v
                case "system-bus-address": o.systemBusAddress = v
                default: o.logLevel = v
                }
            case "activation-delay", "completion-delay", "completed-task-linger", "notify-after":
                let (v, problem) = seconds()
                guard let v else { return .usageError(problem ?? "") }
                switch name {
                case "activation-delay": o.activationDelay = v
                case "completion-delay": o.completionDelay = v
                case "completed-task-linger": o.completedTaskLinger = v
                default: o.notifyAfter = v
                }
            case "replace", "tray", "no-tray", "notify", "no-notify", "no-private-bus":
                if let refusal = flag() { return refusal }
                switch name {
                case "replace": o.replace = true
                case "tray": o.tray = true
                case "no-tray": o.tray = false
                case "notify": o.notify = true
                case "no-notify": o.notify = false
                default: o.noPrivateBus = true
                }
            default:
                return .usageError("Unknown option '--\(name)'")
            }
        }
        return .run(o)
    }
}
