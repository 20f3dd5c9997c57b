import DBusKit
import Logging

/// What the system says about the cost of downloading now, from the system bus; each source is
/// optional, and one that is absent (or leaves) counts as "no":
///
/// - NetworkManager's `Metered` (`org.freedesktop.NetworkManager`, u): 1 (yes) and 3 (guessed
///   yes) are metered; 0 (unknown), 2 (no) and 4 (guessed no) are not.
/// - power-profiles-daemon's `ActiveProfile` (`org.freedesktop.UPower.PowerProfiles`, s):
///   `power-saver` or not.
///
/// Each is read with Get when its name gets an owner (and at start), and followed through
/// PropertiesChanged; nothing is polled.
final class SystemConditions {
    struct State: Equatable {
        var metered = false
        var powerSaver = false
    }

    private struct Source: Sendable {
        let name: String
        let path: String
        let interface: String
        let property: String
        let read: @Sendable (DBusValue, inout State) -> Void
        let absent: @Sendable (inout State) -> Void
    }

    private static let sources = [
        Source(
            name: "org.freedesktop.NetworkManager", path: "/org/freedesktop/NetworkManager",
            interface: "org.freedesktop.NetworkManager", property: "Metered",
            read: { value, state in state.metered = value.uint32Value.map { $0 == 1 || $0 == 3 } ?? false },
            absent: { $0.metered = false }),
        Source(
            name: "org.freedesktop.UPower.PowerProfiles", path: "/org/freedesktop/UPower/PowerProfiles",
            interface: "org.freedesktop.UPower.PowerProfiles", property: "ActiveProfile",
            read: { value, state in state.powerSaver = value.stringValue == "power-saver" },
            absent: { $0.powerSaver = false }),
    ]

    private let bus: Connection
    private let logger: Logger
    private let onChange: (State) -> Void
    private(set) var state = State()

    init(bus: Connection, logger: Logger, onChange: @escaping (State) -> Void) {
        self.bus = bus
        self.logger = logger
        self.onChange = onChange
    }

    /// Subscribes (without waiting for the bus) and asks for the current values.
    func start() {
        for source in Self.sources {
            let changed = SignalMatch(
                sender: source.name, path: source.path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")
            bus.addMatchWithoutWaiting(changed.rule + ",arg0='\(source.interface)'")
            // Messages carry the owner's unique name, not the well-known one.
            bus.onSignal(SignalMatch(path: source.path, interface: changed.interface, member: changed.member)) { [unowned self] message in
                var r = message.reader()
                guard let interface = try? r.read(String.self), interface == source.interface,
                      let changed = try? r.readVardict()
                else { return }
                if let value = changed[source.property] {
                    update { source.read(value, &$0) }
                } else if case .array(_, let invalidated)? = try? r.readValue(),
                          invalidated.contains(where: { $0.stringValue == source.property }) {
                    ask(source)
                }
            }
            let owner = SignalMatch(
                sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
            bus.addMatchWithoutWaiting(owner.rule + ",arg0='\(source.name)'")
            bus.onSignal(owner) { [unowned self] message in
                var r = message.reader()
                guard let name = try? r.read(String.self), name == source.name, (try? r.read(String.self)) != nil,
                      let newOwner = try? r.read(String.self)
                else { return }
                if newOwner.isEmpty { update(source.absent) } else { ask(source) }
            }
            ask(source)
        }
    }

    private func ask(_ source: Source) {
        guard let call = try? Message.methodCall(
            destination: source.name, path: source.path, interface: "org.freedesktop.DBus.Properties", member: "Get")
        else { return }
        var w = call.writer()
        w.append(source.interface)
        w.append(source.property)
        bus.callAsync(call, timeoutMilliseconds: 5_000) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let reply):
                var r = reply.reader()
                guard let value = try? r.readValue().unwrapped else { return }
                update { source.read(value, &$0) }
            case .failure(let error):
                logger.debug("No \(source.property) from \(source.name): \(error.message)")
                update(source.absent)
            }
        }
    }

    private func update(_ change: (inout State) -> Void) {
        var next = state
        change(&next)
        guard next != state else { return }
        state = next
        logger.info("System conditions: metered \(next.metered), power-saver \(next.powerSaver)")
        onChange(next)
    }
}
