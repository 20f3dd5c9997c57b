// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The life of a task: `running` and `suspended` until it is completed, once, for good (the
/// contract's `State` values).
public typealias TaskState = TaskMember.State

/// Byte progress of a task, as NSURLSessionTask's four counters. An expected size of 0 means
/// "unknown" (D-Bus `t` has no -1).
///
/// The rule for updates (`validate(next:)`): counters only grow, and a counter never exceeds its
/// expected size while that size is known. Expected sizes may change freely (a redirect or a
/// retry may learn a new size). A retry that starts over is a new task.
public struct TaskProgress: Equatable, Hashable, Sendable {
    public var sent: UInt64
    public var expectedToSend: UInt64
    public var received: UInt64
    public var expectedToReceive: UInt64

    /// The fraction last given by `SetFraction`: work that is not bytes ("60 %" from a command's
    /// output). It counts only while no expected size is known.
    public var reportedFraction: Double

    public init(
        sent: UInt64 = 0, expectedToSend: UInt64 = 0, received: UInt64 = 0, expectedToReceive: UInt64 = 0,
        reportedFraction: Double = 0
    ) {
        self.sent = sent
        self.expectedToSend = expectedToSend
        self.received = received
        self.expectedToReceive = expectedToReceive
        self.reportedFraction = reportedFraction
    }

    /// Whether an expected size is known in either direction (then the bytes decide the fraction).
    public var hasKnownSize: Bool { expectedToSend > 0 || expectedToReceive > 0 }

    /// Whether there is a fraction to show: a known size, or a reported fraction above 0.
    public var isMeasured: Bool { hasKnownSize || reportedFraction > 0 }

    /// Done over expected, counting only directions whose size is known; with none known, the
    /// reported fraction (0 when none was reported).
    public var fraction: Double {
        guard hasKnownSize else { return reportedFraction }
        var total = 0.0
        var done = 0.0
        if expectedToSend > 0 {
            total += Double(expectedToSend)
            done += Double(min(sent, expectedToSend))
        }
        if expectedToReceive > 0 {
            total += Double(expectedToReceive)
            done += Double(min(received, expectedToReceive))
        }
        return total > 0 ? done / total : 0
    }

    /// Why an update is refused; the message names the value (it becomes InvalidArgs).
    public struct Refusal: Error, Equatable, Sendable {
        public let message: String
        public init(message: String) { self.message = message }
    }

    /// Checks a fraction for `SetFraction`: finite, from 0 to 1.
    public static func validate(fraction: Double) throws(Refusal) {
        guard fraction.isFinite, fraction >= 0, fraction <= 1 else {
            throw Refusal(message: "a fraction is from 0 to 1, not \(fraction)")
        }
    }

    /// Checks that `next` may follow `self`.
    public func validate(next: TaskProgress) throws(Refusal) {
        for (name, old, new) in [
            ("CountOfBytesSent", sent, next.sent), ("CountOfBytesReceived", received, next.received),
        ]
        where new < old {
            throw Refusal(
                message:
                    "\(name) went back from \(old) to \(new); byte counters only grow (a retry from the start is a new task)"
            )
        }
        for (name, count, expectedName, expected) in [
            ("CountOfBytesSent", next.sent, "CountOfBytesExpectedToSend", next.expectedToSend),
            ("CountOfBytesReceived", next.received, "CountOfBytesExpectedToReceive", next.expectedToReceive),
        ] where expected > 0 && count > expected {
            throw Refusal(message: "\(name) \(count) exceeds \(expectedName) \(expected) (use 0 for an unknown size)")
        }
    }
}

/// One task's state, pure: the agent owns one per task object and the client library one per task
/// it began, so both apply the same rules.
///
/// A task counts one unit of activity exactly while `running`: every transition reports the change
/// of that count (`activityDelta`), so suspend-then-complete releases once, never twice.
public struct TaskRecord: Sendable, Equatable {
    /// The owner's unique bus name (the client library's copy takes each new connection's).
    public var owner: String
    public let description: String
    public private(set) var state: TaskState
    public private(set) var progress: TaskProgress
    /// Empty until the task completes with an error.
    public private(set) var error: String = ""

    /// What a call changed; nil from a mutating call means it was a harmless no-op.
    public struct Change: Equatable, Sendable {
        public var stateChanged: Bool
        /// -1, 0 or +1 to the owner's activity.
        public var activityDelta: Int
        public init(stateChanged: Bool, activityDelta: Int) {
            self.stateChanged = stateChanged
            self.activityDelta = activityDelta
        }
    }

    public init(
        owner: String, description: String, state: TaskState = .running, progress: TaskProgress = TaskProgress()
    ) {
        precondition(state != .completed, "a task starts running or suspended")
        self.owner = owner
        self.description = description
        self.state = state
        self.progress = progress
    }

    /// The activity this task holds for its owner now.
    public var activity: Int { state == .running ? 1 : 0 }

    /// Done over expected; 1 once completed successfully.
    public var fractionCompleted: Double {
        state == .completed && error.isEmpty ? 1 : progress.fraction
    }

    /// running -> suspended. Anything else is a no-op.
    public mutating func suspend() -> Change? {
        move(to: .suspended, from: .running)
    }

    /// suspended -> running. Resume while running, or after completion, is a no-op.
    public mutating func resume() -> Change? {
        move(to: .running, from: .suspended)
    }

    /// Completes the task (an empty `error` is success). Completing twice is a no-op: the first
    /// outcome stands.
    public mutating func complete(error: String) -> Change? {
        guard state != .completed else { return nil }
        let delta = -activity
        state = .completed
        self.error = error
        return Change(stateChanged: true, activityDelta: delta)
    }

    /// Applies new byte counts (see `TaskProgress.validate`). After completion the counts are
    /// frozen and updates are ignored (returns false).
    public mutating func setProgress(_ next: TaskProgress) throws(TaskProgress.Refusal) -> Bool {
        guard state != .completed else { return false }
        try progress.validate(next: next)
        var next = next
        next.reportedFraction = progress.reportedFraction
        guard next != progress else { return false }
        progress = next
        return true
    }

    /// Sets the fraction of work that is not counted in bytes (0...1; it may go down as well as
    /// up). It is FractionCompleted while no expected size is known. Ignored after completion
    /// (returns false), like byte counts.
    public mutating func setFraction(_ fraction: Double) throws(TaskProgress.Refusal) -> Bool {
        guard state != .completed else { return false }
        try TaskProgress.validate(fraction: fraction)
        guard fraction != progress.reportedFraction else { return false }
        progress.reportedFraction = fraction
        return true
    }

    private mutating func move(to target: TaskState, from source: TaskState) -> Change? {
        guard state == source else { return nil }
        let before = activity
        state = target
        return Change(stateChanged: true, activityDelta: activity - before)
    }
}
