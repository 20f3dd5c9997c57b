// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import Logging
import NetActivityContract
import NetActivityCore

/// The disk tier as the loop sees it. Every file operation (the directory scan, reads, writes
/// with their checksum, deletions) runs in order on the disk worker thread, on a `DiskCache`
/// that only that thread touches, so the loop never waits for a disk. From the worker's reports
/// the loop keeps what it must answer at once: which entries exist (a miss costs no trip to the
/// worker), DiskUsage and DiskError.
final class DiskTier: @unchecked Sendable {
    // @unchecked: touched only on the loop's thread; the worker's reports come back through the
    // loop's mailbox. `cache` is the worker's alone.
    let directory: String
    private let cache: DiskCache
    private let worker: SerialWorker
    private let mailbox: EventLoop.Mailbox
    private let logger: Logger
    private(set) var capacity: UInt64
    private(set) var usage: UInt64 = 0
    /// What each app holds on disk, as the worker last reported.
    private(set) var usageByApp: [String: UInt64] = [:]
    private(set) var lastError = ""
    /// Entry file names, once the worker has scanned the directory (nil before).
    private var names: Set<String>?
    private var started = false
    /// Writes given to the worker and not yet done, and their bytes: past the limits a write is
    /// skipped (the disk is a cache; the image is in memory and the next download writes it).
    private var queuedWrites = 0
    private var queuedBytes = 0
    private(set) var skippedWrites = 0

    struct Hit {
        let info: CachedResponseInfo
        let body: ImageBody
    }

    init(directory: String, capacity: UInt64 = DiskCache.defaultCapacity, mailbox: EventLoop.Mailbox, logger: Logger) {
        self.directory = directory
        self.capacity = capacity
        self.mailbox = mailbox
        self.logger = logger
        cache = DiskCache(directory: directory, capacity: capacity, logger: logger)
        worker = SerialWorker(name: "netactivity-disk")
    }

    /// Scans the directory (on the worker) if nobody has yet: the first download, or a read of
    /// DiskUsage or DiskError, starts it; they report what the scan found once it has.
    func start() {
        guard !started else { return }
        run({ cache in _ = cache.count }, otherwise: (), then: { _ in })
    }

    /// Whether an entry for `key` may be on disk (false: surely not, and no trip to the worker;
    /// no file name computed either while the tier is known to be empty).
    private func mayHold(key: String) -> Bool {
        guard let names else { return true }
        return !names.isEmpty && names.contains(fileName(for: key))
    }

    /// The file names of the keys asked about lately: a transfer asks for its key's name when it
    /// looks on disk and again when it writes or drops the entry, and SHA-256 is the dearest part.
    private var recentNames: [String: String] = [:]

    private func fileName(for key: String) -> String {
        if let name = recentNames[key] { return name }
        let name = DiskEntry.fileName(for: key)
        if recentNames.count >= 512 { recentNames.removeAll(keepingCapacity: true) }
        recentNames[key] = name
        return name
    }

    /// The entry for `key`, read and checked on the worker; `done` comes on the loop (at once
    /// when the entry surely is not there). Returns how to stop waiting (`done` is then never called).
    func read(key: String, _ done: @escaping (Hit?) -> Void) -> () -> Void {
        guard mayHold(key: key), !broken else {
            done(nil)
            return {}
        }
        let waiting = Waiter(done)
        run({ cache in cache.read(key: key).map { Hit(info: $0.info, body: $0.body) } }, otherwise: nil) { hit in
            waiting.call(hit)
        }
        return { waiting.cancel() }
    }

