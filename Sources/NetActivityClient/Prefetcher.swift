// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract

/// Fetches images ahead of need through the downloader all apps share (`PrefetchImages`), the way
/// a list uses Nuke's `ImagePrefetcher`: start with the URLs of the rows about to show, stop with
/// those scrolled past. Unlike an in-process prefetcher, the agent runs a prefetch only when no
/// app's request waits, holds it on a metered connection, in power-saver and while the system
/// sleeps, and never lets it push out an image someone used since it began: it lands on disk,
/// and in memory only where there is free room. A later `fetchImage` or `ImageSlot` for the same
/// URL is then served from there, or joins the transfer under way at its own priority.
///
/// Each URL is asked for once per prefetcher until it has been tried (or stopped). A prefetcher
/// stops what it still has waiting when it is released. Thread-safe; the calls return at once.
public final class Prefetcher: Sendable {
    private let activity: NetActivity
    private let records: PrefetchRecords

    /// Which URL belongs to which prefetch; touched only on the client's thread.
    final class PrefetchRecords: @unchecked Sendable {
        /// URL -> its prefetch's receipt ("" while the agent has not answered yet).
        var receiptOf: [String: String] = [:]
        /// Receipt -> its URLs not yet tried or stopped.
        var urlsOf: [String: Set<String>] = [:]
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        /// Forgets a prefetch the agent finished (or that ended with the agent).
        func finished(_ receipt: String) {
            for url in urlsOf.removeValue(forKey: receipt) ?? [] where receiptOf[url] == receipt {
                receiptOf[url] = nil
            }
            wakeIfIdle()
        }

        /// Stops every prefetch, at the agent and here.
        func stopAll(_ core: ClientCore) {
            for receipt in urlsOf.keys { core.downloads.cancelPrefetch(receipt, urls: []) }
            urlsOf = [:]
            receiptOf = [:]
            wakeIfIdle()
        }

        func wakeIfIdle() {
            guard receiptOf.isEmpty else { return }
            let waiters = idleWaiters
            idleWaiters = []
            for w in waiters { w.resume() }
        }
    }

    public init(_ activity: NetActivity) {
        self.activity = activity
        records = PrefetchRecords()
    }

    deinit {
        let records = records
        activity.core.mailbox.post { [core = activity.core] in records.stopAll(core) }
    }

    /// Prefetches `urls` (http or https), skipping those this prefetcher is already prefetching.
    /// A URL the agent refuses (a bad URL, an app past its 4,096 waiting URLs) is dropped with
    /// the rest of its call.
    public func startPrefetching(_ urls: [String]) {
        let records = records
        activity.core.mailbox.post { [core = activity.core] in
            var fresh: [String] = []
            for url in urls where records.receiptOf[url] == nil {
                records.receiptOf[url] = ""
                fresh.append(url)
            }
            guard !fresh.isEmpty, !core.isClosed else {
                if !fresh.isEmpty { for url in fresh { records.receiptOf[url] = nil } }
                return records.wakeIfIdle()
            }
            core.downloads.prefetch(
                fresh,
                { result in
                    // URLs stopped before the agent answered are stopped now.
                    let kept = fresh.filter { records.receiptOf[$0] == "" }
                    guard case .success(let receipt) = result else {
                        for url in kept { records.receiptOf[url] = nil }
                        return records.wakeIfIdle()
                    }
                    if kept.count < fresh.count {
                        let keptSet = Set(kept)
                        core.downloads.cancelPrefetch(
                            receipt, urls: kept.isEmpty ? [] : fresh.filter { !keptSet.contains($0) })
                    }
                    guard !kept.isEmpty else { return }
                    for url in kept { records.receiptOf[url] = receipt }
                    records.urlsOf[receipt] = Set(kept)
                }, finished: { receipt in records.finished(receipt) })
        }
    }

    /// Stops prefetching `urls` (those under way stop; those already fetched stay in the cache).
    public func stopPrefetching(_ urls: [String]) {
        let records = records
        activity.core.mailbox.post { [core = activity.core] in
            var byReceipt: [String: [String]] = [:]
            for url in urls {
                guard let receipt = records.receiptOf[url] else { continue }
                if receipt.isEmpty {
                    records.receiptOf[url] = nil  // not answered yet: stopped when it is
                    continue
                }
                records.receiptOf[url] = nil
                records.urlsOf[receipt]?.remove(url)
                byReceipt[receipt, default: []].append(url)
            }
            for (receipt, stopped) in byReceipt {
                let whole = records.urlsOf[receipt]?.isEmpty ?? true
                if whole { records.urlsOf[receipt] = nil }
                core.downloads.cancelPrefetch(receipt, urls: whole ? [] : stopped)
            }
            records.wakeIfIdle()
        }
    }

    /// Stops every prefetch of this prefetcher.
    public func stopPrefetching() {
        let records = records
        activity.core.mailbox.post { [core = activity.core] in records.stopAll(core) }
    }

    /// Returns when every URL asked for has been tried or stopped (at once when none is left).
    public func waitUntilIdle() async {
        let records = records
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let posted = activity.core.mailbox.post {
                records.idleWaiters.append(c)
                records.wakeIfIdle()
            }
            if !posted { c.resume() }
        }
    }
}
