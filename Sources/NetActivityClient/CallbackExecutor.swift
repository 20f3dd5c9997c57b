// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import Dispatch

/// Where the library runs the app's closures given with `callbacks:` (the executor forms of the
/// task bindings and of `ExecutorImageSlot`, and the activity's own): never on the library's
/// connection thread, so a closure that blocks delays only later closures on the same executor,
/// never the library's own work.
///
/// An executor must run jobs one at a time, in the order given (a serial queue, a main loop):
/// bindings rely on that order. The default, made by `NetActivity.connect()`, is a serial
/// dispatch queue of the library's own. `.mainActor` runs them on the main actor, and
/// `glibMainContext()` on a GTK app's GLib main context.
public struct CallbackExecutor: Sendable {
    let run: @Sendable (@escaping @Sendable () -> Void) -> Void

    /// An executor from a function that runs each job later, in order, on the app's thread of
    /// choice.
    public init(_ run: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) {
        self.run = run
    }

    /// Jobs on a serial `DispatchQueue` (`.main` for an app that runs `dispatchMain()` or a
    /// Foundation run loop).
    public static func dispatch(_ queue: DispatchQueue) -> CallbackExecutor {
        CallbackExecutor { job in queue.async(execute: job) }
    }

    /// Jobs on a new serial queue of their own.
    public static func serialQueue(label: String) -> CallbackExecutor {
        dispatch(DispatchQueue(label: label))
    }

    /// Jobs on the main actor, in order: for an app whose main actor runs (`dispatchMain()`, an
    /// async `main`, a Foundation run loop, or a GLib main loop after
    /// `NetActivity.runMainActorOnGLibMainContext()`).
    public static let mainActor = CallbackExecutor { job in Task { @MainActor in job() } }

    /// A main-actor closure as a job for `.mainActor`.
    static func onMainActor<T: Sendable>(_ body: @escaping @MainActor (T) -> Void) -> @Sendable (T) -> Void {
        { value in MainActor.assumeIsolated { body(value) } }
    }

    /// Runs `job` on this executor, after the jobs given before it.
    public func callAsFunction(_ job: @escaping @Sendable () -> Void) { run(job) }

    /// `report`, called on this executor whenever the result is called.
    func delivering<T: Sendable>(_ report: @escaping @Sendable (T) -> Void) -> @Sendable (T) -> Void {
        { value in run { report(value) } }
    }
}
