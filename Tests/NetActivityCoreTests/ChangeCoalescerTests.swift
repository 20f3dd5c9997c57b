// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("Coalescing of per-call change signals")
struct ChangeCoalescerTests {
    let ms: (Int) -> Instant = { .zero + .milliseconds($0) }

    @Test("first change emits at once, the burst after it folds into one emission at +50 ms")
    func burst() {
        var c = ChangeCoalescer(interval: .milliseconds(50))
        #expect(c.noteChange(now: ms(1000)) == .emitNow)
        c.didEmit(now: ms(1000))
        #expect(c.noteChange(now: ms(1010)) == .schedule(ms(1050)))
        #expect(c.noteChange(now: ms(1020)) == .wait)
        #expect(c.noteChange(now: ms(1049)) == .wait)
        c.timerFired()
        c.didEmit(now: ms(1050))
        #expect(c.noteChange(now: ms(1060)) == .schedule(ms(1100)))
    }

    @Test("after a quiet interval a change emits at once again")
    func quiet() {
        var c = ChangeCoalescer(interval: .milliseconds(50))
        #expect(c.noteChange(now: ms(0)) == .emitNow)
        c.didEmit(now: ms(0))
        #expect(c.noteChange(now: ms(50)) == .emitNow)
    }

    @Test("a timer that found nothing to send does not hold back the next change")
    func nothingSent() {
        var c = ChangeCoalescer(interval: .milliseconds(50))
        c.didEmit(now: ms(0))
        #expect(c.noteChange(now: ms(10)) == .schedule(ms(50)))
        c.timerFired()  // the values were back to what was emitted: nothing sent
        #expect(c.noteChange(now: ms(60)) == .emitNow)
    }
}
