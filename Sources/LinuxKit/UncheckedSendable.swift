// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// A value handed from one thread to another by code that guarantees no two threads use it at
/// once (the sender stops touching it, or waits until the receiver is done): the one
/// `@unchecked Sendable` wrapper, so that each such hand-over says so where it happens.
public struct UncheckedSendable<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
