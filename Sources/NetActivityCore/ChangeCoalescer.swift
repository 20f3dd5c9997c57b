// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Rate-limits change signals for values that change on every call: the first change after a
/// quiet period goes out at once, later ones are folded into one emission at the end of the
/// interval. The caller compares values with what it last emitted, so a change that was undone
/// within the interval emits nothing.
public struct ChangeCoalescer: Sendable {
    public enum Decision: Equatable, Sendable {
        /// Emit now (and call `didEmit`).
        case emitNow
        /// Start a timer for this deadline; call `timerFired` then.
        case schedule(Instant)
        /// A timer is already pending; it will carry the latest values.
        case wait
    }

    public let interval: Duration
    private var lastEmission: Instant?
    public private(set) var timerPending = false

    public init(interval: Duration) { self.interval = interval }

    public mutating func noteChange(now: Instant) -> Decision {
        if timerPending { return .wait }
        if let last = lastEmission, now < last + interval {
            timerPending = true
            return .schedule(last + interval)
        }
        return .emitNow
    }

    public mutating func timerFired() { timerPending = false }

    public mutating func didEmit(now: Instant) { lastEmission = now }
}
