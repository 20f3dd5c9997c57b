// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import AsyncHTTPClient
public import NIOCore
import NIOHTTP1
@_exported public import NetActivityClient

/// async-http-client with every request tracked at the agent: AFNetworking's promise that you
/// never count activity yourself. One line to adopt:
///
/// ```swift
/// let http = TrackedHTTPClient(.shared, activity: await NetActivity.connect())
/// let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
/// let body = try await response.body.collect(upTo: 1 << 20)
/// ```
///
/// Each request is a task (`org.example.NetActivity.Task`, described as "GET https://...") that
/// panels list and progress bars follow. It is `running` from the request until the response
/// body has been read to its end, with bytes received counted against Content-Length. It
/// completes with success; with `HTTP <code> <reason>` for a status of 400 or more; with the
/// error when the request or the body fails; and with `Cancelled` when the Swift task is
/// cancelled or the response is dropped unread. A HEAD request, or a response with no body
/// (204, 304, Content-Length 0), completes as soon as its head arrives. Bytes sent are counted
/// when the request carries a Content-Length header (else only the response is).
///
/// async-http-client cannot pause a request, so tracked tasks are never `suspended`; an HTTP stack
/// that can reports it through `TrackedTransfer.suspend()` and `resume()`.
///
/// Tracking never changes what the wrapped client does: if the agent is away the tasks are held
/// by the library for the next agent, and if the agent refuses one (a client's limit of live
/// tasks) the request simply runs untracked.
public struct TrackedHTTPClient: Sendable {
    public let client: HTTPClient
    public let activity: NetActivity

    public init(_ client: HTTPClient = .shared, activity: NetActivity) {
        self.client = client
        self.activity = activity
    }

    /// `HTTPClient.execute(_:timeout:)`, tracked. `description` defaults to "METHOD URL".
    public func execute(
        _ request: HTTPClientRequest, timeout: TimeAmount, description: String? = nil
    ) async throws -> HTTPClientResponse {
        try await execute(request, deadline: .now() + timeout, description: description)
    }

    /// `HTTPClient.execute(_:deadline:)`, tracked.
    public func execute(
        _ request: HTTPClientRequest, deadline: NIODeadline, description: String? = nil
    ) async throws -> HTTPClientResponse {
        let sendLength = request.headers.first(name: "content-length").flatMap(UInt64.init) ?? 0
        let transfer = await activity.beginTransfer(
            description ?? "\(request.method.rawValue) \(TrackedTransfer.publishable(url: request.url))",
            expectedToSend: sendLength)
        var request = request
        if sendLength > 0, let body = request.body {
            // The same framing (a known length), with each part counted as it goes out.
            request.body = .stream(
                CountingSequence(base: body, count: { transfer.didSend($0) }), length: .known(Int64(sendLength)))
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, deadline: deadline)
        } catch {
            transfer.finish(error: TrackedTransfer.describe(error))
            throw error
        }
        let code = response.status.code
        let outcome = code >= 400 ? "HTTP \(code) \(response.status.reasonPhrase)" : ""
        let receiveLength = response.headers.first(name: "content-length").flatMap(UInt64.init)
        if request.method == .HEAD || code == 204 || code == 304 || receiveLength == 0 {
            transfer.finish(error: outcome)
            return response
        }
        if let receiveLength { transfer.setExpected(toReceive: receiveLength) }
        var tracked = response
        tracked.body = .stream(
            CountingSequence(
                base: response.body, count: { transfer.didReceive($0) },
                end: { error in
                    transfer.finish(error: error.map(TrackedTransfer.describe) ?? outcome)
                }))
        return tracked
    }
}

/// Passes a body through, counting its bytes, and says how it ended (nil: at its end). Holding
/// `transfer` through `count` keeps the task running until the body is read or dropped.
struct CountingSequence<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let count: @Sendable (Int) -> Void
    var end: @Sendable ((any Error)?) -> Void = { _ in }

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let count: @Sendable (Int) -> Void
        let end: @Sendable ((any Error)?) -> Void

        mutating func next() async throws -> ByteBuffer? {
            do {
                guard let part = try await base.next() else {
                    end(nil)
                    return nil
                }
                count(part.readableBytes)
                return part
            } catch {
                end(error)
                throw error
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), count: count, end: end)
    }
}
