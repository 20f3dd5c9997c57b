// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The disk tier's books, pure (the agent's `DiskCache` does the file work): each entry's size,
/// owner and last use, in recency order, and which room a new entry may take.
///
/// Making room takes, in order:
/// 1. prefetched entries nobody has used yet, the oldest prefetch first (for a prefetched entry,
///    only those stored before its prefetch started);
/// 2. from the apps above their fair share of the capacity (the incoming entry counted), least
///    recently used within the app (`OwnerLedger`);
/// 3. the least recently used entry, unless only the incoming entry's own app is above its share:
///    one app's entries never push out the entries of apps within their share.
///
/// A prefetched entry (`prefetchStarted`) takes room under one more rule: it never evicts an
/// entry used (read, written, or served from memory and so reported) at or after the moment its
/// prefetch started. When only such entries are left to take, it is refused and nothing is taken.
public struct DiskIndex: Sendable {
    public private(set) var capacity: UInt64
    /// Name -> size and last use, most recently used first; the cost is the size.
    private var entries = LRUCache<String, Double>()
    private var owners = OwnerLedger<String>()
    /// Prefetched entries nobody used yet, the most recent prefetch first; the cost is the size.
    private var unused = LRUCache<String, Bool>()

    public init(capacity: UInt64) {
        self.capacity = capacity
    }

    public var usage: UInt64 { entries.totalCost }
    public var count: Int { entries.count }
    /// The bytes each app holds ("" for entries from an earlier run).
    public var usageByApp: [String: UInt64] { owners.usage }
    public func contains(_ name: String) -> Bool { entries.contains(name) }
    /// Every entry's name, most recently used first.
    public var names: [String] { entries.keysByRecency }
    /// When `name` was last used (nil: no such entry).
    public func lastUse(of name: String) -> Double? { entries.peek(name) }
    /// Whether `name` was prefetched and nobody has used it since.
    public func isUnusedPrefetch(_ name: String) -> Bool { unused.contains(name) }

    /// An entry an earlier run left (owned by "", unknown), last used at `lastUse`; call in the
    /// order of last use, oldest first.
    public mutating func load(_ name: String, size: UInt64, lastUse: Double) {
        entries.set(lastUse, cost: size, for: name)
        owners.note(name, cost: size, owner: "")
    }

    /// `name` was used at `now`: the most recent, and no longer an unused prefetch. False when
    /// there is no such entry.
    @discardableResult
    public mutating func touch(_ name: String, at now: Double) -> Bool {
        guard let size = entries.peekEntry(name)?.cost else { return false }
        entries.set(now, cost: size, for: name)
        owners.touch(name)
        unused.remove(name)
        return true
    }

    /// Forgets `name` (its file is the caller's to delete or replace); false when it was not there.
    @discardableResult
    public mutating func remove(_ name: String) -> Bool {
        guard entries.remove(name) != nil else { return false }
        owners.forget(name)
        unused.remove(name)
        return true
    }

    /// Makes room for `size` bytes of `name` (its older version forgotten first), charged to
    /// `owner`, by the type's rules. Returns the names taken (each forgotten: the caller deletes
    /// their files) and whether the entry fits now. When it does not, what was taken stays taken:
    /// each of those could go by the rules anyway. `prefetchStarted`: the entry comes from a
    /// prefetch that started then.
    public mutating func makeRoom(for name: String, size: UInt64, owner: String, prefetchStarted: Double? = nil) -> (
        taken: [String], fits: Bool
    ) {
        remove(name)
        var taken: [String] = []
        guard size <= capacity else { return (taken, false) }
        owners.note(name, cost: size, owner: owner)
        defer { owners.forget(name) }
        while usage + size > capacity {
            // A prefetch takes no room from its own images (nor from a later prefetch's).
            if let oldest = unused.oldestKey, prefetchStarted.map({ entries.peek(oldest) ?? 0 < $0 }) ?? true {
                remove(oldest)
                taken.append(oldest)
                continue
            }
            let fair = owners.victim(capacity: capacity, keeping: name)
            guard let victim = fair.key ?? (fair.someoneOver ? nil : entries.oldestKey) else { return (taken, false) }
            if let started = prefetchStarted, let used = entries.peek(victim), used >= started { return (taken, false) }
            remove(victim)
            taken.append(victim)
        }
        return (taken, true)
    }

    /// Records `name` (after `makeRoom` said it fits), used at `now`; a prefetched entry counts as
    /// unused until someone touches it.
    public mutating func insert(_ name: String, size: UInt64, owner: String, at now: Double, prefetched: Bool = false) {
        remove(name)
        entries.set(now, cost: size, for: name)
        owners.note(name, cost: size, owner: owner)
        if prefetched { unused.set(true, cost: size, for: name) }
    }

    /// A new capacity; returns the names taken to fit it (unused prefetches first, then as
    /// `makeRoom` takes, regardless of shares: the tier itself must shrink).
    public mutating func setCapacity(_ bytes: UInt64) -> [String] {
        capacity = bytes
        return shrinkToCapacity()
    }

    /// Takes entries until the usage fits the capacity (after `load`, or a smaller capacity).
    public mutating func shrinkToCapacity() -> [String] {
        var taken: [String] = []
        while usage > capacity {
            let victim = unused.oldestKey ?? owners.victim(capacity: capacity).key ?? entries.oldestKey
            guard let victim else { break }
            remove(victim)
            taken.append(victim)
        }
        return taken
    }
}
