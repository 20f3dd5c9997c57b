// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract

/// AFImageDownloader's logic, pure: one transfer per request key however many clients ask, one
/// handler per receipt, a bounded number of running transfers with a FIFO or LIFO queue, and
/// cancellation per receipt. Transport and storage are injected (`ImageFetching`, `store`,
/// `isCached`), so tests drive it with a gated fake and never touch the network. Everything runs
/// on one thread (the agent's loop); fetchers call back on it.
///
/// The faults of the original that this does not have:
/// - Admission is counted only between a transfer's real start and its end, so cancelling queued
///   work never lets more than `maximumActiveDownloads` run (AFNetworking #3469).
/// - Each transfer has its own id; a completion or progress for an older transfer of the same key
///   (cancelled, then asked for again) is ignored and never touches the newer one.
/// - A failure ends only its transfer and the queue moves on.
///
/// Beyond it, priorities shared across apps: each receipt has one, a transfer runs at the highest
/// of its live receipts', and the queue takes the highest priority first, then the fairness rule,
/// then FIFO/LIFO.
///
/// Longer than 500 lines on purpose: one state (transfers by key and id, receipts, slots, the
/// queue) whose invariants every method keeps together, as AFImageDownloader's one class does;
/// the fair choice of the next transfer is its own type already (`FairTransferQueue`).
public final class ImageDownloader {
    public typealias Prioritization = DownloaderMember.DownloadPrioritization
    public typealias Priority = DownloaderMember.Priority

    private struct Waiter {
        let receipt: String
        let owner: String
        /// The app the owner belongs to (the unit of fairness); the owner itself by default.
        let app: String
        var priority: Priority
        /// When the prefetch this waiter is part of started (nil: not a prefetch).
        let prefetchStarted: Double?
        let handler: (Result<Fetched, Failure>) -> Void
    }

    private final class Transfer {
        let id: UInt64
        let url: String
        let key: String
        var reload: Bool
        var waiters: [Waiter]
        var cancel: (() -> Void)?
        var running = false
        /// Still running, but no longer holding one of the `maximumActiveDownloads` slots: it was
        /// too slow while others waited (`yieldSlot`).
        var yielded = false
        /// A reload of the same key took over while this one ran.
        var overtaken = false
        /// The app of the first waiter: what the transfer stores is charged to it.
        let firstApp: String
        /// It reaches public addresses only (for a sandboxed or unknown caller): such requests
        /// merge only with each other, so that no host app's transfer is held to a sandbox's
        /// rules, and no sandboxed one rides a host app's connection.
        let publicOnly: Bool
        /// Where `byKey` holds it: the key, set apart for public-only transfers.
        var mergeKey: String { publicOnly ? key + "\u{0}\u{0}public-only" : key }
        /// The highest priority among the waiters: where it waits in the queues.
        var priority: Priority
        /// The smallest max-age among the waiters that joined it before it started.
        var maxAge: Double?
        init(id: UInt64, url: String, key: String, reload: Bool, publicOnly: Bool, waiter: Waiter) {
            self.id = id
            self.url = url
            self.key = key
            self.reload = reload
            self.publicOnly = publicOnly
            waiters = [waiter]
            firstApp = waiter.app
            priority = waiter.priority
        }
    }

    /// Starts a fetch; returns how to cancel it. The completion must come at most once, later,
    /// on the downloader's thread.
    public typealias Fetch = (
        _ request: Request,
        _ progress: @escaping (_ received: UInt64, _ expected: UInt64) -> Void,
        _ completion: @escaping (Result<Fetched, Failure>) -> Void
    ) -> (() -> Void)

