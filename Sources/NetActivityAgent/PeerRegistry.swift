public import DBusKit
import LinuxKit

/// Who is on the bus: each peer's process, and its departure. Services ask it for a client's
/// process name and hear departures through it, in the order they registered.
public protocol PeerRegistry: AnyObject {
    /// The process name of `peer` (`/proc/PID/comm`), delivered once, later (never inside the call);
    /// "" when it cannot be known.
    func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void)
    /// `handler` runs when a peer leaves the bus, after those registered before it.
    func onDeparture(_ handler: @escaping (String) -> Void)
}

/// The registry of a real bus: NameOwnerChanged for departures (only disappearances of unique
/// names, so a busy bus wakes the agent less), GetConnectionUnixProcessID for processes, asked
/// without blocking the loop.
public final class BusPeerRegistry: PeerRegistry {
    private let connection: Connection
    private var departureHandlers: [(String) -> Void] = []
    /// The process names looked up so far, of peers still on the bus (the per-app shares of
    /// "No app can harm another" will key on these).
    private(set) var processNames: [String: String] = [:]

    public init(connection: Connection) {
        self.connection = connection
    }

    /// Subscribes to departures; call before serving.
    public func start() throws(DBusError) {
        try connection.addMatch(SignalMatch.nameOwnerChanged.rule + ",arg2=''")
        connection.onSignal(SignalMatch.nameOwnerChanged) { [unowned self] message in
            guard let change = SignalMatch.nameOwnerChange(message), change.newOwner.isEmpty, change.name.hasPrefix(":")
            else { return }
            self.departed(change.name)
        }
    }

    func departed(_ peer: String) {
        processNames[peer] = nil
        for handler in departureHandlers { handler(peer) }
    }

    public func onDeparture(_ handler: @escaping (String) -> Void) {
        departureHandlers.append(handler)
    }

    public func lookUpProcessName(of peer: String, _ known: @escaping (String) -> Void) {
        connection.busCallAsync("GetConnectionUnixProcessID", timeoutMilliseconds: 5000, { w in w.append(peer) }) {
            [weak self] result in
            guard let self, case .success(let reply) = result else { return }
            var r = reply.reader()
            guard let pid = try? r.read(UInt32.self) else { return }
            let name = ServiceProcess.processName(pid: pid)
            self.processNames[peer] = name
            known(name)
        }
    }
}
