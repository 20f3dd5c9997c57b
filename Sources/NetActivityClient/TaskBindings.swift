// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityContract

// The UIActivityIndicatorView, UIRefreshControl and UIProgressView categories of AFNetworking,
// as bindings a Linux UI can drive: each follows one task at a time (any client's, by path, or
// one of this app's own) and tells the app what to show through a closure.
//
// Each has two forms. Made on the main actor without an executor, its closure is a main-actor
// closure (it may touch `@MainActor` views and need not be Sendable). Given `callbacks:`, its
// closure runs on that `CallbackExecutor`. Either way, one at a time and in order, never on the
// library's thread: a closure that blocks delays only later closures.
//
// The bindings are TaskSpinnerBinding, RefreshControlBinding and ProgressBinding, each in its own
// file; this one holds what they share: the follower of one task and its reactions, and the same
// bindings as async sequences.

// MARK: the same as async sequences

extension NetActivity {
    /// A spinner's states for the task at `path` (any client's), as `TaskSpinnerBinding` reports
    /// them: the state at once (running: `true`), then each change; the sequence ends after the
    /// task completes (`false`). For a completed or unknown task: `false`, then the end.
    public func spinnerStates(ofTaskAt path: String) -> AsyncStream<Bool> {
        follow(.path(path)) { SpinnerReaction(report: $0) }
    }

    /// A spinner's states for one of this app's tasks (it survives agent restarts).
    public func spinnerStates(of task: NetActivityTask) -> AsyncStream<Bool> {
        follow(.task(task)) { SpinnerReaction(report: $0) }
    }

    /// A refresh control's states, as `RefreshControlBinding` reports them; the sequence ends when
    /// the binding would stop following.
    public func refreshStates(ofTaskAt path: String) -> AsyncStream<Bool> {
        follow(.path(path)) { RefreshReaction(report: $0) }
    }

    public func refreshStates(of task: NetActivityTask) -> AsyncStream<Bool> {
        follow(.task(task)) { RefreshReaction(report: $0) }
    }

    /// A progress bar's values, as `ProgressBinding` reports them (only while the expected size is
    /// known); the sequence ends after the task completes, at once for a completed or unknown one.
    public func progress(ofTaskAt path: String, direction: ProgressBinding.Direction) -> AsyncStream<TransferProgress> {
        follow(.path(path)) { ProgressReaction(direction: direction, report: $0) }
    }

    public func progress(of task: NetActivityTask, direction: ProgressBinding.Direction) -> AsyncStream<
        TransferProgress
    > {
        follow(.task(task)) { ProgressReaction(direction: direction, report: $0) }
    }

    /// A follower whose reports go into a stream, which ends when the follower stops. The stream
    /// keeps the follower; dropping the stream (or the loop over it) unbinds.
    private func follow<T: Sendable>(
        _ target: TaskFollower.Target, _ reaction: (@escaping @Sendable (T) -> Void) -> any TaskReaction
    ) -> AsyncStream<T> {
        let (stream, continuation) = AsyncStream<T>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let inner = reaction { continuation.yield($0) }
        let follower = TaskFollower(core: core, reaction: EndingReaction(inner) { continuation.finish() })
        continuation.onTermination = { _ in follower.unbind() }
        follower.bind(target)
        return stream
    }
}

/// Ends a stream when the reaction it wraps stops following.
final class EndingReaction: TaskReaction {
    private let inner: any TaskReaction
    private let end: () -> Void
    init(_ inner: any TaskReaction, end: @escaping () -> Void) {
        self.inner = inner
        self.end = end
    }

    func react(to snapshot: TaskSnapshot?, first: Bool) -> Bool {
        let keep = inner.react(to: snapshot, first: first)
        if !keep { end() }
        return keep
    }
}

// MARK: the shared machinery

/// What a binding does with its task's snapshots. `first` is the snapshot at binding; nil means
/// the task can no longer be followed. Returns whether to keep following.
protocol TaskReaction: AnyObject {
    func react(to snapshot: TaskSnapshot?, first: Bool) -> Bool
}

/// One task at a time for one binding. Every method body runs on the client's thread (through
/// its mailbox), so a rebinding and the old task's last signal can never interleave.
///
/// @unchecked Sendable: `key`, `generation` and the reaction are touched only on that thread.
final class TaskFollower: @unchecked Sendable {
    enum Target {
        case path(String)
        case task(NetActivityTask)
    }

    private let core: ClientCore
    private let reaction: any TaskReaction
    private var key: Int?
    /// The watch on another connection's thread, for a task of another `NetActivity`.
    private var foreign: (core: ClientCore, watch: ForeignWatch)?
    /// Bumped by every bind, unbind and end: a watcher of an older binding changes nothing.
    private var generation = 0

