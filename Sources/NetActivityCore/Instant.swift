/// A point on a monotonic clock, in nanoseconds. The core never reads a clock itself: the agent
/// passes real monotonic time, tests pass a `ManualClock`'s time.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds &+ d.nanoseconds)
    }

    public static func - (a: Instant, b: Instant) -> Duration {
        a >= b ? .nanoseconds(Int64(a.nanoseconds - b.nanoseconds)) : .nanoseconds(-Int64(b.nanoseconds - a.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// Whole nanoseconds, clamped at 0 (the core has no negative delays).
    public var nanoseconds: UInt64 {
        let (s, atto) = components
        if s < 0 || (s == 0 && atto < 0) { return 0 }
        return UInt64(s) &* 1_000_000_000 &+ UInt64(atto / 1_000_000_000)
    }

    /// Seconds as a Double.
    public var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    public static func seconds(double value: Double) -> Duration {
        .nanoseconds(Int64((value * 1e9).rounded()))
    }
}
