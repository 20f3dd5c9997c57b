import DBusKit

/// An error from the agent or the bus, with the D-Bus error name it came as and a typed `code`
/// for the cases an app handles.
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

    init(_ e: DBusError) {
        self.init(name: e.name, message: e.message)
    }

    static func invalidArguments(_ message: String) -> NetActivityError {
        NetActivityError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }

    static let agentPrefix = "org.example.NetActivity.Error."

    public var code: Code {
        switch name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            .agentNotRunning
        case "org.freedesktop.DBus.Error.Disconnected", "org.freedesktop.DBus.Error.NoReply",
             "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.NoServer":
            .disconnected
        case "org.freedesktop.DBus.Error.InvalidArgs": .invalidArguments
        case "org.freedesktop.DBus.Error.AccessDenied": .accessDenied
        case "org.freedesktop.DBus.Error.LimitsExceeded": .limitsExceeded
        case "org.freedesktop.DBus.Error.UnknownObject", Self.agentPrefix + "NotFound": .notFound
        case Self.agentPrefix + "ClientVanished": .clientVanished
        default:
            name.hasPrefix(Self.agentPrefix) ? .agent(String(name.dropFirst(Self.agentPrefix.count))) : .other
        }
    }

    /// The agent is not on the bus (and the bus could not start it).
    public var isAgentNotRunning: Bool { code == .agentNotRunning }

    public var description: String {
        isAgentNotRunning
            ? "the netactivity agent is not running on this bus (start it with `netactivityd` or `make run`)"
            : "\(message) (\(name))"
    }
}
