// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// Drives a pull-to-refresh control (UIRefreshControl+AFNetworking).
///
/// It attaches only to a task that is running when bound: `onRefreshingChange(true)` at once, then
/// `false` when the task is suspended or completes, `true` again if it resumes. A task that is not
/// running when bound (suspended, completed or unknown) ends the refresh at once
/// (`onRefreshingChange(false)`) and is not followed. Binding again drops the previous task.
public final class RefreshControlBinding: Sendable {
    private let follower: TaskFollower

    /// `onRefreshingChange` runs on the main actor.
    @MainActor
    public convenience init(_ activity: NetActivity, onRefreshingChange: @escaping @MainActor (Bool) -> Void) {
        self.init(activity, callbacks: .mainActor, onRefreshingChange: CallbackExecutor.onMainActor(onRefreshingChange))
    }

    /// The executor form: `onRefreshingChange` runs on `callbacks`.
    public init(
        _ activity: NetActivity, callbacks: CallbackExecutor, onRefreshingChange: @escaping @Sendable (Bool) -> Void
    ) {
        follower = TaskFollower(
            core: activity.core, reaction: RefreshReaction(report: callbacks.delivering(onRefreshingChange)))
    }

    public func bind(toTaskAt path: String) { follower.bind(.path(path)) }
    public func bind(to task: NetActivityTask) { follower.bind(.task(task)) }
    public func unbind() { follower.unbind() }
}
