// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
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

    @Test(
        "NextTurn: asked for many times in a turn, it runs once, on the next; asked again while it runs, once more; gone, never"
    )
    func nextTurn() {
        let loop = EventLoop()
        var runs = 0
        var again = true
        var next: NextTurn?
        next = NextTurn(loop) {
            runs += 1
            if again {
                again = false
                next!.request()
            }
        }
        for _ in 0..<5 { next!.request() }
        #expect(runs == 0 && next!.isScheduled, "not inside the asking call")
        var gone: NextTurn? = NextTurn(loop) { runs += 100 }
        gone!.request()
        gone = nil
        loop.schedule(afterNanoseconds: 5_000_000) { loop.stop() }
        loop.run()
        #expect(runs == 2, "once for five requests, once for the request made while it ran; none for the released one")
        #expect(!next!.isScheduled)
    }

    @Test("a timer is never early")
    func notEarly() {
        let loop = EventLoop()
        let start = EventLoop.now()
        var at: UInt64 = 0
        loop.schedule(afterNanoseconds: 20_000_000) {
            at = EventLoop.now()
            loop.stop()
        }
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
        loop.schedule(afterNanoseconds: 1_000_000) {
            fired += 1
            loop.stop()
        }
        #expect(loop.pendingTimerCount == 1)
        loop.run()
        #expect(fired == 1)
    }

    @Test("stop() from a prepare hook (a dispatched message) returns at once instead of sleeping")
    func stopFromPrepareHook() {
        let loop = EventLoop()
        var turns = 0
        loop.addPrepareHook {
            turns += 1
            if turns == 2 { loop.stop() }
        }
        loop.schedule(afterNanoseconds: 1_000_000) {}  // ends the first turn's sleep
        loop.schedule(afterNanoseconds: 2_000_000_000) {}  // a bug would sleep until here
        let start = EventLoop.now()
        loop.run()
        #expect(turns == 2)
        #expect(EventLoop.now() - start < 1_000_000_000)
    }

    @Test("jobs posted from other threads run on the loop's thread, in each thread's order")
    func mailbox() {
        final class Box: @unchecked Sendable {
            var seen: [(Int, Int)] = []
            var loopThread = pthread_self()
            var loop: EventLoop?
        }
        let loop = EventLoop()
        let box = Box()
        box.loop = loop
        let mailbox = loop.mailbox
        let threads = 4
        let perThread = 500
        var ids: [pthread_t] = []
        for t in 0..<threads {
            var id = pthread_t()
            let context = Unmanaged.passRetained(
                Sender(
                    mailbox: mailbox,
                    box: { i in
                        box.seen.append((t, i))
                        #expect(pthread_equal(pthread_self(), box.loopThread) != 0)
                        if box.seen.count == threads * perThread { box.loop?.stop() }
                    }, count: perThread)
            ).toOpaque()
            pthread_create(
                &id, nil,
                { raw in
                    let sender = Unmanaged<Sender>.fromOpaque(raw!).takeRetainedValue()
                    for i in 0..<sender.count {
                        let f = sender.box
                        sender.mailbox.post { f(i) }
                    }
                    return nil
                }, context)
            ids.append(id)
        }
        loop.run()
        for id in ids { pthread_join(id, nil) }
        #expect(box.seen.count == threads * perThread)
        for t in 0..<threads {
            #expect(box.seen.filter { $0.0 == t }.map(\.1) == Array(0..<perThread))
        }
    }
}

private final class Sender: @unchecked Sendable {
    let mailbox: EventLoop.Mailbox
    let box: @Sendable (Int) -> Void
    let count: Int
    init(mailbox: EventLoop.Mailbox, box: @escaping @Sendable (Int) -> Void, count: Int) {
        self.mailbox = mailbox
        self.box = box
        self.count = count
    }
}
