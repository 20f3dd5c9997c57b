// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// AFAutoPurgingImageCache, without its faults: an in-memory cache whose cost is the bytes held,
/// with two watermarks. When usage exceeds `memoryCapacity` (strictly), entries go until usage is
/// at or under `preferredMemoryUsageAfterPurge`. Every operation is O(1) (amortised; a purge is
/// O(owners + entries evicted × log owners)), and recency is an order, not a clock.
///
/// Fair eviction (max-min, with a floor): each entry has an owner (the leaf that stored it, see
/// `OwnerLedger`). With one owner the purge is exactly AFNetworking's LRU purge. With several, a
/// purge takes only from the owners above their fair share, the one furthest above first, least
/// recently used within it, and stops when nobody is above its share: an owner within its share is
/// never evicted for another (the preferred usage is a wish, the capacity a bound). An image whose
/// own owner is above its share and that cannot fit otherwise is refused (`overShare`).
public struct AutoPurgingCache<Key: Hashable, Image> {
    public static var defaultCapacity: UInt64 { 100 * 1024 * 1024 }
    public static var defaultPreferred: UInt64 { 60 * 1024 * 1024 }

    @usableFromInline var _memoryCapacity: UInt64
    @inlinable public var memoryCapacity: UInt64 { _memoryCapacity }
    @usableFromInline var _preferredMemoryUsageAfterPurge: UInt64
    @inlinable public var preferredMemoryUsageAfterPurge: UInt64 { _preferredMemoryUsageAfterPurge }
    @usableFromInline var entries = LRUCache<Key, Entry>()

    @usableFromInline struct Entry {
        @usableFromInline var image: Image
        @usableFromInline var owner: String
        @inlinable init(image: Image, owner: String) {
            self.image = image
            self.owner = owner
        }
    }
    /// Each entry's owner and each owner's keys in recency order, for fair eviction. Kept only while
    /// the cache holds entries of more than one owner: with one (the common case), the purge is the
    /// plain LRU walk with no hashing at all, and adds and lookups pay nothing for fairness.
    @usableFromInline var owners: OwnerLedger<Key>?
    @usableFromInline var _statistics = Statistics()
    @inlinable public var statistics: Statistics { _statistics }

    public typealias Statistics = CacheStatistics

    public enum Refusal: Error, Equatable, Sendable {
        /// The image alone is larger than the capacity.
        case tooLarge(cost: UInt64, capacity: UInt64)
        /// preferred > capacity.
        case preferredAboveCapacity(preferred: UInt64, capacity: UInt64)
        /// Fitting the image would take from owners within their share while `owner` is above its
        /// own (`usage` with the image, `share`).
        case overShare(owner: String, usage: UInt64, share: UInt64)
    }

    @inlinable public init(
        memoryCapacity: UInt64 = defaultCapacity, preferredMemoryUsageAfterPurge: UInt64 = defaultPreferred
    ) {
        precondition(preferredMemoryUsageAfterPurge <= memoryCapacity, "preferred usage above capacity")
        self._memoryCapacity = memoryCapacity
        self._preferredMemoryUsageAfterPurge = preferredMemoryUsageAfterPurge
    }

    @inlinable public var memoryUsage: UInt64 { entries.totalCost }
    @inlinable public var count: Int { entries.count }

    /// The bytes each owner holds.
    @inlinable public var usageByOwner: [String: UInt64] {
        if let owners { return owners.usage }
        // Without a ledger every entry has the same owner.
        return entries.oldestValue.map { [$0.owner: memoryUsage] } ?? [:]
    }

