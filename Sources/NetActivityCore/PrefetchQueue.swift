// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Prefetch jobs, pure: each a list of URLs one owner asked for ahead of need, taken one at a time
/// when the downloader has nothing else to do (the driver decides when). Apps take turns, one URL
/// each, so one app's thousand URLs do not hold back another's ten; within an app, jobs and their
/// URLs go in the order asked.
public struct PrefetchQueue: Sendable {
    public struct Job: Sendable, Equatable {
        public let receipt: String
        public let owner: String
        public let app: String
        /// When it was asked for: what it stores takes no room from entries used since (`DiskIndex`).
        public let started: Double
        /// URLs not started yet, from `next` on.
        var urls: [String]
        var next = 0
        /// URLs under way, with the driver's handle (the downloader's receipt).
        public internal(set) var running: [String: String] = [:]
        /// URLs that ended stored (or were held already), and that failed.
        public internal(set) var stored = 0
        public internal(set) var failed = 0
        public var waiting: Int { urls.count - next }
        public var isDone: Bool { waiting == 0 && running.isEmpty }
    }

    private var jobs: [String: Job] = [:]
    /// Apps with URLs not started, in turn order; each app's jobs in the order asked.
    private var turns: [String] = []
    private var jobsByApp: [String: [String]] = [:]
    private var jobsByOwner: [String: Set<String>] = [:]
    private var nextReceipt: UInt64 = 1
    /// URLs not started, over all jobs.
    public private(set) var waitingCount = 0

    public init() {}

    public var isEmpty: Bool { jobs.isEmpty }
    public func job(_ receipt: String) -> Job? { jobs[receipt] }
    public func owner(of receipt: String) -> String? { jobs[receipt]?.owner }

    /// A new job; returns its receipt. `urls` should hold no duplicates.
    public mutating func add(urls: [String], owner: String, app: String, started: Double) -> String {
        let receipt = "p\(nextReceipt)"
        nextReceipt += 1
        jobs[receipt] = Job(receipt: receipt, owner: owner, app: app, started: started, urls: urls)
        jobsByOwner[owner, default: []].insert(receipt)
        waitingCount += urls.count
        if !urls.isEmpty {
            if jobsByApp[app] == nil { turns.append(app) }
            jobsByApp[app, default: []].append(receipt)
        }
        return receipt
    }

    /// The next URL to start, from the app whose turn it is (that app then goes last), with its
    /// job's receipt; nil when none waits. The driver reports its handle with `started`.
    public mutating func next() -> (receipt: String, url: String, job: Job)? {
        while let app = turns.first {
            turns.removeFirst()
            guard var queue = jobsByApp[app] else { continue }
            while let receipt = queue.first, jobs[receipt].map({ $0.waiting == 0 }) ?? true { queue.removeFirst() }
            guard let receipt = queue.first, var job = jobs[receipt] else {
                jobsByApp[app] = nil
                continue
            }
            let url = job.urls[job.next]
            job.next += 1
            waitingCount -= 1
            if job.next == job.urls.count {
                job.urls = []
                job.next = 0
                queue.removeFirst()
            }
            jobs[receipt] = job
            if queue.isEmpty {
                jobsByApp[app] = nil
            } else {
                jobsByApp[app] = queue
                turns.append(app)
            }
            return (receipt, url, job)
        }
        return nil
    }

    /// The driver's handle for a URL that `next` gave.
    public mutating func started(_ receipt: String, url: String, handle: String) {
        jobs[receipt]?.running[url] = handle
    }

    /// A URL under way (or given by `next`) ended, stored, failed, or cancelled (nil: counted
    /// neither); returns its job when that was its last.
    public mutating func ended(_ receipt: String, url: String, stored: Bool?) -> Job? {
        guard var job = jobs[receipt] else { return nil }
        job.running[url] = nil
        if stored == true { job.stored += 1 } else if stored == false { job.failed += 1 }
        guard job.isDone else {
            jobs[receipt] = job
            return nil
        }
        drop(receipt)
        return job
    }

    /// Takes a job away (cancelled, or its owner left); returns it, with the URLs it had not
    /// started (`waitingURLs`) and its handles under way, for the driver to release and cancel.
    public mutating func remove(_ receipt: String) -> (job: Job, waitingURLs: [String])? {
        guard let job = jobs[receipt] else { return nil }
        drop(receipt)
        waitingCount -= job.waiting
        unqueue(receipt, of: job.app)
        return (job, Array(job.urls[job.next...]))
    }

    /// Takes `urls` out of a job: those not started go, those under way are returned with their
    /// handles for the driver to cancel (each then `ended`). Returns how many waited, and the job
    /// when nothing of it is left.
    public mutating func remove(_ urls: Set<String>, from receipt: String) -> (
        waiting: Int, running: [(url: String, handle: String)], finished: Job?
    ) {
        guard var job = jobs[receipt] else { return (0, [], nil) }
        let left = job.urls[job.next...].filter { !urls.contains($0) }
        let removed = job.waiting - left.count
        job.urls = Array(left)
        job.next = 0
        waitingCount -= removed
        let running = job.running.filter { urls.contains($0.key) }.map { (url: $0.key, handle: $0.value) }
        jobs[receipt] = job
        guard job.isDone else { return (removed, running, nil) }
        drop(receipt)
        unqueue(receipt, of: job.app)
        return (removed, running, job)
    }

    /// The receipts of `owner`'s jobs.
    public func receipts(of owner: String) -> Set<String> { jobsByOwner[owner] ?? [] }

    /// Takes a job out of its app's turn (and the app out of the turns when it has no other).
    private mutating func unqueue(_ receipt: String, of app: String) {
        guard var queue = jobsByApp[app] else { return }
        queue.removeAll { $0 == receipt }
        if queue.isEmpty {
            jobsByApp[app] = nil
            turns.removeAll { $0 == app }
        } else {
            jobsByApp[app] = queue
        }
    }

    private mutating func drop(_ receipt: String) {
        guard let job = jobs.removeValue(forKey: receipt) else { return }
        if jobsByOwner[job.owner]?.remove(receipt) != nil, jobsByOwner[job.owner]?.isEmpty == true {
            jobsByOwner[job.owner] = nil
        }
    }
}