    private let fetch: Fetch
    /// Whether a cache entry answers `key` for `owner`: one the downloader stored, or one `owner`
    /// added itself (nil: only the downloader's count), cached less than `maxAge` seconds ago when
    /// that is given. Another app's entry never does.
    public typealias IsCached = (_ key: String, _ owner: String?, _ maxAge: Double?) -> Bool
    private let isCached: IsCached
    /// Keeps what a transfer fetched under its key, charged to `app` (the first app that asked);
    /// `prefetchStarted` when only prefetches waited for it (see `prefetchStarted(ofTransfer:)`).
    public typealias Store = (_ key: String, _ fetched: Fetched, _ app: String, _ prefetchStarted: Double?) -> Result<
        Void, Failure
    >
    private let store: Store
    public weak var observer: (any Observer)?

    /// Transfers by key (at most one per key).
    private var byKey: [String: Transfer] = [:]
    /// The transfers waiting for a slot, and the fair choice of the next (`FairTransferQueue`).
    private var queue: FairTransferQueue
    public private(set) var queuedCount = 0
    private var transfersByID: [UInt64: Transfer] = [:]
    /// The running transfers (at most `maximumActiveDownloads`), for the fair choice of the next.
    private var runningByID: [UInt64: Transfer] = [:]
    private var receipts: [String: UInt64] = [:]
    /// Each owner's live receipts, so an owner's departure touches only what it held.
    private var receiptsByOwner: [String: Set<String>] = [:]
    private var nextTransfer: UInt64 = 1
    private var nextReceipt: UInt64 = 1
    public private(set) var activeCount = 0
    /// Running transfers that gave their slot up (`yieldSlot`).
    public private(set) var yieldedCount = 0
    /// Transfers (holding a slot or yielded) one app may have running, while other apps wait.
    public var maximumRunningPerApp: Int { 2 * maximumActiveDownloads }
    /// Transfers an app may run at a raised priority (high, very-high) ahead of other apps' work:
    /// half the slots, rounded up. Past that, its raised work competes as normal, so that no app
    /// can take every slot by marking all its requests very-high.
    public var raisedShare: Int { (maximumActiveDownloads + 1) / 2 }

    public var maximumActiveDownloads: Int {
        didSet { startQueued() }
    }

    public var prioritization: Prioritization {
        get { queue.prioritization }
        set { queue.prioritization = newValue }
    }

    /// While true, `very-low` transfers wait (a metered connection, power-saver): they start
    /// when it turns false, or at once if a receipt of a higher priority joins them. They hold
    /// no slot while they wait, and do not count as work waiting for a slow transfer's slot.
    public var holdingVeryLow = false {
        didSet { if !holdingVeryLow { startQueued() } }
    }

    /// Whether every transfer is held (the system is about to sleep): see `pauseAll`.
    public private(set) var paused = false

    /// Stops every running transfer and puts it back in the queue, each with its receipts, and
    /// starts none until `resumeAll` (the system is going to sleep). Their handlers hear nothing:
    /// after `resumeAll` they run again from the start.
    public func pauseAll() {
        paused = true
        // Newest first, each to the front of its queues (the end a LIFO queue takes from): the
        // stopped transfers go first again, in the order they had.
        for t in runningByID.values.sorted(by: { $0.id > $1.id }) {
            stopRunning(t)
            enqueue(t, first: true)
            queuedCount += 1
            observer?.transferPaused(t.id)
        }
    }

    /// Starts the queue again after `pauseAll` (the system woke up).
    public func resumeAll() {
        guard paused else { return }
        paused = false
        startQueued()
    }

    /// Transfers waiting only because `holdingVeryLow` holds them.
    public var heldCount: Int {
        guard holdingVeryLow else { return 0 }
        return queue.waiting(at: .veryLow) { self.queuedTransfer($0, for: $1) != nil }.count
    }

    public init(
        maximumActiveDownloads: Int = 4, prioritization: Prioritization = .fifo,
        isCached: @escaping IsCached, store: @escaping Store,
        fetch: @escaping Fetch
    ) {
        precondition(maximumActiveDownloads >= 1)
        self.maximumActiveDownloads = maximumActiveDownloads
        queue = FairTransferQueue(prioritization: prioritization)
        self.isCached = isCached
        self.store = store
        self.fetch = fetch
    }