    /// Records `owner` for `key`: the ledger starts, from the entries as they are, when a second
    /// owner appears.
    @inlinable mutating func noteOwner(_ owner: String, of key: Key, cost: UInt64, asOldest: Bool = false) {
        if owners == nil {
            // `key` is already in, as the most recent (or the least): the entry at the other end
            // is another one when there are two or more, and without a ledger it has the owner of
            // them all.
            guard entries.count > 1, let other = (asOldest ? entries.newestValue : entries.oldestValue)?.owner,
                other != owner
            else { return }
            var ledger = OwnerLedger<Key>()
            for k in entries.keysByRecency.reversed() where k != key {
                if let e = entries.peekEntry(k) { ledger.note(k, cost: e.cost, owner: e.value.owner) }
            }
            owners = ledger
        }
        owners!.note(key, cost: cost, owner: owner, asOldest: asOldest)
    }

    /// Back to the ledger-free path once one owner is left.
    @inlinable mutating func settleOwners() {
        if let ledger = owners, ledger.ownerCount <= 1 { owners = nil }
    }

    /// Adds or replaces the image for `key`. Returns what the purge evicted (oldest first), so the
    /// caller can release resources the images hold. The image just added is never evicted by its
    /// own insertion (it is the most recent, and it fits within the capacity).
    @discardableResult
    @inlinable public mutating func add(_ image: Image, cost: UInt64, for key: Key, owner: String = "")
        throws(Refusal) -> [Image]
    {
        guard cost <= memoryCapacity else { throw .tooLarge(cost: cost, capacity: memoryCapacity) }
        var evicted: [Image] = []
        if let old = entries.set(Entry(image: image, owner: owner), cost: cost, for: key) { evicted.append(old.image) }
        noteOwner(owner, of: key, cost: cost)
        _statistics.insertions += 1
        if memoryUsage > memoryCapacity, let ledger = owners,
            !ledger.fits(owner, newest: cost, capacity: memoryCapacity)
        {
            // Room could only come from apps within their shares: the image is refused before
            // anything is evicted for it.
            throw takeBack(key, owner: owner, ledger: ledger)
        }
        if memoryUsage > memoryCapacity { evicted += purge(to: preferredMemoryUsageAfterPurge, keeping: key) }
        if memoryUsage > memoryCapacity, pendingPurge == nil, let ledger = owners {
            // Only the new image itself is left to take: its owner is above its share.
            throw takeBack(key, owner: owner, ledger: ledger)
        }
        return evicted
    }

    /// Adds a prefetched image only if it fits in the free room (nothing is evicted for it), and
    /// as the least recently used entry of the cache and of its owner: when room is needed, it goes
    /// first, until someone uses it. A key already held is left as it is. Returns whether it was added.
    @discardableResult
    @inlinable public mutating func addIfRoom(_ image: Image, cost: UInt64, for key: Key, owner: String = "") -> Bool {
        guard !entries.contains(key), memoryUsage + cost <= memoryCapacity else { return false }
        entries.set(Entry(image: image, owner: owner), cost: cost, for: key, asOldest: true)
        noteOwner(owner, of: key, cost: cost, asOldest: true)
        _statistics.insertions += 1
        return true
    }

    /// Removes the image just added for `key`, uncounted, and says why (`overShare`).
    @inlinable mutating func takeBack(_ key: Key, owner: String, ledger: OwnerLedger<Key>) -> Refusal {
        let refusal = Refusal.overShare(
            owner: owner, usage: ledger.usage(of: owner), share: ledger.share(of: owner, capacity: memoryCapacity))
        _ = remove(key)
        _statistics.insertions -= 1
        return refusal
    }

    /// The image for `key`, refreshed as the most recently used; counts a hit or a miss.
    @inlinable public mutating func image(for key: Key) -> Image? {
        if let entry = entries.value(for: key) {
            _statistics.hits += 1
            owners?.touch(key)
            return entry.image
        }
        _statistics.misses += 1
        return nil
    }

    /// The image for `key` without counting or refreshing it.
    @inlinable public func peek(_ key: Key) -> Image? { entries.peek(key)?.image }

    /// The owner of the entry for `key`, if there is one.
    @inlinable public func owner(of key: Key) -> String? { entries.peek(key)?.owner }

