// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
public import NetActivityCore

/// Where the downloader keeps what it fetched: the shared image cache.
public protocol ImageStore: AnyObject {
    /// The largest image the store can hold.
    var memoryCapacity: UInt64 { get }
    /// Whether `key` is held by an entry that may answer a download for `leaf` (without refreshing
    /// its recency): one the downloader stored, or one `leaf` added itself (nil: the downloader's
    /// only). An entry another app added under someone's URL is never served as that URL. With
    /// `maxAge`, only an entry cached less than that many seconds ago counts.
    func contains(_ key: String, answeringFor leaf: String?, maxAge: Double?) -> Bool
    /// Keeps `bytes` under `key`, charged to `app` (a leaf), or says why not (`TooLarge`,
    /// `NotAnImage`, `LimitsExceeded`).
    func store(_ fetched: ImageDownloader.Fetched, for key: String, app: String) -> Result<
        Void, ImageDownloader.Failure
    >
    /// Keeps a prefetched `body` only where there is free room, as the first to go when room is
    /// needed (`AutoPurgingImageCache.addIfRoom`); never evicts for it. Fails only when it is not
    /// an image.
    func storeIfRoom(_ fetched: ImageDownloader.Fetched, for key: String, app: String) -> Result<
        Void, ImageDownloader.Failure
    >
    /// What `client` sees under `key` (its own entry first, else the downloader's), counted as a
    /// hit or a miss; nil on a miss, or when it was cached `maxAge` seconds ago or earlier.
    func cachedImage(for key: String, client: String, maxAge: Double?) -> (body: any FetchedBody, info: ImageInfo)?
    /// Removes the entries whose key and owner (a leaf) `matches`; returns their keys.
    func removeImages(where matches: (_ key: String, _ owner: String) -> Bool) -> [String]
    /// Whether `leaf` has an entry of its own under `key` (its `AddImage` of a URL), which answers
    /// it before the downloader's.
    func hasOwnEntry(_ key: String, leaf: String) -> Bool
}

/// `org.example.NetActivity.ImageCache`: AFAutoPurgingImageCache for every app, with large images
/// in sealed memfds (`OpenImage` hands out read-only opens, no copy), and memory pressure trims.
///
/// Keys are scoped (docs/contract.md, "Provenance on every read path"): for a URL's key (`http:`/`https:`),
/// an app's own `AddImage` lives in that app's namespace (its leaf: the app, or its process in the
/// unscoped pool) and the downloader's entry is everyone's; plain identifiers are one namespace
/// for host apps and a namespace of its own for each sandboxed app. An app's own entry answers
/// before the downloader's. The namespaced entry is stored under key + NUL NUL + leaf, which no
/// key a client can send equals (D-Bus strings hold no NUL, and a request key has one NUL). A
/// request's own `cache-key` is the downloader's too, in its app's namespace (`ImageRequestKey.scoped`,
/// which starts with NUL): like a URL's key, it answers a sandboxed app that has no entry of its own.
public final class ImageCacheService: ImageStore {
    let context: AgentContext
    var imageCache = AutoPurgingImageCache<CachedImage>()
    /// The decoded tier and its decoders (shared with the downloader: OpenPixels and FetchPixels of
    /// one image meet there).
    let pixels: PixelTier
    let decoding: Decoding

    init(context: AgentContext, pixels: PixelTier, decoding: Decoding) {
        self.context = context
        self.pixels = pixels
        self.decoding = decoding
        ImageBody.maxMemfds = NetActivityLimits.memfdImages(fileLimit: context.accounts.fileLimit)
        context.accounts.show([.images, .pixels], from: self)
    }

    // MARK: namespaces

    /// Whether `key` is a URL's (`http:` or `https:`, as the downloader fetches), request keys included.
    /// Read on every lookup and add: bytes compared in place, nothing allocated.
    static func isURLKey(_ key: String) -> Bool {
        var bytes = key.utf8.makeIterator()
        for letter in "http".utf8 {
            guard let b = bytes.next(), b | 0x20 == letter else { return false }  // ASCII, any case
        }
        guard let b = bytes.next(), b != UInt8(ascii: ":") else { return true }
        guard b | 0x20 == UInt8(ascii: "s") else { return false }
        let after = bytes.next()
        return after == nil || after == UInt8(ascii: ":")
    }

    /// Where `leaf`'s own entry for `key` is kept: key + NUL NUL + leaf.
    static func ownKey(_ key: String, _ leaf: String) -> String { key + "\u{0}\u{0}" + leaf }

