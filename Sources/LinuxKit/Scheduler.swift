// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// A handle to cancel a timer.
public struct TimerID: Hashable, Sendable {
    public let raw: UInt64
    public init(raw: UInt64) { self.raw = raw }
}

/// What anything with time in it needs: the monotonic time and one-shot timers. The event loop is
/// the production scheduler; tests use a manual one (`NetActivityTesting.ManualScheduler`) and
/// advance it by hand, so timing is tested without sleeping.
public protocol Scheduler: AnyObject {
    /// Monotonic nanoseconds.
    var nowNanoseconds: UInt64 { get }
    /// Runs `callback` once at `deadline` (a past deadline runs on the next turn).
    @discardableResult
    func schedule(atNanoseconds deadline: UInt64, _ callback: @escaping () -> Void) -> TimerID
    /// Cancels a timer; cancelling a fired or cancelled timer does nothing.
    func cancel(_ id: TimerID)
}

extension Scheduler {
    @discardableResult
    public func schedule(afterNanoseconds delay: UInt64, _ callback: @escaping () -> Void) -> TimerID {
        schedule(atNanoseconds: nowNanoseconds &+ delay, callback)
    }
}

/// Work that runs once on the next turn of the loop however often it is asked for before then
/// (a pump, a check, the next slice of a long job). The owner keeps it and binds `work` to itself
/// (`bound(self) { $0.pump() }`): a turn that comes after the owner (and so this) went runs nothing.
public final class NextTurn {
    private let scheduler: any Scheduler
    private let work: () -> Void
    /// Asked for, and not run yet.
    public private(set) var isScheduled = false

    public init(_ scheduler: any Scheduler, _ work: @escaping () -> Void) {
        self.scheduler = scheduler
        self.work = work
    }

    public func request() {
        guard !isScheduled else { return }
        isScheduled = true
        scheduler.schedule(afterNanoseconds: 0) { [weak self] in
            guard let self else { return }
            isScheduled = false
            work()
        }
    }
}
