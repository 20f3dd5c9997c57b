// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import DequeModule
import Glibc
public import LinuxKit
import NetActivityContract
public import NetActivityCore

/// `org.example.NetActivity.Downloader`, the shared image downloader. The service owns the
/// interface table, the requests (their options, receipts, their charge in the accounts and the answers)
/// and `ImageDownloader`, the pure queue that coalesces them into transfers; its participants
/// each do one job with a narrow interface:
///
/// - `FetchPipeline`: disk tier first, then HTTP (`HTTPFetcher` on libcurl, loaded at the first
///   download), with revalidation, write-back and offline failure;
/// - `TransferTasks`: each transfer as the agent's activity and, once a person could see it, a
///   task object (made through a `TaskFactory`);
/// - `SlowTransferWatch`: a transfer that stalls gives its slot to waiting work;
/// - `DownloadConditions`: metered, power-saver, offline and sleep;
/// - `Prefetching`: PrefetchImages, fed through `PrefetchDownloader`.
///
/// An agent that never downloads never loads libcurl nor touches the disk tier.
public final class DownloadService: ImageDownloader.Observer {
    let context: AgentContext
    /// libcurl's sockets are watched here.
    private let loop: EventLoop
    let images: any ImageStore
    private let tasks: any TaskFactory
    private let activity: any ActivitySink
    private let announceAfter: () -> Duration
    private let givenTransport: (any HTTPTransport)?
    private let useDiskTier: Bool
    /// Told of every failed download but cancellations (the notifier posts them).
    public var onFailure: [(_ url: String, _ message: String) -> Void] = []

    /// `transport`: HTTP for the downloader (nil: libcurl's, made at the first download).
    /// `diskTier`: whether to keep a disk tier in the user's cache directory.
    /// `announceAfter`: how long a transfer runs before its task object is published (the
    /// indicator's ActivationDelay: what ends sooner, no person could have seen).
    /// `pixels` and `decoding`: the decoded tier and its decoders, shared with the image cache.
    init(
        context: AgentContext, loop: EventLoop, images: any ImageStore, pixels: PixelTier, decoding: Decoding,
        tasks: any TaskFactory, activity: any ActivitySink,
        announceAfter: @escaping () -> Duration, transport: (any HTTPTransport)? = nil, diskTier: Bool = true
    ) {
        self.pixels = pixels
        self.decoding = decoding
        givenTransport = transport
        useDiskTier = diskTier
        self.context = context
        self.loop = loop
        self.images = images
        self.tasks = tasks
        self.activity = activity
        self.announceAfter = announceAfter
        context.accounts.show([.bytesInFlight, .disk], from: self)
    }

    /// An image must fit in the cache, and a bus message in any case.
    private var maxBodyBytes: Int { Int(min(images.memoryCapacity, UInt64(NetActivityLimits.maxDownloadBytes))) }

    lazy var core: ImageDownloader = {
        let d = ImageDownloader(
            isCached: bound(self) { me, key, owner, maxAge in
                me.images.contains(key, answeringFor: owner.map { me.context.peers.app(of: $0) }, maxAge: maxAge)
            },
            store: bound(self) { $0.store($1, fetched: $2, app: $3, prefetchStarted: $4) },
            fetch: bound(self) { $0.pipeline.fetch($1, $2, $3) })
        d.observer = self
        return d
    }()

    /// A prefetch's image takes only free room in memory (it is on disk anyway).
    private func store(
        _ key: String, fetched: ImageDownloader.Fetched, app: String, prefetchStarted: Double?
    ) -> Result<Void, ImageDownloader.Failure> {
        prefetchStarted == nil
            ? images.store(fetched, for: key, app: app) : images.storeIfRoom(fetched, for: key, app: app)
    }

    /// The disk tier (nil when there is no cache directory to use); its files are the disk
    /// worker's, never the loop's.
    lazy var disk: DiskTier? = (useDiskTier ? DiskCache.defaultDirectory() : nil).map {
        DiskTier(directory: $0, mailbox: loop.mailbox, logger: context.logger)
    }

    /// The proxy the latest request went through ("" before any, "direct" for none).
    var proxyInUse: String { pipeline.proxyInUse }

    /// The desktop's proxy settings changed (or were reloaded): every origin is looked up again.
    func proxySettingsChanged() { pipeline.proxySettingsChanged() }

    /// Called once, when downloads start taking the desktop's proxy settings.
    var onDesktopProxy: (() -> Void)? {
        get { pipeline.onDesktopRoutes }
        set { pipeline.onDesktopRoutes = newValue }
    }

