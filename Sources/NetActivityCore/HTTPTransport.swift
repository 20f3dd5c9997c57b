// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// One HTTP response as a transport delivers it: status, the headers the cache policy reads, and
/// the body where the transport put it (the agent's sealed memfd, or an array).
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: HTTPCachePolicy.Headers
    public let body: any FetchedBody

    public init(status: Int, headers: HTTPCachePolicy.Headers = .init([]), body: any FetchedBody) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What the downloader fetches through (Nuke's `DataLoading`): the agent's libcurl fetcher, or a
/// test's gated fake. Everything runs on the downloader's thread.
public protocol HTTPTransport: AnyObject {
    /// Starts a GET of `url` for `app` with extra request `headers`, refusing a body over
    /// `maxBytes` (`TooLarge`). With `reach`, every connection it makes or reuses (after DNS, on
    /// every redirect) must be to an address `reach` allows, else it fails with `AccessDenied`.
    /// `completion` comes at most once: later, or inside this call when the transport fails at
    /// once (the caller copes with both). Returns how to cancel it.
    func fetch(
        url: String, app: String, headers: [(String, String)], maxBytes: Int, reach: NetworkReach?,
        progress: @escaping (_ received: UInt64, _ expected: UInt64) -> Void,
        completion: @escaping (Result<HTTPResponse, ImageDownloader.Failure>) -> Void
    ) -> () -> Void

    /// The system is about to sleep, and every transfer under way is about to be cancelled: a
    /// transport that can continue a body later (a range request) keeps what it has now.
    func keepPartialBodies()
}

extension HTTPTransport {
    public func keepPartialBodies() {}
}