    /// Where an entry `caller` adds under `key` goes: its own namespace for a URL's key or when it
    /// is sandboxed, else the shared one.
    static func storageKey(_ key: String, addedBy caller: ClientIdentity) -> String {
        caller.isSandboxed || isURLKey(key) ? ownKey(key, caller.leaf) : key
    }

    /// The entry `reader` sees under `key` (refreshed, counted): its own first, then, for a URL's
    /// key, the downloader's; for a plain identifier, the shared one unless it is sandboxed.
    func image(for key: String, reader: ClientIdentity) -> CachedImage? {
        imageCache.image(for: readKey(key, reader: reader))
    }

    /// The key of what `reader` reads under `key` (see `image(for:reader:)`): its own entry's, else
    /// the shared one's.
    func readKey(_ key: String, reader: ClientIdentity) -> String {
        let own = Self.storageKey(key, addedBy: reader)
        let shared = own != key && imageCache.peek(own) == nil && (Self.isURLKey(key) || ImageRequestKey.isScoped(key))
        return shared ? key : own
    }

    /// Removes what `caller` sees under `key`: its own entry; else the downloader's entry for a
    /// URL's key when a host app asks, or the one charged to the sandboxed caller itself.
    func remove(_ key: String, by caller: ClientIdentity) -> Bool {
        let own = Self.storageKey(key, addedBy: caller)
        if imageCache.remove(own) != nil {
            pixels.forget(storageKeys: [own])
            return true
        }
        guard own != key, Self.isURLKey(key), !caller.isSandboxed || imageCache.owner(of: key) == caller.leaf else {
            return false
        }
        guard imageCache.remove(key) != nil else { return false }
        pixels.forget(storageKeys: [key])
        return true
    }

    // MARK: images in, images out