    /// Where a sandboxed or unknown caller's transfers may connect beyond public addresses.
    var sandboxReach: NetworkReach {
        get { pipeline.sandboxReach }
        set { pipeline.sandboxReach = newValue }
    }

    private lazy var pipeline = FetchPipeline(
        context: context, loop: loop, disk: disk, transport: givenTransport,
        maxBodyBytes: bound(self) { $0.maxBodyBytes },
        prefetchStarted: bound(self) { $0.core.prefetchStarted(ofTransfer: $1) })
    private lazy var transferTasks = TransferTasks(
        context: context, tasks: tasks, activity: activity, announceAfter: announceAfter,
        cancel: bound(self) { me, transfer in
            let n = me.core.cancel(transfer: transfer)
            me.context.logger.info("Transfer \(transfer) cancelled from a panel (\(n) receipts)")
        })
    private lazy var slowWatch = SlowTransferWatch(
        context: context, core: core, received: bound(self) { $0.transferTasks.received($1) })
    /// Metered, power-saver, offline and sleep (the agent tells it what the system says).
    public private(set) lazy var conditions = DownloadConditions(
        context: context, core: core, pipeline: pipeline, prefetching: prefetching)
    /// PrefetchImages and CancelPrefetch.
    lazy var prefetching = Prefetching(context: context, downloads: self)
    /// FetchPixels: the decoded pixels' tier, and decoding (in netactivity-decoder).
    let pixels: PixelTier
    let decoding: Decoding

    /// At exit: waits up to `milliseconds` for the disk writes under way.
    public func finishDiskWrites(milliseconds: Int) {
        disk?.flush(milliseconds: milliseconds)
    }

    // MARK: requests

    /// The checks every download method makes on its request (`DownloadRequest`), for `owner`.
    private func requestOptions<Option: MethodOption>(
        url: String, options: [String: DBusValue], owner: String, method: DownloaderMember.Method, _: Option.Type
    ) throws(NetActivityError) -> DownloadRequest {
        try mayDownload(owner)
        return try DownloadRequest(
            url: url, options: options, scope: context.peers.identity(of: owner).scope, method: method, Option.self)
    }

    /// A sandboxed app whose sandbox denies it the network (a Flatpak without `shared=network`)
    /// gets no downloads through the agent either: not even another app's cached image.
    func mayDownload(_ owner: String) throws(NetActivityError) {
        let caller = context.peers.identity(of: owner)
        guard caller.mayUseNetwork else {
            throw .accessDenied(
                "\(caller.app) may not use the network (its sandbox does not share it): the agent downloads nothing for it"
            )
        }
    }

    /// Counts one more waiting download for `owner`, or says which limit it would break.
    private func chargePending(_ owner: String) throws(NetActivityError) {
        let app = context.peers.app(of: owner)
        try context.accounts.take(.downloads, connection: owner, leaf: app)
    }

    /// Answers to deliver (FetchImage replies, DownloadFinished signals): always on a later turn
    /// of the loop (never inside the call that started a download, whatever fails first), at most
    /// `answerSlice` per turn, so that the thousands of callers one image (or one failure) may
    /// have never hold the loop at once.
    private var answers: Deque<() -> Void> = []
    static let answerSlice = 128
    private lazy var answerTurn = NextTurn(context.scheduler, bound(self) { $0.deliverAnswers() })

    private func answerLater(_ work: @escaping () -> Void) {
        answers.append(work)
        answerTurn.request()
    }

    private func deliverAnswers() {
        for _ in 0..<min(answers.count, Self.answerSlice) { answers.removeFirst()() }
        if !answers.isEmpty { answerTurn.request() }
    }

