// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract
public import NetActivityCore

/// A gated, counting stand-in for the network (Nuke's MockDataLoader idea): every fetch waits
/// until the test completes it, and the fake counts what was started, cancelled and running.
/// A cancelled fetch keeps its completion, so a test can deliver it late (a racy transport).
public final class FakeFetcher {
    public private(set) var started: [ImageDownloader.Request] = []
    public private(set) var cancelled: [UInt64] = []
    public private(set) var peakRunning = 0
    private var pending: [UInt64: Callbacks] = [:]
    private var late: [UInt64: Callbacks] = [:]

    private struct Callbacks {
        let progress: (UInt64, UInt64) -> Void
        let completion: (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    }

    public init() {}

    public var running: [UInt64] { pending.keys.sorted() }
    public var startedCount: Int { started.count }
    public var startedURLs: [String] { started.map(\.url) }

    /// The `fetch` to give an `ImageDownloader`.
    public var fetch: ImageDownloader.Fetch {
        { [unowned self] request, progress, completion in
            self.started.append(request)
            self.pending[request.transfer] = Callbacks(progress: progress, completion: completion)
            self.peakRunning = max(self.peakRunning, self.pending.count)
            return { [unowned self] in
                self.cancelled.append(request.transfer)
                self.late[request.transfer] = self.pending.removeValue(forKey: request.transfer)
            }
        }
    }

    public func progress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        (pending[transfer] ?? late[transfer])?.progress(received, expected)
    }

    public func succeed(_ transfer: UInt64, bytes: [UInt8] = TestImages.png(width: 1, height: 1)) {
        pending.removeValue(forKey: transfer)?.completion(.success(ImageDownloader.Fetched(bytes: bytes)))
    }

    public func fail(_ transfer: UInt64, _ name: NetActivityError.Name = .http, message: String = "404 Not Found") {
        pending.removeValue(forKey: transfer)?.completion(.failure(.failed(NetActivityError(name, message))))
    }

    /// Delivers the completion of a transfer that was cancelled, as a racy transport might.
    public func deliverLate(_ transfer: UInt64, bytes: [UInt8] = TestImages.png(width: 2, height: 2)) {
        late.removeValue(forKey: transfer)?.completion(.success(ImageDownloader.Fetched(bytes: bytes)))
    }

    /// The transfer fetching `url` now.
    public func transfer(for url: String) -> UInt64? {
        started.last { $0.url == url && pending[$0.transfer] != nil }?.transfer
    }
}
