// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityCore

/// A clock for tests: time moves only when the test says so, and due timers fire in deadline
/// order (ties in scheduling order) as it moves. Nothing sleeps.
public final class ManualClock {
    public private(set) var now: Instant = .zero
    private var timers: [(deadline: Instant, seq: Int, fire: () -> Void)] = []
    private var seq = 0

    public init() {}

    public func schedule(at deadline: Instant, _ fire: @escaping () -> Void) {
        seq += 1
        timers.append((deadline, seq, fire))
    }

    /// Moves to `instant`, firing every timer due on the way, each at its own deadline.
    public func advance(to instant: Instant) {
        precondition(instant >= now, "time does not go backwards")
        while let next = timers.enumerated()
            .filter({ $0.element.deadline <= instant })
            .min(by: { ($0.element.deadline, $0.element.seq) < ($1.element.deadline, $1.element.seq) })
        {
            timers.remove(at: next.offset)
            now = max(now, next.element.deadline)
            next.element.fire()
        }
        now = instant
    }

    public func advance(by duration: Duration) { advance(to: now + duration) }

    public var pendingCount: Int { timers.count }
}
