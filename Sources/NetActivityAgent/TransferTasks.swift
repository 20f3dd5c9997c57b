// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DequeModule
import LinuxKit
import NetActivityContract
import NetActivityCore

/// The downloader's transfers as the desktop sees them: each running transfer is the agent's own
/// activity from its start, and a task object (byte progress for panels) once a person could see
/// it: at once when asked (`announce`: DownloadImage, FetchImage's `announce`), otherwise only if
/// it still runs after `announceAfter` (the indicator's ActivationDelay), so a small image costs
/// the bus nothing but its call and reply. A task is suspended while its transfer waits and
/// running while it downloads; only the apps that asked for the transfer may read it.
final class TransferTasks {
    private let context: AgentContext
    private let tasks: any TaskFactory
    private let activity: any ActivitySink
    private let announceAfter: () -> Duration
    /// Cancels a transfer for everyone who asked for it (a host panel cancelled its task).
    private let cancel: (UInt64) -> Void

    /// What is known of each live transfer.
    private struct Transfer {
        let url: String
        var running = false
        /// The bytes so far (the task's, once published; the slow-transfer watch reads them).
        var progress = TaskProgress()
        /// Its task object, once published.
        var task: TaskEntry?
        /// The leaves of the apps that asked for it: they may read its task (see `TaskAudience`).
        var readers: Set<String> = []
    }

    private var transfers: [UInt64: Transfer] = [:]
    /// Running transfers without a task object, in the order they started, with when each is due
    /// to be published; one timer, for the first (entries of transfers that ended or were
    /// published meanwhile are skipped).
    private var unpublished: Deque<(transfer: UInt64, due: Instant)> = []
    private var publishTimer: TimerID?

    init(
        context: AgentContext, tasks: any TaskFactory, activity: any ActivitySink,
        announceAfter: @escaping () -> Duration, cancel: @escaping (UInt64) -> Void
    ) {
        self.context = context
        self.tasks = tasks
        self.activity = activity
        self.announceAfter = announceAfter
        self.cancel = cancel
    }

    /// Bytes `transfer` has received so far (0 when it is not known).
    func received(_ transfer: UInt64) -> UInt64 { transfers[transfer]?.progress.received ?? 0 }

    /// `leaf` asked for `transfer`: it may read the transfer's task, sandboxed or not.
    func noteReader(_ leaf: String, of transfer: UInt64) {
        guard transfers[transfer] != nil else { return }
        transfers[transfer]!.readers.insert(leaf)
        transfers[transfer]!.task?.readers.insert(leaf)
    }

    /// The transfer's task object, published now if it has none (running or suspended, as the
    /// transfer is). Nil when the transfer has ended already.
    func announce(_ transfer: UInt64) -> TaskEntry? {
        guard var state = transfers[transfer] else { return nil }
        if let task = state.task { return task }
        // With its progress so far, in its one InterfacesAdded.
        let task = tasks.makeAgentTask(
            description: PublishedURL.downloadDescription(state.url), running: state.running, progress: state.progress,
            readers: state.readers, onCancelRequest: bound(self) { $0.cancel(transfer) })
        // The task now holds the activity the transfer held without one.
        if state.running { activity.release(.task, for: context.uniqueName) }
        state.task = task
        transfers[transfer] = state
        return task
    }

    func queued(_ transfer: UInt64, url: String) {
        transfers[transfer] = Transfer(url: url)
    }

    func started(_ transfer: UInt64) {
        guard var state = transfers[transfer] else { return }
        state.running = true
        transfers[transfer] = state
        if let task = state.task { return tasks.resume(task) }
        // Activity from the start (the indicator's own delay hides short work); the task object
        // only once the transfer has run for the activation delay.
        try? activity.acquire(.task, for: context.uniqueName)
        unpublished.append((transfer, context.now + announceAfter()))
        schedulePublishing()
    }

    func progress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        let progress = TaskProgress(received: received, expectedToReceive: max(expected, received))
        transfers[transfer]?.progress = progress
        if let task = transfers[transfer]?.task { tasks.setProgress(task, progress) }
    }

    func paused(_ transfer: UInt64) {
        guard var state = transfers[transfer], state.running else { return }
        state.running = false
        transfers[transfer] = state
        if let task = state.task { tasks.suspend(task) } else { activity.release(.task, for: context.uniqueName) }
    }

    func ended(_ transfer: UInt64, outcome: Result<Void, ImageDownloader.Failure>) {
        guard let state = transfers.removeValue(forKey: transfer) else { return }
        guard let task = state.task else {
            if state.running { activity.release(.task, for: context.uniqueName) }
            return
        }
        let error: String =
            switch outcome {
            case .success: ""
            case .failure(.cancelled): NetActivityError.Name.cancelled.rawValue
            case .failure(.failed(let failure)): failure.name + ": " + failure.message
            }
        tasks.complete(task, error: error.prefix(utf8Bytes: NetActivityLimits.maxTaskErrorBytes))
    }

    private func schedulePublishing() {
        guard publishTimer == nil, let next = unpublished.first else { return }
        publishTimer = context.schedule(at: next.due) { [weak self] in
            guard let self else { return }
            publishTimer = nil
            publishDue()
        }
    }

    /// Publishes the task of every transfer that has run for the activation delay and still runs.
    private func publishDue() {
        let now = context.now
        while let next = unpublished.first, next.due <= now {
            unpublished.removeFirst()
            if let state = transfers[next.transfer], state.running, state.task == nil { _ = announce(next.transfer) }
        }
        if unpublished.isEmpty { unpublished = [] }  // what a burst of transfers took goes back
        schedulePublishing()
    }
}
