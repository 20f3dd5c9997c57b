// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract
public import NetActivityCore

/// A gated stand-in for HTTP (Nuke's `MockDataLoader`), for driving the agent's download service:
/// every GET waits until the test answers it, unless `failAtOnce` makes the transport fail inside
/// the call that started it (a missing libcurl does so).
public final class FakeTransport: HTTPTransport {
    public private(set) var requested: [String] = []
    /// The `reach` each fetch was given, in order (nil: unrestricted).
    public private(set) var reaches: [NetworkReach?] = []
    public private(set) var cancelled: [String] = []
    /// When set, every fetch fails with it inside `fetch` itself.
    public var failAtOnce: NetActivityError?
    private var pending:
        [(
            url: String, progress: (UInt64, UInt64) -> Void,
            completion: (Result<HTTPResponse, ImageDownloader.Failure>) -> Void
        )] = []

    public init() {}

    public var running: [String] { pending.map(\.url) }

    public func fetch(
        url: String, app: String, headers: [(String, String)], maxBytes: Int, reach: NetworkReach?,
        progress: @escaping (UInt64, UInt64) -> Void,
        completion: @escaping (Result<HTTPResponse, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        requested.append(url)
        reaches.append(reach)
        if let failAtOnce {
            completion(.failure(.failed(failAtOnce)))
            return {}
        }
        pending.append((url, progress, completion))
        return { [weak self] in
            guard let self, let i = pending.firstIndex(where: { $0.url == url }) else { return }
            pending.remove(at: i)
            cancelled.append(url)
        }
    }

    /// Reports progress of the running GET of `url`.
    public func progress(_ url: String, received: UInt64, expected: UInt64) {
        pending.first { $0.url == url }?.progress(received, expected)
    }

    /// Answers the running GET of `url`; false when none runs.
    @discardableResult
    public func respond(_ url: String, status: Int = 200, bytes: [UInt8] = TestImages.png(width: 1, height: 1)) -> Bool
    {
        guard let i = pending.firstIndex(where: { $0.url == url }) else { return false }
        let p = pending.remove(at: i)
        p.completion(.success(HTTPResponse(status: status, body: bytes)))
        return true
    }

    /// Fails the running GET of `url`; false when none runs.
    @discardableResult
    public func fail(_ url: String, _ error: NetActivityError) -> Bool {
        guard let i = pending.firstIndex(where: { $0.url == url }) else { return false }
        pending.remove(at: i).completion(.failure(.failed(error)))
        return true
    }
}
