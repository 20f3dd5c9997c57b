// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import LinuxKit
public import NetActivityCore

/// A `Scheduler` whose time moves only when a test says so (NIO's `EmbeddedEventLoop.advanceTime`):
/// the agent's services run on it in the driver tests, so their timelines are checked without
/// sleeping. Timers fire in deadline order (ties in scheduling order), each at its own deadline.
public final class ManualScheduler: Scheduler {
    public private(set) var nowNanoseconds: UInt64 = 0
    private var timers: [UInt64: (deadline: UInt64, fire: () -> Void)] = [:]
    private var nextID: UInt64 = 1

    public init() {}

    public var now: Instant { Instant(nanoseconds: nowNanoseconds) }

    @discardableResult
    public func schedule(atNanoseconds deadline: UInt64, _ callback: @escaping () -> Void) -> TimerID {
        let id = nextID
        nextID += 1
        timers[id] = (deadline, callback)
        return TimerID(raw: id)
    }

    public func cancel(_ id: TimerID) { timers[id.raw] = nil }

    /// Moves to `nanoseconds`, firing every timer due on the way (also those scheduled by the
    /// timers themselves), each at its own deadline.
    public func advance(toNanoseconds target: UInt64) {
        precondition(target >= nowNanoseconds, "time does not go backwards")
        while let next = timers.filter({ $0.value.deadline <= target }).min(by: {
            ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
        }) {
            timers[next.key] = nil
            nowNanoseconds = max(nowNanoseconds, next.value.deadline)
            next.value.fire()
        }
        nowNanoseconds = target
    }

    public func advance(to instant: Instant) { advance(toNanoseconds: instant.nanoseconds) }
    public func advance(by duration: Duration) { advance(toNanoseconds: nowNanoseconds + duration.nanoseconds) }
    public func advance(seconds: Double) { advance(by: .seconds(double: seconds)) }

    /// Timers that will still fire.
    public var pendingCount: Int { timers.count }
}
