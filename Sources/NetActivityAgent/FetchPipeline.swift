// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// How the downloader gets an image's bytes: disk first, then the network. A fresh disk entry
/// answers without the network; a stale one is revalidated with its ETag/Last-Modified (a 304
/// serves it); a 200 is written back when HTTP caching allows, and `no-store` removes any copy.
/// Offline, any copy on disk, fresh or not, beats an error, and with none the error comes at once
/// (on the next turn); a transfer under way when the network goes fails at once (`failInFlight`).
/// The disk is read on its worker, never on the loop.
final class FetchPipeline {
    private let context: AgentContext
    private let loop: EventLoop
    private let disk: DiskTier?
    private let givenTransport: (any HTTPTransport)?
    /// The largest body taken: an image must fit in the cache, and a bus message in any case.
    private let maxBodyBytes: () -> Int
    /// When the prefetch a transfer serves started (disk entries made for it take only older room).
    private let prefetchStarted: (UInt64) -> Double?
    /// Whether NetworkManager says there is no network.
    var offline = false
    /// Where a sandboxed or unknown caller's transfer may connect: public addresses, and the
    /// ranges the settings let through (`sandboxed-local-networks`).
    var sandboxReach = NetworkReach()

    static let offlineError = NetActivityError(.offline, "NetworkManager says there is no network connection")

    /// The network transfers under way, each with what ends it as a failure.
    private var inFlight: [UInt64: (NetActivityError) -> Void] = [:]

    init(
        context: AgentContext, loop: EventLoop, disk: DiskTier?, transport: (any HTTPTransport)?,
        maxBodyBytes: @escaping () -> Int, prefetchStarted: @escaping (UInt64) -> Double?
    ) {
        self.context = context
        self.loop = loop
        self.disk = disk
        self.givenTransport = transport
        self.maxBodyBytes = maxBodyBytes
        self.prefetchStarted = prefetchStarted
    }

    /// The given transport, else libcurl's, made (and libcurl loaded) at the first download.
    /// NETACTIVITY_LIBCURL names another libcurl to load (the tests name a missing one).
    private lazy var transport: any HTTPTransport =
        givenTransport
        ?? {
            let fetcher = HTTPFetcher(
                loop: loop, limits: .init(maxBytes: maxBodyBytes()),
                library: getenv("NETACTIVITY_LIBCURL").map { String(cString: $0) }, routes: routes)
            fetcher.sumsBodies = disk != nil
            transportMade = true
            if routes.source == .desktop { onDesktopRoutes?() }
            return fetcher
        }()

    /// Which proxy each request goes through (the environment's, or the desktop's settings).
    private(set) lazy var routes = ProxyRoutes(
        loop: loop, logger: context.logger, environment: ProxyRoutes.processEnvironment(),
        library: getenv("NETACTIVITY_LIBGIO").map { String(cString: $0) })
    /// The proxy the latest request went through ("" before any, "direct" for none).
    var proxyInUse: String { transportMade ? routes.latest : "" }
    private var transportMade = false

    /// The response bytes running transfers hold, by app (libcurl's transport; nil before it).
    var bytesInFlight: FairQuota? { transportMade ? (transport as? HTTPFetcher)?.admission.inFlight : nil }

    /// Called once, when downloads start taking the desktop's proxy settings (the settings' change
    /// signals matter from then on).
    var onDesktopRoutes: (() -> Void)?

    /// The proxy settings changed: every origin is looked up again.
    func proxySettingsChanged() {
        if transportMade { routes.forget() }
    }

    static func wallClock() -> Double { DiskCache.now() }

    /// The system is about to sleep: bodies under way are kept where their servers can continue
    /// them (Range) after waking.
    func keepPartialBodies() {
        transport.keepPartialBodies()
    }

    /// The network went away: every transfer on it fails now with Offline rather than at its
    /// stall timeout; the queue then moves on, and what it starts fails as fast (or is served
    /// from the disk tier).
    func failInFlight() {
        let failing = inFlight
        inFlight = [:]
        context.logger.info("Offline: \(failing.count) transfers fail now")
        for (_, fail) in failing.sorted(by: { $0.key < $1.key }) { fail(Self.offlineError) }
    }

