// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// A least-recently-used map with O(1) insert, lookup (which refreshes recency), removal and
/// eviction of the oldest entry.
///
/// Entries live in arrays indexed by slot and are chained in a doubly linked list through slot
/// indices (no object per entry, so no reference counting on the hot path). Keys are found through
/// an open-addressing table of slot numbers that keeps each slot's hash: a lookup hashes its key
/// once (Swift's seeded hasher, so clients cannot flood it with collisions), and an eviction hashes
/// nothing at all: it finds its bucket from the stored hash and the slot number, and deletes by
/// backward shift (no tombstones). Recency is the list order itself: deterministic, with no clock
/// and no ties (AFNetworking sorted on wall-clock access dates, where equal dates made the order
/// arbitrary, and sorted everything on every purge).
public struct LRUCache<Key: Hashable, Value> {
    /// Buckets: 0 when empty, else the slot + 1 in the low 32 bits and the low 32 bits of the
    /// key's hash in the high ones, so probing and deletion never touch the nodes. The size is a
    /// power of two (at most 2^31), at most half full.
    @usableFromInline var table: [UInt64] = []
    /// Per slot, what the list and the table need, together (one cache line per eviction).
    @usableFromInline var nodes: [Node] = []
    /// Per slot, the key and value; nil for a free slot.
    @usableFromInline var entries: [Entry?] = []
    @usableFromInline var free: [Int32] = []
    @usableFromInline var live = 0
    /// Most recent at `head`, least recent at `tail`; -1 when empty.
    @usableFromInline var head: Int32 = -1
    @usableFromInline var tail: Int32 = -1
    @usableFromInline var _totalCost: UInt64 = 0

    @usableFromInline struct Node {
        @usableFromInline var hash: Int
        @usableFromInline var cost: UInt64
        @usableFromInline var prev: Int32
        @usableFromInline var next: Int32
        @inlinable init(hash: Int, cost: UInt64) {
            self.hash = hash
            self.cost = cost
            prev = -1
            next = -1
        }
    }

