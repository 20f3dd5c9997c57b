// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import LinuxKit
import NetActivityContract
import NetActivityCore

/// What a decoded entry is kept under: the key its image is stored under in the image cache (an
/// app's own entry's key names that app, so its pixels answer that app alone), and what was asked
/// of the pixels.
struct PixelKey: Hashable {
    let storage: String
    let ask: PixelAsk
}

/// What a FetchPixels or OpenPixels call asks of the pixels (its options, checked as the method's
/// already): the box ("max-width", "max-height"), the colours ("color"; InvalidArgs for a value it
/// does not take) and the frames ("animation", "max-frames"). The two methods' options have the
/// same names.
struct PixelAsk: Hashable {
    var box = PixelBox.unbounded
    var color = PixelColor.srgb
    /// The most frames wanted: 1 for a still image or an animation's first frame.
    var maxFrames: UInt32 = 1

    init(box: PixelBox = .unbounded, color: PixelColor = .srgb, maxFrames: UInt32 = 1) {
        self.box = box
        self.color = color
        self.maxFrames = maxFrames
    }

    init(options: [String: DBusValue]) throws(NetActivityError) {
        typealias Option = DownloaderMember.FetchPixelsOption
        box = PixelBox(
            maxWidth: options[Option.maxWidth.rawValue]?.uint32Value ?? 0,
            maxHeight: options[Option.maxHeight.rawValue]?.uint32Value ?? 0)
        let named = options[Option.color.rawValue]?.stringValue
        guard let color = named.map(PixelColor.init(rawValue:)) ?? .srgb else {
            let known = PixelColor.allCases.map { "'\($0.rawValue)'" }.joined(separator: " or ")
            throw .invalidArgs("\(Option.color.rawValue) must be \(known), got '\(named ?? "")'")
        }
        self.color = color
        if options[Option.animation.rawValue]?.boolValue == true {
            let most = NetActivityLimits.maxAnimationFrames
            let asked = options[Option.maxFrames.rawValue]?.uint32Value ?? most
            guard (1...most).contains(asked) else {
                throw .invalidArgs("\(Option.maxFrames.rawValue) must be 1 to \(most), got \(asked)")
            }
            maxFrames = asked
        }
    }

    func key(_ storage: String) -> PixelKey { PixelKey(storage: storage, ask: self) }
}

/// Decoded pixels as the tier keeps them.
final class CachedPixels {
    let pixels: DecodedPixels
    let contentType: String
    let storedAt: UInt64
    init(pixels: DecodedPixels, contentType: String, storedAt: UInt64) {
        self.pixels = pixels
        self.contentType = contentType
        self.storedAt = storedAt
    }
}

/// The decoded pixels the agent keeps, as AFNetworking's cache keeps decoded images: counted in
/// pixel bytes, with its two numbers (100 MiB, 60 MiB after a purge), least recently used out
/// first, fairly among the apps that asked first, trimmed under memory pressure. Both services read
/// it (FetchPixels and OpenPixels); the image cache tells it which images went.
final class PixelTier {
    static let defaultCapacity: UInt64 = 100 << 20
    static let defaultPreferred: UInt64 = 60 << 20

    private var tier = AutoPurgingCache<PixelKey, CachedPixels>(
        memoryCapacity: PixelTier.defaultCapacity, preferredMemoryUsageAfterPurge: PixelTier.defaultPreferred)
    /// The entries kept for each storage key, so that an image's removal finds its pixels without a
    /// look at every entry. Entries the tier evicted on its own stay listed until their image goes
    /// or the index is rebuilt (when it lists twice what the tier holds).
    private var boxes: [String: [PixelKey]] = [:]
    private var indexed = 0
    /// The most entries (memfds) the tier keeps: `NetActivityLimits.memfdPixels`.
    private let maxEntries: Int

    init(fileLimit: UInt64) {
        maxEntries = NetActivityLimits.memfdPixels(fileLimit: fileLimit)
    }

    /// What an entry of `bytes` pixel bytes is charged: its bytes in whole pages (what the kernel
    /// holds for a memfd), and at least the capacity's share of one descriptor, so that the tier's
    /// byte limits bound the memfds it keeps, and its fair eviction shares them among apps.
    static func charge(_ bytes: Int, capacity: UInt64, maxEntries: Int) -> UInt64 {
        let page: UInt64 = 4096
        let pages = (UInt64(bytes) + page - 1) / page * page
        return max(pages, page, capacity / UInt64(max(1, maxEntries)))
    }

    /// Pixel bytes held, and entries.
    var memoryUsage: UInt64 { tier.memoryUsage }
    var count: Int { tier.count }
    var memoryCapacity: UInt64 { tier.memoryCapacity }
    var preferredMemoryUsageAfterPurge: UInt64 { tier.preferredMemoryUsageAfterPurge }
    /// The bytes each owner's entries are charged.
    var usageByOwner: [String: UInt64] { tier.usageByOwner }
    var statistics: CacheStatistics { tier.statistics }

    /// New limits (a capacity below the usage purges at once); InvalidArgs as the image cache's own.
    func setLimits(capacity: UInt64, preferred: UInt64) throws(NetActivityError) {
        try ImageCacheService.setLimits(
            of: &tier, capacity: capacity, preferred: preferred,
            names: (ImageCacheMember.Property.decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge))
    }

    /// The entry under `key` (a hit makes it the most recent), if any.
    func entry(_ key: PixelKey) -> CachedPixels? { tier.image(for: key) }

    /// Keeps `entry` under `key`, charged to `owner`; an entry too large for the tier, or over its
    /// owner's share, is not kept (the asker has its pixels all the same).
    func keep(_ entry: CachedPixels, _ key: PixelKey, owner: String) {
        let cost = Self.charge(entry.pixels.byteCount, capacity: tier.memoryCapacity, maxEntries: maxEntries)
        guard (try? tier.add(entry, cost: cost, for: key, owner: owner)) != nil else { return }
        if indexed > 2 * tier.count + 1024 {
            boxes.removeAll(keepingCapacity: true)
            indexed = 0
            for kept in tier.keysByRecency where kept != key { index(kept) }
        }
        index(key)
    }

    private func index(_ key: PixelKey) {
        boxes[key.storage, default: []].append(key)
        indexed += 1
    }

    /// The decoded pixels of images that left the cache by request (RemoveImage, RemoveImages,
    /// RemoveAllImages) go with them: what an app removes is gone in every form. (Images the cache
    /// evicts to make room keep theirs: the tiers are purged each by its own limits.) Each removed
    /// image costs one look-up, whatever the tier holds.
    func forget(storageKeys: [String]) {
        guard !storageKeys.isEmpty, tier.count > 0 else { return }
        for storage in storageKeys {
            guard let kept = boxes.removeValue(forKey: storage) else { continue }
            indexed -= kept.count
            for key in kept { _ = tier.remove(key) }
        }
    }

    func forgetAll() {
        _ = tier.removeAll()
        boxes.removeAll()
        indexed = 0
    }

    /// Memory pressure: moderate trims to the preferred usage, critical empties. Entries let go.
    func trim(critical: Bool) -> Int { tier.trim(critical: critical).count }
}
