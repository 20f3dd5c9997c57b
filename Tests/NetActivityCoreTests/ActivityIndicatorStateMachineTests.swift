// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

/// Drives the state machine with a manual clock and records what it publishes.
final class IndicatorHarness {
    let clock = ManualClock()
    var machine: ActivityIndicatorStateMachine
    var count: UInt64 = 0
    var visible: [(at: Instant, value: Bool)] = []
    var states: [IndicatorState] = []

    init(activation: Duration, completion: Duration) {
        machine = ActivityIndicatorStateMachine(activationDelay: activation, completionDelay: completion)
    }

    enum Event { case inc, dec, enable, disable }

    func perform(_ actions: [ActivityIndicatorStateMachine.Action]) {
        for action in actions {
            switch action {
            case .scheduleTimer(let deadline, let generation):
                clock.schedule(at: deadline) { [unowned self] in
                    self.perform(
                        self.machine.timerFired(generation: generation, count: self.count, now: self.clock.now))
                }
            case .cancelTimer: break  // the generation makes the pending callback a no-op
            case .publishState(let s): states.append(s)
            case .publishVisible(let v): visible.append((clock.now, v))
            }
        }
    }

    /// Runs `(seconds, event)` rows in order, then lets every timer run out.
    func run(_ rows: [(Double, Event)]) {
        for (t, event) in rows {
            clock.advance(to: .zero + .seconds(double: t))
            switch event {
            case .inc: count += 1
            case .dec: count = count > 0 ? count - 1 : 0
            case .enable:
                perform(machine.setEnabled(true, count: count, now: clock.now))
                continue
            case .disable:
                perform(machine.setEnabled(false, count: count, now: clock.now))
                continue
            }
            perform(machine.countChanged(to: count, now: clock.now))
        }
        clock.advance(by: .seconds(120))
    }

    var values: [Bool] { visible.map(\.value) }
    func times() -> [Double] { visible.map { Double($0.at.nanoseconds) / 1e9 } }
}

@Suite("AFNetworking's activity indicator state machine")
struct ActivityIndicatorStateMachineTests {
    @Test("delays 0/0 with inc, dec gives exactly [true, false]")
    func zeroDelaysIncDec() {
        let h = IndicatorHarness(activation: .zero, completion: .zero)
        h.run([(0, .inc), (0, .dec)])
        #expect(h.values == [true, false])
    }

    @Test("delays 0/0 with inc, inc, dec, dec gives [true, false]")
    func zeroDelaysTwoOfEach() {
        let h = IndicatorHarness(activation: .zero, completion: .zero)
        h.run([(0, .inc), (0, .inc), (0, .dec), (0, .dec)])
        #expect(h.values == [true, false])
    }

    @Test("activation 0.1 s with inc then dec after 50 ms shows nothing")
    func shortActivityNeverShows() {
        let h = IndicatorHarness(activation: .milliseconds(100), completion: .milliseconds(170))
        h.run([(0, .inc), (0.05, .dec)])
        #expect(h.values == [])
        #expect(h.states == [.delayingStart, .notActive])
    }

    @Test("completion 0.2 s with inc, dec@0.1, inc@0.2, dec@0.3 gives [true, false]: no flicker")
    func noFlicker() {
        let h = IndicatorHarness(activation: .zero, completion: .milliseconds(200))
        h.run([(0, .inc), (0.1, .dec), (0.2, .inc), (0.3, .dec)])
        #expect(h.values == [true, false])
        #expect(h.times() == [0, 0.5])
        #expect(h.states == [.delayingStart, .active, .delayingEnd, .active, .delayingEnd, .notActive])
    }

    @Test("disabled gives nothing")
    func disabledShowsNothing() {
        let h = IndicatorHarness(activation: .zero, completion: .zero)
        h.run([(0, .disable), (0, .inc), (0.5, .dec), (1, .inc), (2, .dec)])
        #expect(h.values == [])
        #expect(h.machine.state == .notActive)
    }

    @Test("default delays: visible at 1.0 s, hidden 0.17 s after the last decrement")
    func defaultDelayTimes() {
        let h = IndicatorHarness(activation: .seconds(1), completion: .milliseconds(170))
        h.run([(0, .inc), (2, .dec)])
        #expect(h.values == [true, false])
        #expect(h.times() == [1.0, 2.17])
    }

    @Test("DelayingStart ignores count changes; the timer decides by the count at its end")
    func delayingStartIgnoresChanges() {
        let h = IndicatorHarness(activation: .seconds(1), completion: .zero)
        // Drops to 0 and comes back within the delay: shown at 1.0 because count > 0 then.
        h.run([(0, .inc), (0.3, .dec), (0.6, .inc), (3, .dec)])
        #expect(h.values == [true, false])
        #expect(h.times() == [1.0, 3.0])
        #expect(h.states == [.delayingStart, .active, .delayingEnd, .notActive])
    }

    @Test("the completion timer ends in NotActive; new activity afterwards waits the activation delay again")
    func restartAfterCompletion() {
        let h = IndicatorHarness(activation: .milliseconds(100), completion: .milliseconds(100))
        h.run([(0, .inc), (0.5, .dec), (1, .inc), (2, .dec)])
        #expect(h.values == [true, false, true, false])
        #expect(h.times() == [0.1, 0.6, 1.1, 2.1])
    }

    @Test("disabling while visible hides at once and cancels the timer; enabling with activity restarts the delay")
    func disableWhileVisible() {
        let h = IndicatorHarness(activation: .milliseconds(100), completion: .milliseconds(100))
        h.run([(0, .inc), (0.5, .disable), (0.6, .enable), (1, .dec)])
        #expect(h.values == [true, false, true, false])
        #expect(h.times() == [0.1, 0.5, 0.7, 1.1])
    }

    @Test("a stale timer generation is ignored")
    func staleTimer() {
        var m = ActivityIndicatorStateMachine(activationDelay: .seconds(1), completionDelay: .seconds(1))
        let first = m.countChanged(to: 1, now: .zero)
        guard case .scheduleTimer(_, let g1) = first.first else {
            Issue.record("no timer")
            return
        }
        _ = m.setEnabled(false, count: 1, now: .zero)
        _ = m.setEnabled(true, count: 1, now: .zero)  // schedules a new activation timer
        #expect(m.timerFired(generation: g1, count: 1, now: .zero + .seconds(1)) == [])
        #expect(m.state == .delayingStart)
    }

    @Test("visible is announced only when it changes")
    func visibleOnlyOnChange() {
        let h = IndicatorHarness(activation: .zero, completion: .milliseconds(500))
        h.run([(0, .inc), (0.1, .inc), (0.2, .dec), (0.3, .dec), (0.4, .inc), (0.45, .dec)])
        #expect(h.values == [true, false])
    }
}