    @usableFromInline struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @inlinable init(key: Key, value: Value) {
            self.key = key
            self.value = value
        }
    }

    @inlinable public init() {}

    @inlinable public var totalCost: UInt64 { _totalCost }
    @inlinable public var count: Int { live }
    @inlinable public var isEmpty: Bool { live == 0 }

    /// The value for `key`, made the most recent.
    @inlinable public mutating func value(for key: Key) -> Value? {
        guard let slot = find(key, hash: key.hashValue)?.slot else { return nil }
        moveToFront(slot)
        return entries[slot]!.value
    }

    /// The value for `key` without touching recency.
    @inlinable public func peek(_ key: Key) -> Value? {
        find(key, hash: key.hashValue).flatMap { entries[$0.slot]?.value }
    }

    @inlinable public func contains(_ key: Key) -> Bool { find(key, hash: key.hashValue) != nil }

    /// Inserts or replaces; the entry becomes the most recent (with `asOldest`, the least recent:
    /// the first to go). Returns the replaced value.
    @discardableResult
    @inlinable public mutating func set(_ value: Value, cost: UInt64, for key: Key, asOldest: Bool = false) -> Value? {
        let hash = key.hashValue
        if let slot = find(key, hash: hash)?.slot {
            let old = entries[slot]!.value
            _totalCost = _totalCost - nodes[slot].cost + cost
            entries[slot]!.value = value
            nodes[slot].cost = cost
            if asOldest {
                unlink(slot)
                linkAtBack(slot)
            } else {
                moveToFront(slot)
            }
            return old
        }
        if (live + 1) * 2 > table.count { grow() }
        let slot: Int
        if let reused = free.popLast() {
            slot = Int(reused)
            nodes[slot] = Node(hash: hash, cost: cost)
            entries[slot] = Entry(key: key, value: value)
        } else {
            slot = nodes.count
            nodes.append(Node(hash: hash, cost: cost))
            entries.append(Entry(key: key, value: value))
        }
        placeInTable(slot)
        live += 1
        _totalCost += cost
        if asOldest { linkAtBack(slot) } else { linkAtFront(slot) }
        return nil
    }

    /// Removes `key`; returns its value and cost.
    @discardableResult
    @inlinable public mutating func remove(_ key: Key) -> (value: Value, cost: UInt64)? {
        guard let (bucket, slot) = find(key, hash: key.hashValue) else { return nil }
        removeFromTable(bucket)
        return release(slot)
    }

    /// Removes and returns the least recently used entry, hashing nothing.
    @inlinable public mutating func removeOldest() -> (key: Key, value: Value, cost: UInt64)? {
        guard tail >= 0 else { return nil }
        let slot = Int(tail)
        let key = entries[slot]!.key
        removeFromTable(bucket(of: slot))
        let (value, cost) = release(slot)
        return (key, value, cost)
    }

    /// The value and cost for `key` without refreshing it.
    @inlinable public func peekEntry(_ key: Key) -> (value: Value, cost: UInt64)? {
        guard let (_, slot) = find(key, hash: key.hashValue), let e = entries[slot] else { return nil }
        return (e.value, nodes[slot].cost)
    }

    /// The least recently used value, if any (no hashing).
    @inlinable public var oldestValue: Value? { tail >= 0 ? entries[Int(tail)]!.value : nil }

    /// The most recently used value, if any (no hashing).
    @inlinable public var newestValue: Value? { head >= 0 ? entries[Int(head)]!.value : nil }

    /// The least recently used key, if any.
    @inlinable public var oldestKey: Key? { tail >= 0 ? entries[Int(tail)]!.key : nil }

    /// Removes the least recently used entry and returns its value (no key copy, no hashing).
    @inlinable public mutating func dropOldest() -> Value? {
        guard tail >= 0 else { return nil }
        let slot = Int(tail)
        removeFromTable(bucket(of: slot))
        return release(slot).0
    }

    @inlinable public mutating func removeAll() {
        self = LRUCache()
    }

    /// Keys from the most to the least recent (for tests and tools; O(n)).
    @inlinable public var keysByRecency: [Key] {
        var out: [Key] = []
        out.reserveCapacity(live)
        var slot = head
        while slot >= 0 {
            out.append(entries[Int(slot)]!.key)
            slot = nodes[Int(slot)].next
        }
        return out
    }

    // MARK: the table

    @inlinable func find(_ key: Key, hash: Int) -> (bucket: Int, slot: Int)? {
        guard !table.isEmpty else { return nil }
        let mask = table.count - 1
        var b = hash & mask
        let fragment = UInt64(UInt32(truncatingIfNeeded: hash))
        while true {
            let entry = table[b]
            if entry == 0 { return nil }
            if entry >> 32 == fragment {
                let slot = Int(entry & 0xFFFF_FFFF) - 1
                if nodes[slot].hash == hash, entries[slot]!.key == key { return (b, slot) }
            }
            b = (b + 1) & mask
        }
    }

    /// The bucket holding `slot`, found from its stored hash.
    @inlinable func bucket(of slot: Int) -> Int {
        let mask = table.count - 1
        var b = nodes[slot].hash & mask
        while Int(table[b] & 0xFFFF_FFFF) != slot + 1 { b = (b + 1) & mask }
        return b
    }

    @inlinable mutating func placeInTable(_ slot: Int) {
        let mask = table.count - 1
        let hash = nodes[slot].hash
        var b = hash & mask
        while table[b] != 0 { b = (b + 1) & mask }
        table[b] = UInt64(UInt32(truncatingIfNeeded: hash)) << 32 | UInt64(slot + 1)
    }

    /// Backward-shift deletion: later entries of the probe run move up, so lookups never need
    /// tombstones.
    @inlinable mutating func removeFromTable(_ bucket: Int) {
        let mask = table.count - 1
        var hole = bucket
        var j = bucket
        while true {
            j = (j + 1) & mask
            let entry = table[j]
            if entry == 0 { break }
            let home = Int(entry >> 32) & mask
            // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
            let stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j)
            if !stays {
                table[hole] = table[j]
                hole = j
            }
        }
        table[hole] = 0
    }

    @inlinable mutating func grow() {
        table = [UInt64](repeating: 0, count: max(16, table.count * 2))
        var slot = head
        while slot >= 0 {
            placeInTable(Int(slot))
            slot = nodes[Int(slot)].next
        }
    }

    // MARK: the list

    @inlinable mutating func release(_ slot: Int) -> (Value, UInt64) {
        unlink(slot)
        let value = entries[slot].take()!.value
        let cost = nodes[slot].cost
        _totalCost -= cost
        live -= 1
        free.append(Int32(slot))
        return (value, cost)
    }

    @inlinable mutating func linkAtFront(_ slot: Int) {
        nodes[slot].prev = -1
        nodes[slot].next = head
        if head >= 0 { nodes[Int(head)].prev = Int32(slot) }
        head = Int32(slot)
        if tail < 0 { tail = Int32(slot) }
    }

    @inlinable mutating func linkAtBack(_ slot: Int) {
        nodes[slot].next = -1
        nodes[slot].prev = tail
        if tail >= 0 { nodes[Int(tail)].next = Int32(slot) }
        tail = Int32(slot)
        if head < 0 { head = Int32(slot) }
    }

    @inlinable mutating func unlink(_ slot: Int) {
        let p = nodes[slot].prev
        let n = nodes[slot].next
        if p >= 0 { nodes[Int(p)].next = n } else { head = n }
        if n >= 0 { nodes[Int(n)].prev = p } else { tail = p }
        nodes[slot].prev = -1
        nodes[slot].next = -1
    }

    @inlinable mutating func moveToFront(_ slot: Int) {
        guard Int(head) != slot else { return }
        unlink(slot)
        linkAtFront(slot)
    }
}

extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
extension LRUCache.Node: Sendable {}
extension LRUCache.Entry: Sendable where Key: Sendable, Value: Sendable {}
