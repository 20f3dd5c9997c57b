public import Dispatch

/// Where the library runs the app's closures (task bindings, image slots' `decode`, `apply` and
/// handlers): never on the library's connection thread, so a closure that blocks delays only
/// later closures on the same executor, never the library's own work.
///
/// An executor must run jobs one at a time, in the order given (a serial queue, a main loop):
/// bindings rely on that order. The default, made by `NetActivity.connect()`, is a serial
/// dispatch queue of the library's own. A GTK app delivers on its GLib main context:
///
/// ```swift
/// import CGLib  // the app's own module map of glib-2.0
/// let gtk = CallbackExecutor { job in
///     let box = Unmanaged.passRetained(JobBox(job)).toOpaque()
///     g_main_context_invoke(nil, { data in
///         Unmanaged<JobBox>.fromOpaque(data!).takeRetainedValue().job()
///         return 0  // G_SOURCE_REMOVE
///     }, box)
/// }
/// final class JobBox { let job: () -> Void; init(_ job: @escaping () -> Void) { self.job = job } }
/// ```
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
