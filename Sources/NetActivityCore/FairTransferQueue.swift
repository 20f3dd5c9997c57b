// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DequeModule
public import NetActivityContract

/// The transfers waiting for a download slot, and the rule that picks the next: one FIFO or LIFO
/// queue per (app leaf, priority). The next transfer is one of the highest priority waiting;
/// among those, from the app with the fewest running transfers (a merged transfer runs for all its
/// apps), then the leaf with the fewest, then by order within the app (the oldest for FIFO, the
/// newest for LIFO). With one app and one priority this is exactly AFNetworking's single queue.
///
/// A transfer waits in the queue of every app that waits for it. One that leaves early (cancelled,
/// started for another app, or no longer waited for by this app) stays as a dead entry, skipped
/// when reached (`isQueued` says which are live), so leaving is O(1); a queue is compacted when
/// dead entries are the majority. Pure: the caller owns the transfers and their running counts.
public struct FairTransferQueue: Sendable {
    public typealias Priority = DownloaderMember.Priority
    public typealias Prioritization = DownloaderMember.DownloadPrioritization

    /// One app's queue at one priority.
    public struct Key: Hashable, Sendable {
        public let app: String
        public let priority: Priority
        public init(app: String, priority: Priority) {
            self.app = app
            self.priority = priority
        }
    }

    /// One queue's ids in arrival order.
    private struct AppQueue: Sendable {
        var ids: Deque<UInt64> = []
        var isEmpty: Bool { ids.isEmpty }

        /// `id` where the queue is taken from next (an older entry of it, if any, is skipped as
        /// dead once it has started).
        mutating func putFirst(_ id: UInt64, lifo: Bool) {
            if lifo { ids.append(id) } else { ids.prepend(id) }
        }
    }

    /// What limits the choice besides priority and order.
    public struct Limits: Sendable {
        /// Transfers an app may have running while others wait (unless its leaf runs none).
        public var maximumRunningPerApp: Int
        /// Transfers an app may run at a raised priority ahead of others; past it, its raised
        /// work competes as normal.
        public var raisedShare: Int
        /// Whether `very-low` queues are held (metered, power-saver).
        public var holdingVeryLow: Bool
        public init(maximumRunningPerApp: Int, raisedShare: Int, holdingVeryLow: Bool = false) {
            self.maximumRunningPerApp = maximumRunningPerApp
            self.raisedShare = raisedShare
            self.holdingVeryLow = holdingVeryLow
        }
    }

    public var prioritization: Prioritization
    private var queues: [Key: AppQueue] = [:]
    /// The queues that hold an entry for each transfer, live or not: it enters each at most once,
    /// and a transfer that drops back to a priority finds its old place.
    private var entered: [UInt64: Set<Key>] = [:]

    public init(prioritization: Prioritization = .fifo) {
        self.prioritization = prioritization
    }

    /// Queues that hold any entry, live or dead (for tests).
    public var queueCount: Int { queues.count }

    /// Puts transfer `id` in the queue of each of `apps` at `priority`: at the end where it is not
    /// already, or with `first` where the queue is taken from next.
    public mutating func enqueue(_ id: UInt64, apps: Set<String>, priority: Priority, first: Bool = false) {
        for app in apps {
            let key = Key(app: app, priority: priority)
            if first {
                entered[id, default: []].insert(key)
                queues[key, default: AppQueue()].putFirst(id, lifo: prioritization == .lifo)
            } else if entered[id, default: []].insert(key).inserted {
                queues[key, default: AppQueue()].ids.append(id)
            }
        }
    }

    /// Transfer `id` is gone for good: its entries are dead, and nothing is kept of it.
    public mutating func remove(_ id: UInt64) {
        entered[id] = nil
    }

    /// The live transfers waiting at `priority`, in any app's queue.
    public func waiting(at priority: Priority, isQueued: (UInt64, Key) -> Bool) -> Set<UInt64> {
        var ids = Set<UInt64>()
        for (key, q) in queues where key.priority == priority {
            for id in q.ids where isQueued(id, key) { ids.insert(id) }
        }
        return ids
    }

    /// The next transfer to start, left in the queue (it leaves as a dead entry once it runs), or
    /// nil. `running` counts the running transfers of each leaf, `runningApps` of each app (a
    /// leaf's app is `ClientIdentity.app(ofLeaf:)`): the processes of the unscoped pool are
    /// compared as one app first, then among themselves, so forking never wins more slots.
    public mutating func next(
        running: [String: Int], runningApps: [Substring: Int], limits: Limits, isQueued: (UInt64, Key) -> Bool
    ) -> UInt64? {
        var best: (priority: Priority, appRunning: Int, running: Int, id: UInt64)?
        for key in Array(queues.keys) {
            if let b = best, key.priority < b.priority { continue }
            if limits.holdingVeryLow, key.priority == .veryLow { continue }
            guard let id = peek(key, isQueued: isQueued) else { continue }
            let a = runningApps[ClientIdentity.app(ofLeaf: key.app)] ?? 0
            let r = running[key.app] ?? 0
            // The cap is the app's; a process of the unscoped pool that runs nothing may still start
            // one (the pool's floor is per live process: another process's stalls never block it).
            guard a < limits.maximumRunningPerApp || r == 0 else { continue }
            // A raised priority counts only within the app's raised share.
            let priority = key.priority > .normal && a >= limits.raisedShare ? .normal : key.priority
            let better: Bool =
                if let b = best {
                    priority != b.priority
                        ? priority > b.priority
                        : a != b.appRunning
                            ? a < b.appRunning
                            : r != b.running ? r < b.running : (prioritization == .fifo ? id < b.id : id > b.id)
                } else { true }
            if better { best = (priority, a, r, id) }
        }
        return best?.id
    }

    /// Drops dead ids from the front (FIFO) or back (LIFO) of the queue, and the queue itself
    /// when nothing is left in it; compacts it when dead ids are the majority. Returns the
    /// queue's next live id in the current order, left in place.
    private mutating func peek(_ key: Key, isQueued: (UInt64, Key) -> Bool) -> UInt64? {
        guard var q = queues[key] else { return nil }
        defer { queues[key] = q.isEmpty ? nil : q }
        while !q.isEmpty {
            let id = prioritization == .fifo ? q.ids.first! : q.ids.last!
            if isQueued(id, key) { return id }
            // A dead entry leaves: its transfer (if any) may enter this queue again later.
            entered[id]?.remove(key)
            if prioritization == .fifo { q.ids.removeFirst() } else { q.ids.removeLast() }
        }
        return nil
    }
}
