// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import NetActivityContract

/// A task this app began: report progress, suspend, resume, complete. A value; copies refer to
/// the same task. Calls after completion are harmless no-ops.
public struct NetActivityTask: Sendable, Hashable {
    let core: ClientCore
    let id: Int

    public static func == (a: NetActivityTask, b: NetActivityTask) -> Bool { a.core === b.core && a.id == b.id }
    public func hash(into h: inout Hasher) {
        h.combine(ObjectIdentifier(core))
        h.combine(id)
    }

    func perform(_ change: @escaping @Sendable (inout TaskRecord) throws(NetActivityError) -> Void)
        async throws(NetActivityError)
    {
        let result: Result<Void, NetActivityError> = await withCheckedContinuation { c in
            let posted = core.mailbox.post { [core, id] in
                if core.isClosed {
                    c.resume(returning: .failure(ClientCore.closedError))
                } else {
                    c.resume(returning: Result { () throws(NetActivityError) in try core.ownTasks.update(id, change) })
                }
            }
            if !posted { c.resume(returning: .failure(ClientCore.closedError)) }
        }
        try result.get()
    }

    /// Reports byte progress; a size left out (nil) keeps its value, and 0 means unknown.
    /// Counters only grow and stay within known sizes (`invalidArguments` otherwise). Answers at
    /// once and is cheap to call often: the library sends the agent the latest values with at
    /// most one update in flight.
    public func setProgress(
        sent: UInt64? = nil, expectedToSend: UInt64? = nil, received: UInt64? = nil, expectedToReceive: UInt64? = nil
    ) async throws(NetActivityError) {
        try await perform { record throws(NetActivityError) in
            let now = record.progress
            let next = TaskProgress(
                sent: sent ?? now.sent, expectedToSend: expectedToSend ?? now.expectedToSend,
                received: received ?? now.received, expectedToReceive: expectedToReceive ?? now.expectedToReceive)
            do throws(TaskProgress.Refusal) {
                _ = try record.setProgress(next)
            } catch {
                throw .invalidArguments(error.message)
            }
        }
    }

    /// Reports progress that is not bytes ("60 %"): a fraction from 0 to 1, which may also go
    /// down. Panels show it as a percentage while no expected size is known; `invalidArguments`
    /// for anything outside 0...1. Cheap to call often, like `setProgress`.
    public func setFraction(_ fraction: Double) async throws(NetActivityError) {
        try await perform { record throws(NetActivityError) in
            do throws(TaskProgress.Refusal) {
                _ = try record.setFraction(fraction)
            } catch {
                throw .invalidArguments(error.message)
            }
        }
    }

    public func suspend() async throws(NetActivityError) {
        try await perform { record in _ = record.suspend() }
    }

    public func resume() async throws(NetActivityError) {
        try await perform { record in _ = record.resume() }
    }

    /// Completes the task; an empty `error` is success.
    public func complete(error: String = "") async throws(NetActivityError) {
        try await perform { record in _ = record.complete(error: error) }
    }

    /// The task's object path at the agent (`org.example.NetActivity.Task`), for panels and for
    /// `bind(toTaskAt:)` in other processes; nil while no agent holds it (just begun, no agent, or
    /// the agent restarting: a restarted agent gives it a new path), and after completion.
    public var path: String? {
        get async { await snapshot()?.path }
    }

    /// The task now; nil once it has completed and left the library.
    public func snapshot() async -> TaskSnapshot? {
        await withCheckedContinuation { c in
            let posted = core.mailbox.post { [core, id] in c.resume(returning: core.ownTasks.snapshot(of: id)) }
            if !posted { c.resume(returning: nil) }
        }
    }

    /// What a panel asked of the task (its Cancel or Pause button); only for a task begun
    /// `cancellable` or `suspendable`.
    public enum Request: Sendable, Hashable {
        case cancel
        case suspend
        case resume
    }

    /// What panels may ask of a task.
    struct Offers: Sendable, Hashable {
        var cancellable = false
        var suspendable = false
    }

    /// What panels ask of this task, as they ask it: `cancel`, `suspend` or `resume`. Nothing
    /// happens by itself: the app stops (and completes the task, by convention with the error
    /// `org.example.NetActivity.Error.Cancelled`), suspends or resumes its work, or ignores the
    /// request. Requests come only for what the task offered (`beginTask`'s `cancellable` and
    /// `suspendable`), survive agent restarts, and the stream ends when the task completes.
    ///
    /// ```swift
    /// for await request in task.requests {
    ///     switch request {
    ///     case .cancel: backup.stop()
    ///     case .suspend: backup.pause()
    ///     case .resume: backup.resume()
    ///     }
    /// }
    /// ```
    public var requests: AsyncStream<Request> {
        let (stream, continuation) = AsyncStream<Request>.makeStream(bufferingPolicy: .bufferingNewest(16))
        if !core.mailbox.post({ [core, id] in core.ownTasks.listen(id, continuation) }) { continuation.finish() }
        return stream
    }

    /// The task's states: the current one first, then one per change (including a new `path`
    /// after an agent restart); ends after `completed`.
    public var states: AsyncStream<TaskSnapshot> {
        let (stream, continuation) = AsyncStream<TaskSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(64))
        if !core.mailbox.post({ [core, id] in core.ownTasks.observe(id, continuation) }) { continuation.finish() }
        return stream
    }
}
