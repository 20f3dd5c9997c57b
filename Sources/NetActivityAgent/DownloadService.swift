public import DBusKit
import Glibc
public import LinuxKit
import NetActivityContract
public import NetActivityCore

/// `org.example.NetActivity.Downloader`, the shared image downloader: `ImageDownloader` (the pure
/// queue and coalescing) with `HTTPFetcher` as its transport, the disk tier, and an `ImageStore`
/// (the image cache) for what it fetched. Each transfer is a task object owned by the agent (made
/// through a `TaskFactory`), suspended while queued and running while it downloads, so a running
/// download is the agent's own activity and a queued one is not. The HTTP side starts on the
/// first download, so an agent that never downloads never loads it.
public final class DownloadService: ImageDownloader.Observer {
    private let context: AgentContext
    /// libcurl's sockets are watched here.
    private let loop: EventLoop
    private unowned let images: any ImageStore
    private unowned let tasks: any TaskFactory
    /// Pending receipts: the budget, the shares of apps and the per-client cap. An owner's app is
    /// known from its first call until its departure has been handled, so counting and releasing
    /// agree on it.
    private var pending = FairQuota(
        budget: NetActivityLimits.pendingDownloadsBudget, limit: NetActivityLimits.maxPendingDownloads,
        perConnection: NetActivityLimits.maxPendingDownloadsPerClient)
    /// Running transfers that hold a slot, watched for slowness while work waits for a slot. One
    /// timer, ticking every `slowTick` only while some run and some wait.
    private var slowWatch: [UInt64: SlowWatch] = [:]
    private var slowTimer: TimerID?
    private struct SlowWatch {
        /// Bytes when the current window began, and at the last tick (nil: not seen yet).
        var windowStart: UInt64?
        var lastTick: UInt64?
        var quietTicks = 0
        var ticks = 0
    }
    /// While others wait, a transfer gives its slot up (`ImageDownloader.yieldSlot`) and goes on
    /// outside the limit when it moved no byte for `stallTicks` ticks (a stalled server: half a
    /// second), or less than `slowFloorBytes` in `windowTicks` ticks (a dribbling one: 2 s). No
    /// server holds anyone hostage.
    static let slowTick: Duration = .milliseconds(250)
    static let stallTicks = 2
    static let windowTicks = 8
    static let slowFloorBytes: UInt64 = 16 * 1024
    /// Told of every failed download but cancellations (the notifier posts them).
    public var onFailure: [(_ url: String, _ message: String) -> Void] = []

    /// Running transfers count as the agent's own activity from their start; this adds it for
    /// those that have no task object yet.
    private unowned let activity: any ActivitySink
    /// How long a transfer runs before its task object is published (the indicator's
    /// ActivationDelay: what ends sooner, no person could have seen).
    private let announceAfter: () -> Duration

    /// `transport`: HTTP for the downloader (nil: libcurl's, made at the first download).
    /// `diskTier`: whether to keep a disk tier in the user's cache directory.
    public init(
        context: AgentContext, loop: EventLoop, images: any ImageStore, tasks: any TaskFactory, activity: any ActivitySink,
        announceAfter: @escaping () -> Duration, transport: (any HTTPTransport)? = nil, diskTier: Bool = true
    ) {
        givenTransport = transport
        useDiskTier = diskTier
        self.context = context
        self.loop = loop
        self.images = images
        self.tasks = tasks
        self.activity = activity
        self.announceAfter = announceAfter
    }

    private let givenTransport: (any HTTPTransport)?
    private let useDiskTier: Bool

    /// The given transport, else libcurl's, made (and libcurl loaded) at the first download.
    /// NETACTIVITY_LIBCURL names another libcurl to load (the tests name a missing one).
    private lazy var transport: any HTTPTransport = givenTransport ?? {
        let fetcher = HTTPFetcher(
            loop: loop, limits: .init(maxBytes: maxBodyBytes), library: getenv("NETACTIVITY_LIBCURL").map { String(cString: $0) })
        fetcher.sumsBodies = disk != nil
        return fetcher
    }()

    /// An image must fit in the cache, and a bus message in any case.
    private var maxBodyBytes: Int { Int(min(images.memoryCapacity, UInt64(NetActivityLimits.maxDownloadBytes))) }

    lazy var core: ImageDownloader = {
        let d = ImageDownloader(
            isCached: { [unowned self] key, owner, maxAge in
                self.images.contains(key, answeringFor: owner.map { self.context.peers.app(of: $0) }, maxAge: maxAge)
            },
            store: { [unowned self] key, fetched, app, prefetchStarted in
                // A prefetch's image takes only free room in memory (it is on disk anyway).
                guard prefetchStarted == nil else { return self.images.storeIfRoom(fetched, for: key, app: app) }
                return self.images.store(fetched, for: key, app: app)
            },
            fetch: { [unowned self] request, progress, completion in self.fetch(request, progress, completion) })
        d.observer = self
        return d
    }()

    /// The disk tier (nil when there is no cache directory to use); its files are the disk
    /// worker's, never the loop's.
    lazy var disk: DiskTier? = (useDiskTier ? DiskCache.defaultDirectory() : nil).map {
        DiskTier(directory: $0, mailbox: loop.mailbox, logger: context.logger)
    }