    static func identifier(_ s: String, what: String = "Identifier") throws(NetActivityError) -> String {
        guard !s.isEmpty else { throw .invalidArgs("\(what) must not be empty") }
        guard s.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw .invalidArgs(
                "\(what) is \(s.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)")
        }
        return s
    }

    /// (url, additional) -> the unambiguous request key (NetActivityCore.ImageRequestKey).
    static func requestKey(_ r: inout MessageReader) throws -> String {
        let url = try identifier(try r.read(String.self), what: "URL")
        let additional = try r.read(String.self)
        guard additional.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw NetActivityError.invalidArgs(
                "Additional identifier is \(additional.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)"
            )
        }
        return ImageRequestKey.make(url: url, additional: additional)
    }

    /// Large images never travel inline: bytes in a message pile up in the bus for a client that
    /// does not read them, and hold the loop while they are copied.
    static let inlineLimit = NetActivityLimits.maxInlineImageBytes

    func addImage(key: String, call: inout MethodCall) throws {
        let capacity = imageCache.memoryCapacity
        // The bytes are read in place (no copy) and copied once, into the cache's storage.
        let made = try call.args.withBytes { data -> Result<CachedImage, NetActivityError> in
            guard data.count <= Self.inlineLimit else {
                return .failure(
                    NetActivityError(
                        .tooLarge,
                        "The image is \(data.count) bytes; AddImage carries at most \(Self.inlineLimit) inline: pass larger ones as a sealed memfd with AddImageFromFd"
                    ))
            }
            guard UInt64(data.count) <= capacity else { return .failure(Self.tooLarge(data.count, capacity)) }
            guard let info = ImageInfo.sniff(data) else {
                return .failure(notAnImage(data.count, key))
            }
            return .success(CachedImage(info: info, data: data))
        }
        try keep(try made.get(), key: key, addedBy: call.sender)
    }

    func addImageFromFd(key: String, call: inout MethodCall) throws {
        let fd = try call.args.readFD()
        let capacity = imageCache.memoryCapacity
        guard let body = ImageBody.from(sealed: fd, maxBytes: Int(min(capacity, UInt64(Int.max)))) else {
            // Its size only if it is a memfd (F_GET_SEALS answers for nothing else): fstat on a
            // file of the client's FUSE server would wait for that server.
            var st = stat()
            let size = SealedMemory.isMemfd(fd) && fstat(fd, &st) == 0 ? Int(st.st_size) : 0
            Closer.close(fd)
            if size > 0, UInt64(size) > capacity { throw Self.tooLarge(size, capacity) }
            throw NetActivityError.invalidArgs(
                "The image must be a non-empty memfd sealed against writing, shrinking and growing (memfd_create with MFD_ALLOW_SEALING, then F_ADD_SEALS with F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)"
            )
        }
        close(fd)
        guard let info = body.withUnsafeBytes({ ImageInfo.sniff($0) }) else { throw notAnImage(body.count, key) }
        try keep(CachedImage(info: info, body: body), key: key, addedBy: call.sender)
    }

    static func tooLarge(_ size: Int, _ capacity: UInt64) -> NetActivityError {
        NetActivityError(.tooLarge, "The image is \(size) bytes; the cache holds at most \(capacity) (MemoryCapacity)")
    }

    func notAnImage(_ count: Int, _ key: String) -> NetActivityError {
        NetActivityError(
            .notAnImage,
            "The \(count) bytes for '\(Self.printable(key))' are not a PNG, JPEG, GIF, WebP, BMP, ICO or SVG image (or its header is damaged)"
        )
    }

    /// Stores what `sender` added, in its namespace, charged to its leaf (for fair eviction).
    func keep(_ image: CachedImage, key: String, addedBy sender: String) throws {
        let caller = context.peers.identity(of: sender)
        let stored = Self.storageKey(key, addedBy: caller)
        do throws(AutoPurgingImageCache<CachedImage>.Refusal) {
            try imageCache.add(image, cost: UInt64(image.size), for: stored, owner: caller.leaf)
            continuePurgeLater()
        } catch {
            throw Self.refusal(error, leaf: caller.leaf)
        }
        context.logger.trace(
            "Cached for \(caller.leaf) under '\(Self.printable(stored))': \(image.info.format.rawValue) \(image.info.width ?? 0)x\(image.info.height ?? 0), \(image.size) bytes"
        )
    }

    static func refusal(_ error: AutoPurgingImageCache<CachedImage>.Refusal, leaf: String) -> NetActivityError {
        switch error {
        case .overShare(_, let usage, let share):
            .limitsExceeded(
                "The app \(leaf) would hold \(usage) bytes of images, above its fair share of \(share) while other apps hold the rest of MemoryCapacity; its own older images go first, so this one does not fit"
            )
        case .tooLarge(let cost, let capacity):
            tooLarge(Int(clamping: cost), capacity)
        case .preferredAboveCapacity:
            .failed("\(error)")
        }
    }

    func lookupImage(key: String, for sender: String, reply: inout MessageWriter) throws {
        guard let image = image(for: key, reader: context.peers.identity(of: sender)) else {
            reply.append(false)
            try reply.appendBytes([])
            return
        }
        guard image.size <= Self.inlineLimit else {
            throw NetActivityError(
                .tooLarge,
                "The image is \(image.size) bytes; LookupImage carries at most \(Self.inlineLimit) inline: use OpenImage (a sealed memfd, no copy)"
            )
        }
        reply.append(true)
        try image.withBytes { try reply.appendBytes($0) }
    }

    func setCacheLimits(capacity: UInt64, preferred: UInt64) throws {
        let oldCapacity = imageCache.memoryCapacity
        let oldPreferred = imageCache.preferredMemoryUsageAfterPurge
        try Self.setLimits(
            of: &imageCache, capacity: capacity, preferred: preferred,
            names: (ImageCacheMember.Property.memoryCapacity, .preferredMemoryUsageAfterPurge))
        continuePurgeLater()
        var changed: [String] = []
        if capacity != oldCapacity { changed.append(ImageCacheMember.Property.memoryCapacity.rawValue) }
        if preferred != oldPreferred {
            changed.append(ImageCacheMember.Property.preferredMemoryUsageAfterPurge.rawValue)
        }
        context.emitPropertiesChanged(.imageCache, changed)
    }

    /// New limits for a cache (of images, or of decoded pixels), or InvalidArgs naming its two
    /// properties: a capacity over 2^40, or a preferred usage above the capacity.
    static func setLimits<Key, Image>(
        of cache: inout AutoPurgingCache<Key, Image>, capacity: UInt64, preferred: UInt64,
        names: (capacity: ImageCacheMember.Property, preferred: ImageCacheMember.Property)
    ) throws(NetActivityError) {
        guard capacity <= NetActivityLimits.maxCacheCapacity else {
            throw .invalidArgs(
                "\(names.capacity.rawValue) \(capacity) is above the limit of \(NetActivityLimits.maxCacheCapacity) bytes"
            )
        }
        do {
            _ = try cache.setLimits(capacity: capacity, preferred: preferred)
        } catch {
            throw .invalidArgs(
                "\(names.preferred.rawValue) (\(preferred)) must not be above \(names.capacity.rawValue) (\(capacity)); lower the preferred usage first, or raise the capacity first"
            )
        }
    }

    /// A purge that stopped at `AutoPurgingImageCache.purgeSlice` evictions goes on a turn later,
    /// until done: no call holds the loop for a million tiny images.
    private lazy var purgeSlice = NextTurn(
        context.scheduler,
        bound(self) { me in
            _ = me.imageCache.continuePurge()
            me.continuePurgeLater()
        })

    func continuePurgeLater() {
        guard imageCache.purgePending else { return }
        purgeSlice.request()
    }

    /// A key for a message: a request key's NUL shown as " + ".
    static func printable(_ key: String) -> String {
        key.replacing("\u{0}", with: " + ")
    }

    /// Memory pressure from PSI or LowMemoryMonitor.
    public func memoryPressure(critical: Bool, source: String) {
        let before = imageCache.memoryUsage
        let evicted = imageCache.trim(critical: critical)
        continuePurgeLater()
        context.logger.notice(
            "Memory pressure (\(critical ? "critical" : "moderate"), \(source)): evicted \(evicted.count) images, freed \(before - imageCache.memoryUsage) bytes"
        )
    }
}

