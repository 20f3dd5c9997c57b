// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// Decoded pixels as the pixel tier keeps them.
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

/// FetchPixels' half of the downloader: an image's bytes (from FetchImage's machinery) decoded in
/// `netactivity-decoder` (`DecoderPool`: a sandboxed process, never the agent), and the decoded
/// pixels kept in a tier of their own, as AFNetworking's cache keeps decoded images: counted in
/// pixel bytes, with its two numbers (100 MiB, 60 MiB after a purge), least recently used out
/// first, trimmed under memory pressure. Each image is decoded once for every app that asks with
/// the same box; every app maps the same sealed memfd.
///
/// Provenance is the image's: pixels decoded from what the downloader stored are everyone's;
/// pixels of an app's own `AddImage` for a URL answer that app alone (their key names its leaf).
final class PixelPipeline {
    /// The box a request asks its pixels to fit in (0: no limit on that side).
    struct Box: Hashable {
        var maxWidth: UInt32 = 0
        var maxHeight: UInt32 = 0
    }

    /// What FetchPixels answers with.
    struct Answer {
        let pixels: DecodedPixels
        let source: DownloaderMember.FetchPixelsSource
        let contentType: String
        let httpStatus: UInt32
    }

    static let defaultCapacity: UInt64 = 100 << 20
    static let defaultPreferred: UInt64 = 60 << 20

    private let context: AgentContext
    private let loop: EventLoop
    private let images: any ImageStore
    private var tier = AutoPurgingImageCache<CachedPixels>(
        memoryCapacity: PixelPipeline.defaultCapacity, preferredMemoryUsageAfterPurge: PixelPipeline.defaultPreferred)
    /// Replies waiting for the decode of a tier key under way: one decode answers them all.
    private var underWay: [String: [(Result<Answer, NetActivityError>) -> Void]] = [:]

    /// What the tier and its decoders did since the agent started (DecodedStatistics).
    struct Statistics: Equatable {
        var tier = AutoPurgingImageCache<CachedPixels>.Statistics()
        /// Images decoded, and decodes that failed.
        var decodes: UInt64 = 0
        var decodeFailures: UInt64 = 0
        /// Requests answered by another request's decode, under way when they came.
        var sharedDecodes: UInt64 = 0
        var decodersStarted: UInt64 = 0
        var decodersReplaced: UInt64 = 0
    }
    private var counts = Statistics()
    var statistics: Statistics {
        var s = counts
        s.tier = tier.statistics
        s.decodersStarted = pool?.started ?? 0
        s.decodersReplaced = pool?.replaced ?? 0
        return s
    }

    /// Started at the first FetchPixels that misses the tier.
    private lazy var pool: DecoderPool? = Self.decoderPath().map { [context] in
        let pool = DecoderPool(
            executable: $0, loop: loop, bubblewrap: Self.bubblewrapPath(), accounts: context.accounts)
        pool.warn = { context.logger.warning("\($0)") }
        return pool
    }

    /// The most entries (memfds) the tier keeps: `NetActivityLimits.memfdPixels`.
    private let maxEntries: Int

    init(context: AgentContext, loop: EventLoop, images: any ImageStore) {
        self.context = context
        self.loop = loop
        self.images = images
        maxEntries = NetActivityLimits.memfdPixels(fileLimit: context.accounts.fileLimit)
    }

    /// What an entry of `bytes` pixel bytes is charged: its bytes in whole pages (what the kernel
    /// holds for a memfd), and at least the capacity's share of one descriptor, so that the tier's
    /// byte limits bound the memfds it keeps, and its fair eviction shares them among apps.
    static func charge(_ bytes: Int, capacity: UInt64, maxEntries: Int) -> UInt64 {
        let page: UInt64 = 4096
        let pages = (UInt64(bytes) + page - 1) / page * page
        return max(pages, page, capacity / UInt64(max(1, maxEntries)))
    }