    /// At exit: waits up to `milliseconds` for the disk writes under way.
    public func finishDiskWrites(milliseconds: Int) {
        disk?.flush(milliseconds: milliseconds)
    }

    static func wallClock() -> Double { DiskCache.now() }

    /// PrefetchImages and CancelPrefetch.
    lazy var prefetching = Prefetching(context: context, downloads: self)

    /// Disk first (unless reloading): a fresh entry answers without the network, a stale one is
    /// revalidated with its ETag/Last-Modified; a 200 is written back when HTTP caching allows.
    /// The disk is read on its worker; a key it surely does not hold goes to the network at once.
    private func fetch(
        _ request: ImageDownloader.Request, _ progress: @escaping (UInt64, UInt64) -> Void,
        _ completion: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        guard !request.reload, let disk else { return network(request, stale: nil, progress, completion) }
        // Offline, any copy on disk, fresh or not, beats an error; with none, the error comes at once.
        var stopNetwork: (() -> Void)?
        var stopped = false
        let stopReading = disk.read(key: request.key) { [weak self] hit in
            guard let self, !stopped else { return }
            guard let hit else { return stopNetwork = self.network(request, stale: nil, progress, completion) }
            if self.conditions.offline { return completion(.success(ImageDownloader.Fetched(body: hit.body))) }
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
        if conditions.offline {
            // On the next turn: a queue of thousands failing one after another never nests
            // start, failure and the next start on the stack.
            let timer = context.scheduler.schedule(afterNanoseconds: 0) { completion(.failure(.failed(Self.offlineError))) }
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
            url: request.url, app: request.app, headers: stale?.conditional ?? [], maxBytes: maxBodyBytes, progress: progress
        ) {
            [weak self] result in
            finish(result.flatMap { response in
                if response.status == 304, let stale {
                    let info = HTTPCachePolicy.refreshed(stale.hit.info, notModified: response.headers, now: Self.wallClock())
                    self?.disk?.write(
                        key: request.key, info: info, body: stale.hit.body, owner: request.app,
                        prefetchStarted: self?.core.prefetchStarted(ofTransfer: id))
                    return .success(ImageDownloader.Fetched(body: stale.hit.body, httpStatus: 304))
                }
                guard response.status == 200 else {
                    return .failure(.failed(NetActivityError(.http, "HTTP \(response.status) for \(PublishedURL.redact(request.url))")))
                }
                let image = response.body.withUnsafeBytes { ImageInfo.sniff($0) }
                if let info = HTTPCachePolicy.store(status: 200, headers: response.headers, now: Self.wallClock()) {
                    if image != nil {
                        self?.disk?.write(
                            key: request.key, info: info, body: response.body, owner: request.app,
                            prefetchStarted: self?.core.prefetchStarted(ofTransfer: id))
                    }
                } else {
                    self?.disk?.remove(key: request.key)  // no-store: keep no copy, not even an old one
                }
                return .success(ImageDownloader.Fetched(body: response.body, httpStatus: 200, info: image))
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

    // MARK: requests

    /// A priority named on the bus, or InvalidArgs naming the values.
    static func priority(_ value: String?) throws(NetActivityError) -> ImageDownloader.Priority {
        guard let value else { return .normal }
        guard let priority = ImageDownloader.Priority(rawValue: value) else {
            let known = ImageDownloader.Priority.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidArgs("A priority must be one of \(known), got '\(value.prefix(100))'")
        }
        return priority
    }

    /// What a request asks for, from its options.
    private struct Asked {
        let key: String
        let reload: Bool
        let priority: ImageDownloader.Priority
        /// Seconds a cached copy may be old for this request (the `max-age` option).
        let maxAge: Double?
    }

    /// The checks both methods make; the request key (the URL's, or the caller's app's
    /// `cache-key`), reload, priority and max-age.
    private func asked<Option: MethodOption>(
        url: String, options: [String: DBusValue], owner: String, method: DownloaderMember.Method, _: Option.Type
    ) throws(NetActivityError) -> Asked {
        typealias Common = DownloaderMember.DownloadImageOption
        try Self.checkURL(url)
        try checkOptions(options, of: method.rawValue, Option.self)
        let priority = try Self.priority(options[Common.priority.rawValue]?.stringValue)
        let additional = options[Common.additionalIdentifier.rawValue]?.stringValue ?? ""
        guard additional.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw .invalidArgs(
                "additional-identifier is \(additional.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)")
        }
        var key = ImageRequestKey.make(url: url, additional: additional)
        if let cacheKey = options[Common.cacheKey.rawValue]?.stringValue {
            guard !cacheKey.isEmpty, cacheKey.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
                throw .invalidArgs("cache-key must be 1 to \(NetActivityLimits.maxImageKeyBytes) bytes long, got \(cacheKey.utf8.count)")
            }
            key = ImageRequestKey.scoped(app: context.peers.identity(of: owner).app[...], cacheKey: cacheKey, additional: additional)
        }
        let maxAge = options[Common.maxAge.rawValue]?.doubleValue
        if let maxAge, !(0...Double(NetActivityLimits.maxRequestMaxAge)).contains(maxAge) {
            throw .invalidArgs("max-age must be 0 to \(NetActivityLimits.maxRequestMaxAge) seconds, got \(maxAge)")
        }
        return Asked(
            key: key, reload: options[Common.reload.rawValue]?.boolValue ?? false, priority: priority, maxAge: maxAge)
    }

    /// Counts one more waiting download for `owner`, or says which limit it would break.
    private func chargePending(_ owner: String) throws(NetActivityError) {
        let app = context.peers.app(of: owner)
        if let refusal = pending.check(connection: owner, leaf: app) {
            throw .limitsExceeded(refusal.message("downloads waited for", client: owner, leaf: app, quota: pending))
        }
        pending.charge(connection: owner, leaf: app)
    }

    /// Answers to deliver (FetchImage replies, DownloadFinished signals): always on a later turn
    /// of the loop (never inside the call that started a download, whatever fails first), at most
    /// `answerSlice` per turn, so that the thousands of callers one image (or one failure) may
    /// have never hold the loop at once.
    private var answers: [() -> Void] = []
    private var answersHead = 0
    static let answerSlice = 128
    private lazy var answerTurn = NextTurn(context.scheduler) { [unowned self] in deliverAnswers() }

    private func answerLater(_ work: @escaping () -> Void) {
        answers.append(work)
        answerTurn.request()
    }

    private func deliverAnswers() {
        let end = min(answers.count, answersHead + Self.answerSlice)
        while answersHead < end {
            let work = answers[answersHead]
            answersHead += 1
            work()
        }
        if answersHead == answers.count {
            answers.removeAll(keepingCapacity: answers.count <= 256)
            answersHead = 0
        } else {
            answerTurn.request()
        }
    }

    /// `core.download` for `owner`, noting which app may read the transfer's task.
    private func start(
        url: String, _ asked: Asked, owner: String,
        _ handler: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> ImageDownloader.Ticket {
        prefetching.requested()
        let leaf = context.peers.app(of: owner)
        let ticket = core.download(
            url: url, key: asked.key, owner: owner, app: leaf, reload: asked.reload, priority: asked.priority,
            maxAge: asked.maxAge, handler: handler)
        if case .receipt(_, let transfer) = ticket { noteReader(leaf, of: transfer) }
        return ticket
    }

    func download(url: String, options: [String: DBusValue], owner: String) throws(NetActivityError) -> (receipt: String, task: String, cached: Bool) {
        let asked = try asked(url: url, options: options, owner: owner, method: .downloadImage, DownloaderMember.DownloadImageOption.self)
        // Counted before the call: a transport that fails at once answers inside it.
        try chargePending(owner)
        var receipt = ""
        let ticket = start(url: url, asked, owner: owner) { [unowned self] result in
            self.release(owner)
            // `receipt` is read when the signal goes: after this call has returned it.
            self.answerLater { self.finished(receipt: receipt, url: url, owner: owner, result.map { _ in }) }
        }
        switch ticket {
        case .cached:
            release(owner)
            prefetching.used(asked.key)
            return ("", "/", true)
        case .receipt(let r, let transfer):
            receipt = r
            // Its reply names the task: a DownloadImage transfer is announced at once.
            return (r, announce(transfer)?.path ?? "/", false)
        }
    }

    /// DownloadFinished goes to the requester only (a unicast signal).
    private func finished(receipt: String, url: String, owner: String, _ result: Result<Void, ImageDownloader.Failure>) {
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
        url: String, options: [String: DBusValue], owner: String, reply: @escaping (Result<Answer, NetActivityError>) -> Void
    ) throws(NetActivityError) -> Answer? {
        typealias Option = DownloaderMember.FetchImageOption
        let asked = try asked(url: url, options: options, owner: owner, method: .fetchImage, Option.self)
        let named = options[Option.receipt.rawValue]?.stringValue
        if let named {
            guard !named.isEmpty, named.utf8.count <= NetActivityLimits.maxReceiptBytes else {
                throw .invalidArgs("A receipt must be 1 to \(NetActivityLimits.maxReceiptBytes) bytes long, got \(named.utf8.count)")
            }
            guard fetchReceipts[owner]?[named] == nil else {
                throw .invalidArgs("Receipt '\(named.prefix(100))' is already pending on this connection; choose another")
            }
        }
        if !asked.reload, let hit = images.cachedImage(for: asked.key, client: owner, maxAge: asked.maxAge) {
            prefetching.used(asked.key)
            return Answer(body: hit.body, info: hit.info, source: .memory, httpStatus: 0)
        }
        try chargePending(owner)
        var receiptName: String?
        let ticket = start(url: url, asked, owner: owner) { [unowned self] result in
            self.release(owner)
            if let receiptName { self.forgetFetch(receiptName, of: owner) }
            let answer = result.mapError(Self.error).flatMap { fetched -> Result<Answer, NetActivityError> in
                fetched.info.map {
                    .success(Answer(body: fetched.body, info: $0, source: fetched.httpStatus == 0 ? .disk : .network, httpStatus: fetched.httpStatus))
                } ?? .failure(NetActivityError(.notAnImage, "The bytes received are not an image of a known format"))
            }
            if case .failure(let error) = answer, error.name != NetActivityError.Name.cancelled.rawValue {
                for observer in self.onFailure { observer(PublishedURL.redact(url), error.message) }
            }
            self.answerLater { reply(answer) }
        }
        switch ticket {
        case .cached:
            // Not held in memory a moment ago, yet the downloader's check found it: served as a hit.
            release(owner)
            guard let hit = images.cachedImage(for: asked.key, client: owner, maxAge: asked.maxAge) else {
                throw NetActivityError(.notFound, "The image for \(PublishedURL.redact(url)) left the cache while it was fetched; fetch it again")
            }
            return Answer(body: hit.body, info: hit.info, source: .memory, httpStatus: 0)
        case .receipt(let r, let transfer):
            if let named, core.owner(of: r) != nil {
                receiptName = named
                fetchReceipts[owner, default: [:]][named] = r
            }
            if options[Option.announce.rawValue]?.boolValue == true { _ = announce(transfer) }
            return nil
        }
    }

    private func forgetFetch(_ receipt: String, of owner: String) {
        guard fetchReceipts[owner]?.removeValue(forKey: receipt) != nil, fetchReceipts[owner]?.isEmpty == true else { return }
        fetchReceipts[owner] = nil
    }

    private func release(_ owner: String, count: Int = 1) {
        pending.release(connection: owner, leaf: context.peers.app(of: owner), cost: count)
    }

    /// The downloader's receipt for `receipt` as `caller` names it: one it named in `FetchImage`,
    /// else one `DownloadImage` gave it (AccessDenied for another's; nil when unknown or finished).
    private func ownReceipt(_ receipt: String, by caller: String, toDo what: String) throws(NetActivityError) -> String? {
        if let ours = fetchReceipts[caller]?[receipt] { return ours }
        guard let owner = core.owner(of: receipt) else { return nil }
        guard owner == caller else {
            throw .accessDenied("Only the owner of receipt \(receipt.prefix(100)) (\(owner)) may \(what) it; the caller is \(caller)")
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
        let priority = try Self.priority(priority)
        guard let ours = try ownReceipt(receipt, by: caller, toDo: "change the priority of") else { return false }
        return core.setPriority(priority, receipt: ours)
    }

    /// Departed owners' receipts leave in slices of `departureSlice` per turn of the loop, over all
    /// departures: each queued transfer is a task object whose cancellation is announced, and
    /// 5,000 of them at once held the loop for a third of a second (debug build). Slices of 128
    /// still took 8–20 ms a turn with the other core busy, and the prober's Ping waited up to
    /// 85 ms behind them and the bus daemon's routing of their signals; 32 keep it under 20 ms.
    public func ownerVanished(_ owner: String) {
        fetchReceipts[owner] = nil
        let prefetched = prefetching.ownerVanished(owner)
        let n = pending.held(byConnection: owner)
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

    /// http or https, with a host, no spaces or control characters, at most 4096 bytes. Read as
    /// bytes (every download passes here).
    static func checkURL(_ url: String) throws(NetActivityError) {
        func refuse(_ why: String) -> NetActivityError {
            NetActivityError(.invalidURL, "'\(url.prefix(200))' \(why)")
        }
        var url = url
        let problem: String? = url.withUTF8 { b in
            guard b.count <= NetActivityLimits.maxImageKeyBytes else {
                return "is longer than \(NetActivityLimits.maxImageKeyBytes) bytes"
            }
            guard !b.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return "contains spaces or control characters" }
            func hasPrefix(_ p: StaticString) -> Bool {
                b.count >= p.utf8CodeUnitCount
                    && (0..<p.utf8CodeUnitCount).allSatisfy { b[$0] | 0x20 == p.utf8Start[$0] | 0x20 || b[$0] == p.utf8Start[$0] }
            }
            let start = hasPrefix("http://") ? 7 : hasPrefix("https://") ? 8 : nil
            guard let start else { return "is not an http or https URL" }
            var end = start
            while end < b.count, b[end] != UInt8(ascii: "/"), b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") { end += 1 }
            // The host: after the last "@" of the authority; up to a ":" unless it is an [IPv6] literal.
            var host = start
            for i in start..<end where b[i] == UInt8(ascii: "@") { host = i + 1 }
            var hostEnd = host
            if hostEnd < end, b[hostEnd] == UInt8(ascii: "[") {
                hostEnd = end
            } else {
                while hostEnd < end, b[hostEnd] != UInt8(ascii: ":") { hostEnd += 1 }
            }
            return hostEnd > host ? nil : "has no host"
        }
        if let problem { throw refuse(problem) }
    }

    // MARK: ImageDownloader.Observer: task objects, published when a person could see them

    /// What the service knows of each live transfer.
    private struct TransferState {
        let url: String
        var running = false
        /// The bytes so far (the task's, once published; the slow-transfer watch reads them).
        var progress = TaskProgress()
        /// Its task object, once published.
        var task: TaskEntry?
        /// The leaves of the apps that asked for it: they may read its task (see `TaskAudience`).
        var readers: Set<String> = []
    }

    /// `leaf` asked for `transfer`: it may read the transfer's task, sandboxed or not.
    private func noteReader(_ leaf: String, of transfer: UInt64) {
        guard transfers[transfer] != nil else { return }
        transfers[transfer]!.readers.insert(leaf)
        transfers[transfer]!.task?.readers.insert(leaf)
    }

    private var transfers: [UInt64: TransferState] = [:]
    /// Running transfers without a task object, in the order they started, with when each is due
    /// to be published; one timer, for the first (entries of transfers that ended or were
    /// published meanwhile are skipped).
    private var unpublished: [(transfer: UInt64, due: Instant)] = []
    private var unpublishedHead = 0
    private var publishTimer: TimerID?

    /// The transfer's task object, published now if it has none (running or suspended, as the
    /// transfer is). Nil when the transfer has ended already.
    private func announce(_ transfer: UInt64) -> TaskEntry? {
        guard var state = transfers[transfer] else { return nil }
        if let task = state.task { return task }
        // With its progress so far, in its one InterfacesAdded.
        let task = tasks.makeAgentTask(
            description: PublishedURL.downloadDescription(state.url), running: state.running, progress: state.progress,
            readers: state.readers)
        // The task now holds the activity the transfer held without one.
        if state.running { activity.release(.task, for: context.uniqueName) }
        state.task = task
        transfers[transfer] = state
        return task
    }

    public func transferQueued(_ transfer: UInt64, url: String) {
        transfers[transfer] = TransferState(url: url)
        watchForSlowness()
    }

    public func transferStarted(_ transfer: UInt64, url: String) {
        checkRunningSoon()
        slowWatch[transfer] = SlowWatch()
        watchForSlowness()
        guard var state = transfers[transfer] else { return }
        state.running = true
        transfers[transfer] = state
        if let task = state.task { return tasks.resume(task) }
        // Activity from the start (the indicator's own delay hides short work); the task object
        // only once the transfer has run for the activation delay.
        try? activity.acquire(.task, for: context.uniqueName)
        unpublished.append((transfer, context.now + announceAfter()))
        schedulePublishing()
    }

    private func schedulePublishing() {
        guard publishTimer == nil, unpublishedHead < unpublished.count else { return }
        publishTimer = context.schedule(at: unpublished[unpublishedHead].due) { [weak self] in
            guard let self else { return }
            publishTimer = nil
            publishDue()
        }
    }

    /// Publishes the task of every transfer that has run for the activation delay and still runs.
    private func publishDue() {
        let now = context.now
        while unpublishedHead < unpublished.count, unpublished[unpublishedHead].due <= now {
            let transfer = unpublished[unpublishedHead].transfer
            unpublishedHead += 1
            if let state = transfers[transfer], state.running, state.task == nil { _ = announce(transfer) }
        }
        if unpublishedHead == unpublished.count {
            unpublished.removeAll(keepingCapacity: unpublished.count <= 64)
            unpublishedHead = 0
        } else if unpublishedHead > 64, unpublishedHead * 2 > unpublished.count {
            unpublished.removeFirst(unpublishedHead)
            unpublishedHead = 0
        }
        schedulePublishing()
    }

    public func transferProgress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        let progress = TaskProgress(received: received, expectedToReceive: max(expected, received))
        transfers[transfer]?.progress = progress
        if let task = transfers[transfer]?.task { tasks.setProgress(task, progress) }
    }

    public func transferPaused(_ transfer: UInt64) {
        checkRunningSoon()
        slowWatch[transfer] = nil
        guard var state = transfers[transfer], state.running else { return }
        state.running = false
        transfers[transfer] = state
        if let task = state.task { tasks.suspend(task) } else { activity.release(.task, for: context.uniqueName) }
    }

    public func transferEnded(_ transfer: UInt64, outcome: Result<Void, ImageDownloader.Failure>) {
        checkRunningSoon()
        prefetching.pumpSoon()
        slowWatch[transfer] = nil
        guard let state = transfers.removeValue(forKey: transfer) else { return }
        guard let task = state.task else {
            if state.running { activity.release(.task, for: context.uniqueName) }
            return
        }
        let error: String = switch outcome {
        case .success: ""
        case .failure(.cancelled): NetActivityError.Name.cancelled.rawValue
        case .failure(.failed(let failure)): failure.name + ": " + failure.message
        }
        tasks.complete(task, error: error.prefix(utf8Bytes: NetActivityLimits.maxTaskErrorBytes))
    }

    /// Starts the ticks while transfers hold slots and work waits; on a start, every watch begins
    /// from the bytes its transfer has now.
    private func watchForSlowness() {
        guard slowTimer == nil, !slowWatch.isEmpty, core.queuedCount > 0 else { return }
        for transfer in slowWatch.keys {
            let bytes = received(transfer)
            slowWatch[transfer] = SlowWatch(windowStart: bytes, lastTick: bytes)
        }
        slowTimer = context.schedule(after: Self.slowTick) { [weak self] in self?.judgeSlowness() }
    }

    private func received(_ transfer: UInt64) -> UInt64 { transfers[transfer]?.progress.received ?? 0 }

    /// Every tick while others wait: a transfer that moved no byte for `stallTicks` ticks, or less
    /// than the floor in a window, yields its slot.
    private func judgeSlowness() {
        slowTimer = nil
        guard core.queuedCount > 0 else { return }  // nobody waits: no ticks until someone does
        for (transfer, var watch) in slowWatch {
            guard core.holdsSlot(transfer) else {
                slowWatch[transfer] = nil
                continue
            }
            let now = received(transfer)
            watch.quietTicks = watch.lastTick == now ? watch.quietTicks + 1 : 0
            watch.lastTick = now
            watch.ticks += 1
            let stalled = watch.quietTicks >= Self.stallTicks
            let slow = watch.ticks >= Self.windowTicks && watch.windowStart.map { now - $0 < Self.slowFloorBytes } == true
            if stalled || slow, core.yieldSlot(transfer) {
                slowWatch[transfer] = nil
                let why = stalled
                    ? "moved no byte for \(Self.slowTick * Self.stallTicks)"
                    : "moved \(now - (watch.windowStart ?? now)) bytes in \(Self.slowTick * Self.windowTicks)"
                context.logger.info("Transfer \(transfer) \(why): it gives its slot to queued work and goes on")
                continue
            }
            if watch.ticks >= Self.windowTicks {
                watch.windowStart = now
                watch.ticks = 0
            }
            slowWatch[transfer] = watch
        }
        if !slowWatch.isEmpty { slowTimer = context.schedule(after: Self.slowTick) { [weak self] in self?.judgeSlowness() } }
    }

    // MARK: the interface table

    /// `org.example.NetActivity.Downloader` (dbus/org.example.NetActivity.Downloader.xml).
    public func makeInterface() -> DBusInterface {
        typealias M = DownloaderMember.Method
        typealias P = DownloaderMember.Property
        return DBusInterface(
            NetActivityInterface.downloader.rawValue,
            methods: [
                DBusMethod(
                    M.downloadImage.rawValue, in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("receipt", "s"), DBusArgument("task", "o"), DBusArgument("cached", "b")]
                ) { [unowned self] in try self.downloadImage(&$0) },
                DBusMethod(
                    M.fetchImage.rawValue, in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("image", "h"), DBusArgument("size", "t"), DBusArgument("info", "a{sv}")]
                ) { [unowned self] in try self.fetchImage(&$0) },
                DBusMethod(M.cancelDownload.rawValue, in: [DBusArgument("receipt", "s")], out: [DBusArgument("cancelled", "b")]) {
                    [unowned self] in try self.cancelDownload(&$0)
                },
                DBusMethod(
                    M.setPriority.rawValue, in: [DBusArgument("receipt", "s"), DBusArgument("priority", "s")],
                    out: [DBusArgument("changed", "b")]
                ) { [unowned self] in try self.setPriority(&$0) },
                DBusMethod(M.removeImages.rawValue, in: [DBusArgument("prefix", "s")], out: [DBusArgument("removed", "u")]) {
                    [unowned self] in try self.removeImages(&$0)
                },
                DBusMethod(
                    M.prefetchImages.rawValue, in: [DBusArgument("urls", "as"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("receipt", "s")]
                ) { [unowned self] call in
                    let urls = try call.args.readStrings()
                    let options = try call.args.readVardict()
                    call.reply.append(try self.prefetching.prefetch(urls: urls, options: options, owner: call.sender))
                },
                DBusMethod(
                    M.cancelPrefetch.rawValue, in: [DBusArgument("receipt", "s"), DBusArgument("urls", "as")],
                    out: [DBusArgument("cancelled", "u")]
                ) { [unowned self] call in
                    let receipt = try call.args.read(String.self)
                    let urls = try call.args.readStrings()
                    call.reply.append(try self.prefetching.cancel(receipt: receipt, urls: urls, by: call.sender))
                },
            ],
            properties: [
                .contractVersion,
                DBusProperty(
                    P.maximumActiveDownloads.rawValue, "u", get: { [unowned self] w, _ in w.append(UInt32(self.core.maximumActiveDownloads)) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "MaximumActiveDownloads")
                    try self.setMaximumActiveDownloads(try r.read(UInt32.self))
                },
                DBusProperty(
                    P.downloadPrioritization.rawValue, "s", get: { [unowned self] w, _ in w.append(self.core.prioritization.rawValue) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "DownloadPrioritization")
                    try self.setPrioritization(try r.read(String.self))
                },
                DBusProperty(P.activeDownloads.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.core.activeCount + self.core.yieldedCount))
                },
                DBusProperty(P.queuedDownloads.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.core.queuedCount))
                },
                DBusProperty(
                    P.diskCapacity.rawValue, "t", get: { [unowned self] w, _ in w.append(self.disk?.capacity ?? DiskCache.defaultCapacity) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "DiskCapacity")
                    try self.setDiskCapacity(try r.read(UInt64.self))
                },
                DBusProperty(P.diskUsage.rawValue, "t", emitsChanged: .false) { [unowned self] w, _ in
                    self.disk?.start()
                    w.append(self.disk?.usage ?? 0)
                },
                DBusProperty(P.diskError.rawValue, "s", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.diskError)
                },
                DBusProperty(P.deferred.rawValue, "a{sv}", emitsChanged: .invalidates) { [unowned self] w, _ in
                    typealias Key = DownloaderMember.DeferredKey
                    let (metered, powerSaver) = self.holdReasons
                    var out: [String: DBusValue] = [:]
                    if metered { out[Key.metered.rawValue] = .bool(true) }
                    if powerSaver { out[Key.powerSaver.rawValue] = .bool(true) }
                    if metered || powerSaver {
                        out[Key.held.rawValue] = .uint32(UInt32(clamping: self.core.heldCount))
                        out[Key.prefetch.rawValue] = .uint32(UInt32(clamping: self.prefetching.waitingCount))
                    }
                    try w.appendVardict(out)
                },
            ],
            signals: [
                DBusSignal(DownloaderMember.Signal.downloadFinished.rawValue, [
                    DBusArgument("receipt", "s"), DBusArgument("url", "s"), DBusArgument("ok", "b"),
                    DBusArgument("error_name", "s"), DBusArgument("error_message", "s"),
                ]),
                DBusSignal(DownloaderMember.Signal.prefetchFinished.rawValue, [
                    DBusArgument("receipt", "s"), DBusArgument("stored", "u"), DBusArgument("failed", "u"),
                ]),
            ]
        )
    }

    // MARK: handlers

    func downloadImage(_ call: inout MethodCall) throws {
        let url = try call.args.read(String.self)
        let options = try call.args.readVardict()
        let answer = try download(url: url, options: options, owner: call.sender)
        call.reply.append(answer.receipt)
        try call.reply.appendObjectPath(answer.task)
        call.reply.append(answer.cached)
    }

    func fetchImage(_ call: inout MethodCall) throws {
        let url = try call.args.read(String.self)
        let options = try call.args.readVardict()
        let message = call.message
        let answer = try fetch(url: url, options: options, owner: call.sender) { [unowned self] result in
            let server = self.context.server
            do {
                try server.respond(to: message) { w in try Self.write(try result.get(), to: &w) }
            } catch {
                server.replyError(message, thrown: error)
            }
        }
        guard let answer else { return call.deferReply() }
        try Self.write(answer, to: &call.reply)
    }

    /// FetchImage's (h image, t size, a{sv} info): the body's sealed memfd, opened read-only for
    /// the caller (the same memory as the cache's when it is one, else a new one).
    static func write(_ answer: Answer, to w: inout MessageWriter) throws {
        let fd: Int32? = if let body = answer.body as? ImageBody { body.openReadOnly() } else {
            answer.body.withUnsafeBytes { SealedMemory.make(name: "netactivity-image", bytes: $0) }
        }
        guard let fd else { throw NetActivityError.failed("Could not share the image: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        try w.appendFD(fd)
        w.append(UInt64(answer.body.count))
        typealias Info = DownloaderMember.FetchImageInfo
        w.appendArray(elementSignature: "{sv}") { a in
            a.appendDictEntry { e in
                e.append(Info.source.rawValue)
                e.appendVariant(signature: "s") { v in v.append(answer.source.rawValue) }
            }
            a.appendDictEntry { e in
                e.append(Info.contentType.rawValue)
                e.appendVariant(signature: "s") { v in v.append(answer.info.format.mediaType) }
            }
            guard answer.httpStatus != 0 else { return }
            a.appendDictEntry { e in
                e.append(Info.httpStatus.rawValue)
                e.appendVariant(signature: "u") { v in v.append(answer.httpStatus) }
            }
        }
    }

    // MARK: system conditions

    /// What the system says (metered, power-saver, offline) and which of those the user lets hold
    /// work; a change of either may change what holds very-low work.
    private var conditions = SystemConditions.State() {
        didSet { holdReasonsChanged(from: Self.holdReasons(oldValue, deferral)) }
    }
    private var deferral = Deferral() {
        didSet { holdReasonsChanged(from: Self.holdReasons(conditions, oldValue)) }
    }

    /// Which conditions hold `very-low` work (the settings' `defer-when-metered`,
    /// `defer-in-power-saver`).
    public struct Deferral: Equatable, Sendable {
        public var whenMetered = true
        public var inPowerSaver = true
        public init(whenMetered: Bool = true, inPowerSaver: Bool = true) {
            self.whenMetered = whenMetered
            self.inPowerSaver = inPowerSaver
        }
    }

    /// The reasons that hold `very-low` work.
    private static func holdReasons(_ conditions: SystemConditions.State, _ deferral: Deferral) -> (metered: Bool, powerSaver: Bool) {
        (conditions.metered && deferral.whenMetered, conditions.powerSaver && deferral.inPowerSaver)
    }

    private var holdReasons: (metered: Bool, powerSaver: Bool) { Self.holdReasons(conditions, deferral) }

    func setConditions(_ new: SystemConditions.State) {
        let wentOffline = new.offline && !conditions.offline
        conditions = new
        if wentOffline { failInFlight() }
    }

    static let offlineError = NetActivityError(.offline, "NetworkManager says there is no network connection")

    /// The network transfers under way, each with what ends it as a failure.
    private var inFlight: [UInt64: (NetActivityError) -> Void] = [:]

    /// The network went away: every transfer on it fails now with Offline rather than at its
    /// stall timeout; the queue then moves on, and what it starts fails as fast (or is served
    /// from the disk tier).
    private func failInFlight() {
        let failing = inFlight
        inFlight = [:]
        context.logger.info("Offline: \(failing.count) transfers fail now")
        for (_, fail) in failing.sorted(by: { $0.key < $1.key }) { fail(Self.offlineError) }
    }

    public func setDeferral(_ new: Deferral) {
        deferral = new
    }

    private func holdReasonsChanged(from before: (metered: Bool, powerSaver: Bool)) {
        let after = holdReasons
        guard before != after else { return }
        core.holdingVeryLow = after.metered || after.powerSaver
        prefetching.held = core.holdingVeryLow
        context.emitPropertiesChanged(.downloader, [], invalidated: [DownloaderMember.Property.deferred.rawValue])
    }

    // MARK: sleep

    /// Told whether transfers run (a sleep inhibitor is held while they do), after every start,
    /// end and pause.
    var onRunning: ((Bool) -> Void)?
    private var wasRunning = false

    /// `runningChanged` at the end of this turn: a transfer that ends as the next starts keeps
    /// the inhibitor rather than dropping and taking it again.
    private lazy var runningCheck = NextTurn(context.scheduler) { [unowned self] in runningChanged() }

    private func checkRunningSoon() {
        runningCheck.request()
    }

    private func runningChanged() {
        let running = core.activeCount + core.yieldedCount > 0
        guard running != wasRunning else { return }
        wasRunning = running
        onRunning?(running)
    }

    /// The system is about to sleep (logind's PrepareForSleep(true)): every running transfer
    /// stops and waits in the queue, and nothing starts until `wake`.
    func sleep() {
        let running = core.activeCount + core.yieldedCount
        context.logger.info("The system is going to sleep: \(running) transfers stop until it wakes")
        // Bodies under way are kept where their servers can continue them (Range) after waking.
        if running > 0 { transport.keepPartialBodies() }
        core.pauseAll()
        runningChanged()
    }

    /// The system woke up: the queue starts again (stopped transfers first in their order).
    func wake() {
        core.resumeAll()
        runningChanged()
        prefetching.pumpSoon()
    }

    /// Apps whose RemoveImages is reading the disk: one at a time each, as each reads every
    /// entry's first bytes on the disk worker, which every app's disk reads share.
    private var removing: Set<String> = []

    /// RemoveImages: the caller's app's entries under `prefix`, from memory at once and from the
    /// disk on its worker; the reply counts both (an entry in both counts once).
    func removeImages(_ call: inout MethodCall) throws {
        let prefix = try call.args.read(String.self)
        guard prefix.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw NetActivityError.invalidArgs("A prefix must be at most \(NetActivityLimits.maxImageKeyBytes) bytes long, got \(prefix.utf8.count)")
        }
        let app = context.peers.identity(of: call.sender).app
        guard !removing.contains(app) else {
            throw NetActivityError.limitsExceeded("A RemoveImages of \(app) is still reading the disk; ask again when it has answered")
        }
        let matches: @Sendable (String, String) -> Bool = { key, owner in
            ImageRequestKey.removable(key: key, owner: owner, prefix: prefix, by: app[...])
        }
        let fromMemory = images.removeImages(where: matches)
        context.logger.debug("RemoveImages('\(prefix.prefix(100))') by \(app): \(fromMemory.count) from memory")
        guard let disk else { return call.reply.append(UInt32(clamping: fromMemory.count)) }
        let message = call.message
        removing.insert(app)
        disk.removeImages(where: matches) { [unowned self] fromDisk in
            removing.remove(app)
            let count = Set(fromMemory).union(fromDisk).count
            try? self.context.server.respond(to: message) { w in w.append(UInt32(clamping: count)) }
        }
        call.deferReply()
    }

    func cancelDownload(_ call: inout MethodCall) throws {
        call.reply.append(try cancel(receipt: try call.args.read(String.self), by: call.sender))
    }

    func setPriority(_ call: inout MethodCall) throws {
        let receipt = try call.args.read(String.self)
        call.reply.append(try setPriority(receipt: receipt, priority: try call.args.read(String.self), by: call.sender))
    }

    func setMaximumActiveDownloads(_ n: UInt32) throws(NetActivityError) {
        let range = NetActivityLimits.activeDownloads
        guard range.contains(n) else {
            throw .invalidArgs("MaximumActiveDownloads must be between \(range.lowerBound) and \(range.upperBound), got \(n)")
        }
        guard Int(n) != core.maximumActiveDownloads else { return }
        core.maximumActiveDownloads = Int(n)
        prefetching.pumpSoon()
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.maximumActiveDownloads.rawValue])
    }

    func setPrioritization(_ value: String) throws(NetActivityError) {
        guard let order = ImageDownloader.Prioritization(rawValue: value) else {
            throw .invalidArgs("DownloadPrioritization must be 'fifo' or 'lifo', got '\(value.prefix(100))'")
        }
        guard order != core.prioritization else { return }
        core.prioritization = order
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.downloadPrioritization.rawValue])
    }

    func setDiskCapacity(_ bytes: UInt64) throws(NetActivityError) {
        guard bytes <= NetActivityLimits.maxCacheCapacity else {
            throw .invalidArgs("DiskCapacity \(bytes) is above the limit of \(NetActivityLimits.maxCacheCapacity) bytes")
        }
        guard let disk, bytes != disk.capacity else { return }
        disk.setCapacity(bytes)
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.diskCapacity.rawValue])
    }

    var diskError: String {
        guard let disk else { return "no cache directory: neither XDG_CACHE_HOME nor HOME is set" }
        disk.start()  // the directory is checked on first use, on the worker: a later read reports it
        return disk.lastError
    }
}
