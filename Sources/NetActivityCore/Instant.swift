// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
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
        a >= b
            ? .nanoseconds(Int64(a.nanoseconds - b.nanoseconds)) : .nanoseconds(-Int64(b.nanoseconds - a.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}