    /// Asks for the image at `url` (cache key `key`) for `owner`. A cache hit answers `.cached`
    /// at once; otherwise `handler` is called exactly once with the outcome: what was fetched (and
    /// stored), or why not. `publicOnly`: the transfer may reach public addresses only.
    public func download(
        url: String, key: String, owner: String, app: String? = nil, reload: Bool = false, priority: Priority = .normal,
        prefetchStarted: Double? = nil, maxAge: Double? = nil, publicOnly: Bool = false,
        handler: @escaping (Result<Fetched, Failure>) -> Void
    ) -> Ticket {
        if !reload, isCached(key, owner, maxAge) { return .cached }
        let receipt = "r\(nextReceipt)"
        nextReceipt += 1
        let waiter = Waiter(
            receipt: receipt, owner: owner, app: app ?? owner, priority: priority, prefetchStarted: prefetchStarted,
            handler: handler)
        // Merge into the transfer for this key, unless this one must skip the caches and that one
        // is already running without doing so (a reload wants fresh bytes). A queued one simply
        // becomes a reload.
        receiptsByOwner[owner, default: []].insert(receipt)
        let mergeKey = publicOnly ? key + "\u{0}\u{0}public-only" : key
        if let existing = byKey[mergeKey], existing.reload || !reload || !existing.running {
            if reload { existing.reload = true }
            // A merged transfer belongs to every app that waits for it: queued, any of them may
            // pull it, at the highest priority any of them gave it.
            existing.waiters.append(waiter)
            if !existing.running, let maxAge { existing.maxAge = min(existing.maxAge ?? maxAge, maxAge) }
            receipts[receipt] = existing.id
            reprioritize(existing)
            return .receipt(receipt, transfer: existing.id)
        }
        // Either no transfer has this key, or a reload overtakes a running plain one: the new
        // transfer owns the key from now on (see `finished`).
        let transfer = Transfer(
            id: nextTransfer, url: url, key: key, reload: reload, publicOnly: publicOnly, waiter: waiter)
        transfer.maxAge = maxAge
        nextTransfer += 1
        byKey[mergeKey]?.overtaken = true
        byKey[mergeKey] = transfer
        transfersByID[transfer.id] = transfer
        receipts[receipt] = transfer.id
        enqueue(transfer)
        queuedCount += 1
        observer?.transferQueued(transfer.id, url: url)
        startQueued()
        return .receipt(receipt, transfer: transfer.id)
    }

    /// Puts a queued transfer in the queue of each app that waits for it, at its priority: at the
    /// end where it is not already, or with `first` where the queue is taken from next (an older
    /// entry of it is then skipped as dead once it has started).
    private func enqueue(_ t: Transfer, first: Bool = false) {
        guard !t.running else { return }
        queue.enqueue(t.id, apps: Set(t.waiters.map(\.app)), priority: t.priority, first: first)
    }

    /// The transfer's priority is the highest of its waiters' again (after one joined, left or
    /// changed its own); a queued one moves to that priority's queues.
    private func reprioritize(_ t: Transfer) {
        let before = t.priority
        if let top = t.waiters.map(\.priority).max() { t.priority = top }
        enqueue(t)
        // Lifted out of the hold, it may take a slot that was left free.
        if holdingVeryLow, !t.running, before == .veryLow, t.priority > .veryLow { startQueued() }
    }

    /// A new priority for a pending receipt; the transfer's becomes the highest of its receipts'.
    /// Returns false when the receipt is unknown or finished.
    @discardableResult
    public func setPriority(_ priority: Priority, receipt: String) -> Bool {
        guard let id = receipts[receipt], let t = transfersByID[id],
            let index = t.waiters.firstIndex(where: { $0.receipt == receipt })
        else { return false }
        t.waiters[index].priority = priority
        reprioritize(t)
        return true
    }

    /// When the earliest prefetch waiting for transfer `id` started, if only prefetches wait for it
    /// (what it stores then takes no room from entries used since); nil otherwise.
    public func prefetchStarted(ofTransfer id: UInt64) -> Double? {
        transfersByID[id].flatMap { Self.prefetchStarted($0) }
    }

