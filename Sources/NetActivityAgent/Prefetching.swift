// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import NetActivityContract
import NetActivityCore

/// What prefetch needs of the downloader (`DownloadService`), and no more.
protocol PrefetchDownloader: AnyObject {
    /// Throws AccessDenied when `owner`'s sandbox denies it the network.
    func mayDownload(_ owner: String) throws(NetActivityError)
    /// Whether a prefetched URL may start now beside `running` others: nothing waits in the
    /// queue, the downloader is not paused, a slot is free, and one stays free for what comes next
    /// (with one slot in all, prefetch may take it).
    func roomForPrefetch(running: Int) -> Bool
    /// Starts `url` at `very-low` for `owner`; `handler` hears how it ended.
    func startPrefetch(
        url: String, owner: String, app: String, started: Double,
        handler: @escaping (Result<Void, ImageDownloader.Failure>) -> Void
    ) -> ImageDownloader.Ticket
    /// Cancels a prefetched URL under way (the downloader's receipt for it).
    func cancelPrefetch(_ handle: String)
    /// `key` was served from memory while a prefetch was there: its disk entry becomes the most
    /// recent, so that no prefetch takes its room.
    func touchOnDisk(_ key: String)
}

/// `PrefetchImages` and `CancelPrefetch`: a `PrefetchQueue` fed to the downloader one URL at a
/// time, when nothing else waits and a slot is free, keeping one slot for whatever comes next.
/// What a prefetch fetches takes no room from what people use (see `DiskIndex` and
/// `AutoPurgingImageCache.addIfRoom`).
final class Prefetching {
    private let context: AgentContext
    private unowned let downloads: any PrefetchDownloader
    /// Prefetched URLs waiting or under way, each charged to its owner and app in the accounts
    /// (`.prefetchURLs`).
    private var queue = PrefetchQueue()
    /// Prefetched URLs under way in the downloader.
    private var running = 0
    /// Whether the downloader may be fed now (not asleep, not held by metered or power-saver).
    var held = false {
        didSet { if !held { pumpSoon() } }
    }
    /// Keys served from memory while a prefetch was there, already reported to the disk tier.
    private var touched: Set<String> = []

    init(context: AgentContext, downloads: any PrefetchDownloader) {
        self.context = context
        self.downloads = downloads
    }

    /// URLs waiting, for `Deferred`.
    var waitingCount: Int { queue.waitingCount }

    // MARK: the methods

    func prefetch(urls: [String], options: [String: DBusValue], owner: String) throws(NetActivityError) -> String {
        if let key = options.keys.sorted().first {
            throw .invalidArgs("PrefetchImages takes no options yet; got '\(key.prefix(100))'")
        }
        try downloads.mayDownload(owner)
        var seen = Set<String>()
        var list: [String] = []
        for (i, url) in urls.enumerated() {
            do throws(NetActivityError) { try DownloadURL.check(url) } catch {
                throw NetActivityError(name: error.name, message: "URL \(i + 1) of \(urls.count): \(error.message)")
            }
            if seen.insert(url).inserted { list.append(url) }
        }
        // The cap is an app's, and in the unscoped pool each live process's (its leaf): one
        // process of the pool never takes every other's first URL.
        let app = context.peers.app(of: owner)
        let held = context.accounts[.prefetchURLs].held(byLeaf: app)
        guard held + list.count <= NetActivityLimits.maxPrefetchURLsPerApp else {
            throw .limitsExceeded(
                "\(app) has \(held) prefetched URLs waiting; \(list.count) more would pass its limit of \(NetActivityLimits.maxPrefetchURLsPerApp)"
            )
        }
        try context.accounts.take(.prefetchURLs, connection: owner, leaf: app, cost: list.count)
        let receipt = queue.add(urls: list, owner: owner, app: app, started: DiskCache.now())
        if list.isEmpty, let job = queue.remove(receipt)?.job { finished(job) }  // nothing to try
        pumpSoon()
        return receipt
    }

    func cancel(receipt: String, urls: [String], by caller: String) throws(NetActivityError) -> UInt32 {
        guard let owner = queue.owner(of: receipt) else { return 0 }
        guard owner == caller else {
            throw .accessDenied(
                "Only the owner of prefetch \(receipt.prefix(100)) (\(owner)) may cancel it; the caller is \(caller)")
        }
        let app = context.peers.app(of: owner)
        if urls.isEmpty {
            guard let (job, waiting) = queue.remove(receipt) else { return 0 }
            forget(job, waiting: waiting.count)
            for handle in job.running.values { downloads.cancelPrefetch(handle) }
            return UInt32(clamping: waiting.count + job.running.count)
        }
        let (waiting, running, finished) = queue.remove(Set(urls), from: receipt)
        context.accounts.release(.prefetchURLs, connection: owner, leaf: app, cost: waiting)
        for (_, handle) in running { downloads.cancelPrefetch(handle) }
        if let finished { self.finished(finished) }
        return UInt32(clamping: waiting + running.count)
    }

