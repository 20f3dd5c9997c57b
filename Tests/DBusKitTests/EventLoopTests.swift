import DBusKit
import Testing

@Suite("Event loop timers")
struct EventLoopTests {
    @Test("timers fire in deadline order, ties in scheduling order; cancelled ones never fire")
    func order() {
        let loop = EventLoop()
        var fired: [Int] = []
        let base = EventLoop.now()
        loop.schedule(at: base + 2_000_000) { fired.append(3) }
        loop.schedule(at: base + 1_000_000) { fired.append(1) }
        loop.schedule(at: base + 1_000_000) { fired.append(2) }
        let cancelled = loop.schedule(at: base) { fired.append(99) }
        loop.cancel(cancelled)
        loop.schedule(at: base + 3_000_000) { loop.stop() }
        loop.run()
        #expect(fired == [1, 2, 3])
        #expect(loop.pendingTimerCount == 0)
    }

    @Test("a timer is never early")
    func notEarly() {
        let loop = EventLoop()
        let start = EventLoop.now()
        var at: UInt64 = 0
        loop.schedule(afterNanoseconds: 20_000_000) { at = EventLoop.now(); loop.stop() }
        loop.run()
        #expect(at - start >= 20_000_000)
    }

    @Test("many cancelled long timers do not pile up, and the live ones still fire")
    func cancelledDoNotPileUp() {
        let loop = EventLoop()
        var fired = 0
        for _ in 0..<10_000 {
            let id = loop.schedule(afterNanoseconds: 60_000_000_000) { fired += 100 }
            loop.cancel(id)
        }
        loop.schedule(afterNanoseconds: 1_000_000) { fired += 1; loop.stop() }
        #expect(loop.pendingTimerCount == 1)
        loop.run()
        #expect(fired == 1)
    }
}