    /// The downloader's transport: disk first (unless reloading), then the network. Returns what
    /// stops it.
    func fetch(
        _ request: ImageDownloader.Request, _ progress: @escaping (UInt64, UInt64) -> Void,
        _ completion: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        guard !request.reload, let disk else { return network(request, stale: nil, progress, completion) }
        var stopNetwork: (() -> Void)?
        var stopped = false
        let stopReading = disk.read(key: request.key) { [weak self] hit in
            guard let self, !stopped else { return }
            guard let hit else { return stopNetwork = self.network(request, stale: nil, progress, completion) }
            if self.offline { return completion(.success(ImageDownloader.Fetched(body: hit.body))) }
            switch HTTPCachePolicy.decide(hit.info, now: Self.wallClock(), maxAge: request.maxAge) {
            case .fresh:
                // A hit always comes on a later turn of the loop (from the worker), never
                // inside the downloader's own call.
                completion(.success(ImageDownloader.Fetched(body: hit.body)))
            case .revalidate(let headers):
                stopNetwork = self.network(request, stale: (hit, headers), progress, completion)
            case .refetch:
                stopNetwork = self.network(request, stale: nil, progress, completion)
            }
        }
        return {
            stopped = true
            stopReading()
            stopNetwork?()
        }
    }

    private func network(
        _ request: ImageDownloader.Request, stale: (hit: DiskTier.Hit, conditional: [(String, String)])?,
        _ progress: @escaping (UInt64, UInt64) -> Void,
        _ completion: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        if offline {
            // On the next turn: a queue of thousands failing one after another never nests
            // start, failure and the next start on the stack.
            let timer = context.scheduler.schedule(afterNanoseconds: 0) {
                completion(.failure(.failed(Self.offlineError)))
            }
            return { [weak self] in self?.context.scheduler.cancel(timer) }
        }
        let id = request.transfer
        var done = false
        let finish: (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void = { [weak self] result in
            guard !done else { return }
            done = true
            self?.inFlight[id] = nil
            completion(result)
        }
        let stop = transport.fetch(
            url: request.url, app: request.app, headers: stale?.conditional ?? [], maxBytes: maxBodyBytes(),
            reach: request.publicOnly ? sandboxReach : nil, progress: progress
        ) { [weak self] result in
            finish(
                result.flatMap { response in self?.answer(request, response, stale: stale?.hit) ?? .failure(.cancelled)
                })
        }
        guard !done else { return stop }
        inFlight[id] = { error in
            stop()
            finish(.failure(.failed(error)))
        }
        return { [weak self] in
            done = true
            self?.inFlight[id] = nil
            stop()
        }
    }

    /// What a response means for the request, with the disk tier told what to keep.
    private func answer(
        _ request: ImageDownloader.Request, _ response: HTTPResponse, stale: DiskTier.Hit?
    ) -> Result<ImageDownloader.Fetched, ImageDownloader.Failure> {
        if response.status == 304, let stale {
            let info = HTTPCachePolicy.refreshed(stale.info, notModified: response.headers, now: Self.wallClock())
            disk?.write(
                key: request.key, info: info, body: stale.body, owner: request.app,
                prefetchStarted: prefetchStarted(request.transfer))
            return .success(ImageDownloader.Fetched(body: stale.body, httpStatus: 304))
        }
        guard response.status == 200 else {
            return .failure(
                .failed(NetActivityError(.http, "HTTP \(response.status) for \(PublishedURL.redact(request.url))")))
        }
        let image = response.body.withUnsafeBytes { ImageInfo.sniff($0) }
        if let info = HTTPCachePolicy.store(status: 200, headers: response.headers, now: Self.wallClock()) {
            if image != nil {
                disk?.write(
                    key: request.key, info: info, body: response.body, owner: request.app,
                    prefetchStarted: prefetchStarted(request.transfer))
            }
        } else {
            disk?.remove(key: request.key)  // no-store: keep no copy, not even an old one
        }
        return .success(ImageDownloader.Fetched(body: response.body, httpStatus: 200, info: image))
    }
}
