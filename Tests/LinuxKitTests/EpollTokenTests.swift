// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Testing

/// Registrations carry a token, not the fd number: an event already waiting in a batch for an fd
/// that a handler closed (and whose number it reused at once) must not reach the new registration.
@Suite("Event loop registrations")
struct EpollTokenTests {
    final class Record {
        var newHandlerEvents: [UInt32] = []
        var swapped = false
        var fired: [Int32] = []
    }

    @Test("an fd number reused within one epoll batch never gets the old fd's event")
    func reuseInOneBatch() throws {
        let loop = EventLoop()
        let record = Record()
        // Two leases whose holders both went away: both read ends report a hang-up in the same batch.
        var a: [Int32] = [-1, -1]
        var b: [Int32] = [-1, -1]
        #expect(pipe(&a) == 0 && pipe(&b) == 0)
        close(a[1])
        close(b[1])
        // The new lease that takes over the closed fd's number; its writer stays open, so it has
        // no event of its own.
        var fresh: [Int32] = [-1, -1]
        #expect(pipe(&fresh) == 0)

        // Whichever handler runs first ends the other lease and, in the same batch, starts a new
        // one under the very same fd number (as a BeginActivity arriving just then would).
        func handler(for fd: Int32, other: Int32) -> EventLoop.FDHandler {
            return { _ in
                record.fired.append(fd)
                guard !record.swapped else { return }
                record.swapped = true
                loop.unwatch(fd: other)
                close(other)
                #expect(dup2(fresh[0], other) == other)
                loop.watch(fd: other, events: EventLoop.readable) { events in record.newHandlerEvents.append(events) }
            }
        }
        loop.watch(fd: a[0], events: EventLoop.readable, handler: handler(for: a[0], other: b[0]))
        loop.watch(fd: b[0], events: EventLoop.readable, handler: handler(for: b[0], other: a[0]))

        loop.runOnce(maxWaitNanoseconds: 1_000_000_000)
        #expect(record.swapped)
        #expect(record.fired.count == 1, "the closed registration's event was dropped")
        #expect(record.newHandlerEvents.isEmpty, "the old fd's hang-up reached the new registration")

        // The new registration still works: closing its writer reaches it, and only it.
        close(fresh[0])
        let reused = record.fired[0] == a[0] ? b[0] : a[0]
        let survivor = record.fired[0]
        loop.unwatch(fd: survivor)
        close(survivor)
        close(fresh[1])
        loop.runOnce(maxWaitNanoseconds: 1_000_000_000)
        #expect(record.newHandlerEvents.count == 1)
        loop.unwatch(fd: reused)
        close(reused)
    }

    @Test("watching again replaces the handler and keeps one registration")
    func rewatch() {
        let loop = EventLoop()
        var p: [Int32] = [-1, -1]
        #expect(pipe(&p) == 0)
        var seen: [String] = []
        loop.watch(fd: p[0], events: EventLoop.readable) { _ in seen.append("first") }
        loop.watch(fd: p[0], events: EventLoop.readable) { _ in seen.append("second") }
        var byte: UInt8 = 1
        #expect(write(p[1], &byte, 1) == 1)
        loop.runOnce(maxWaitNanoseconds: 1_000_000_000)
        #expect(seen == ["second"])
        loop.unwatch(fd: p[0])
        #expect(!loop.isWatching(fd: p[0]))
        close(p[0])
        close(p[1])
    }
}
