// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later

/// A handler for an object that whatever keeps the handler must not keep alive, the way sd-bus
/// hands a handler its userdata: `body` receives `target` as its first argument, and the handler
/// holds `target` unowned. The loop's watches and timers, a connection's signal handlers and a
/// service's callbacks into its owner are kept by something the target owns (or outlives), so
/// the target going first is a bug, and calling the handler then traps.
///
///     loop.watch(fd: fd, events: EventLoop.readable, handler: bound(self) { me, _ in me.readable() })
@inlinable
public func bound<Target: AnyObject, Result>(
    _ target: Target, _ body: @escaping (Target) -> Result
) -> () -> Result {
    { [unowned target] in body(target) }
}

@inlinable
public func bound<Target: AnyObject, A, Result>(
    _ target: Target, _ body: @escaping (Target, A) -> Result
) -> (A) -> Result {
    { [unowned target] a in body(target, a) }
}

@inlinable
public func bound<Target: AnyObject, A, B, Result>(
    _ target: Target, _ body: @escaping (Target, A, B) -> Result
) -> (A, B) -> Result {
    { [unowned target] a, b in body(target, a, b) }
}

@inlinable
public func bound<Target: AnyObject, A, B, C, Result>(
    _ target: Target, _ body: @escaping (Target, A, B, C) -> Result
) -> (A, B, C) -> Result {
    { [unowned target] a, b, c in body(target, a, b, c) }
}

@inlinable
public func bound<Target: AnyObject, A, B, C, D, Result>(
    _ target: Target, _ body: @escaping (Target, A, B, C, D) -> Result
) -> (A, B, C, D) -> Result {
    { [unowned target] a, b, c, d in body(target, a, b, c, d) }
}

@inlinable
public func bound<Target: AnyObject, A, B, Result>(
    _ target: Target, _ body: @escaping (Target, inout A, B) throws -> Result
) -> (inout A, B) throws -> Result {
    { [unowned target] a, b in try body(target, &a, b) }
}

@inlinable
public func bound<Target: AnyObject, A, Result>(
    _ target: Target, _ body: @escaping (Target, inout A) throws -> Result
) -> (inout A) throws -> Result {
    { [unowned target] a in try body(target, &a) }
}
