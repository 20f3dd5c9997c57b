// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// One network request as a task at the agent, for adapters of HTTP stacks (the
/// async-http-client adapter, `NetActivityAsyncHTTPClient`, is one): report bytes as they move
/// and the task's panels and progress bars follow.
///
/// It completes exactly once: with `finish(error:)`, or as `Cancelled` when the last reference
/// goes unfinished, so a request that throws or is cancelled leaves nothing behind. Nothing here
/// waits or throws: calls are handed to the client's thread, in order. If the agent refused the
/// task (a client's limit of live tasks), the request goes on untracked and the calls do nothing.
public final class TrackedTransfer: Sendable {
    /// The task, or nil when the agent refused it.
    public let task: NetActivityTask?

    init(task: NetActivityTask?) { self.task = task }

    deinit { finish(error: Self.cancelled) }

    /// Sets the sizes that are known (0: unknown).
    public func setExpected(toSend: UInt64? = nil, toReceive: UInt64? = nil) {
        change { p in
            if let toSend { p.expectedToSend = max(toSend, p.sent) }
            if let toReceive { p.expectedToReceive = max(toReceive, p.received) }
        }
    }

    /// `count` more bytes of the request body went out. A size that turns out too small grows
    /// with the count (a server may send more than it announced).
    public func didSend(_ count: Int) {
        guard count > 0 else { return }
        change { p in
            p.sent += UInt64(count)
            if p.expectedToSend > 0 { p.expectedToSend = max(p.expectedToSend, p.sent) }
        }
    }

    /// `count` more bytes of the response body came in.
    public func didReceive(_ count: Int) {
        guard count > 0 else { return }
        change { p in
            p.received += UInt64(count)
            if p.expectedToReceive > 0 { p.expectedToReceive = max(p.expectedToReceive, p.received) }
        }
    }

    /// The app paused the request: the task is `suspended` and stops counting as activity.
    public func suspend() { update { record in _ = record.suspend() } }

    public func resume() { update { record in _ = record.resume() } }

    /// Completes the task: an empty `error` is success. Only the first completion counts. Errors
    /// longer than the agent's 1,024 bytes are cut at a character boundary.
    public func finish(error: String = "") {
        let error = TrackedTransfer.fitting(error)
        update { record in _ = record.complete(error: error) }
    }

    private func change(_ body: @escaping @Sendable (inout TaskProgress) -> Void) {
        update { record in
            var p = record.progress
            body(&p)
            _ = try? record.setProgress(p)
        }
    }

    private func update(_ change: @escaping @Sendable (inout TaskRecord) -> Void) {
        guard let task else { return }
        task.core.mailbox.post { [core = task.core, id = task.id] in
            try? core.ownTasks.update(id) { record in change(&record) }
        }
    }

    /// The agent's limit for descriptions and errors.
    static let textLimit = NetActivityLimits.maxDescriptionBytes

    /// What a task description may say about `url`: every client on the bus can read it, so the
    /// userinfo, the query and the fragment are left out ("GET https://example.com/a.png").
    public static func publishable(url: String) -> String { PublishedURL.redact(url) }

    /// `text` cut to at most `limit` bytes of UTF-8 at a character boundary, with "…" when cut.
    static func fitting(_ text: String, limit: Int = textLimit) -> String {
        guard text.utf8.count > limit else { return text }
        var out = ""
        var used = 3  // "…"
        for c in text {
            let n = String(c).utf8.count
            if used + n > limit { break }
            out.append(c)
            used += n
        }
        return out + "…"
    }
}

extension NetActivity {
    /// Begins a tracked transfer: a task, running unless `suspended`, with the description (cut to
    /// 1,024 bytes). It never fails: when the agent refuses the task, the transfer is untracked.
    public func beginTransfer(
        _ description: String, expectedToSend: UInt64 = 0, expectedToReceive: UInt64 = 0, suspended: Bool = false
    ) async -> TrackedTransfer {
        let task = try? await beginTask(
            TrackedTransfer.fitting(description), expectedToSend: expectedToSend, expectedToReceive: expectedToReceive,
            suspended: suspended)
        return TrackedTransfer(task: task)
    }

    /// Runs `body` as a tracked transfer and completes it however `body` ends: success, the
    /// error's description, or `Cancelled` for a cancelled Swift task.
    public func withTransfer<T>(
        _ description: String, expectedToSend: UInt64 = 0, expectedToReceive: UInt64 = 0,
        isolation: isolated (any Actor)? = #isolation, _ body: (TrackedTransfer) async throws -> T
    ) async throws -> T {
        let transfer = await beginTransfer(
            description, expectedToSend: expectedToSend, expectedToReceive: expectedToReceive)
        do {
            let value = try await body(transfer)
            transfer.finish()
            return value
        } catch {
            transfer.finish(error: TrackedTransfer.describe(error))
            throw error
        }
    }
}

extension TrackedTransfer {
    /// A cancelled transfer's `Error`: the contract's full error name, as the agent's downloader
    /// writes it, so a panel reads one name for a cancellation whoever set it.
    public static let cancelled = NetActivityError.Name.cancelled.rawValue

    /// How an error reads in the task's `Error` property.
    public static func describe(_ error: any Error) -> String {
        if error is CancellationError { return cancelled }
        let text = String(describing: error)
        return text.isEmpty ? "Failed" : text
    }
}
