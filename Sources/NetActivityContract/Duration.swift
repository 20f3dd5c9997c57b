// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Conversions the agent, the library and the tests share (in nanoseconds, as timers take them).
extension Duration {
    /// Whole nanoseconds, clamped at 0 (no timer waits a negative time).
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
