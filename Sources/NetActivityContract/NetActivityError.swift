// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// An error of the contract: a D-Bus error name, a human message, and a typed `code` for the
/// cases an app handles. The agent throws these (the bus carries `name` and `message`), the client
/// library hands them to apps, and `Name` (generated from dbus/*.xml into Names.swift) is the one
/// table of every error name either side uses (in the style of systemd's `bus-common-errors.h`).
public struct NetActivityError: Error, Equatable, Sendable, CustomStringConvertible {
    public let name: String
    public let message: String

    /// What kind of error this is, from its D-Bus name.
    public enum Code: Sendable, Equatable {
        /// The agent is not on the bus (and the bus could not start it).
        case agentNotRunning
        /// The bus connection is gone, or no reply came in time.
        case disconnected
        /// A bad argument; the message names the value (`org.freedesktop.DBus.Error.InvalidArgs`).
        case invalidArguments
        /// A call on another client's task or receipt.
        case accessDenied
        /// A per-client limit; the message names it.
        case limitsExceeded
        /// No such object, task or cache entry.
        case notFound
        /// A task's owner left the bus (`org.example.NetActivity.Error.ClientVanished`).
        case clientVanished
        /// Another `org.example.NetActivity.Error.<Name>`: the name's last part.
        case agent(String)
        /// Anything else.
        case other
    }

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public init(_ name: Name, _ message: String) {
        self.init(name: name.rawValue, message: message)
    }

    public static func invalidArgs(_ message: String) -> NetActivityError { NetActivityError(.invalidArgs, message) }
    public static func accessDenied(_ message: String) -> NetActivityError { NetActivityError(.accessDenied, message) }
    public static func limitsExceeded(_ message: String) -> NetActivityError {
        NetActivityError(.limitsExceeded, message)
    }
    public static func failed(_ message: String) -> NetActivityError { NetActivityError(.failed, message) }

    /// The error's name as one of the contract's, if it is.
    public var knownName: Name? { Name(rawValue: name) }

    public var code: Code {
        switch knownName {
        case .serviceUnknown, .nameHasNoOwner: .agentNotRunning
        case .disconnected, .noReply, .busTimeout, .noServer: .disconnected
        case .invalidArgs: .invalidArguments
        case .accessDenied: .accessDenied
        case .limitsExceeded, .busLimitsExceeded: .limitsExceeded
        case .unknownObject, .notFound: .notFound
        case .clientVanished: .clientVanished
        default:
            name.hasPrefix(Name.agentPrefix) ? .agent(String(name.dropFirst(Name.agentPrefix.count))) : .other
        }
    }

    /// The agent is not on the bus (and the bus could not start it).
    public var isAgentNotRunning: Bool { code == .agentNotRunning }

    /// The library's own messages for "no agent" and "no bus" (the bus's ServiceUnknown says
    /// something else, and is explained by `description`).
    public static let agentNotRunningMessage = "the netactivity agent is not running on this bus"
    public static let noSessionBusMessage =
        "there is no session bus (DBUS_SESSION_BUS_ADDRESS is unset, or the bus has gone), so no netactivity agent"

    public var description: String {
        guard isAgentNotRunning else { return "\(message) (\(name))" }
        if message == Self.agentNotRunningMessage || message == Self.noSessionBusMessage { return message }
        return "\(Self.agentNotRunningMessage) (\(message))"
    }
}