extension ImageCacheService {
    // MARK: ImageStore

    public var memoryCapacity: UInt64 { imageCache.memoryCapacity }

    public func cachedImage(for key: String, client: String, maxAge: Double?) -> (
        body: any FetchedBody, info: ImageInfo
    )? {
        image(for: key, reader: context.peers.identity(of: client)).flatMap {
            $0.isYoung(maxAge) ? ($0.body, $0.info) : nil
        }
    }

    public func removeImages(where matches: (_ key: String, _ owner: String) -> Bool) -> [String] {
        let removed = imageCache.keysByRecency.filter { matches($0, imageCache.owner(of: $0) ?? "") }
        for key in removed { _ = imageCache.remove(key) }
        pixels.forget(storageKeys: removed)
        return removed
    }

    public func hasOwnEntry(_ key: String, leaf: String) -> Bool {
        imageCache.peek(Self.ownKey(key, leaf)) != nil
    }

    public func contains(_ key: String, answeringFor leaf: String?, maxAge: Double?) -> Bool {
        if let image = imageCache.peek(key) { return image.isYoung(maxAge) }
        guard let leaf else { return false }
        return imageCache.peek(Self.ownKey(key, leaf))?.isYoung(maxAge) ?? false
    }

    /// Keeps a downloaded body as it is (an `ImageBody`: its memfd becomes the cache's, no copy).
    public func store(_ fetched: ImageDownloader.Fetched, for key: String, app: String) -> Result<
        Void, ImageDownloader.Failure
    > {
        let capacity = imageCache.memoryCapacity
        guard UInt64(fetched.body.count) <= capacity else {
            return .failure(.failed(Self.tooLarge(fetched.body.count, capacity)))
        }
        return Self.cachedImage(fetched).flatMap { image in
            do throws(AutoPurgingImageCache<CachedImage>.Refusal) {
                try imageCache.add(image, cost: UInt64(image.size), for: key, owner: app)
                continuePurgeLater()
            } catch {
                return .failure(.failed(Self.refusal(error, leaf: app)))
            }
            // The app asked for the network's bytes: its own entry under the URL gives way.
            _ = imageCache.remove(Self.ownKey(key, app))
            context.logger.trace("Stored \(image.size) downloaded bytes for \(app) under '\(Self.printable(key))'")
            return .success(())
        }
    }

    public func storeIfRoom(_ fetched: ImageDownloader.Fetched, for key: String, app: String) -> Result<
        Void, ImageDownloader.Failure
    > {
        Self.cachedImage(fetched).map { image in
            if imageCache.addIfRoom(image, cost: UInt64(image.size), for: key, owner: app) {
                context.logger.trace("Kept \(image.size) prefetched bytes for \(app) under '\(Self.printable(key))'")
            }
        }
    }

    /// A downloaded body as a cache entry (an `ImageBody` as it is: its memfd becomes the
    /// cache's, no copy), or NotAnImage.
    static func cachedImage(_ fetched: ImageDownloader.Fetched) -> Result<CachedImage, ImageDownloader.Failure> {
        let body = fetched.body
        return body.withUnsafeBytes { data in
            guard let info = fetched.info else {
                return .failure(
                    .failed(
                        NetActivityError(
                            .notAnImage, "The \(data.count) bytes received are not an image of a known format")))
            }
            return .success(
                (body as? ImageBody).map { CachedImage(info: info, body: $0) } ?? CachedImage(info: info, data: data))
        }
    }
}

extension ImageCacheService: AccountBook {
    func holdings(_ resource: AgentAccounts.Resource, of app: String?) -> [AgentAccounts.Holding] {
        if resource == .pixels {
            return AgentAccounts.holdings(
                of: app, .pixels, usage: pixels.usageByOwner, capacity: pixels.memoryCapacity)
        }
        return AgentAccounts.holdings(
            of: app, .images, usage: imageCache.usageByOwner, capacity: imageCache.memoryCapacity)
    }
}