    /// The decoder beside the agent (a build tree), else where `make install` and the package put
    /// it (`PREFIX/libexec/netactivity/`); NETACTIVITY_DECODER names another.
    static func decoderPath() -> String? {
        if let given = getenv("NETACTIVITY_DECODER").map({ String(cString: $0) }), !given.isEmpty { return given }
        var candidates: [String] = []
        if let exe = ServiceProcess.executablePath, let slash = exe.lastIndex(of: "/") {
            candidates.append(String(exe[..<slash]) + "/netactivity-decoder")
        }
        if let prefix = ServiceProcess.installPrefix {
            candidates.append(prefix + "/libexec/netactivity/netactivity-decoder")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    /// bwrap for the decoders: where the system keeps it; NETACTIVITY_DECODER_BWRAP names another,
    /// or `none`.
    static func bubblewrapPath() -> String? {
        guard let given = getenv("NETACTIVITY_DECODER_BWRAP").map({ String(cString: $0) }), !given.isEmpty else {
            return DecoderPool.installedBubblewrap()
        }
        return given == "none" ? nil : given
    }

    /// Pixel bytes held, and entries.
    var memoryUsage: UInt64 { tier.memoryUsage }
    var count: Int { tier.count }
    var memoryCapacity: UInt64 { tier.memoryCapacity }
    /// The bytes each owner's decoded entries are charged.
    var usageByOwner: [String: UInt64] { tier.usageByOwner }
    var preferredMemoryUsageAfterPurge: UInt64 { tier.preferredMemoryUsageAfterPurge }

    /// New limits for the tier (a capacity below the usage purges at once); InvalidArgs as the
    /// image cache's own.
    func setLimits(capacity: UInt64, preferred: UInt64) throws(NetActivityError) {
        try ImageCacheService.setLimits(
            of: &tier, capacity: capacity, preferred: preferred,
            names: (ImageCacheMember.Property.decodedMemoryCapacity, .decodedPreferredMemoryUsageAfterPurge))
    }

    /// The tier's key: the key the image is stored under in the cache (an app's own entry's key
    /// names that app) and the box. No key a client sends holds NUL.
    static func key(_ storageKey: String, _ box: Box) -> String {
        prefix(storageKey) + "\(box.maxWidth)x\(box.maxHeight)"
    }

    /// The tier's key for a downloaded image's pixels: everyone's, or `leaf`'s own entry's.
    private static func key(_ imageKey: String, _ box: Box, own: Bool, leaf: String) -> String {
        key(own ? ImageCacheService.ownKey(imageKey, leaf) : imageKey, box)
    }

    /// What separates a tier key's storage key from its box.
    private static let boxMarker = "\u{0}\u{0}px\u{0}"
    private static func prefix(_ storageKey: String) -> String { storageKey + boxMarker }

    /// The storage key a tier key was made from (`key(_:_:)`): up to its last box marker.
    static func storageKey(ofTierKey key: String) -> Substring? {
        key.ranges(of: boxMarker).last.map { key[..<$0.lowerBound] }
    }

    /// The tier keys kept for each storage key, so that an image's removal finds its pixels
    /// without a look at every entry. Entries the tier evicted on its own stay listed until their
    /// image goes or the index is rebuilt (when it lists twice what the tier holds).
    private var byStorageKey: [Substring: [String]] = [:]
    private var indexed = 0

    private func index(_ key: String) {
        guard let storage = Self.storageKey(ofTierKey: key) else { return }
        if indexed > 2 * tier.count + 1024 {
            byStorageKey.removeAll(keepingCapacity: true)
            indexed = 0
            for kept in tier.keysByRecency where kept != key { index(kept) }
        }
        byStorageKey[storage, default: []].append(key)
        indexed += 1
    }

    /// The decoded pixels of images that left the cache by request (RemoveImage, RemoveImages,
    /// RemoveAllImages) go with them: what an app removes is gone in every form. (Images the cache
    /// evicts to make room keep theirs: the tiers are purged each by its own limits.) Each removed
    /// image costs one look-up, whatever the tier holds.
    func forget(storageKeys: [String]) {
        guard !storageKeys.isEmpty, tier.count > 0 else { return }
        for storage in storageKeys {
            guard let keys = byStorageKey.removeValue(forKey: storage[...]) else { continue }
            indexed -= keys.count
            for key in keys { _ = tier.remove(key) }
        }
    }

    func forgetAll() {
        _ = tier.removeAll()
        byStorageKey.removeAll()
        indexed = 0
    }

    /// Decoded pixels `reader` may have at once: its own entry's, else (when it has no entry of its
    /// own for the image) everyone's; nil when they are older than `maxAge` seconds.
    func cached(_ imageKey: String, box: Box, reader leaf: String, maxAge: Double?) -> Answer? {
        let own = images.hasOwnEntry(imageKey, leaf: leaf)
        guard let hit = tier.image(for: Self.key(imageKey, box, own: own, leaf: leaf)) else { return nil }
        if let maxAge, Double(context.scheduler.nowNanoseconds &- hit.storedAt) / 1e9 >= maxAge { return nil }
        return Answer(pixels: hit.pixels, source: .memory, contentType: hit.contentType, httpStatus: 0)
    }

    /// Decodes `image` (FetchImage's answer for `imageKey`) to fit `box`, keeps the pixels, and
    /// answers `reply` on a later turn. `own`: the image was `reader`'s own entry.
    func decode(
        _ image: DownloadService.Answer, imageKey: String, box: Box, reader leaf: String, own: Bool,
        reply: @escaping (Result<Answer, NetActivityError>) -> Void
    ) {
        let source: DownloaderMember.FetchPixelsSource =
            switch image.source {
            case .memory: .memory
            case .disk: .disk
            case .network: .network
            }
        decode(
            image.body, info: image.info, source: source, httpStatus: image.httpStatus,
            key: Self.key(imageKey, box, own: own, leaf: leaf), owner: leaf,
            box: box, reader: leaf,
            reply: reply)
    }

    /// The decoded pixels kept under `key` (a tier key: `key(_:_:scope:)`), if any.
    func cached(key: String) -> Answer? {
        tier.image(for: key).map {
            Answer(pixels: $0.pixels, source: .memory, contentType: $0.contentType, httpStatus: 0)
        }
    }

    /// Decodes `body` in a decoder, for `reader` (its queue share), keeps the pixels under `key`
    /// charged to `owner` (the app that asked first: one app's churn evicts its own entries
    /// first), and answers `reply` on a later turn. A decode of
    /// `key` under way already answers this request too (each asker with its own `source`).
    func decode(
        _ body: any FetchedBody, info: ImageInfo, source: DownloaderMember.FetchPixelsSource, httpStatus: UInt32,
        key: String, owner: String, box: Box, reader leaf: String,
        reply: @escaping (Result<Answer, NetActivityError>) -> Void
    ) {
        let answer: (Result<Answer, NetActivityError>) -> Void = { result in
            reply(
                result.map {
                    Answer(pixels: $0.pixels, source: source, contentType: $0.contentType, httpStatus: httpStatus)
                })
        }
        if underWay[key] != nil {
            underWay[key]!.append(answer)
            counts.sharedDecodes += 1
            return
        }
        underWay[key] = [answer]
        startDecode(body, info: info, key: key, owner: owner, box: box, reader: leaf)
    }

    /// Everyone waiting for `key`'s decode hears `result`.
    private func finish(_ key: String, _ result: Result<Answer, NetActivityError>) {
        for reply in underWay.removeValue(forKey: key) ?? [] { reply(result) }
    }

    private func startDecode(
        _ body: any FetchedBody, info: ImageInfo, key: String, owner: String, box: Box, reader leaf: String
    ) {
        let reply = { [weak self] (result: Result<Answer, NetActivityError>) in self?.finish(key, result) }
        let fd: Int32? =
            if let body = body as? ImageBody { body.openReadOnly() } else {
                body.withUnsafeBytes { SealedMemory.make(name: "netactivity-encoded", bytes: $0) }
            }
        guard let fd, let pool else {
            if let fd { Closer.close(fd) }
            let why =
                pool == nil
                ? "the image decoder (netactivity-decoder) is not installed" : "the image could not be handed over"
            _ = loop.schedule(afterNanoseconds: 0) { reply(.failure(NetActivityError(.decode, why))) }
            return
        }
        let contentType = info.format.mediaType
        _ = pool.decode(
            image: fd,
            box: DecoderPool.Box(
                maxWidth: box.maxWidth, maxHeight: box.maxHeight, maxPixels: NetActivityLimits.maxDecodedPixels),
            owner: leaf
        ) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success: counts.decodes += 1
            case .failure(.busy): break  // not decoded at all
            case .failure: counts.decodeFailures += 1
            }
            switch result {
            case .success(let pixels):
                let entry = CachedPixels(
                    pixels: pixels, contentType: contentType, storedAt: context.scheduler.nowNanoseconds)
                // Too large for the tier is still an answer: kept or not, this caller gets it.
                let cost = Self.charge(pixels.byteCount, capacity: tier.memoryCapacity, maxEntries: maxEntries)
                if (try? tier.add(entry, cost: cost, for: key, owner: owner)) != nil { index(key) }
                reply(.success(Answer(pixels: pixels, source: .network, contentType: contentType, httpStatus: 0)))
            case .failure(.notAnImage(let why)): reply(.failure(NetActivityError(.notAnImage, why)))
            case .failure(.tooLarge(let why)): reply(.failure(NetActivityError(.tooLarge, why)))
            case .failure(.failed(let why)): reply(.failure(NetActivityError(.decode, why)))
            case .failure(.busy(let why)): reply(.failure(NetActivityError(.limitsExceeded, why)))
            }
        }
    }

    /// Memory pressure: moderate trims to the preferred usage, critical empties.
    func trim(critical: Bool) -> Int { tier.trim(critical: critical).count }
}
