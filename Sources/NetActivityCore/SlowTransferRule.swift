// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The rule that keeps a stalled or dribbling server from holding a download slot while other work
/// waits for one. It is told, once per tick, the bytes each running transfer has received; it says
/// which of them should give their slot up and go on outside the limit.
///
/// A transfer yields when it moved no byte for `stallTicks` ticks (a stalled server), or less than
/// `floorBytes` over a window of `windowTicks` ticks (a dribbling one). A transfer whose apps hold
/// more than their share of the slots while another app's work waits yields below a higher floor,
/// `shareFloorBytes` a window (the caller yields only each app's slowest): paced just above the
/// dribbling floor, one app's transfers would otherwise hold every slot. Ticks run only while work
/// waits (the caller's timer); when they start again, every watch begins afresh from the bytes its
/// transfer has then, so bytes moved while nothing waited never count for or against it.
public struct SlowTransferRule: Sendable {
    /// Why a transfer yields its slot.
    public enum Verdict: Equatable, Sendable {
        /// No byte for `stallTicks` ticks.
        case stalled
        /// Only `moved` bytes in the last window.
        case slow(moved: UInt64)
        /// Only `moved` bytes in the last window, below `shareFloorBytes`, while its apps hold more
        /// than their share of the slots and another app's work waits.
        case slowBeyondShare(moved: UInt64)
    }

    public let stallTicks: Int
    public let windowTicks: Int
    public let floorBytes: UInt64
    public let shareFloorBytes: UInt64

    private struct Watch {
        /// Bytes when the current window began, and at the last tick (nil: not seen yet).
        var windowStart: UInt64?
        var lastTick: UInt64?
        var quietTicks = 0
        var ticks = 0
    }

    private var watches: [UInt64: Watch] = [:]

    public init(
        stallTicks: Int = 2, windowTicks: Int = 8, floorBytes: UInt64 = 16 * 1024, shareFloorBytes: UInt64 = 256 * 1024
    ) {
        precondition(stallTicks > 0 && windowTicks > 0)
        self.stallTicks = stallTicks
        self.windowTicks = windowTicks
        self.floorBytes = floorBytes
        self.shareFloorBytes = max(floorBytes, shareFloorBytes)
    }

    /// Transfers watched (running and holding a slot).
    public var transfers: [UInt64] { Array(watches.keys) }
    public var isEmpty: Bool { watches.isEmpty }

    /// `transfer` started (or started again) and holds a slot.
    public mutating func started(_ transfer: UInt64) {
        watches[transfer] = Watch()
    }

    /// `transfer` no longer holds a slot (it ended, paused or yielded).
    public mutating func forget(_ transfer: UInt64) {
        watches[transfer] = nil
    }

    /// Ticks begin: every watch starts from the bytes its transfer has now.
    public mutating func restart(received: (UInt64) -> UInt64) {
        for transfer in watches.keys {
            let bytes = received(transfer)
            watches[transfer] = Watch(windowStart: bytes, lastTick: bytes)
        }
    }

    /// One tick for `transfer`, which has received `bytes` so far (`beyondShare`: its apps hold
    /// more than their share of the slots while another app's work waits): whether it should yield
    /// its slot now. A transfer the rule judges slow is still watched until the caller `forget`s it (its
    /// yield may not be possible: nothing may wait by then).
    public mutating func tick(_ transfer: UInt64, received bytes: UInt64, beyondShare: Bool = false) -> Verdict? {
        guard var watch = watches[transfer] else { return nil }
        watch.quietTicks = watch.lastTick == bytes ? watch.quietTicks + 1 : 0
        watch.lastTick = bytes
        watch.ticks += 1
        var verdict: Verdict?
        if watch.quietTicks >= stallTicks {
            verdict = .stalled
        } else if watch.ticks >= windowTicks, let start = watch.windowStart, bytes - start < floorBytes {
            verdict = .slow(moved: bytes - start)
        } else if beyondShare, watch.ticks >= windowTicks, let start = watch.windowStart,
            bytes - start < shareFloorBytes
        {
            verdict = .slowBeyondShare(moved: bytes - start)
        }
        if watch.ticks >= windowTicks {
            watch.windowStart = bytes
            watch.ticks = 0
        }
        watches[transfer] = watch
        return verdict
    }
}
