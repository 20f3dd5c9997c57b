// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import Testing

/// The loop's registrations reach a connection without holding a reference, so a callback that
/// lets go of the app's last reference (the client library drops its connection when the bus
/// goes, or when a call's reply says so) must not leave the connection's own frames running on
/// freed memory, nor anything of it registered with the loop. glibc is told to scribble over
/// freed memory for the length of each test, so a use after free reads garbage and crashes,
/// instead of stale values that happen to work (or run the tests under `--sanitize=address`).
@Suite("Connections let go from their own callbacks", .serialized, .timeLimit(.minutes(1)))
struct ConnectionLifetimeTests {
    init() { perturbFreedMemory(0xa5) }

    @Test("a Disconnected handler that drops the last reference: the connection goes, the loop goes on")
    func dropOnDisconnect() throws {
        defer { perturbFreedMemory(0) }
        let bus = try PrivateBus()
        let loop = EventLoop()
        var connection: Connection? = try Connection(address: bus.address)
        weak var gone = connection
        connection!.attach(to: loop)
        connection!.onDisconnect = {
            connection = nil
            loop.stop()
        }
        bus.stop()
        let deadline = loop.schedule(afterNanoseconds: 20_000_000_000) { loop.stop() }
        loop.run()
        loop.cancel(deadline)
        #expect(connection == nil, "the Disconnected handler ran")
        #expect(gone == nil, "nothing else held the connection")
        // The loop has nothing of the connection's left to call.
        var turns = 0
        let tick = loop.schedule(afterNanoseconds: 1_000_000) { turns += 1 }
        loop.runOnce(maxWaitNanoseconds: 100_000_000)
        loop.runOnce(maxWaitNanoseconds: 100_000_000)
        loop.cancel(tick)
        #expect(turns == 1)
    }

    @Test("a call's timeout whose completion drops the last reference")
    func dropOnTimeout() throws {
        defer { perturbFreedMemory(0) }
        let bus = try PrivateBus()
        defer { bus.stop() }
        let loop = EventLoop()
        let silent = try Connection(address: bus.address)  // never attached: never answers
        var connection: Connection? = try Connection(address: bus.address)
        weak var gone = connection
        connection!.attach(to: loop)
        var outcome: Result<Message, DBusError>?
        let call = try Message.methodCall(
            destination: silent.uniqueName, path: "/t", interface: "org.example.T", member: "Hang")
        connection!.callAsync(call, timeoutMilliseconds: 50) { result in
            outcome = result
            connection = nil
            loop.stop()
        }
        let deadline = loop.schedule(afterNanoseconds: 20_000_000_000) { loop.stop() }
        loop.run()
        loop.cancel(deadline)
        guard case .failure = outcome else {
            Issue.record("expected the call to time out, got \(String(describing: outcome))")
            return
        }
        #expect(gone == nil, "nothing else held the connection")
        silent.close()
    }
}
