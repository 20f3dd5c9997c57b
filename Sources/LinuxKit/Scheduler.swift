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
