// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("The slow-transfer rule: stalled and dribbling servers give their slot up")
struct SlowTransferRuleTests {
    /// Ticks `rule` for `transfer` with each byte count in turn; the verdicts, one per tick.
    private func ticks(_ rule: inout SlowTransferRule, _ transfer: UInt64, _ counts: [UInt64]) -> [SlowTransferRule
        .Verdict?]
    {
        counts.map { rule.tick(transfer, received: $0) }
    }

    @Test("no byte for two ticks is a stall; a byte in between starts the count again")
    func stall() {
        var rule = SlowTransferRule()
        rule.started(1)
        rule.restart { _ in 0 }
        #expect(ticks(&rule, 1, [0, 0]) == [nil, .stalled])
        var moving = SlowTransferRule()
        moving.started(2)
        moving.restart { _ in 0 }
        #expect(ticks(&moving, 2, [0, 1, 1, 2]) == [nil, nil, nil, nil])
        #expect(ticks(&moving, 2, [2, 2]) == [nil, .stalled])
    }

    @Test("less than the floor over a window of eight ticks is slow; at the floor it is not")
    func dribble() {
        var rule = SlowTransferRule()
        rule.started(1)
        rule.restart { _ in 100 }
        // 2,000 bytes a tick: 16,000 over the window, under the 16,384 floor, and never quiet.
        let slow = (1...8).map { UInt64(100 + $0 * 2000) }
        #expect(ticks(&rule, 1, slow) == Array(repeating: nil, count: 7) + [.slow(moved: 16_000)])
        var fast = SlowTransferRule()
        fast.started(2)
        fast.restart { _ in 0 }
        #expect(ticks(&fast, 2, (1...8).map { UInt64($0 * 2048) }).allSatisfy { $0 == nil })
    }

    @Test("beyond its apps' share of slots, a transfer paced just above the floor is slow below the share floor")
    func beyondShare() {
        var rule = SlowTransferRule()
        rule.started(1)
        rule.restart { _ in 0 }
        // 4 KiB a tick: 32 KiB a window, above the 16 KiB floor, below the 256 KiB share floor.
        let paced = (1...8).map { UInt64($0 * 4096) }
        #expect(
            paced.map { rule.tick(1, received: $0, beyondShare: true) }
                == Array(repeating: nil, count: 7) + [.slowBeyondShare(moved: 32_768)])
        var within = SlowTransferRule()
        within.started(2)
        within.restart { _ in 0 }
        #expect(paced.map { within.tick(2, received: $0) }.allSatisfy { $0 == nil }, "within its share it may dribble")
        var fast = SlowTransferRule()
        fast.started(3)
        fast.restart { _ in 0 }
        #expect((1...8).map { fast.tick(3, received: UInt64($0 * 40_000), beyondShare: true) }.allSatisfy { $0 == nil })
    }

    @Test("a window that passed begins the next from its end: a slow second window is judged on its own")
    func windows() {
        var rule = SlowTransferRule(stallTicks: 2, windowTicks: 4, floorBytes: 1000)
        rule.started(1)
        rule.restart { _ in 0 }
        #expect(ticks(&rule, 1, [5000, 6000, 7000, 8000]).allSatisfy { $0 == nil })
        #expect(ticks(&rule, 1, [8100, 8200, 8300, 8400]) == [nil, nil, nil, .slow(moved: 400)])
    }

    @Test("a transfer watched before ticks began is judged from the bytes it had when they began")
    func restart() {
        var rule = SlowTransferRule(stallTicks: 2, windowTicks: 2, floorBytes: 1000)
        rule.started(1)
        rule.restart { _ in 50_000 }
        // Bytes before the restart never count for it: 500 since then is slow.
        #expect(ticks(&rule, 1, [50_250, 50_500]) == [nil, .slow(moved: 500)])
    }

    @Test("a transfer started while ticks run has no window yet: it can stall but not be slow in its first window")
    func lateStart() {
        var rule = SlowTransferRule(stallTicks: 3, windowTicks: 2, floorBytes: 1000)
        rule.started(7)  // no restart: the ticks were already running
        #expect(ticks(&rule, 7, [10, 20]) == [nil, nil])
        #expect(ticks(&rule, 7, [30, 40]) == [nil, .slow(moved: 20)])
    }

    @Test("forgotten transfers are not judged; the rule lists what it watches")
    func forget() {
        var rule = SlowTransferRule()
        rule.started(1)
        rule.started(2)
        #expect(Set(rule.transfers) == [1, 2])
        rule.forget(1)
        #expect(rule.transfers == [2])
        #expect(rule.tick(1, received: 0) == nil)
        rule.forget(2)
        #expect(rule.isEmpty)
    }
}