    /// Writes an entry on the worker (the body is read there, in place); skipped when the worker
    /// is too far behind. `prefetchStarted`: a prefetch's entry (see `DiskIndex`).
    func write(
        key: String, info: CachedResponseInfo, body: any FetchedBody, owner: String, prefetchStarted: Double? = nil
    ) {
        guard !broken else { return }
        guard queuedWrites < NetActivityLimits.maxQueuedDiskWrites,
            queuedBytes + body.count <= NetActivityLimits.maxQueuedDiskBytes
        else {
            if skippedWrites == 0 {
                logger.notice("Disk cache: the disk is behind the downloads; skipping writes until it catches up")
            }
            skippedWrites += 1
            return
        }
        skippedWrites = 0
        queuedWrites += 1
        queuedBytes += body.count
        let size = body.count
        names?.insert(fileName(for: key))  // a read that follows waits for the write (one queue)
        run(
            { cache in _ = cache.write(key: key, info: info, body: body, owner: owner, prefetchStarted: prefetchStarted)
            }, otherwise: ()
        ) {
            [self] _ in
            queuedWrites -= 1
            queuedBytes -= size
        }
    }

    /// The entry for `key` was used without a read (served from memory): the most recent on disk
    /// too, so a prefetch that runs takes no room from it.
    func touch(key: String) {
        guard mayHold(key: key), !broken else { return }
        run({ cache in cache.touch(key: key) }, otherwise: (), then: { _ in })
    }

    func remove(key: String) {
        guard mayHold(key: key), !broken else { return }
        run({ cache in cache.remove(key: key) }, otherwise: (), then: { _ in })
    }

    /// Deletes (on the worker) the entries whose key and owner `matches` (see
    /// `DiskCache.removeImages`); `done` hears their keys, on the loop.
    func removeImages(
        where matches: @escaping @Sendable (_ key: String, _ owner: String) -> Bool,
        _ done: @escaping ([String]) -> Void
    ) {
        guard !broken else { return done([]) }
        run({ cache in cache.removeImages(where: matches) }, otherwise: [], then: done)
    }

    func setCapacity(_ bytes: UInt64) {
        capacity = bytes
        run({ cache in cache.setCapacity(bytes) }, otherwise: (), then: { _ in })
    }

    /// Waits (at exit) until the writes given so far are on disk, or `milliseconds` passed.
    func flush(milliseconds: Int) {
        guard started, !broken else { return }
        if !worker.waitUntilIdle(milliseconds: milliseconds) {
            logger.notice("Disk cache: left writes unfinished at exit")
        }
    }

    /// The worker could not be started: no disk tier, and DiskError says why.
    private var broken = false

    /// Runs `job` on the worker, then `then` on the loop with its result, after the loop has
    /// taken in what the job changed (or at once with `otherwise` when there is no worker).
    private func run<T>(_ job: @escaping (DiskCache) -> T, otherwise: T, then: @escaping (T) -> Void) {
        started = true
        let cache = cache
        let then = UncheckedSendable(then)
        let task = UncheckedSendable { [mailbox] in
            let result = UncheckedSendable(job(cache))
            let report = Report(
                journal: cache.takeJournal(), usage: cache.usage, usageByApp: cache.usageByApp,
                lastError: cache.lastError)
            mailbox.post { [self] in
                self.apply(report)
                then.value(result.value)
            }
        }
        guard worker.async({ task.value() }) else {
            broken = true
            lastError = "the disk worker thread could not be started; images are kept in memory only"
            logger.warning("Disk cache off: \(lastError)")
            return then.value(otherwise)
        }
    }

    private struct Report: @unchecked Sendable {
        let journal: [(name: String, present: Bool)]
        let usage: UInt64
        let usageByApp: [String: UInt64]
        let lastError: String
    }

    private func apply(_ report: Report) {
        if names == nil { names = [] }
        for (name, present) in report.journal {
            if present { names?.insert(name) } else { names?.remove(name) }
        }
        usage = report.usage
        usageByApp = report.usageByApp
        lastError = report.lastError
    }

    /// A reader's completion, or nothing once it stopped waiting.
    private final class Waiter {
        private var done: ((Hit?) -> Void)?
        init(_ done: @escaping (Hit?) -> Void) { self.done = done }
        func call(_ hit: Hit?) {
            let d = done
            done = nil
            d?(hit)
        }
        func cancel() { done = nil }
    }
}
