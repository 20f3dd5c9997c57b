// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
public import LinuxKit
public import Logging
import NetActivityContract
import NetActivityCore

/// What every service of the agent shares: time (a `Scheduler`: the event loop, or a manual one in
/// tests), the object server and the sink its replies and signals go to, the peer registry, the
/// accounts of what apps hold, and the log. Services meet here and through narrow protocols, never through each other's state.
public final class AgentContext {
    public let scheduler: any Scheduler
    public let server: ObjectServer
    public let peers: any PeerRegistry
    public let logger: Logger
    public let accounts: AgentAccounts

    /// `fileLimit`: the open-file limit the descriptor budgets are cut from.
    public init(
        scheduler: any Scheduler, server: ObjectServer, peers: any PeerRegistry, logger: Logger,
        fileLimit: UInt64 = 1024
    ) {
        accounts = AgentAccounts(fileLimit: fileLimit)
        self.scheduler = scheduler
        self.server = server
        self.peers = peers
        self.logger = logger
        // Handlers throw the contract's errors; the bus carries their names.
        server.errorMapper = { error in
            (error as? NetActivityError).map { DBusError(name: $0.name, message: $0.message) }
        }
    }

    /// The properties an administrator locked, each with what locked it (`AgentOptions.locks`).
    var locks: [String: String] = [:]

    /// Settings that affect every app (Enabled, the delays, capacities, MaximumActiveDownloads)
    /// are changed by host apps and the settings files only, never by a sandboxed app; one an
    /// administrator locked, by the settings files alone.
    func requireHost(_ sender: String, toSet name: String) throws(NetActivityError) {
        if let lock = locks[name] {
            throw .accessDenied("\(name) is locked by the administrator (\(lock))")
        }
        let caller = peers.identity(of: sender)
        guard !caller.isSandboxed else {
            throw .accessDenied("\(name) affects every app; \(caller.refusedAs) may not change it")
        }
    }

    /// Where signals go.
    public var sink: any MessageSink { server.sink }

    /// Our own unique name: the owner of the agent's own tasks.
    public var uniqueName: String { sink.uniqueName }

    var now: Instant { Instant(nanoseconds: scheduler.nowNanoseconds) }

    func emitPropertiesChanged(
        _ interface: NetActivityInterface, at path: String = NetActivityBus.objectPath, _ names: [String],
        invalidated: [String] = []
    ) {
        guard !names.isEmpty || !invalidated.isEmpty else { return }
        server.emitPropertiesChanged(
            path: path, interface: interface.rawValue, changed: names, invalidated: invalidated)
    }

    @discardableResult
    func schedule(at instant: Instant, _ callback: @escaping () -> Void) -> TimerID {
        scheduler.schedule(atNanoseconds: instant.nanoseconds, callback)
    }

    @discardableResult
    func schedule(after duration: Duration, _ callback: @escaping () -> Void) -> TimerID {
        scheduler.schedule(afterNanoseconds: duration.nanoseconds, callback)
    }
}

/// Checks an `a{sv}` options argument: an unknown key or a wrong type is InvalidArgs naming it,
/// so a typo does not pass silently.
func checkOptions<Option: MethodOption>(_ options: [String: DBusValue], of method: String, _: Option.Type)
    throws(NetActivityError)
{
    for (key, value) in options {
        guard let option = Option(rawValue: key) else {
            let known = Option.allCases.map(\.rawValue).sorted().joined(separator: ", ")
            throw .invalidArgs("Unknown \(method) option '\(key)'; known options: \(known)")
        }
        guard value.signature == option.signature else {
            throw .invalidArgs(
                "\(method) option '\(key)' must have type '\(option.signature)', got '\(value.signature)'")
        }
    }
}

extension AgentContext {
    /// What answers `message` later (a call whose reply waits for a download or a decoder): its
    /// reply, written by `write`, or the error.
    func replyLater<Answer>(
        _ message: Message, _ write: @escaping (Answer, inout MessageWriter) throws -> Void
    ) -> (Result<Answer, NetActivityError>) -> Void {
        { [server] result in
            do {
                try server.respond(to: message) { w in try write(try result.get(), &w) }
            } catch {
                server.replyError(message, thrown: error)
            }
        }
    }
}

extension ClientIdentity {
    /// How a refusal names a caller that is no host app: a sandboxed app, or one not known.
    var refusedAs: String { isUnknown ? "a caller whose app is not known" : "a sandboxed app (\(app))" }
}
