// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityContract
import NetActivityCore

/// One task object: the pure record plus what the agent needs to announce it.
public final class TaskEntry {
    let path: String
    var record: TaskRecord
    /// Progress signals: at most one per 100 ms, the latest values always sent (docs/contract.md).
    var coalescer = ChangeCoalescer(interval: .milliseconds(100))
    var progressTimer: TimerID?
    var lingerTimer: TimerID?
    /// What observers were last told.
    var announced: TaskProgress
    var announcedFraction: Double
    /// The app's desktop entry, for dock progress (com.canonical.Unity.LauncherEntry).
    let desktopID: String?
    /// The leaf the task is charged to (`ClientIdentity.leaf`); nil for the agent's own tasks,
    /// which no app's share pays for.
    let app: String?
    /// Whether it is in the object tree (see `TaskAudience`).
    var listed = false
    /// For the agent's own (download) tasks: the leaves of the apps that asked for the transfer,
    /// which may read it whether sandboxed or not.
    var readers: Set<String> = []
    /// Peers that read it directly (Properties): its own signals reach them.
    var followers: [String] = []
    /// What panels may ask of its owner (BeginTask's `cancellable` and `suspendable`).
    let offers: TaskOffers
    /// When each request was last passed to the owner: the same one again within
    /// `TaskOffers.repeatAfter` is not passed on (a panel's double click, or a flood, reaches the
    /// owner once a second at most), unless the opposite (pause, resume) was passed in between.
    var passed: [TaskRequest: Instant] = [:]
    /// For the agent's own tasks: what a cancel request does (a download's: cancel the transfer).
    var onCancelRequest: (() -> Void)?
    /// When it began (KDE's job tracker shows tasks older than the activation delay).
    var created = Instant.zero

    init(path: String, record: TaskRecord, desktopID: String? = nil, app: String?, offers: TaskOffers = TaskOffers()) {
        self.path = path
        self.record = record
        self.desktopID = desktopID
        self.app = app
        self.offers = offers
        announced = record.progress
        announcedFraction = record.fractionCompleted
    }
}

/// What panels may ask of a task's owner.
struct TaskOffers: Equatable {
    var cancellable = false
    var suspendable = false
    /// How long the same request is not passed on again.
    static let repeatAfter: Duration = .seconds(1)
}

/// A panel's request to a task's owner.
enum TaskRequest: Hashable {
    case cancel
    case suspend(Bool)
}