    init(core: ClientCore, reaction: any TaskReaction) {
        self.core = core
        self.reaction = reaction
    }

    deinit {
        if let key { core.mailbox.post { [core] in core.unwatchTask(key) } }
        if let foreign { foreign.watch.end(on: foreign.core) }
    }

    func bind(_ target: Target) {
        core.mailbox.post { [self] in
            let generation = drop()
            var first = true
            // Weak: the binding may be released by the app's thread while a signal is being handled here.
            let watcher: TaskWatcher = { [weak self] snapshot in
                guard let self, self.generation == generation else { return }
                let keep = self.reaction.react(to: snapshot, first: first)
                first = false
                if !keep { _ = self.drop() }
            }
            let key: Int
            switch target {
            case .path(let path):
                key = core.watchTask(path: path, watcher)
            case .task(let task) where task.core === core:
                key = core.watchTask(id: task.id, watcher)
            case .task(let task):
                // A task of another connection: its state lives on that connection's thread, which
                // forwards each snapshot here.
                let watch = ForeignWatch()
                foreign = (task.core, watch)
                watch.start(on: task.core, id: task.id, forwardingTo: core, UncheckedSendable(watcher))
                return
            }
            // The watcher may have ended the binding already (a completed or unknown task).
            if self.generation == generation { self.key = key } else { core.unwatchTask(key) }
        }
    }

    func unbind() {
        core.mailbox.post { [self] in _ = drop() }
    }

    /// Ends the current binding; returns the new generation.
    private func drop() -> Int {
        generation += 1
        if let key {
            core.unwatchTask(key)
            self.key = nil
        }
        if let foreign {
            foreign.watch.end(on: foreign.core)
            self.foreign = nil
        }
        return generation
    }
}

/// A watch of one connection's task on behalf of a binding of another. @unchecked Sendable:
/// `key` and `ended` are touched only on the watched connection's thread.
final class ForeignWatch: @unchecked Sendable {
    private var key: Int?
    private var ended = false

    func start(on owner: ClientCore, id: Int, forwardingTo home: ClientCore, _ watcher: UncheckedSendable<TaskWatcher>)
    {
        let posted = owner.mailbox.post { [self] in
            guard !ended else { return }
            key = owner.watchTask(id: id) { snapshot in
                home.mailbox.post { watcher.value(snapshot) }
            }
        }
        if !posted { home.mailbox.post { watcher.value(nil) } }
    }

    func end(on owner: ClientCore) {
        owner.mailbox.post { [self] in
            ended = true
            if let key { owner.unwatchTask(key) }
            key = nil
        }
    }
}

final class SpinnerReaction: TaskReaction {
    private let report: @Sendable (Bool) -> Void
    private var animating: Bool?
    init(report: @escaping @Sendable (Bool) -> Void) { self.report = report }

    func react(to snapshot: TaskSnapshot?, first: Bool) -> Bool {
        let state = snapshot?.state ?? .completed
        // At binding the spinner is told where it stands; after that, only changes.
        if first || (state == .running) != animating { report(state == .running) }
        animating = state == .running
        return state != .completed
    }
}

final class RefreshReaction: TaskReaction {
    private let report: @Sendable (Bool) -> Void
    private var refreshing: Bool?
    init(report: @escaping @Sendable (Bool) -> Void) { self.report = report }

    func react(to snapshot: TaskSnapshot?, first: Bool) -> Bool {
        let state = snapshot?.state ?? .completed
        if first || (state == .running) != refreshing { report(state == .running) }
        refreshing = state == .running
        // Attached only to a task running at binding.
        return state != .completed && (!first || state == .running)
    }
}

final class ProgressReaction: TaskReaction {
    private let direction: ProgressBinding.Direction
    private let report: @Sendable (TransferProgress) -> Void
    private var last: TransferProgress?
    init(direction: ProgressBinding.Direction, report: @escaping @Sendable (TransferProgress) -> Void) {
        self.direction = direction
        self.report = report
    }

    func react(to snapshot: TaskSnapshot?, first: Bool) -> Bool {
        guard let snapshot, !(first && snapshot.state == .completed) else { return false }
        let progress =
            switch direction {
            case .upload:
                TransferProgress(completed: snapshot.countOfBytesSent, expected: snapshot.countOfBytesExpectedToSend)
            case .download:
                TransferProgress(
                    completed: snapshot.countOfBytesReceived, expected: snapshot.countOfBytesExpectedToReceive)
            }
        if progress.expected > 0, progress != last {
            last = progress
            report(progress)
        }
        return snapshot.state != .completed
    }
}