    /// Removes the image for `key`; nil when there was none.
    @inlinable public mutating func remove(_ key: Key) -> Image? {
        owners?.forget(key)
        defer { settleOwners() }
        return entries.remove(key)?.value.image
    }

    /// Removes everything; returns what was held.
    @inlinable public mutating func removeAll() -> [Image] {
        var all: [Image] = []
        while let e = entries.removeOldest() { all.append(e.value.image) }
        owners = nil
        return all
    }

    /// Sets both watermarks (preferred <= capacity); a shrink below the usage purges at once.
    @inlinable public mutating func setLimits(capacity: UInt64, preferred: UInt64) throws(Refusal) -> [Image] {
        guard preferred <= capacity else { throw .preferredAboveCapacity(preferred: preferred, capacity: capacity) }
        _memoryCapacity = capacity
        _preferredMemoryUsageAfterPurge = preferred
        return memoryUsage > memoryCapacity ? purge(to: preferred, keeping: nil, force: true) : []
    }

    /// Memory pressure: moderate trims to the preferred usage, critical empties the cache.
    @inlinable public mutating func trim(critical: Bool) -> [Image] {
        let before = memoryUsage
        let evicted: [Image]
        if critical {
            _statistics.pressureCritical += 1
            evicted = removeAll()
            _statistics.evictions += UInt64(evicted.count)
        } else {
            _statistics.pressureModerate += 1
            evicted = purge(to: preferredMemoryUsageAfterPurge, keeping: nil, force: true)
        }
        _statistics.pressureEvictions += UInt64(evicted.count)
        _statistics.pressureBytesFreed += before - memoryUsage
        return evicted
    }

    /// Keys from the most to the least recently used.
    @inlinable public var keysByRecency: [Key] { entries.keysByRecency }

    /// Evictions one purge makes at most; a purge that needs more goes on with `continuePurge()`
    /// (on a later turn of the owner's loop), so that no add holds the loop for a million tiny
    /// images. Meanwhile the usage may pass the capacity by what the last adds brought.
    public static var purgeSlice: Int { 4096 }

    /// The purge under way that stopped at `purgeSlice` evictions: its target, what it keeps, and
    /// whether it must reach the target (nil: none).
    @usableFromInline var pendingPurge: (target: UInt64, kept: Key?, force: Bool)?

    /// Whether a purge waits for `continuePurge()`.
    @inlinable public var purgePending: Bool { pendingPurge != nil }

    /// Goes on with a purge that stopped at `purgeSlice` evictions; returns what it evicted.
    @inlinable public mutating func continuePurge() -> [Image] {
        guard let (target, kept, force) = pendingPurge else { return [] }
        pendingPurge = nil
        return purge(to: target, keeping: kept.flatMap { entries.contains($0) ? $0 : nil }, force: force)
    }

    /// Evicts down to `target`: fairly (see the type's comment), then, when `force` (memory
    /// pressure, a smaller capacity: the cache itself must shrink), least recently used first;
    /// `purgeSlice` entries at most, the rest left to `continuePurge()`.
    @inlinable mutating func purge(to target: UInt64, keeping kept: Key?, force: Bool = false) -> [Image] {
        var evicted: [Image] = []
        pendingPurge = nil
        let slice = Self.purgeSlice
        var sliced = false
        defer {
            _statistics.evictions += UInt64(evicted.count)
            if sliced || evicted.count >= slice, memoryUsage > target, entries.count > 1 {
                pendingPurge = (target, kept, force)
            }
        }
        settleOwners()  // a replacement may have left one owner
        if owners == nil {
            // One owner: plain LRU, walking the tail with no hashing (AFNetworking's purge).
            let keptSlot = kept.flatMap { entries.find($0, hash: $0.hashValue)?.slot } ?? -1
            while evicted.count < slice, memoryUsage > target, entries.tail >= 0, Int(entries.tail) != keptSlot,
                let e = entries.dropOldest()
            {
                evicted.append(e.image)
            }
        } else if memoryUsage > target {
            let excess = memoryUsage - target
            var count = 0
            let keys = owners!.takeOverShare(capacity: memoryCapacity, keeping: kept) { freed in
                count += 1
                if count > slice { sliced = true }
                return freed >= excess || sliced
            }
            for key in keys {
                if let e = entries.remove(key) { evicted.append(e.value.image) }
            }
            while force, evicted.count < slice, memoryUsage > target, let e = entries.removeOldest() {
                owners?.forget(e.key)
                evicted.append(e.value.image)
            }
            settleOwners()
        }
        return evicted
    }
}