    /// `core.download` for `owner`, noting which app may read the transfer's task.
    private func start(
        url: String, _ request: DownloadRequest, owner: String,
        _ handler: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> ImageDownloader.Ticket {
        prefetching.requested()
        let caller = context.peers.identity(of: owner)
        let leaf = caller.leaf
        let ticket = core.download(
            url: url, key: request.key, owner: owner, app: leaf, reload: request.reload, priority: request.priority,
            maxAge: request.maxAge, publicOnly: caller.isSandboxed, handler: handler)
        if case .receipt(_, let transfer) = ticket { transferTasks.noteReader(leaf, of: transfer) }
        return ticket
    }

    func download(url: String, options: [String: DBusValue], owner: String) throws(NetActivityError) -> (
        receipt: String, task: String, cached: Bool
    ) {
        let request = try requestOptions(
            url: url, options: options, owner: owner, method: .downloadImage, DownloaderMember.DownloadImageOption.self)
        // Counted before the call: a transport that fails at once answers inside it.
        try chargePending(owner)
        var receipt = ""
        let ticket = start(
            url: url, request, owner: owner,
            bound(self) { me, result in
                me.release(owner)
                // `receipt` is read when the signal goes: after this call has returned it.
                me.answerLater { me.finished(receipt: receipt, url: url, owner: owner, result.map { _ in }) }
            })
        switch ticket {
        case .cached:
            release(owner)
            prefetching.used(request.key)
            return ("", "/", true)
        case .receipt(let r, let transfer):
            receipt = r
            // Its reply names the task: a DownloadImage transfer is announced at once.
            return (r, transferTasks.announce(transfer)?.path ?? "/", false)
        }
    }

    /// DownloadFinished goes to the requester only (a unicast signal).
    private func finished(receipt: String, url: String, owner: String, _ result: Result<Void, ImageDownloader.Failure>)
    {
        let error: NetActivityError? = if case .failure(let failure) = result { Self.error(failure) } else { nil }
        let (ok, name, message) = (error == nil, error?.name ?? "", error?.message ?? "")
        if !ok, name != NetActivityError.Name.cancelled.rawValue {
            for observer in onFailure { observer(PublishedURL.redact(url), message) }
        }
        context.sink.emitSignal(
            path: NetActivityBus.objectPath, interface: NetActivityInterface.downloader.rawValue,
            member: DownloaderMember.Signal.downloadFinished.rawValue, destination: owner
        ) { w in
            w.append(receipt)
            w.append(url)
            w.append(ok)
            w.append(name)
            w.append(message)
        }
    }

    static let cancelledError = NetActivityError(.cancelled, "The download was cancelled")

    static func error(_ failure: ImageDownloader.Failure) -> NetActivityError {
        switch failure {
        case .cancelled: cancelledError
        case .failed(let error): error
        }
    }

    // MARK: FetchImage

    /// Pending `FetchImage` calls that named a receipt, by caller and receipt: the downloader's
    /// receipt for each (what `CancelDownload` cancels).
    private var fetchReceipts: [String: [String: String]] = [:]

    /// What `FetchImage` answers at once (a memory hit), or nil when the answer comes later.
    struct Answer {
        let body: any FetchedBody
        let info: ImageInfo
        let source: DownloaderMember.FetchImageSource
        let httpStatus: UInt32
    }

    /// Starts a `FetchImage` for `owner`: a memory hit is answered at once; otherwise `reply` is
    /// called once, on a later turn than this call, with the image or the error.
    func fetch(
        url: String, options: [String: DBusValue], owner: String,
        reply: @escaping (Result<Answer, NetActivityError>) -> Void
    ) throws(NetActivityError) -> Answer? {
        try fetch(
            url: url, options: options, owner: owner, method: .fetchImage, DownloaderMember.FetchImageOption.self,
            reply: reply)
    }

    /// `fetch` for `method` (FetchImage, or FetchPixels, whose options are FetchImage's and more).
    func fetch<Options: MethodOption>(
        url: String, options: [String: DBusValue], owner: String, method: DownloaderMember.Method, _: Options.Type,
        reply: @escaping (Result<Answer, NetActivityError>) -> Void
    ) throws(NetActivityError) -> Answer? {
        typealias Option = DownloaderMember.FetchImageOption
        let request = try requestOptions(url: url, options: options, owner: owner, method: method, Options.self)
        let named = options[Option.receipt.rawValue]?.stringValue
        if let named {
            guard !named.isEmpty, named.utf8.count <= NetActivityLimits.maxReceiptBytes else {
                throw .invalidArgs(
                    "A receipt must be 1 to \(NetActivityLimits.maxReceiptBytes) bytes long, got \(named.utf8.count)")
            }
            guard fetchReceipts[owner]?[named] == nil else {
                throw .invalidArgs(
                    "Receipt '\(named.prefix(100))' is already pending on this connection; choose another")
            }
        }
        if !request.reload, let hit = images.cachedImage(for: request.key, client: owner, maxAge: request.maxAge) {
            prefetching.used(request.key)
            return Answer(body: hit.body, info: hit.info, source: .memory, httpStatus: 0)
        }
        try chargePending(owner)
        var receiptName: String?
        let ticket = start(
            url: url, request, owner: owner,
            bound(self) { me, result in
                me.release(owner)
                if let receiptName { me.forgetFetch(receiptName, of: owner) }
                let answer = result.mapError(Self.error).flatMap { fetched -> Result<Answer, NetActivityError> in
                    fetched.info.map {
                        .success(
                            Answer(
                                body: fetched.body, info: $0, source: fetched.httpStatus == 0 ? .disk : .network,
                                httpStatus: fetched.httpStatus))
                    }
                        ?? .failure(
                            NetActivityError(.notAnImage, "The bytes received are not an image of a known format"))
                }
                if case .failure(let error) = answer, error.name != NetActivityError.Name.cancelled.rawValue {
                    for observer in me.onFailure { observer(PublishedURL.redact(url), error.message) }
                }
                me.answerLater { reply(answer) }
            })
        switch ticket {
        case .cached:
            // Not held in memory a moment ago, yet the downloader's check found it: served as a hit.
            release(owner)
            guard let hit = images.cachedImage(for: request.key, client: owner, maxAge: request.maxAge) else {
                throw NetActivityError(
                    .notFound,
                    "The image for \(PublishedURL.redact(url)) left the cache while it was fetched; fetch it again")
            }
            return Answer(body: hit.body, info: hit.info, source: .memory, httpStatus: 0)
        case .receipt(let r, let transfer):
            if let named, core.owner(of: r) != nil {
                receiptName = named
                fetchReceipts[owner, default: [:]][named] = r
            }
            if options[Option.announce.rawValue]?.boolValue == true { _ = transferTasks.announce(transfer) }
            return nil
        }
    }

    /// Starts a `FetchPixels` for `owner`: decoded pixels held already are answered at once;
    /// otherwise the image comes as for `FetchImage` and `reply` hears its pixels (or the error)
    /// once, on a later turn than this call.
    ///
    /// Provenance is the image's: pixels decoded from what the downloader stored are everyone's;
    /// pixels of an app's own `AddImage` for the URL answer that app alone (their key names it).
    func fetchPixels(
        url: String, options: [String: DBusValue], owner: String,
        reply: @escaping (Result<PixelsReply, NetActivityError>) -> Void
    ) throws(NetActivityError) -> PixelsReply? {
        typealias Option = DownloaderMember.FetchPixelsOption
        let ask = try PixelAsk(options: options)
        let request = try requestOptions(url: url, options: options, owner: owner, method: .fetchPixels, Option.self)
        let leaf = context.peers.app(of: owner)
        // The caller's own entry for the URL, if it has one, is what it reads: asked once.
        let own = images.hasOwnEntry(request.key, leaf: leaf)
        let ownKey = ask.key(own ? ImageCacheService.ownKey(request.key, leaf) : request.key)
        if !request.reload, let hit = pixels.entry(ownKey),
            request.maxAge.map({ Double(context.scheduler.nowNanoseconds &- hit.storedAt) / 1e9 < $0 }) ?? true
        {
            return PixelsReply(hit, source: .memory)
        }
        let decode = bound(self) { (me, image: Answer) in
            // An image answered from memory is the caller's own entry when it has one.
            let key = own && image.source == .memory ? ownKey : ask.key(request.key)
            me.decoding.decode(
                image.body, contentType: image.info.format.mediaType, key: key, owner: leaf, reader: leaf
            ) { result in reply(result.map { PixelsReply($0, source: image.source, httpStatus: image.httpStatus) }) }
        }
        let image = try fetch(url: url, options: options, owner: owner, method: .fetchPixels, Option.self) { result in
            switch result {
            case .success(let image): decode(image)
            case .failure(let error): reply(.failure(error))
            }
        }
        if let image { decode(image) }
        return nil
    }

    private func forgetFetch(_ receipt: String, of owner: String) {
        guard fetchReceipts[owner]?.removeValue(forKey: receipt) != nil, fetchReceipts[owner]?.isEmpty == true else {
            return
        }
        fetchReceipts[owner] = nil
    }

    private func release(_ owner: String, count: Int = 1) {
        context.accounts.release(.downloads, connection: owner, leaf: context.peers.app(of: owner), cost: count)
    }

    /// The downloader's receipt for `receipt` as `caller` names it: one it named in `FetchImage`,
    /// else one `DownloadImage` gave it (AccessDenied for another's; nil when unknown or finished).
    private func ownReceipt(_ receipt: String, by caller: String, toDo what: String) throws(NetActivityError) -> String?
    {
        if let ours = fetchReceipts[caller]?[receipt] { return ours }
        guard let owner = core.owner(of: receipt) else { return nil }
        guard owner == caller else {
            throw .accessDenied(
                "Only the owner of receipt \(receipt.prefix(100)) (\(owner)) may \(what) it; the caller is \(caller)")
        }
        return receipt
    }

    /// A receipt `caller` named in `FetchImage` (its pending call is answered `Cancelled`), else
    /// one `DownloadImage` gave it.
    func cancel(receipt: String, by caller: String) throws(NetActivityError) -> Bool {
        guard let ours = try ownReceipt(receipt, by: caller, toDo: "cancel") else { return false }
        return core.cancel(receipt: ours)
    }

    /// A new priority for a pending receipt of `caller`'s, named as `cancel` names it.
    func setPriority(receipt: String, priority: String, by caller: String) throws(NetActivityError) -> Bool {
        let priority = try DownloadRequest.priority(priority)
        guard let ours = try ownReceipt(receipt, by: caller, toDo: "change the priority of") else { return false }
        return core.setPriority(priority, receipt: ours)
    }

    /// Departed owners' receipts leave in slices of `departureSlice` per turn of the loop, over all
    /// departures: each queued transfer is a task object whose cancellation is announced, and a
    /// turn may hold the loop (and the bus daemon, routing their signals) only briefly: a slice is
    /// sized so that a Ping waits less than the stall budget behind it (`make bench`, "receipts of
    /// three apps leaving at once").
    public func ownerVanished(_ owner: String) {
        fetchReceipts[owner] = nil
        let prefetched = prefetching.ownerVanished(owner)
        let n = context.accounts[.downloads].held(byConnection: owner)
        guard n > 0 || prefetched else { return }
        release(owner, count: n)
        departing.append(owner)
        if departing.count == 1 { drainDepartures() }
    }

    static let departureSlice = 32
    private var departing: [String] = []

    private func drainDepartures() {
        var budget = Self.departureSlice
        while budget > 0, let owner = departing.first {
            let (taken, more) = core.ownerVanished(owner, atMost: budget)
            budget -= taken
            if !more { departing.removeFirst() }
        }
        guard !departing.isEmpty else { return }
        context.scheduler.schedule(afterNanoseconds: 0) { [weak self] in self?.drainDepartures() }
    }

    // MARK: ImageDownloader.Observer: each participant hears what it needs

    public func transferQueued(_ transfer: UInt64, url: String) {
        transferTasks.queued(transfer, url: url)
        slowWatch.queued()
    }

    public func transferStarted(_ transfer: UInt64, url: String) {
        conditions.transfersChanged()
        slowWatch.started(transfer)
        transferTasks.started(transfer)
    }

    public func transferProgress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        transferTasks.progress(transfer, received: received, expected: expected)
    }

