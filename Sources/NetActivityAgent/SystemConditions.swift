// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Logging

/// What the system says about the cost of downloading now, from the system bus; each source is
/// optional, and one that is absent (or leaves) counts as "no":
///
/// - NetworkManager's `Metered` (`org.freedesktop.NetworkManager`, u): 1 (yes) and 3 (guessed
///   yes) are metered; 0 (unknown), 2 (no) and 4 (guessed no) are not.
/// - power-profiles-daemon's `ActiveProfile` (`org.freedesktop.UPower.PowerProfiles`, s):
///   `power-saver` or not.
///
/// Each is read with Get when its name has an owner (at start) or gets one, and followed through
/// PropertiesChanged; nothing is polled.
///
/// And logind (`org.freedesktop.login1`): `PrepareForSleep(b)` says when the system is about to
/// sleep and when it woke, and while transfers run a "delay" inhibitor for sleep gives them the
/// moment to stop cleanly (`holdSleep`).
final class SystemConditions {
    struct State: Equatable {
        var metered = false
        var powerSaver = false
        /// NetworkManager says there is no network (asleep, disconnected, disconnecting).
        var offline = false
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
        // NM_STATE_ASLEEP 10, DISCONNECTED 20, DISCONNECTING 30; unknown (0) and connecting or
        // connected (40 and up) are not offline.
        Source(
            name: "org.freedesktop.NetworkManager", path: "/org/freedesktop/NetworkManager",
            interface: "org.freedesktop.NetworkManager", property: "State",
            read: { value, state in state.offline = value.uint32Value.map { (10...30).contains($0) } ?? false },
            absent: { $0.offline = false }),
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

    /// logind's PrepareForSleep: true before the system sleeps, false once it woke.
    var onSleep: ((Bool) -> Void)?
    private var sleeping = false
    /// The inhibitor's fd while one is held.
    private var inhibitor: Int32 = -1
    private var wantsInhibitor = false
    private var inhibiting = false

    deinit {
        if inhibitor >= 0 { close(inhibitor) }
    }

    /// Holds a logind "delay" inhibitor for sleep while `hold` (transfers run); lets it go at once
    /// otherwise. Without logind this does nothing.
    func holdSleep(_ hold: Bool) {
        wantsInhibitor = hold
        guard hold else {
            if inhibitor >= 0 {
                close(inhibitor)
                inhibitor = -1
                logger.debug("Released the sleep inhibitor")
            }
            return
        }
        guard inhibitor < 0, !inhibiting,
            let call = try? Message.methodCall(
                destination: Self.logind, path: "/org/freedesktop/login1", interface: Self.logindManager,
                member: "Inhibit")
        else { return }
        var w = call.writer()
        for text in ["sleep", "netactivity", "Network transfers stop cleanly before sleep", "delay"] { w.append(text) }
        inhibiting = true
        bus.callAsync(call, timeoutMilliseconds: 5_000) { [weak self] result in
            guard let self else {
                if case .success(let reply) = result {
                    var r = reply.reader()
                    if let fd = try? r.readFD() { close(fd) }
                }
                return
            }
            inhibiting = false
            switch result {
            case .success(let reply):
                var r = reply.reader()
                guard let fd = try? r.readFD() else { return }
                if wantsInhibitor, inhibitor < 0 {
                    inhibitor = fd
                    logger.debug("Holding a sleep inhibitor while transfers run")
                } else {
                    close(fd)
                }
            case .failure(let error):
                logger.debug("No sleep inhibitor from logind: \(error.message)")
            }
        }
    }

    static let logind = "org.freedesktop.login1"
    static let logindManager = "org.freedesktop.login1.Manager"

    /// Subscribes (without waiting for the bus) and asks for the current values.
    func start() {
        let sleep = SignalMatch(
            sender: Self.logind, path: "/org/freedesktop/login1", interface: Self.logindManager,
            member: "PrepareForSleep")
        bus.addMatchWithoutWaiting(sleep.rule)
        // The match names logind; messages carry its unique name.
        bus.onSignal(
            SignalMatch(path: sleep.path, interface: sleep.interface, member: sleep.member),
            bound(self) { $0.prepareForSleep($1) })
        // A logind that leaves while the system "sleeps" would never say it woke: its leaving does.
        _ = bus.followOwner(of: Self.logind, bound(self) { $0.logindOwnerChanged($1) })
        for source in Self.sources {
            let changed = SignalMatch(
                sender: source.name, path: source.path, interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged")
            bus.addMatchWithoutWaiting(changed.rule + ",arg0='\(source.interface)'")
            // Messages carry the owner's unique name, not the well-known one.
            bus.onSignal(
                SignalMatch(path: source.path, interface: changed.interface, member: changed.member),
                bound(self) { $0.propertiesChanged($1, of: source) })
            // Read when the service is there now, and whenever it comes back.
            _ = bus.followOwner(
                of: source.name,
                bound(self) { me, owner in if owner.isEmpty { me.update(source.absent) } else { me.ask(source) } })
        }
    }

    private func prepareForSleep(_ message: Message) {
        var r = message.reader()
        guard let start = try? r.read(Bool.self), start != sleeping else { return }
        sleeping = start
        logger.info(start ? "The system is about to sleep" : "The system woke up")
        onSleep?(start)
    }

    private func logindOwnerChanged(_ owner: String) {
        guard owner.isEmpty, sleeping else { return }
        sleeping = false
        logger.info("logind left while the system was to sleep; transfers go on")
        onSleep?(false)
    }

    private func propertiesChanged(_ message: Message, of source: Source) {
        var r = message.reader()
        guard let interface = try? r.read(String.self), interface == source.interface,
            let changed = try? r.readVardict()
        else { return }
        if let value = changed[source.property] {
            update { source.read(value, &$0) }
        } else if case .array(_, let invalidated)? = try? r.readValue(),
            invalidated.contains(where: { $0.stringValue == source.property })
        {
            ask(source)
        }
    }

    private func ask(_ source: Source) {
        guard
            let call = try? Message.methodCall(
                destination: source.name, path: source.path, interface: "org.freedesktop.DBus.Properties", member: "Get"
            )
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
        logger.info(
            "System conditions: metered \(next.metered), power-saver \(next.powerSaver), offline \(next.offline)")
        onChange(next)
    }
}
