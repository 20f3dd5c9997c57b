// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Who holds what in a cache, for fair eviction: each key's owner (the leaf that stored it: an app,
/// or a process of the unscoped pool, `ClientIdentity.leaf`) and each owner's keys in recency order
/// with their costs. The memory cache and the disk tier both use it, so both purge the same way.
///
/// Max-min fairness with a floor: an owner's share of the capacity is capacity ÷ the apps holding
/// entries ÷ the leaves of its app holding entries. Only owners above their share lose entries to
/// make room for others, the one furthest above first, least recently used within it; an owner
/// within its share is never evicted for another. O(1) per note/touch/forget; a purge is
/// O(owners + evictions × log owners).
public struct OwnerLedger<Key: Hashable> {
    @usableFromInline var byOwner: [String: LRUCache<Key, Bool>] = [:]
    @usableFromInline var ownerOf: [Key: String] = [:]
    /// Leaves holding entries, per app.
    @usableFromInline var leavesByApp: [Substring: Int] = [:]

    @inlinable public init() {}

    /// The cost each owner holds.
    @inlinable public var usage: [String: UInt64] { byOwner.mapValues(\.totalCost) }

    /// The number of owners holding entries.
    @inlinable public var ownerCount: Int { byOwner.count }

    @inlinable public func owner(of key: Key) -> String? { ownerOf[key] }

    @inlinable public func usage(of owner: String) -> UInt64 { byOwner[owner]?.totalCost ?? 0 }

    /// `owner`'s fair share of `capacity` (as if it held something).
    @inlinable public func share(of owner: String, capacity: UInt64) -> UInt64 {
        let app = ClientIdentity.app(ofLeaf: owner)
        let holds = byOwner[owner] != nil
        let leaves = (leavesByApp[app] ?? 0) + (holds ? 0 : 1)
        let apps = leavesByApp.count + (leavesByApp[app] == nil ? 1 : 0)
        return FairShare.of(capacity, apps: apps, leaves: leaves)
    }

    /// Whether `owner`'s newest entry (`cost`, noted already) can stay within `capacity` by taking
    /// only from owners above their share (its own older entries included): true when it is within
    /// its share, or when what the others hold within their shares leaves room for it. O(owners).
    @inlinable public func fits(_ owner: String, newest cost: UInt64, capacity: UInt64) -> Bool {
        if usage(of: owner) <= share(of: owner, capacity: capacity) { return true }
        var untouchable: UInt64 = 0
        for (other, keys) in byOwner where other != owner {
            untouchable += min(keys.totalCost, share(of: other, capacity: capacity))
        }
        return untouchable + cost <= capacity
    }

    /// Records `key` (with `cost`) as `owner`'s and as its most recent (with `asOldest`, its least
    /// recent: a prefetched entry nobody used yet).
    @inlinable public mutating func note(_ key: Key, cost: UInt64, owner: String, asOldest: Bool = false) {
        if let old = ownerOf[key], old != owner { forget(key) }
        ownerOf[key] = owner
        if byOwner[owner] == nil { leavesByApp[ClientIdentity.app(ofLeaf: owner), default: 0] += 1 }
        _ = byOwner[owner, default: LRUCache()].set(true, cost: cost, for: key, asOldest: asOldest)
    }

    /// Makes `key` its owner's most recent.
    @inlinable public mutating func touch(_ key: Key) {
        if let owner = ownerOf[key] { _ = byOwner[owner]?.value(for: key) }
    }

    @inlinable public mutating func forget(_ key: Key) {
        guard let owner = ownerOf.removeValue(forKey: key) else { return }
        _ = byOwner[owner]?.remove(key)
        if byOwner[owner]?.isEmpty == true {
            byOwner[owner] = nil
            let app = ClientIdentity.app(ofLeaf: owner)
            if let n = leavesByApp[app] { leavesByApp[app] = n > 1 ? n - 1 : nil }
        }
    }

