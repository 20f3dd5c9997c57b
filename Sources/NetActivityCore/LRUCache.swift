/// A least-recently-used map with O(1) insert, lookup (which refreshes recency), removal and
/// eviction of the oldest entry.
///
/// Entries live in arrays indexed by slot and are chained in a doubly linked list through slot
/// indices (no object per entry, so no reference counting on the hot path); a dictionary maps keys
/// to slots. Recency is the list order itself: deterministic, with no clock and no ties (the
/// AFNetworking cache sorted on wall-clock access dates, where equal dates made the order arbitrary).
public struct LRUCache<Key: Hashable, Value> {
    private var slots: [Key: Int] = [:]
    private var keys: [Key?] = []
    private var values: [Value?] = []
    private var costs: [UInt64] = []
    private var prev: [Int] = []
    private var next: [Int] = []
    private var free: [Int] = []
    /// Most recent at `head`, least recent at `tail`; -1 when empty.
    private var head = -1
    private var tail = -1

    public private(set) var totalCost: UInt64 = 0

    public init() {}

    public var count: Int { slots.count }
    public var isEmpty: Bool { slots.isEmpty }

    /// The value for `key`, made the most recent.
    public mutating func value(for key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        moveToFront(slot)
        return values[slot]
    }

    /// The value for `key` without touching recency.
    public func peek(_ key: Key) -> Value? {
        slots[key].flatMap { values[$0] }
    }

    public func contains(_ key: Key) -> Bool { slots[key] != nil }

    /// Inserts or replaces; the entry becomes the most recent. Returns the replaced value.
    @discardableResult
    public mutating func set(_ value: Value, cost: UInt64, for key: Key) -> Value? {
        if let slot = slots[key] {
            let old = values[slot]
            totalCost = totalCost - costs[slot] + cost
            values[slot] = value
            costs[slot] = cost
            moveToFront(slot)
            return old
        }
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            keys[slot] = key
            values[slot] = value
            costs[slot] = cost
        } else {
            slot = keys.count
            keys.append(key)
            values.append(value)
            costs.append(cost)
            prev.append(-1)
            next.append(-1)
        }
        slots[key] = slot
        totalCost += cost
        linkAtFront(slot)
        return nil
    }

    /// Removes `key`; returns its value and cost.
    @discardableResult
    public mutating func remove(_ key: Key) -> (value: Value, cost: UInt64)? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        return release(slot)
    }

    /// Removes and returns the least recently used entry.
    public mutating func removeOldest() -> (key: Key, value: Value, cost: UInt64)? {
        guard tail >= 0 else { return nil }
        let slot = tail
        let key = keys[slot]!
        slots[key] = nil
        let (value, cost) = release(slot)
        return (key, value, cost)
    }

    /// The least recently used key (the next to go).
    public var oldestKey: Key? { tail >= 0 ? keys[tail] : nil }

    public mutating func removeAll() {
        self = LRUCache()
    }

    /// Keys from the most to the least recent (for tests and tools; O(n)).
    public var keysByRecency: [Key] {
        var out: [Key] = []
        out.reserveCapacity(count)
        var slot = head
        while slot >= 0 {
            out.append(keys[slot]!)
            slot = next[slot]
        }
        return out
    }

    private mutating func release(_ slot: Int) -> (Value, UInt64) {
        unlink(slot)
        let value = values[slot]!
        let cost = costs[slot]
        keys[slot] = nil
        values[slot] = nil
        totalCost -= cost
        free.append(slot)
        return (value, cost)
    }

    private mutating func linkAtFront(_ slot: Int) {
        prev[slot] = -1
        next[slot] = head
        if head >= 0 { prev[head] = slot }
        head = slot
        if tail < 0 { tail = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let p = prev[slot], n = next[slot]
        if p >= 0 { next[p] = n } else { head = n }
        if n >= 0 { prev[n] = p } else { tail = p }
        prev[slot] = -1
        next[slot] = -1
    }

    private mutating func moveToFront(_ slot: Int) {
        guard head != slot else { return }
        unlink(slot)
        linkAtFront(slot)
    }
}

extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