    private static func prefetchStarted(_ t: Transfer) -> Double? {
        var earliest: Double?
        for w in t.waiters {
            guard let started = w.prefetchStarted else { return nil }
            earliest = min(earliest ?? started, started)
        }
        return earliest
    }

    /// The priority transfer `id` waits or runs at (nil when it is unknown or finished).
    public func priority(ofTransfer id: UInt64) -> Priority? { transfersByID[id]?.priority }

    /// Who holds `receipt` (nil when it is unknown or finished).
    public func owner(of receipt: String) -> String? {
        guard let id = receipts[receipt], let t = transfersByID[id] else { return nil }
        return t.waiters.first { $0.receipt == receipt }?.owner
    }

    /// Cancels one receipt: its handler gets `.cancelled`; the transfer stops (or leaves the
    /// queue) when no receipt is left. Returns false when the receipt is unknown or finished.
    @discardableResult
    public func cancel(receipt: String) -> Bool {
        guard let id = receipts.removeValue(forKey: receipt), let t = transfersByID[id],
            let index = t.waiters.firstIndex(where: { $0.receipt == receipt })
        else { return false }
        let waiter = t.waiters.remove(at: index)
        forget(receipt, of: waiter.owner)
        if t.waiters.isEmpty { abandon(t) } else { reprioritize(t) }
        waiter.handler(.failure(.cancelled))
        return true
    }

    /// Cancels every receipt of transfer `id` (someone cancelled its task from a panel): each
    /// handler gets `.cancelled`, and the transfer stops or leaves the queue. Returns how many
    /// receipts it had (0 when it is unknown or finished).
    @discardableResult
    public func cancel(transfer id: UInt64) -> Int {
        guard let t = transfersByID[id] else { return 0 }
        let held = t.waiters.map(\.receipt)
        for receipt in held { cancel(receipt: receipt) }
        return held.count
    }

    private func forget(_ receipt: String, of owner: String) {
        guard receiptsByOwner[owner]?.remove(receipt) != nil, receiptsByOwner[owner]?.isEmpty == true else { return }
        receiptsByOwner[owner] = nil
    }

    /// The owner left: every receipt it held is cancelled (its handlers are not called: nobody
    /// is there to hear them).
    /// O(the owner's receipts and their transfers' waiters): thousands of abandoned receipts
    /// leave without a scan of every transfer or of the queue. With `atMost`, only that many of the
    /// owner's receipts go now (the driver spreads a large departure over turns of its loop, so
    /// nobody else waits for it); returns how many went and whether any are left.
    @discardableResult
    public func ownerVanished(_ owner: String, atMost limit: Int = .max) -> (taken: Int, more: Bool) {
        guard var held = receiptsByOwner[owner] else { return (0, false) }
        var touched: [UInt64] = []
        var taken = 0
        while taken < limit, let receipt = held.popFirst() {
            taken += 1
            if let id = receipts.removeValue(forKey: receipt) { touched.append(id) }
        }
        receiptsByOwner[owner] = held.isEmpty ? nil : held
        for id in Set(touched).sorted() {
            guard let t = transfersByID[id] else { continue }
            t.waiters.removeAll { $0.owner == owner && receipts[$0.receipt] == nil }
            if t.waiters.isEmpty { abandon(t) } else { reprioritize(t) }
        }
        return (taken, !held.isEmpty)
    }

    /// A running transfer slower than the driver's floor while others wait gives its slot up: it
    /// goes on (nothing already received is lost) but no longer counts against
    /// `maximumActiveDownloads`, so a slow or stalled server cannot hold the queue hostage. It
    /// still counts among its apps' running transfers, of which each app may have at most
    /// `maximumRunningPerApp` (and all apps `NetActivityLimits.maxRunningTransfers`): an app whose transfers all stall
    /// stops starting new ones while others wait, and its stalled ones cannot take every slot.
    /// Returns whether the slot was given up (a queued transfer that may start does, in it).
    @discardableResult
    public func yieldSlot(_ id: UInt64) -> Bool {
        guard let t = transfersByID[id], t.running, !t.yielded, queuedCount > 0, popQueued() != nil else {
            return false
        }
        t.yielded = true
        yieldedCount += 1
        activeCount -= 1
        startQueued()
        return true
    }