    @inlinable public mutating func removeAll() {
        byOwner.removeAll()
        ownerOf.removeAll()
        leavesByApp.removeAll()
    }

    /// The least recently used key of the owner furthest above its share of `capacity`, never
    /// `kept`; `someoneOver` says whether any owner is above its share at all (with one owner,
    /// never: the plain LRU purge applies). O(owners).
    @inlinable public func victim(capacity: UInt64, keeping kept: Key? = nil) -> (key: Key?, someoneOver: Bool) {
        guard byOwner.count > 1 else { return (nil, false) }
        var over: [(excess: UInt64, owner: String)] = []
        for (owner, keys) in byOwner {
            let share = share(of: owner, capacity: capacity)
            if keys.totalCost > share { over.append((keys.totalCost - share, owner)) }
        }
        over.sort { $0.excess != $1.excess ? $0.excess > $1.excess : $0.owner < $1.owner }
        for (_, owner) in over {
            if let key = oldest(of: owner, notKept: kept) { return (key, true) }
        }
        return (nil, !over.isEmpty)
    }

    /// The least recently used key of `owner`, or its next one when that is `kept`.
    @inlinable func oldest(of owner: String, notKept kept: Key?) -> Key? {
        guard let keys = byOwner[owner], let oldest = keys.oldestKey else { return nil }
        if oldest != kept { return oldest }
        return keys.keysByRecency.dropLast().last
    }

    /// Takes keys from the owners above their share of `capacity`, furthest above first (ties by
    /// name), least recently used within each, never `kept`, until `enough(freed)` or nobody is
    /// above its share with something left to take. Forgets them and returns them in order.
    @inlinable public mutating func takeOverShare(capacity: UInt64, keeping kept: Key?, enough: (UInt64) -> Bool)
        -> [Key]
    {
        var taken: [Key] = []
        var freed: UInt64 = 0
        guard byOwner.count > 1 else { return taken }
        var heap = ExcessHeap()
        for (owner, keys) in byOwner {
            let share = share(of: owner, capacity: capacity)
            if keys.totalCost > share { heap.push(keys.totalCost - share, owner) }
        }
        // Shares only grow during a purge (owners empty, none appear), so an excess in the heap is
        // never below the true one: each popped owner's excess is checked again, and one that fell
        // goes back with its new value (a lazy heap: no rebuild when an owner empties).
        while !enough(freed), let top = heap.pop() {
            guard let usage = byOwner[top.owner]?.totalCost else { continue }
            let share = share(of: top.owner, capacity: capacity)
            guard usage > share else { continue }
            if usage - share < top.excess {
                heap.push(usage - share, top.owner)
                continue
            }
            guard let key = oldest(of: top.owner, notKept: kept), let cost = byOwner[top.owner]?.peekEntry(key)?.cost
            else { continue }
            forget(key)
            taken.append(key)
            freed += cost
            if usage - cost > share { heap.push(usage - cost - share, top.owner) }
        }
        return taken
    }
}

/// A max-heap of (excess, owner), ties by the smaller owner name: the purge's order.
@usableFromInline struct ExcessHeap {
    @usableFromInline var items: [(excess: UInt64, owner: String)] = []

    @inlinable init() {}

    @inlinable static func above(_ a: (excess: UInt64, owner: String), _ b: (excess: UInt64, owner: String)) -> Bool {
        a.excess != b.excess ? a.excess > b.excess : a.owner < b.owner
    }

    @inlinable mutating func push(_ excess: UInt64, _ owner: String) {
        items.append((excess, owner))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.above(items[i], items[parent]) else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    @inlinable mutating func pop() -> (excess: UInt64, owner: String)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var best = i
            if l < items.count, Self.above(items[l], items[best]) { best = l }
            if r < items.count, Self.above(items[r], items[best]) { best = r }
            if best == i { break }
            items.swapAt(i, best)
            i = best
        }
        return top
    }
}

extension OwnerLedger: Sendable where Key: Sendable {}
