// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// Shows whether a task is running, like a spinner (UIActivityIndicatorView+AFNetworking).
///
/// On binding, the spinner is told the task's state at once (running: `true`; suspended: `false`),
/// then each change of state; it stops following at completion (`false`). Binding again drops the
/// previous task. A completed or unknown task is not followed: the spinner is told `false`, so a
/// spinner left going by the previous task stops (AFNetworking left it spinning).
public final class TaskSpinnerBinding: Sendable {
    private let follower: TaskFollower

    /// `onAnimatingChange(true)`: start animating; `false`: stop. On the main actor, so it may
    /// touch `@MainActor` views.
    @MainActor
    public convenience init(_ activity: NetActivity, onAnimatingChange: @escaping @MainActor (Bool) -> Void) {
        self.init(activity, callbacks: .mainActor, onAnimatingChange: CallbackExecutor.onMainActor(onAnimatingChange))
    }

    /// The executor form: `onAnimatingChange` runs on `callbacks`.
    public init(
        _ activity: NetActivity, callbacks: CallbackExecutor, onAnimatingChange: @escaping @Sendable (Bool) -> Void
    ) {
        follower = TaskFollower(
            core: activity.core, reaction: SpinnerReaction(report: callbacks.delivering(onAnimatingChange)))
    }

    /// Follows the task at `path` (any client's, e.g. from `netactivity tasks` or GetManagedObjects).
    public func bind(toTaskAt path: String) { follower.bind(.path(path)) }
    /// Follows one of this app's tasks (begun on any of its `NetActivity` connections); this
    /// survives agent restarts.
    public func bind(to task: NetActivityTask) { follower.bind(.task(task)) }
    /// Stops following; nothing more is reported.
    public func unbind() { follower.unbind() }
}
