// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import Foundation
@_exported public import NetActivityClient

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// A URLSession (FoundationNetworking's, on Linux) whose every task is tracked at the agent:
///
/// ```swift
/// let web = TrackedURLSession(activity: await NetActivity.connect())
/// let (data, response) = try await web.data(for: URLRequest(url: url))
/// ```
///
/// Each request is a task described as "GET https://..." with bytes sent and received. A task
/// from `dataTask(with:)` starts `suspended`, as URLSession's do, and follows the app's
/// `resume()` and `suspend()`. It completes with success; `HTTP <code>` for a status of 400 or
/// more; the error's description; or `Cancelled`. The session keeps its delegate until
/// `invalidate()`, as URLSession does.
public final class TrackedURLSession: Sendable {
    public let session: URLSession
    public let activity: NetActivity
    private let delegate: Delegate

    public init(configuration: URLSessionConfiguration = .default, activity: NetActivity) {
        self.activity = activity
        delegate = Delegate()
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// `URLSession.data(for:)`, tracked. Cancelling the Swift task cancels the request.
    public func data(for request: URLRequest) async throws -> (Data, URLResponse) {
        let outcome = Outcome()
        let task = await dataTask(with: request) { data, response, error in
            if let response, error == nil {
                outcome.deliver(.success((data, response)))
            } else {
                outcome.deliver(.failure(error ?? URLError(.badServerResponse)))
            }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { c in
                outcome.wait(c)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// A data task that starts suspended; drive it with `resume()`, `suspend()` and `cancel()`.
    /// `completion` gets the body, the response and the error once it ends.
    public func dataTask(
        with request: URLRequest, completion: (@Sendable (Data, URLResponse?, (any Error)?) -> Void)? = nil
    ) async -> TrackedDataTask {
        let method = request.httpMethod ?? "GET"
        let url = TrackedTransfer.publishable(url: request.url?.absoluteString ?? "")
        let sendLength = UInt64(max(0, request.httpBody?.count ?? 0))
        let transfer = await activity.beginTransfer("\(method) \(url)", expectedToSend: sendLength, suspended: true)
        let task = session.dataTask(with: request)
        delegate.track(task, transfer, completion)
        return TrackedDataTask(task: task, transfer: transfer)
    }

    /// Lets running tasks finish, then releases the session and its delegate.
    public func invalidate() {
        session.finishTasksAndInvalidate()
    }
}

/// A URLSessionDataTask with its tracked transfer: pausing and resuming show at the agent.
/// On Linux, Foundation starts a resumed task's transfer once its URL cache has answered and queues
/// a stop or start behind that: a `suspend()` and a `resume()` both made before it can make
/// Foundation fail a fatal check (swift-corelibs-foundation's `NativeProtocol.stopLoading`).
public final class TrackedDataTask: Sendable {
    public let task: URLSessionDataTask
    public let transfer: TrackedTransfer

    init(task: URLSessionDataTask, transfer: TrackedTransfer) {
        self.task = task
        self.transfer = transfer
    }

    public func resume() {
        transfer.resume()
        task.resume()
    }

    public func suspend() {
        task.suspend()
        transfer.suspend()
    }

    public func cancel() { task.cancel() }
}

/// The session's delegate: counts bytes and completes transfers. URLSession calls it on its own
/// serial queue; `lock` guards the table against the app's threads adding tasks.
private final class Delegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    typealias Completion = @Sendable (Data, URLResponse?, (any Error)?) -> Void

    private final class Entry {
        let transfer: TrackedTransfer
        var completion: Completion?
        var data = Data()
        init(transfer: TrackedTransfer, completion: Completion?) {
            self.transfer = transfer
            self.completion = completion
        }
    }

    private let lock = NSLock()
    private var entries: [Int: Entry] = [:]

    func track(_ task: URLSessionTask, _ transfer: TrackedTransfer, _ completion: Completion?) {
        lock.withLock { entries[task.taskIdentifier] = Entry(transfer: transfer, completion: completion) }
    }

    private func entry(_ task: URLSessionTask) -> Entry? {
        lock.withLock { entries[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        if response.expectedContentLength > 0 {
            entry(dataTask)?.transfer.setExpected(toReceive: UInt64(response.expectedContentLength))
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let entry = entry(dataTask) else { return }
        entry.data.append(data)
        entry.transfer.didReceive(data.count)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        guard let entry = entry(task) else { return }
        if totalBytesExpectedToSend > 0 { entry.transfer.setExpected(toSend: UInt64(totalBytesExpectedToSend)) }
        entry.transfer.didSend(Int(bytesSent))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = lock.withLock({ entries.removeValue(forKey: task.taskIdentifier) }) else { return }
        let outcome: String
        if let error {
            outcome =
                (error as? URLError)?.code == .cancelled ? TrackedTransfer.cancelled : TrackedTransfer.describe(error)
        } else if let http = task.response as? HTTPURLResponse, http.statusCode >= 400 {
            outcome = "HTTP \(http.statusCode) \(HTTPURLResponse.localizedString(forStatusCode: http.statusCode))"
        } else {
            outcome = ""
        }
        entry.transfer.finish(error: outcome)
        entry.completion?(entry.data, task.response, error)
    }
}

/// A result and a continuation that may arrive in either order (a cancellation can complete the
/// task before the continuation exists).
private final class Outcome: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<(Data, URLResponse), any Error>?
    private var continuation: CheckedContinuation<(Data, URLResponse), any Error>?

    func deliver(_ r: Result<(Data, URLResponse), any Error>) { meet(r, nil) }

    func wait(_ c: CheckedContinuation<(Data, URLResponse), any Error>) { meet(nil, c) }

    /// Keeps what arrives; the second of the two resumes the continuation.
    private func meet(
        _ r: Result<(Data, URLResponse), any Error>?, _ c: CheckedContinuation<(Data, URLResponse), any Error>?
    ) {
        lock.lock()
        if let r { result = r }
        if let c { continuation = c }
        guard let r = result, let c = continuation else { return lock.unlock() }
        result = nil
        continuation = nil
        lock.unlock()
        c.resume(with: r)
    }
}
