// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// The ImageCache interface table (dbus/org.example.NetActivity.ImageCache.xml) and its handlers:
/// each reads its arguments, calls the service, and writes the reply.
extension ImageCacheService {
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
                DBusMethod(
                    M.addImageFromFd.rawValue, in: [DBusArgument("identifier", "s"), DBusArgument("image", "h")]
                ) {
                    [unowned self] in try self.addImageFromFd(&$0)
                },
                DBusMethod(M.addImageFromFdForRequest.rawValue, in: urlArgs + [DBusArgument("image", "h")]) {
                    [unowned self] in try self.addImageFromFdForRequest(&$0)
                },
                DBusMethod(
                    M.lookupImage.rawValue, in: [DBusArgument("identifier", "s")],
                    out: [DBusArgument("found", "b"), dataArg]
                ) {
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
                    M.openPixels.rawValue, in: [DBusArgument("identifier", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("pixels", "h"), DBusArgument("info", "a{sv}")]
                ) { [unowned self] in try self.openPixels(&$0) },
                DBusMethod(
                    M.openImageForRequest.rawValue, in: urlArgs,
                    out: [DBusArgument("fd", "h"), DBusArgument("size", "t")]
                ) { [unowned self] in try self.openImageForRequest(&$0) },
                DBusMethod(
                    M.removeImage.rawValue, in: [DBusArgument("identifier", "s")], out: [DBusArgument("removed", "b")]
                ) {
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
                DBusProperty(
                    P.memoryCapacity.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.imageCache.memoryCapacity) }
                ) {
                    [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: P.memoryCapacity.rawValue)
                    try self.setCacheLimits(
                        capacity: try r.read(UInt64.self), preferred: self.imageCache.preferredMemoryUsageAfterPurge)
                },
                DBusProperty(
                    P.decodedMemoryCapacity.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.pixels?.memoryCapacity ?? 0) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: P.decodedMemoryCapacity.rawValue)
                    try self.setDecodedLimits(capacity: try r.read(UInt64.self), preferred: nil)
                },
                DBusProperty(
                    P.decodedPreferredMemoryUsageAfterPurge.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.pixels?.preferredMemoryUsageAfterPurge ?? 0) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: P.decodedPreferredMemoryUsageAfterPurge.rawValue)
                    try self.setDecodedLimits(capacity: nil, preferred: try r.read(UInt64.self))
                },
                DBusProperty(P.decodedMemoryUsage.rawValue, "t", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.pixels?.memoryUsage ?? 0)
                },
                DBusProperty(
                    P.preferredMemoryUsageAfterPurge.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.imageCache.preferredMemoryUsageAfterPurge) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: P.preferredMemoryUsageAfterPurge.rawValue)
                    try self.setCacheLimits(
                        capacity: self.imageCache.memoryCapacity, preferred: try r.read(UInt64.self))
                },
                // These change on every call; read them when needed (no change signal).
                DBusProperty(P.memoryUsage.rawValue, "t", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.imageCache.memoryUsage)
                },
                DBusProperty(P.imageCount.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(clamping: self.imageCache.count))
                },
                DBusProperty(P.memoryUsageByApp.rawValue, "a{st}", emitsChanged: .false) { [unowned self] w, _ in
                    // A sandboxed caller sees its own row only.
                    let caller = self.context.peers.identity(of: self.context.server.caller)
                    w.appendArray(elementSignature: "{st}") { a in
                        for (app, bytes) in self.imageCache.usageByOwner.sorted(by: { $0.key < $1.key })
                        where !caller.isSandboxed || app == caller.leaf {
                            a.appendDictEntry { e in
                                e.append(app)
                                e.append(bytes)
                            }
                        }
                    }
                },
                DBusProperty(P.statistics.rawValue, "a{st}", emitsChanged: .false) { [unowned self] w, _ in
                    let s = self.imageCache.statistics
                    // Every key the XML lists, and only those: a new key fails to compile in `count`.
                    Self.appendCounters(
                        &w, ImageCacheMember.StatisticsKey.allCases.map { ($0.rawValue, Self.count($0, s)) })
                },
                DBusProperty(P.decodedStatistics.rawValue, "a{st}", emitsChanged: .false) { [unowned self] w, _ in
                    let s = self.pixels?.statistics ?? .init()
                    Self.appendCounters(
                        &w,
                        ImageCacheMember.DecodedStatisticsKey.allCases.map { key in
                            let value: UInt64 =
                                if let tierKey = ImageCacheMember.StatisticsKey(rawValue: key.rawValue) {
                                    Self.count(tierKey, s.tier)
                                } else {
                                    switch key {
                                    case .decodes: s.decodes
                                    case .decodeFailures: s.decodeFailures
                                    case .sharedDecodes: s.sharedDecodes
                                    case .decodersStarted: s.decodersStarted
                                    case .decodersReplaced: s.decodersReplaced
                                    default: 0  // the tier's, above
                                    }
                                }
                            return (key.rawValue, value)
                        })
                },
            ]
        )
    }

    /// A tier's counter by its Statistics key (the image cache's, or the decoded tier's).
    private static func count<Image>(
        _ key: ImageCacheMember.StatisticsKey, _ s: AutoPurgingImageCache<Image>.Statistics
    ) -> UInt64 {
        switch key {
        case .hits: s.hits
        case .misses: s.misses
        case .insertions: s.insertions
        case .evictions: s.evictions
        case .pressureModerate: s.pressureModerate
        case .pressureCritical: s.pressureCritical
        case .pressureEvictions: s.pressureEvictions
        case .pressureBytesFreed: s.pressureBytesFreed
        }
    }

    private static func appendCounters(_ w: inout MessageWriter, _ counters: [(String, UInt64)]) {
        w.appendArray(elementSignature: "{st}") { a in
            for (name, value) in counters {
                a.appendDictEntry { e in
                    e.append(name)
                    e.append(value)
                }
            }
        }
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

    func addImageFromFd(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        try addImageFromFd(key: key, call: &call)
    }

    func addImageFromFdForRequest(_ call: inout MethodCall) throws {
        let key = try Self.requestKey(&call.args)
        try addImageFromFd(key: key, call: &call)
    }

    func lookupImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        try lookupImage(key: key, for: call.sender, reply: &call.reply)
    }

    func lookupImageForRequest(_ call: inout MethodCall) throws {
        try lookupImage(key: try Self.requestKey(&call.args), for: call.sender, reply: &call.reply)
    }

    func openImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        try openImage(key: key, named: "'\(key)'", for: call.sender, reply: &call.reply)
    }

    func openImageForRequest(_ call: inout MethodCall) throws {
        var args = call.args  // a copy of the iterator, to name the URL in the error
        let url = (try? args.read(String.self)) ?? ""
        try openImage(
            key: try Self.requestKey(&call.args), named: "for \(PublishedURL.redact(url))", for: call.sender,
            reply: &call.reply)
    }

    private func openImage(key: String, named name: String, for sender: String, reply: inout MessageWriter) throws {
        guard let image = image(for: key, reader: context.peers.identity(of: sender)) else {
            throw NetActivityError(.notFound, "No image \(name) in the cache")
        }
        guard let fd = image.openReadOnly() else {
            throw NetActivityError.failed("Could not share the image: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try reply.appendFD(fd)
        reply.append(UInt64(image.size))
    }

    /// OpenPixels: what OpenImage would hand out, decoded (see `PixelPipeline`). The decoded
    /// entry's key names the entry it came from, so it answers exactly those who may read that one.
    func openPixels(_ call: inout MethodCall) throws {
        typealias Option = ImageCacheMember.OpenPixelsOption
        let key = try Self.identifier(try call.args.read(String.self))
        let options = try call.args.readVardict()
        try checkOptions(options, of: ImageCacheMember.Method.openPixels.rawValue, Option.self)
        let box = PixelPipeline.Box(
            maxWidth: options[Option.maxWidth.rawValue]?.uint32Value ?? 0,
            maxHeight: options[Option.maxHeight.rawValue]?.uint32Value ?? 0)
        let reader = context.peers.identity(of: call.sender)
        let storage = readKey(key, reader: reader)
        guard let pixels else { throw NetActivityError(.decode, "The agent decodes no images") }
        guard let image = imageCache.image(for: storage) else {
            throw NetActivityError(.notFound, "No image '\(key)' in the cache")
        }
        let pixelKey = PixelPipeline.key(storage, box)
        if let hit = pixels.cached(key: pixelKey) { return try DownloadService.write(hit, to: &call.reply) }
        pixels.decode(
            image.body, info: image.info, source: .memory, httpStatus: 0, key: pixelKey,
            owner: imageCache.owner(of: storage) ?? "", box: box, reader: reader.leaf,
            reply: context.replyLater(call.message) { (answer: PixelPipeline.Answer, w) in
                try DownloadService.write(answer, to: &w)
            })
        call.deferReply()
    }

    /// DecodedMemoryCapacity or DecodedPreferredMemoryUsageAfterPurge set (nil: kept as it is).
    func setDecodedLimits(capacity: UInt64?, preferred: UInt64?) throws {
        guard let pixels else { throw NetActivityError(.decode, "The agent decodes no images") }
        let old = (pixels.memoryCapacity, pixels.preferredMemoryUsageAfterPurge)
        try pixels.setLimits(capacity: capacity ?? old.0, preferred: preferred ?? old.1)
        typealias P = ImageCacheMember.Property
        var changed: [String] = []
        if pixels.memoryCapacity != old.0 { changed.append(P.decodedMemoryCapacity.rawValue) }
        if pixels.preferredMemoryUsageAfterPurge != old.1 {
            changed.append(P.decodedPreferredMemoryUsageAfterPurge.rawValue)
        }
        context.emitPropertiesChanged(.imageCache, changed)
    }

    func removeImage(_ call: inout MethodCall) throws {
        let key = try Self.identifier(try call.args.read(String.self))
        call.reply.append(remove(key, by: context.peers.identity(of: call.sender)))
    }

    func removeImageForRequest(_ call: inout MethodCall) throws {
        let key = try Self.requestKey(&call.args)
        call.reply.append(remove(key, by: context.peers.identity(of: call.sender)))
    }

    /// A host app empties the cache (AFNetworking's removeAllImages); a sandboxed app removes the
    /// entries charged to it, never another app's.
    func removeAllImages(_ call: inout MethodCall) {
        let caller = context.peers.identity(of: call.sender)
        guard caller.isSandboxed else {
            pixels?.forgetAll()
            return call.reply.append(!imageCache.removeAll().isEmpty)
        }
        call.reply.append(!removeImages(where: { _, owner in owner == caller.leaf }).isEmpty)
    }
}