extension AutoPurgingCache: Sendable where Key: Sendable, Image: Sendable {}
extension AutoPurgingCache.Entry: Sendable where Image: Sendable {}

/// What a cache did (hits, misses, insertions, evictions, memory pressure).
public struct CacheStatistics: Equatable, Sendable {
    public var hits: UInt64 = 0
    public var misses: UInt64 = 0
    public var insertions: UInt64 = 0
    public var evictions: UInt64 = 0
    /// Memory-pressure events acted on, and what they freed.
    public var pressureModerate: UInt64 = 0
    public var pressureCritical: UInt64 = 0
    public var pressureEvictions: UInt64 = 0
    public var pressureBytesFreed: UInt64 = 0
    public init() {}
}

/// The cache of images by their string keys (URLs and identifiers).
public typealias AutoPurgingImageCache<Image> = AutoPurgingCache<String, Image>

/// The cache key of an image request, without AFNetworking's ambiguity (it joined URL and
/// identifier with nothing between, so "u"+"rl" and "ur"+"l" collided).
///
/// (url, "") is the URL itself, so a request without an additional identifier and the plain
/// identifier `url` are one entry. Otherwise the key is url + NUL + additional: D-Bus strings
/// cannot hold NUL, so the first NUL splits any key back into its one (url, additional) pair,
/// and no identifier a client can send equals such a key.
public enum ImageRequestKey {
    public static let separator: Character = "\u{0}"

    public static func make(url: String, additional: String) -> String {
        additional.isEmpty ? url : url + String(separator) + additional
    }

    /// The key of a request that named its own `cache-key`, in `app`'s namespace:
    /// NUL "key" NUL app NUL cacheKey (NUL additional). No bus string holds a NUL, so no client
    /// can name it with an identifier or URL, and each part is read back without ambiguity.
    public static func scoped(app: Substring, cacheKey: String, additional: String) -> String {
        make(url: "\u{0}key\u{0}\(app)\u{0}\(cacheKey)", additional: additional)
    }

    /// Whether `key` is a `scoped` one.
    public static func isScoped(_ key: String) -> Bool { key.utf8.first == 0 }

    /// Whether `RemoveImages(prefix)` by `app` (a caller's `ClientIdentity.scope`) takes the entry
    /// under `key` charged to `owner` (a leaf; "" when not known, as for disk entries an older
    /// agent wrote: the unscoped pool's). One of `app`'s cache-keys that starts with `prefix`,
    /// whoever was charged (only `app` can name them); else an entry charged within `app` whose
    /// URL (or identifier) starts with `prefix`.
    public static func removable(key: String, owner: String, prefix: String, by app: Substring) -> Bool {
        if let scoped = cacheKey(of: key) { return scoped.app == app && scoped.cacheKey.hasPrefix(prefix) }
        guard !isScoped(key),
            (owner.isEmpty ? ClientIdentity.unscopedApp[...] : ClientIdentity.scope(ofLeaf: owner)) == app
        else {
            return false
        }
        // A request key's URL, or an app's own entry's: up to the first NUL.
        return key.prefix { $0 != separator }.hasPrefix(prefix)
    }

    /// The app and cache-key of a `scoped` key (nil for any other).
    public static func cacheKey(of key: String) -> (app: Substring, cacheKey: Substring)? {
        guard isScoped(key) else { return nil }
        let parts = key.split(separator: separator, maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[1] == "key" else { return nil }
        return (parts[2], parts[3])
    }
}
