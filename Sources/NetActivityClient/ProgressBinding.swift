// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// Bytes done of bytes expected, in one direction.
public struct TransferProgress: Sendable, Equatable {
    public var completed: UInt64
    public var expected: UInt64
    /// completed / expected, at most 1.
    public var fraction: Double { min(1, Double(completed) / Double(expected)) }

    public init(completed: UInt64, expected: UInt64) {
        self.completed = completed
        self.expected = expected
    }
}

/// Fills a progress bar from a task's upload or download (UIProgressView+AFNetworking).
///
/// Reports `sent / expected to send` (`.upload`) or `received / expected to receive` (`.download`)
/// at binding and on each change, and only while the expected size is known (> 0); the last
/// report comes with completion, and then the binding stops. A completed or unknown task is
/// ignored: nothing is reported. Binding again drops the previous task.
public final class ProgressBinding: Sendable {
    public enum Direction: Sendable {
        case upload, download
    }

    private let follower: TaskFollower

    /// `onProgress` runs on the main actor.
    @MainActor
    public convenience init(
        _ activity: NetActivity, direction: Direction, onProgress: @escaping @MainActor (TransferProgress) -> Void
    ) {
        self.init(
            activity, direction: direction, callbacks: .mainActor, onProgress: CallbackExecutor.onMainActor(onProgress))
    }

    /// The executor form: `onProgress` runs on `callbacks`.
    public init(
        _ activity: NetActivity, direction: Direction, callbacks: CallbackExecutor,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) {
        follower = TaskFollower(
            core: activity.core,
            reaction: ProgressReaction(direction: direction, report: callbacks.delivering(onProgress)))
    }

    public func bind(toTaskAt path: String) { follower.bind(.path(path)) }
    public func bind(to task: NetActivityTask) { follower.bind(.task(task)) }
    public func unbind() { follower.unbind() }
}