    public func transferPaused(_ transfer: UInt64) {
        conditions.transfersChanged()
        slowWatch.stopped(transfer)
        transferTasks.paused(transfer)
    }

    public func transferEnded(_ transfer: UInt64, outcome: Result<Void, ImageDownloader.Failure>) {
        conditions.transfersChanged()
        prefetching.pumpSoon()
        slowWatch.stopped(transfer)
        transferTasks.ended(transfer, outcome: outcome)
    }

    /// Apps whose RemoveImages is reading the disk: one at a time each, as each reads every
    /// entry's first bytes on the disk worker, which every app's disk reads share.
    var removing: Set<String> = []

}

extension DownloadService: PrefetchDownloader {
    func roomForPrefetch(running: Int) -> Bool {
        !core.paused && core.queuedCount == 0 && core.activeCount < core.maximumActiveDownloads
            && running < max(1, core.maximumActiveDownloads - 1)
    }

    func startPrefetch(
        url: String, owner: String, app: String, started: Double,
        handler: @escaping (Result<Void, ImageDownloader.Failure>) -> Void
    ) -> ImageDownloader.Ticket {
        core.download(
            url: url, key: url, owner: owner, app: app, priority: .veryLow, prefetchStarted: started,
            publicOnly: context.peers.identity(of: owner).isSandboxed
        ) { result in
            handler(result.map { _ in () })
        }
    }

    func cancelPrefetch(_ handle: String) {
        _ = core.cancel(receipt: handle)
    }

    func touchOnDisk(_ key: String) {
        disk?.touch(key: key)
    }
}

extension DownloadService: AccountBook {
    func holdings(_ resource: AgentAccounts.Resource, of app: String?) -> [AgentAccounts.Holding] {
        if resource == .disk {
            // Without a disk tier, nothing and no room.
            return AgentAccounts.holdings(of: app, .disk, usage: disk?.usageByApp ?? [:], capacity: disk?.capacity ?? 0)
        }
        // Before the first transfer, the figures it will be held to.
        let quota =
            pipeline.bytesInFlight
            ?? TransferAdmission(inFlightLimit: NetActivityLimits.bodiesInFlight(largestBody: maxBodyBytes)).inFlight
        return AgentAccounts.holdings(of: app, .bytesInFlight, quota)
    }
}
