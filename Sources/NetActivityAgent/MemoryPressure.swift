// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Logging

/// Tells the agent when the system is short of memory, from two sources; each is skipped
/// silently when absent.
///
/// - PSI triggers on `/proc/pressure/memory` (2 s windows, which unprivileged users may set):
///   "some" tasks stalled 150 ms of 2 s is moderate, "full" (every task stalled) 150 ms is critical.
/// - `org.freedesktop.LowMemoryMonitor.LowMemoryWarning(y level)` on the system bus: 255 is
///   critical, any other non-zero level (50 low, 100 medium) is moderate.
final class MemoryPressureMonitor {
    private let loop: EventLoop
    private let logger: Logger
    private let onPressure: (_ critical: Bool, _ source: String) -> Void
    private var psiFDs: [Int32] = []

    init(loop: EventLoop, logger: Logger, onPressure: @escaping (_ critical: Bool, _ source: String) -> Void) {
        self.loop = loop
        self.logger = logger
        self.onPressure = onPressure
    }

    deinit {
        for fd in psiFDs {
            loop.unwatch(fd: fd)
            close(fd)
        }
    }

    /// The triggers that were set (for the log).
    @discardableResult
    func startPSI(path: String = "/proc/pressure/memory") -> Int {
        for (critical, trigger) in [(false, "some 150000 2000000"), (true, "full 150000 2000000")] {
            let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else {
                logger.debug("No PSI at \(path): \(String(cString: strerror(errno)))")
                return psiFDs.count
            }
            let written = trigger.withCString { write(fd, $0, strlen($0) + 1) }
            guard written > 0 else {
                logger.debug("PSI trigger '\(trigger)' refused: \(String(cString: strerror(errno)))")
                close(fd)
                continue
            }
            psiFDs.append(fd)
            loop.watch(
                fd: fd, events: EventLoop.priority,
                handler: bound(self) { me, events in
                    if events & EventLoop.error != 0 {
                        // The monitor is gone (cgroup removed): stop watching rather than spin.
                        me.loop.unwatch(fd: fd)
                        return
                    }
                    me.onPressure(critical, "PSI")
                })
        }
        return psiFDs.count
    }

    /// The system bus address: $DBUS_SYSTEM_BUS_ADDRESS, else the standard socket if it exists.
    static func systemBusAddress() -> String? {
        if let a = getenv("DBUS_SYSTEM_BUS_ADDRESS").map({ String(cString: $0) }), !a.isEmpty { return a }
        return access("/run/dbus/system_bus_socket", F_OK) == 0 ? "unix:path=/run/dbus/system_bus_socket" : nil
    }

    /// Subscribes to LowMemoryWarning on the system bus; returns whether it could.
    @discardableResult
    func startLowMemoryMonitor(bus: Connection) -> Bool {
        do {
            let warning = SignalMatch(
                sender: "org.freedesktop.LowMemoryMonitor", path: "/org/freedesktop/LowMemoryMonitor",
                interface: "org.freedesktop.LowMemoryMonitor", member: "LowMemoryWarning")
            try bus.addMatch(warning.rule)
            // The match's sender is the well-known name; messages carry the owner's unique name.
            bus.onSignal(
                SignalMatch(path: warning.path, interface: warning.interface, member: warning.member),
                bound(self) { me, message in
                    var r = message.reader()
                    guard let level = try? r.read(UInt8.self), level > 0 else { return }
                    me.onPressure(level == 255, "LowMemoryMonitor level \(level)")
                })
            return true
        } catch {
            logger.debug("No LowMemoryMonitor: \(error.message)")
            return false
        }
    }
}
