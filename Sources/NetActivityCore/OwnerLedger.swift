/// Who holds what in a cache, for fair eviction: each key's owner (the app that stored it) and each
/// owner's keys in recency order with their costs. O(1) per operation; `victim` is O(owners).
/// The memory cache and the disk tier both use it, so both purge the same way: first from the
/// owners above their fair share (capacity ÷ owners holding entries), the largest first (ties by
/// name), least recently used within it.
public struct OwnerLedger<Key: Hashable> {
    @usableFromInline var byOwner: [String: LRUCache<Key, Bool>] = [:]
    @usableFromInline var ownerOf: [Key: String] = [:]

    @inlinable public init() {}

    /// The cost each owner holds.
    @inlinable public var usage: [String: UInt64] { byOwner.mapValues(\.totalCost) }

    /// The number of owners holding entries.
    @inlinable public var ownerCount: Int { byOwner.count }

    @inlinable public func owner(of key: Key) -> String? { ownerOf[key] }

    @inlinable public func usage(of owner: String) -> UInt64 { byOwner[owner]?.totalCost ?? 0 }

    /// Records `key` (with `cost`) as `owner`'s and as its most recent.
    @inlinable public mutating func note(_ key: Key, cost: UInt64, owner: String) {
        if let old = ownerOf[key], old != owner { forget(key) }
        ownerOf[key] = owner
        _ = byOwner[owner, default: LRUCache()].set(true, cost: cost, for: key)
    }

    /// Makes `key` its owner's most recent.
    @inlinable public mutating func touch(_ key: Key) {
        if let owner = ownerOf[key] { _ = byOwner[owner]?.value(for: key) }
    }

    @inlinable public mutating func forget(_ key: Key) {
        guard let owner = ownerOf.removeValue(forKey: key) else { return }
        _ = byOwner[owner]?.remove(key)
        if byOwner[owner]?.isEmpty == true { byOwner[owner] = nil }
    }

    @inlinable public mutating func removeAll() {
        byOwner.removeAll()
        ownerOf.removeAll()
    }

    /// The least recently used key of the owner furthest above its share of `capacity`, never
    /// `kept`; `someoneOver` says whether any owner is above its share at all (with one owner,
    /// only when its usage passes the capacity).
    @inlinable public func victim(capacity: UInt64, keeping kept: Key? = nil) -> (key: Key?, someoneOver: Bool) {
        guard byOwner.count > 1 else { return (nil, false) }
        let share = capacity / UInt64(byOwner.count)
        let over = byOwner.filter { $0.value.totalCost > share }.sorted {
            $0.value.totalCost != $1.value.totalCost ? $0.value.totalCost > $1.value.totalCost : $0.key < $1.key
        }
        for (_, keys) in over {
            if let oldest = keys.oldestKey, oldest != kept { return (oldest, true) }
        }
        return (nil, !over.isEmpty)
    }
}

extension OwnerLedger: Sendable where Key: Sendable {}