    /// The owner left: its prefetches go. Returns whether any of their URLs were under way: the
    /// downloader's receipts for them are then the owner's to drop (`ImageDownloader.ownerVanished`).
    func ownerVanished(_ owner: String) -> Bool {
        var underWay = false
        for receipt in queue.receipts(of: owner) {
            guard let (job, waiting) = queue.remove(receipt) else { continue }
            underWay = underWay || !job.running.isEmpty
            forget(job, waiting: waiting.count)
        }
        pumpSoon()
        return underWay
    }

    /// A job taken out of the queue: what it held is released (its URLs under way no longer
    /// count, whether or not the downloader tells of their end).
    private func forget(_ job: PrefetchQueue.Job, waiting: Int) {
        context.accounts.release(.prefetchURLs, connection: job.owner, leaf: job.app, cost: waiting + job.running.count)
        running -= job.running.count
        if queue.isEmpty { touched = [] }
    }

    // MARK: feeding the downloader

    private lazy var pumpNextTurn = NextTurn(context.scheduler, bound(self) { $0.pump() })

    /// `pump` at the end of this turn: after a transfer ended, a prefetch came, or what held
    /// prefetch let go (never inside the downloader's own calls).
    func pumpSoon() {
        guard !queue.isEmpty else { return }
        pumpNextTurn.request()
    }

    /// How long prefetch starts nothing after an app's own request: an app loading what it shows
    /// asks in bursts, and each gap between its calls would otherwise let a prefetched transfer in
    /// to take CPU, bus and a slot from the rest of the burst.
    static let quietAfterRequest: UInt64 = 100_000_000
    /// When an app last asked for an image (monotonic ns; 0: never).
    private var lastRequest: UInt64 = 0
    private var quietTimer: TimerID?

    /// An app asked the downloader for an image (not a prefetch).
    func requested() {
        lastRequest = context.scheduler.nowNanoseconds
    }

    /// Starts prefetched URLs while nothing else waits, no app has asked for an image in the last
    /// `quietAfterRequest`, and a slot is free, leaving one slot free (with one slot in all,
    /// prefetch may take it).
    private func pump() {
        let quietFrom = lastRequest &+ Self.quietAfterRequest
        if lastRequest != 0, context.scheduler.nowNanoseconds < quietFrom {
            if quietTimer == nil, !queue.isEmpty {
                quietTimer = context.scheduler.schedule(atNanoseconds: quietFrom) { [weak self] in
                    self?.quietTimer = nil
                    self?.pump()
                }
            }
            return
        }
        while !held, downloads.roomForPrefetch(running: running), let (receipt, url, job) = queue.next() {
            var over = false
            let ticket = downloads.startPrefetch(url: url, owner: job.owner, app: job.app, started: job.started) {
                [weak self] result in
                over = true
                self?.ended(receipt, url: url, result)
            }
            switch ticket {
            case .cached:
                running += 1  // counted as if it ran, so that ended's accounting is the same
                ended(receipt, url: url, .success(()))
            case .receipt(let handle, _):
                running += 1
                if !over { queue.started(receipt, url: url, handle: handle) }
            }
        }
    }

    /// A prefetched URL was tried (stored, failed, or cancelled by CancelPrefetch). Nothing for a
    /// job already taken out of the queue (`forget` released it).
    private func ended(_ receipt: String, url: String, _ result: Result<Void, ImageDownloader.Failure>) {
        guard let job = queue.job(receipt) else { return }
        running -= 1
        context.accounts.release(.prefetchURLs, connection: job.owner, leaf: job.app)
        let stored: Bool? =
            switch result {
            case .success: true
            case .failure(.cancelled): nil
            case .failure: false
            }
        if let done = queue.ended(receipt, url: url, stored: stored) { finished(done) }
        pumpSoon()
    }

    /// PrefetchFinished, to the owner only, on the loop's next turn (never before the reply of
    /// the call that ended it).
    private func finished(_ job: PrefetchQueue.Job) {
        if queue.isEmpty { touched = [] }
        _ = context.scheduler.schedule(afterNanoseconds: 0) { [weak self] in self?.announce(job) }
    }

    private func announce(_ job: PrefetchQueue.Job) {
        context.sink.emitSignal(
            path: NetActivityBus.objectPath, interface: NetActivityInterface.downloader.rawValue,
            member: DownloaderMember.Signal.prefetchFinished.rawValue, destination: job.owner
        ) { w in
            w.append(job.receipt)
            w.append(UInt32(clamping: job.stored))
            w.append(UInt32(clamping: job.failed))
        }
    }

    /// `key` was served from memory: while a prefetch is there, its disk entry becomes the most
    /// recent (once per key), so that no prefetch takes its room.
    func used(_ key: String) {
        guard !queue.isEmpty, touched.insert(key).inserted else { return }
        downloads.touchOnDisk(key)
    }
}
