public import DBusKit
import Glibc
import NetActivityContract
public import NetActivityCore

/// Where the downloader keeps what it fetched: the shared image cache.
public protocol ImageStore: AnyObject {
    /// The largest image the store can hold.
    var memoryCapacity: UInt64 { get }
    /// Whether `key` is held by an entry that may answer `owner`'s download (without refreshing
    /// its recency): one the downloader stored, or one `owner` added itself (nil: the downloader's
    /// only). An entry another app added under someone's URL is never served as that URL.
    func contains(_ key: String, answeringFor owner: String?) -> Bool
    /// Keeps `bytes` under `key`, charged to `app`, or says why not (`TooLarge`, `NotAnImage`).
    func store(_ body: any FetchedBody, for key: String, app: String) -> Result<Void, ImageDownloader.Failure>
}

/// `org.example.NetActivity.ImageCache`: AFAutoPurgingImageCache for every app, with large images
/// in sealed memfds (`OpenImage` hands out read-only opens, no copy), and memory pressure trims.
public final class ImageCacheService: ImageStore {
    private let context: AgentContext
    var imageCache = AutoPurgingImageCache<CachedImage>()

    public init(context: AgentContext, fileLimit: UInt64) {
        self.context = context
        ImageBody.maxMemfds = NetActivityLimits.memfdImages(fileLimit: fileLimit)
    }

    // MARK: the interface table

