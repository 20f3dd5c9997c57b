// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc
public import LinuxKit

/// The connection on an event loop: libdbus's watches become epoll registrations, its timeouts
/// loop timers, and what it reads is dispatched after each batch of I/O and before each sleep.
extension Connection {

    /// Hands the connection's I/O to `loop`. Call once, before running the loop.
    public func attach(to loop: EventLoop) {
        self.loop = loop
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = dbus_connection_set_watch_functions(
            raw,
            { watch, data in
                Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().addWatch(watch!)
                return 1
            },
            { watch, data in Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().removeWatch(watch!) },
            { watch, data in Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().updateWatches(watch!) },
            me, nil)
        _ = dbus_connection_set_timeout_functions(
            raw,
            { timeout, data in
                Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().addTimeout(timeout!)
                return 1
            },
            { timeout, data in Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().removeTimeout(timeout!) },
            { timeout, data in Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().addTimeout(timeout!) },
            me, nil)
        prepareHook = loop.addPrepareHook { [unowned(unsafe) self] in
            if self.hasQueued { self.holdingSelf { self.dispatchAll() } }
        }
    }

    /// Runs `body` with a reference to the connection held. The loop's registrations hold none
    /// (see `loop`), and what a callback dispatches may let go of the app's last reference (a
    /// `Disconnected` handler that drops its connection, a reply's completion that closes it):
    /// the callback's own frames still use the connection after that, so they run inside this.
    /// (Swift 6.3 happens to keep a reference across a call through an `unowned(unsafe)`
    /// capture too, in debug and release builds, but nothing promises it.)
    @inline(__always)
    private func holdingSelf(_ body: () -> Void) {
        let held = Unmanaged.passUnretained(self).retain()
        body()
        held.release()
    }

    func installDispatchStatusFunction() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, data in
                Unmanaged<Connection>.fromOpaque(data!)._withUnsafeGuaranteedRef {
                    $0.dispatchPending = status == DBUS_DISPATCH_DATA_REMAINS
                }
            }, me, nil)
    }

    private func addWatch(_ watch: OpaquePointer) {
        let fd = dbus_watch_get_unix_fd(watch)
        if let i = watchesByFD.firstIndex(where: { $0.fd == fd }) {
            watchesByFD[i].watches.append(watch)
        } else {
            watchesByFD.append((fd, [watch]))
        }
        syncEvents(fd: fd)
    }

    private func watches(of fd: Int32) -> [OpaquePointer] {
        for entry in watchesByFD where entry.fd == fd { return entry.watches }
        return []
    }

    private func removeWatch(_ watch: OpaquePointer) {
        let fd = dbus_watch_get_unix_fd(watch)
        if let i = watchesByFD.firstIndex(where: { $0.fd == fd }) {
            watchesByFD[i].watches.removeAll { $0 == watch }
            if watchesByFD[i].watches.isEmpty { watchesByFD.remove(at: i) }
        }
        syncEvents(fd: fd)
    }

    private func updateWatches(_ watch: OpaquePointer) {
        syncEvents(fd: dbus_watch_get_unix_fd(watch))
    }

    /// One epoll registration per fd, with the union of its enabled watches. An fd with no
    /// enabled watch is removed, because epoll would still report its hang-up and spin.
    private func syncEvents(fd: Int32) {
        guard let loop else { return }
        var events: UInt32 = 0
        for w in watches(of: fd) where dbus_watch_get_enabled(w) != 0 {
            let flags = dbus_watch_get_flags(w)
            if flags & CDBUS_WATCH_READABLE != 0 { events |= EventLoop.readable }
            if flags & CDBUS_WATCH_WRITABLE != 0 { events |= EventLoop.writable }
        }
        if events == 0 {
            loop.unwatch(fd: fd)
        } else if loop.isWatching(fd: fd) {
            loop.setEvents(fd: fd, events: events)
        } else {
            loop.watch(fd: fd, events: events) { [unowned(unsafe) self] revents in
                self.holdingSelf { self.handleIO(fd: fd, revents: revents) }
            }
        }
    }

    private func handleIO(fd: Int32, revents: UInt32) {
        var flags: UInt32 = 0
        if revents & EventLoop.readable != 0 { flags |= CDBUS_WATCH_READABLE }
        if revents & EventLoop.writable != 0 { flags |= CDBUS_WATCH_WRITABLE }
        if revents & EventLoop.error != 0 { flags |= CDBUS_WATCH_ERROR }
        if revents & EventLoop.hangup != 0 { flags |= CDBUS_WATCH_HANGUP }
        // Handling one watch may add or remove others: each after the first is handled only if
        // it is still there. (The list taken shares its storage; a change to it makes a copy.)
        let taken = watches(of: fd)
        if let first = taken.first { handle(first, flags) }
        for w in taken.dropFirst() where watches(of: fd).contains(w) { handle(w, flags) }
        if flags & CDBUS_WATCH_READABLE != 0 { readMore(fd) }
        dispatchAll()
    }

    /// libdbus reads at most 2 KiB per handling of its watch: a message of megabytes took one turn
    /// of the loop per 2 KiB (and everyone's calls queue behind it in the bus's one stream). While
    /// the socket holds more and no complete message waits, its read watch is handled again, up to
    /// `readAheadBytes` per turn.
    static let readAheadBytes = 4 << 20

    private func readMore(_ fd: Int32) {
        var budget = Self.readAheadBytes
        while budget > 0, !closed, dbus_connection_get_dispatch_status(raw) != DBUS_DISPATCH_DATA_REMAINS {
            let pending = Files.bytesReadable(fd)
            guard pending > 0,
                let w = watches(of: fd).first(where: { dbus_watch_get_flags($0) & CDBUS_WATCH_READABLE != 0 }),
                dbus_watch_get_enabled(w) != 0
            else { return }
            _ = dbus_watch_handle(w, CDBUS_WATCH_READABLE)
            budget -= min(pending, 2048)
        }
    }

    private func handle(_ watch: OpaquePointer, _ flags: UInt32) {
        guard dbus_watch_get_enabled(watch) != 0 else { return }
        let f = flags & (dbus_watch_get_flags(watch) | CDBUS_WATCH_ERROR | CDBUS_WATCH_HANGUP)
        if f != 0 { _ = dbus_watch_handle(watch, f) }
    }

    private func addTimeout(_ timeout: OpaquePointer) {
        if let old = timeouts.removeValue(forKey: timeout) { loop?.cancel(old) }
        guard dbus_timeout_get_enabled(timeout) != 0, let loop else { return }
        let ms = UInt64(max(0, dbus_timeout_get_interval(timeout)))
        timeouts[timeout] = loop.schedule(afterNanoseconds: ms * 1_000_000) { [unowned(unsafe) self] in
            self.holdingSelf { self.fire(timeout) }
        }
    }

    private func fire(_ timeout: OpaquePointer) {
        timeouts[timeout] = nil
        firingTimeout = timeout
        _ = dbus_timeout_handle(timeout)
        // libdbus timeouts repeat until removed or disabled; re-arm unless it was removed (or
        // re-armed through the toggle function) while it ran.
        if firingTimeout == timeout, timeouts[timeout] == nil { addTimeout(timeout) }
        firingTimeout = nil
        dispatchAll()
    }

    private func removeTimeout(_ timeout: OpaquePointer) {
        if let id = timeouts.removeValue(forKey: timeout) { loop?.cancel(id) }
        if firingTimeout == timeout { firingTimeout = nil }
    }
}