    /// The running transfers (holding a slot) whose apps all hold more than their share of the
    /// slots while another app's work waits, by one of those apps: the share is
    /// `maximumActiveDownloads` divided by the apps running or waiting. Empty while nothing waits.
    public func transfersBeyondShare() -> [UInt64: String] {
        guard queuedCount > 0 else { return [:] }
        var slots: [Substring: Int] = [:]
        var waitingApps = Set<Substring>()
        for t in transfersByID.values {
            let apps = Set(t.waiters.map { ClientIdentity.app(ofLeaf: $0.app) })
            if t.running, !t.yielded {
                for app in apps { slots[app, default: 0] += 1 }
            } else if !t.running {
                waitingApps.formUnion(apps)
            }
        }
        let share = max(1, maximumActiveDownloads / max(1, Set(slots.keys).union(waitingApps).count))
        var out: [UInt64: String] = [:]
        for t in runningByID.values where !t.yielded {
            let apps = Set(t.waiters.map { ClientIdentity.app(ofLeaf: $0.app) })
            // Another app's work waits, and every app of this transfer is above its share.
            guard !waitingApps.subtracting(apps).isEmpty, let app = apps.min(),
                apps.allSatisfy({ slots[$0, default: 0] > share })
            else { continue }
            out[t.id] = String(app)
        }
        return out
    }

    /// Whether transfer `id` runs and holds a slot (the driver watches these for slowness).
    public func holdsSlot(_ id: UInt64) -> Bool {
        guard let t = transfersByID[id] else { return false }
        return t.running && !t.yielded
    }

    /// The running transfer's slot (or its yielded place) is free again.
    private func leaveSlot(_ t: Transfer) {
        if t.yielded {
            t.yielded = false
            yieldedCount -= 1
        } else {
            activeCount -= 1
        }
    }

    /// A running transfer stops: its slot is free and its fetch cancelled.
    private func stopRunning(_ t: Transfer) {
        t.running = false
        runningByID[t.id] = nil
        leaveSlot(t)
        let cancel = t.cancel
        t.cancel = nil
        cancel?()
    }

    /// A transfer nobody waits for any more: out of the queue, or stopped.
    private func abandon(_ t: Transfer) {
        transfersByID[t.id] = nil
        queue.remove(t.id)
        if byKey[t.mergeKey] === t { byKey[t.mergeKey] = nil }
        if t.running {
            stopRunning(t)
            observer?.transferEnded(t.id, outcome: .failure(.cancelled))
            startQueued()
        } else {
            // Its id stays in the app queues as a dead entry (skipped when reached): O(1).
            queuedCount -= 1
            observer?.transferEnded(t.id, outcome: .failure(.cancelled))
        }
    }

    /// The transfer `id` if it is still queued at this priority and `key.app` waits for it.
    private func queuedTransfer(_ id: UInt64, for key: FairTransferQueue.Key) -> Transfer? {
        guard let t = transfersByID[id], !t.running, t.priority == key.priority,
            t.waiters.contains(where: { $0.app == key.app })
        else { return nil }
        return t
    }