    /// `org.example.NetActivity.ImageCache` (documented in dbus/org.example.NetActivity.ImageCache.xml).
    public func makeInterface() -> DBusInterface {
        typealias M = ImageCacheMember.Method
        typealias P = ImageCacheMember.Property
        let dataArg = DBusArgument("data", "ay")
        let urlArgs = [DBusArgument("url", "s"), DBusArgument("additional_identifier", "s")]
        return DBusInterface(
            NetActivityInterface.imageCache.rawValue,
            methods: [
                DBusMethod(M.addImage.rawValue, in: [DBusArgument("identifier", "s"), dataArg]) { [unowned self] in
                    try self.addImage(&$0)
                },
                DBusMethod(M.addImageForRequest.rawValue, in: urlArgs + [dataArg]) { [unowned self] in
                    try self.addImageForRequest(&$0)
                },
                DBusMethod(M.lookupImage.rawValue, in: [DBusArgument("identifier", "s")], out: [DBusArgument("found", "b"), dataArg]) {
                    [unowned self] in try self.lookupImage(&$0)
                },
                DBusMethod(M.lookupImageForRequest.rawValue, in: urlArgs, out: [DBusArgument("found", "b"), dataArg]) {
                    [unowned self] in try self.lookupImageForRequest(&$0)
                },
                DBusMethod(
                    M.openImage.rawValue, in: [DBusArgument("identifier", "s")],
                    out: [DBusArgument("fd", "h"), DBusArgument("size", "t")]
                ) { [unowned self] in try self.openImage(&$0) },
                DBusMethod(
                    M.openImageForRequest.rawValue, in: urlArgs, out: [DBusArgument("fd", "h"), DBusArgument("size", "t")]
                ) { [unowned self] in try self.openImageForRequest(&$0) },
                DBusMethod(M.removeImage.rawValue, in: [DBusArgument("identifier", "s")], out: [DBusArgument("removed", "b")]) {
                    [unowned self] in try self.removeImage(&$0)
                },
                DBusMethod(M.removeImageForRequest.rawValue, in: urlArgs, out: [DBusArgument("removed", "b")]) {
                    [unowned self] in try self.removeImageForRequest(&$0)
                },
                DBusMethod(M.removeAllImages.rawValue, out: [DBusArgument("removed", "b")]) { [unowned self] in
                    self.removeAllImages(&$0)
                },
            ],
            properties: [
                .contractVersion,
                DBusProperty(P.memoryCapacity.rawValue, "t", get: { [unowned self] w, _ in w.append(self.imageCache.memoryCapacity) }) {
                    [unowned self] r, _, _ in
                    try self.setCacheLimits(capacity: try r.read(UInt64.self), preferred: self.imageCache.preferredMemoryUsageAfterPurge)
                },
                DBusProperty(
                    P.preferredMemoryUsageAfterPurge.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.imageCache.preferredMemoryUsageAfterPurge) }
                ) { [unowned self] r, _, _ in
                    try self.setCacheLimits(capacity: self.imageCache.memoryCapacity, preferred: try r.read(UInt64.self))
                },
                // These change on every call; read them when needed (no change signal).
                DBusProperty(P.memoryUsage.rawValue, "t", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.imageCache.memoryUsage)
                },
                DBusProperty(P.imageCount.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(clamping: self.imageCache.count))
                },
                DBusProperty(P.memoryUsageByApp.rawValue, "a{st}", emitsChanged: .false) { [unowned self] w, _ in
                    w.appendArray(elementSignature: "{st}") { a in
                        for (app, bytes) in self.imageCache.usageByOwner.sorted(by: { $0.key < $1.key }) {
                            a.appendDictEntry { e in
                                e.append(app)
                                e.append(bytes)
                            }
                        }
                    }
                },
                DBusProperty(P.statistics.rawValue, "a{st}", emitsChanged: .false) { [unowned self] w, _ in
                    let s = self.imageCache.statistics
                    w.appendArray(elementSignature: "{st}") { a in
                        for (name, value) in [
                            ("hits", s.hits), ("misses", s.misses), ("insertions", s.insertions), ("evictions", s.evictions),
                            ("pressure-moderate", s.pressureModerate), ("pressure-critical", s.pressureCritical),
                            ("pressure-evictions", s.pressureEvictions), ("pressure-bytes-freed", s.pressureBytesFreed),
                        ] {
                            a.appendDictEntry { e in
                                e.append(name)
                                e.append(value)
                            }
                        }
                    }
                },
            ]
        )
    }

    // MARK: handlers

    func addImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        try addImage(key: key, call: &call)
    }

    func addImageForRequest(_ call: inout MethodCall) throws {
        let key = try Self.requestKey(&call.args)
        try addImage(key: key, call: &call)
    }

    func lookupImage(_ call: inout MethodCall) throws {
        try lookupImage(key: try Self.identifier(try call.args.read(String.self)), reply: &call.reply)
    }

    func lookupImageForRequest(_ call: inout MethodCall) throws {
        try lookupImage(key: try Self.requestKey(&call.args), reply: &call.reply)
    }

    func openImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        try openImage(key: key, named: "'\(key)'", reply: &call.reply)
    }

    func openImageForRequest(_ call: inout MethodCall) throws {
        var args = call.args  // a copy of the iterator, to name the URL in the error
        let url = (try? args.read(String.self)) ?? ""
        try openImage(key: try Self.requestKey(&call.args), named: "for \(url)", reply: &call.reply)
    }

    private func openImage(key: String, named name: String, reply: inout MessageWriter) throws {
        guard let image = imageCache.image(for: key) else {
            throw NetActivityError(.notFound, "No image \(name) in the cache")
        }
        guard let fd = image.openReadOnly() else {
            throw NetActivityError.failed("Could not share the image: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try reply.appendFD(fd)
        reply.append(UInt64(image.size))
    }

    func removeImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        call.reply.append(imageCache.remove(key) != nil)
    }

    func removeImageForRequest(_ call: inout MethodCall) throws {
        let key = try Self.requestKey(&call.args)
        call.reply.append(imageCache.remove(key) != nil)
    }

    func removeAllImages(_ call: inout MethodCall) {
        call.reply.append(!imageCache.removeAll().isEmpty)
    }

    static func identifier(_ s: String, what: String = "Identifier") throws(NetActivityError) -> String {
        guard !s.isEmpty else { throw .invalidArgs("\(what) must not be empty") }
        guard s.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw .invalidArgs("\(what) is \(s.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)")
        }
        return s
    }

    /// (url, additional) -> the unambiguous request key (NetActivityCore.ImageRequestKey).
    static func requestKey(_ r: inout MessageReader) throws -> String {
        let url = try identifier(try r.read(String.self), what: "URL")
        let additional = try r.read(String.self)
        guard additional.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw NetActivityError.invalidArgs(
                "Additional identifier is \(additional.utf8.count) bytes long; the limit is \(NetActivityLimits.maxImageKeyBytes)")
        }
        return ImageRequestKey.make(url: url, additional: additional)
    }

    private func addImage(key: String, call: inout MethodCall) throws {
        let capacity = imageCache.memoryCapacity
        let sender = call.sender
        // The bytes are read in place (no copy) and copied once, into the cache's storage.
        let made = try call.args.withBytes { data -> Result<CachedImage, NetActivityError> in
            guard UInt64(data.count) <= capacity else {
                return .failure(NetActivityError(
                    .tooLarge, "The image is \(data.count) bytes; the cache holds at most \(capacity) (MemoryCapacity)"))
            }
            guard let info = ImageInfo.sniff(data) else {
                return .failure(NetActivityError(
                    .notAnImage, "The \(data.count) bytes for '\(Self.printable(key))' are not a PNG, JPEG, GIF, WebP, BMP, ICO or SVG image (or its header is damaged)"))
            }
            return .success(CachedImage(info: info, data: data, addedBy: sender))
        }
        let image = try made.get()
        // Cannot throw: the size was checked against the capacity above. Charged to the caller's
        // app, for fair eviction.
        _ = try? imageCache.add(image, cost: UInt64(image.size), for: key, owner: context.peers.app(of: call.sender))
        context.logger.trace("Cached \(image.info.format.rawValue) \(image.info.width ?? 0)x\(image.info.height ?? 0), \(image.size) bytes")
    }

    private func lookupImage(key: String, reply: inout MessageWriter) throws {
        guard let image = imageCache.image(for: key) else {
            reply.append(false)
            try reply.appendBytes([])
            return
        }
        reply.append(true)
        try image.withBytes { try reply.appendBytes($0) }
    }

    private func setCacheLimits(capacity: UInt64, preferred: UInt64) throws {
        guard capacity <= NetActivityLimits.maxCacheCapacity else {
            throw NetActivityError.invalidArgs(
                "MemoryCapacity \(capacity) is above the limit of \(NetActivityLimits.maxCacheCapacity) bytes")
        }
        let oldCapacity = imageCache.memoryCapacity, oldPreferred = imageCache.preferredMemoryUsageAfterPurge
        do {
            _ = try imageCache.setLimits(capacity: capacity, preferred: preferred)
        } catch {
            throw NetActivityError.invalidArgs(
                "PreferredMemoryUsageAfterPurge (\(preferred)) must not be above MemoryCapacity (\(capacity)); lower the preferred usage first, or raise the capacity first")
        }
        var changed: [String] = []
        if capacity != oldCapacity { changed.append(ImageCacheMember.Property.memoryCapacity.rawValue) }
        if preferred != oldPreferred { changed.append(ImageCacheMember.Property.preferredMemoryUsageAfterPurge.rawValue) }
        context.emitPropertiesChanged(.imageCache, changed)
    }

    /// A key for a message: a request key's NUL shown as " + ".
    static func printable(_ key: String) -> String {
        key.replacing("\u{0}", with: " + ")
    }

    /// Memory pressure from PSI or LowMemoryMonitor.
    public func memoryPressure(critical: Bool, source: String) {
        let before = imageCache.memoryUsage
        let evicted = imageCache.trim(critical: critical)
        context.logger.notice(
            "Memory pressure (\(critical ? "critical" : "moderate"), \(source)): evicted \(evicted.count) images, freed \(before - imageCache.memoryUsage) bytes")
    }
}

extension ImageCacheService {
    // MARK: ImageStore

    public var memoryCapacity: UInt64 { imageCache.memoryCapacity }

    public func contains(_ key: String, answeringFor owner: String?) -> Bool {
        guard let image = imageCache.peek(key) else { return false }
        return image.addedBy == nil || image.addedBy == owner
    }

    /// Keeps a downloaded body as it is (an `ImageBody`: its memfd becomes the cache's, no copy).
    public func store(_ body: any FetchedBody, for key: String, app: String) -> Result<Void, ImageDownloader.Failure> {
        let capacity = imageCache.memoryCapacity
        guard UInt64(body.count) <= capacity else {
            return .failure(.failed(NetActivityError(.tooLarge, "The image is \(body.count) bytes; the cache holds at most \(capacity)")))
        }
        return body.withUnsafeBytes { data in
            guard let info = ImageInfo.sniff(data) else {
                return .failure(.failed(NetActivityError(.notAnImage, "The \(data.count) bytes received are not an image of a known format")))
            }
            let image = (body as? ImageBody).map { CachedImage(info: info, body: $0) } ?? CachedImage(info: info, data: data)
            _ = try? imageCache.add(image, cost: UInt64(data.count), for: key, owner: app)
            return .success(())
        }
    }
}
