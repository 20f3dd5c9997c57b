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
    private var transferTasks: [UInt64: TaskEntry] = [:]
    /// Pending receipts: the budget, the shares of apps and the per-client cap. An owner's app is
    /// known from its first call until its departure has been handled, so counting and releasing
    /// agree on it.
    private var pending = FairQuota(
        budget: NetActivityLimits.pendingDownloadsBudget, limit: NetActivityLimits.maxPendingDownloads,
        perConnection: NetActivityLimits.maxPendingDownloadsPerClient)
    /// Running transfers that hold a slot, watched for slowness: the bytes they had when the current
    /// window began (nil: started during it, judged from the next). One timer, only while some run.
    private var slowWatch: [UInt64: UInt64?] = [:]
    private var receivedByTransfer: [UInt64: UInt64] = [:]
    private var slowTimer: TimerID?
    /// A transfer that moves less than `slowFloorBytes` in a window while others wait gives its
    /// slot up (`ImageDownloader.yieldSlot`): a stalled or dribbling server holds no one hostage.
    static let slowWindow: Duration = .seconds(2)
    static let slowFloorBytes: UInt64 = 16 * 1024
    /// Told of every failed download but cancellations (the notifier posts them).
    public var onFailure: [(_ url: String, _ message: String) -> Void] = []

    public init(context: AgentContext, loop: EventLoop, images: any ImageStore, tasks: any TaskFactory) {
        self.context = context
        self.loop = loop
        self.images = images
        self.tasks = tasks
    }

    /// Made (and libcurl loaded) at the first download. NETACTIVITY_LIBCURL names another libcurl
    /// to load (the tests name a missing one).
    private lazy var fetcher = HTTPFetcher(
        loop: loop, limits: .init(maxBytes: maxBodyBytes), library: getenv("NETACTIVITY_LIBCURL").map { String(cString: $0) })

    /// An image must fit in the cache, and a bus message in any case.
    private var maxBodyBytes: Int { Int(min(images.memoryCapacity, UInt64(NetActivityLimits.maxDownloadBytes))) }

    lazy var core: ImageDownloader = {
        let d = ImageDownloader(
            isCached: { [unowned self] key, owner in
                self.images.contains(key, answeringFor: owner.map { self.context.peers.app(of: $0) })
            },
            store: { [unowned self] key, fetched, app in self.images.store(fetched.body, for: key, app: app) },
            fetch: { [unowned self] request, progress, completion in self.fetch(request, progress, completion) })
        d.observer = self
        return d
    }()

    /// The disk tier (nil when there is no cache directory to use); its files are the disk
    /// worker's, never the loop's.
    lazy var disk: DiskTier? = DiskCache.defaultDirectory().map {
        DiskTier(directory: $0, mailbox: loop.mailbox, logger: context.logger)
    }

    /// At exit: waits up to `milliseconds` for the disk writes under way.
    public func finishDiskWrites(milliseconds: Int) {
        disk?.flush(milliseconds: milliseconds)
    }

    static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Disk first (unless reloading): a fresh entry answers without the network, a stale one is
    /// revalidated with its ETag/Last-Modified; a 200 is written back when HTTP caching allows.
    /// The disk is read on its worker; a key it surely does not hold goes to the network at once.
    private func fetch(
        _ request: ImageDownloader.Request, _ progress: @escaping (UInt64, UInt64) -> Void,
        _ completion: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        guard !request.reload, let disk else { return network(request, stale: nil, progress, completion) }
        var stopNetwork: (() -> Void)?
        var stopped = false
        let stopReading = disk.read(key: request.key) { [weak self] hit in
            guard let self, !stopped else { return }
            guard let hit else { return stopNetwork = self.network(request, stale: nil, progress, completion) }
            switch HTTPCachePolicy.decide(hit.info, now: Self.wallClock()) {
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
        fetcher.limits.maxBytes = maxBodyBytes
        return fetcher.fetch(url: request.url, app: request.app, headers: stale?.conditional ?? [], progress: progress) {
            [weak self] result in
            completion(result.flatMap { response in
                if response.status == 304, let stale {
                    let info = HTTPCachePolicy.refreshed(stale.hit.info, notModified: response.headers, now: Self.wallClock())
                    self?.disk?.write(key: request.key, info: info, body: stale.hit.body, owner: request.app)
                    return .success(ImageDownloader.Fetched(body: stale.hit.body))
                }
                guard response.status == 200 else {
                    return .failure(.failed(NetActivityError(.http, "HTTP \(response.status) for \(PublishedURL.redact(request.url))")))
                }
                if let info = HTTPCachePolicy.store(status: 200, headers: response.headers, now: Self.wallClock()) {
                    if response.body.withUnsafeBytes({ ImageInfo.sniff($0) }) != nil {
                        self?.disk?.write(key: request.key, info: info, body: response.body, owner: request.app)
                    }
                } else {
                    self?.disk?.remove(key: request.key)  // no-store: keep no copy, not even an old one
                }
                return .success(ImageDownloader.Fetched(body: response.body))
            })
        }
    }

    // MARK: requests

    func download(url: String, options: [String: DBusValue], owner: String) throws(NetActivityError) -> (receipt: String, task: String, cached: Bool) {
        typealias Option = DownloaderMember.Option
        try Self.checkURL(url)
        try checkOptions(options, of: DownloaderMember.Method.downloadImage.rawValue, Option.self)
        let additional = options[Option.additionalIdentifier.rawValue]?.stringValue ?? ""
        guard additional.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw .invalidArgs(
                "additional-identifier is \(additional.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)")
        }
        let app = context.peers.app(of: owner)
        if let refusal = pending.check(connection: owner, leaf: app) {
            throw .limitsExceeded(refusal.message("downloads waited for", client: owner, leaf: app, quota: pending))
        }
        let key = ImageRequestKey.make(url: url, additional: additional)
        var receipt = ""
        let reload = options[Option.reload.rawValue]?.boolValue ?? false
        // Counted before the call: a transport that fails at once answers inside it.
        pending.charge(connection: owner, leaf: app)
        let ticket = core.download(url: url, key: key, owner: owner, app: app, reload: reload) {
            [unowned self] result in
            self.finished(receipt: receipt, url: url, owner: owner, result)
        }
        if let (transfer, description) = unannounced {  // queued, not started: announced suspended
            unannounced = nil
            transferTasks[transfer] = tasks.makeAgentTask(description: description, running: false)
        }
        switch ticket {
        case .cached:
            release(owner)
            return ("", "/", true)
        case .receipt(let r, let transfer):
            receipt = r
            return (r, transferTasks[transfer]?.path ?? "/", false)
        }
    }

    /// DownloadFinished goes to the requester only (a unicast signal).
    private func finished(receipt: String, url: String, owner: String, _ result: Result<Void, ImageDownloader.Failure>) {
        release(owner)
        let (ok, name, message): (Bool, String, String) = switch result {
        case .success: (true, "", "")
        case .failure(.cancelled): (false, NetActivityError.Name.cancelled.rawValue, "The download was cancelled")
        case .failure(.failed(let error)): (false, error.name, error.message)
        }
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

    private func release(_ owner: String, count: Int = 1) {
        pending.release(connection: owner, leaf: context.peers.app(of: owner), cost: count)
    }

    func cancel(receipt: String, by caller: String) throws(NetActivityError) -> Bool {
        guard let owner = core.owner(of: receipt) else { return false }
        guard owner == caller else {
            throw .accessDenied("Only the owner of receipt \(receipt) (\(owner)) may cancel it; the caller is \(caller)")
        }
        return core.cancel(receipt: receipt)
    }

    /// Departed owners' receipts leave in slices of `departureSlice` per turn of the loop, over all
    /// departures: each queued transfer is a task object whose cancellation is announced, and
    /// 5,000 of them at once held the loop for a third of a second (debug build).
    public func ownerVanished(_ owner: String) {
        let n = pending.held(byConnection: owner)
        guard n > 0 else { return }
        release(owner, count: n)
        departing.append(owner)
        if departing.count == 1 { drainDepartures() }
    }

    static let departureSlice = 128
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

    /// http or https, with a host, no spaces or control characters, at most 4096 bytes.
    static func checkURL(_ url: String) throws(NetActivityError) {
        func refuse(_ why: String) -> NetActivityError {
            NetActivityError(.invalidURL, "'\(url.prefix(200))' \(why)")
        }
        guard url.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw refuse("is longer than \(NetActivityLimits.maxImageKeyBytes) bytes")
        }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw refuse("contains spaces or control characters") }
        let lower = url.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") { rest = url.dropFirst(7) } else if lower.hasPrefix("https://") { rest = url.dropFirst(8) } else {
            throw refuse("is not an http or https URL")
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last.map { $0.hasPrefix("[") ? $0 : $0.split(separator: ":").first ?? "" } ?? ""
        guard !host.isEmpty else { throw refuse("has no host") }
    }

    // MARK: ImageDownloader.Observer: one task object per transfer

    /// A transfer queued by the `download` under way, whose task is announced when that call
    /// knows whether it started at once (running: one InterfacesAdded, where announcing it
    /// suspended and then resuming it took a PropertiesChanged more, for most downloads).
    private var unannounced: (transfer: UInt64, description: String)?

    public func transferQueued(_ transfer: UInt64, url: String) {
        unannounced = (transfer, String(
            "Download \(PublishedURL.redact(url))".prefix(utf8Bytes: NetActivityLimits.maxDescriptionBytes)))
    }

    public func transferStarted(_ transfer: UInt64, url: String) {
        slowWatch[transfer] = .some(nil)
        receivedByTransfer[transfer] = 0
        watchForSlowness()
        if let (queued, description) = unannounced, queued == transfer {
            unannounced = nil
            transferTasks[transfer] = tasks.makeAgentTask(description: description, running: true)
            return
        }
        guard let entry = transferTasks[transfer] else { return }
        tasks.resume(entry)
    }

    public func transferProgress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        if receivedByTransfer[transfer] != nil { receivedByTransfer[transfer] = received }
        guard let entry = transferTasks[transfer] else { return }
        tasks.setProgress(entry, TaskProgress(received: received, expectedToReceive: max(expected, received)))
    }

    public func transferEnded(_ transfer: UInt64, outcome: Result<Void, ImageDownloader.Failure>) {
        slowWatch[transfer] = nil
        receivedByTransfer[transfer] = nil
        guard let entry = transferTasks.removeValue(forKey: transfer) else { return }
        let error: String = switch outcome {
        case .success: ""
        case .failure(.cancelled): NetActivityError.Name.cancelled.rawValue
        case .failure(.failed(let failure)): failure.name + ": " + failure.message
        }
        tasks.complete(entry, error: error.prefix(utf8Bytes: NetActivityLimits.maxTaskErrorBytes))
    }

    private func watchForSlowness() {
        guard slowTimer == nil, !slowWatch.isEmpty else { return }
        slowTimer = context.schedule(after: Self.slowWindow) { [weak self] in self?.judgeSlowness() }
    }

    /// Once per window while transfers run: each that moved less than the floor since the last
    /// window began yields its slot if anyone waits.
    private func judgeSlowness() {
        slowTimer = nil
        for (transfer, start) in slowWatch {
            let now = receivedByTransfer[transfer] ?? 0
            guard core.holdsSlot(transfer) else {
                slowWatch[transfer] = nil
                continue
            }
            if let start, now - start < Self.slowFloorBytes, core.yieldSlot(transfer) {
                slowWatch[transfer] = nil
                context.logger.info(
                    "Transfer \(transfer) moved \(now - start) bytes in \(Self.slowWindow): it gives its slot to queued work and goes on")
                continue
            }
            slowWatch[transfer] = .some(now)
        }
        watchForSlowness()
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
                DBusMethod(M.cancelDownload.rawValue, in: [DBusArgument("receipt", "s")], out: [DBusArgument("cancelled", "b")]) {
                    [unowned self] in try self.cancelDownload(&$0)
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
            ],
            signals: [DBusSignal(DownloaderMember.Signal.downloadFinished.rawValue, [
                DBusArgument("receipt", "s"), DBusArgument("url", "s"), DBusArgument("ok", "b"),
                DBusArgument("error_name", "s"), DBusArgument("error_message", "s"),
            ])]
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

    func cancelDownload(_ call: inout MethodCall) throws {
        call.reply.append(try cancel(receipt: try call.args.read(String.self), by: call.sender))
    }

    func setMaximumActiveDownloads(_ n: UInt32) throws(NetActivityError) {
        let range = NetActivityLimits.activeDownloads
        guard range.contains(n) else {
            throw .invalidArgs("MaximumActiveDownloads must be between \(range.lowerBound) and \(range.upperBound), got \(n)")
        }
        guard Int(n) != core.maximumActiveDownloads else { return }
        core.maximumActiveDownloads = Int(n)
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