    /// The next transfer to start: of the highest priority waiting, from the app with the fewest
    /// running transfers, then by order;
    /// none from an app at `maximumRunningPerApp` (a merged transfer counts for each of its
    /// apps) unless its leaf runs none, nor past `NetActivityLimits.maxRunningTransfers` in all.
    ///
    /// "App" here is a leaf (`ClientIdentity.leaf`): the processes of the unscoped pool are compared
    /// as one app first, then among themselves, so that forking never wins more slots.
    private func popQueued() -> Transfer? {
        guard !paused, runningByID.count < NetActivityLimits.maxRunningTransfers else { return nil }
        var running: [String: Int] = [:]
        var runningApps: [Substring: Int] = [:]
        for t in runningByID.values {
            let leaves = Set(t.waiters.map(\.app))
            for leaf in leaves { running[leaf, default: 0] += 1 }
            for app in Set(leaves.map { ClientIdentity.app(ofLeaf: $0) }) { runningApps[app, default: 0] += 1 }
        }
        let limits = FairTransferQueue.Limits(
            maximumRunningPerApp: maximumRunningPerApp, raisedShare: raisedShare, holdingVeryLow: holdingVeryLow)
        let id = queue.next(running: running, runningApps: runningApps, limits: limits) {
            self.queuedTransfer($0, for: $1) != nil
        }
        return id.flatMap { transfersByID[$0] }
    }

    /// Starts queued transfers while there is room.
    private func startQueued() {
        while activeCount < maximumActiveDownloads, queuedCount > 0, let t = popQueued() {
            let id = t.id
            queuedCount -= 1
            t.running = true
            runningByID[id] = t
            activeCount += 1
            observer?.transferStarted(id, url: t.url)
            let request = Request(
                url: t.url, key: t.key, reload: t.reload, transfer: id, app: t.firstApp, maxAge: t.maxAge,
                publicOnly: t.publicOnly)
            let cancel = fetch(
                request,
                { [weak self] received, expected in
                    self?.progress(id, received: received, expected: expected)
                },
                { [weak self] result in
                    self?.finished(id, result)
                })
            // The fetch may have completed synchronously.
            if transfersByID[id] === t, t.running { t.cancel = cancel }
        }
    }

    private func progress(_ id: UInt64, received: UInt64, expected: UInt64) {
        guard let t = transfersByID[id], t.running else { return }  // stale: an older transfer
        observer?.transferProgress(id, received: received, expected: expected)
    }

    private func finished(_ id: UInt64, _ result: Result<Fetched, Failure>) {
        // A completion for a transfer that was cancelled (or already ended) changes nothing: a
        // newer transfer of the same key has its own id.
        guard let t = transfersByID[id], t.running else { return }
        t.running = false
        runningByID[id] = nil
        t.cancel = nil
        leaveSlot(t)
        transfersByID[id] = nil
        queue.remove(id)
        if let newer = byKey[t.mergeKey], newer !== t {
            // Overtaken by a reload of the same key that is still under way. A download that
            // succeeded is answered with its own bytes (stored now; the reload's, newer, replace
            // them when they come): another app's reload never fails it. One that failed hands
            // its waiters to the reload, their second chance.
            if case .success(let fetched) = result,
                case .success = store(t.key, fetched, t.firstApp, Self.prefetchStarted(t))
            {
                complete(t, .success(fetched))
                return
            }
            for w in t.waiters { receipts[w.receipt] = newer.id }
            newer.waiters += t.waiters
            reprioritize(newer)
            observer?.transferEnded(id, outcome: .failure(.cancelled))
            startQueued()
            return
        }
        if byKey[t.mergeKey] === t { byKey[t.mergeKey] = nil }
        let outcome: Result<Fetched, Failure> = result.flatMap { fetched in
            // An overtaken transfer stores only if the reload that overtook it left nothing.
            t.overtaken && isCached(t.key, nil, nil)
                ? .success(fetched) : store(t.key, fetched, t.firstApp, Self.prefetchStarted(t)).map { fetched }
        }
        complete(t, outcome)
    }

    private func complete(_ t: Transfer, _ outcome: Result<Fetched, Failure>) {
        for w in t.waiters {
            receipts[w.receipt] = nil
            forget(w.receipt, of: w.owner)
        }
        observer?.transferEnded(t.id, outcome: outcome.map { _ in })
        for w in t.waiters { w.handler(outcome) }
        startQueued()
    }
}
