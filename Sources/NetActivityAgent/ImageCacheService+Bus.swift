// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// The ImageCache interface table (dbus/org.example.NetActivity.ImageCache.xml) and its handlers:
/// each reads its arguments, calls the service, and writes the reply.
extension ImageCacheService: BusService {
    typealias Member = ImageCacheMember

    // MARK: the interface table

    func handle(_ method: Member.Method, _ call: inout MethodCall) throws {
        switch method {
        case .addImage: try addImage(&call)
        case .addImageForRequest: try addImageForRequest(&call)
        case .addImageFromFd: try addImageFromFd(&call)
        case .addImageFromFdForRequest: try addImageFromFdForRequest(&call)
        case .lookupImage: try lookupImage(&call)
        case .lookupImageForRequest: try lookupImageForRequest(&call)
        case .openImage: try openImage(&call)
        case .openPixels: try openPixels(&call)
        case .openImageForRequest: try openImageForRequest(&call)
        case .removeImage: try removeImage(&call)
        case .removeImageForRequest: try removeImageForRequest(&call)
        case .removeAllImages: removeAllImages(&call)
        }
    }

    static func property(_ property: Member.Property) -> BusProperty<ImageCacheService> {
        switch property {
        case .version: .version
        case .memoryCapacity:
            .readwrite({ s, w in w.append(s.imageCache.memoryCapacity) }) { s, r in
                try s.setCacheLimits(
                    capacity: try r.read(UInt64.self), preferred: s.imageCache.preferredMemoryUsageAfterPurge)
            }
        case .preferredMemoryUsageAfterPurge:
            .readwrite({ s, w in w.append(s.imageCache.preferredMemoryUsageAfterPurge) }) { s, r in
                try s.setCacheLimits(capacity: s.imageCache.memoryCapacity, preferred: try r.read(UInt64.self))
            }
        case .decodedMemoryCapacity:
            .readwrite({ s, w in w.append(s.pixels.memoryCapacity) }) { s, r in
                try s.setDecodedLimits(capacity: try r.read(UInt64.self), preferred: nil)
            }
        case .decodedPreferredMemoryUsageAfterPurge:
            .readwrite({ s, w in w.append(s.pixels.preferredMemoryUsageAfterPurge) }) { s, r in
                try s.setDecodedLimits(capacity: nil, preferred: try r.read(UInt64.self))
            }
        case .decodedMemoryUsage: .read { s, w in w.append(s.pixels.memoryUsage) }
        case .memoryUsage: .read { s, w in w.append(s.imageCache.memoryUsage) }
        case .imageCount: .read { s, w in w.append(UInt32(clamping: s.imageCache.count)) }
        case .memoryUsageByApp: .read { s, w in s.writeMemoryUsageByApp(&w) }
        case .statistics:
            .read { s, w in
                // Every key the XML lists, and only those: a new key fails to compile in `count`.
                let counts = s.imageCache.statistics
                appendCounters(&w, ImageCacheMember.StatisticsKey.allCases.map { ($0.rawValue, count($0, counts)) })
            }
        case .decodedStatistics: .read { s, w in s.writeDecodedStatistics(&w) }
        }
    }

    /// MemoryUsageByApp: bytes per app; a sandboxed caller sees its own row only.
    func writeMemoryUsageByApp(_ w: inout MessageWriter) {
        let caller = context.peers.identity(of: context.server.caller)
        w.appendArray(elementSignature: "{st}") { a in
            for (app, bytes) in imageCache.usageByOwner.sorted(by: { $0.key < $1.key })
            where !caller.isSandboxed || app == caller.leaf {
                a.appendDictEntry { e in
                    e.append(app)
                    e.append(bytes)
                }
            }
        }
    }

    /// DecodedStatistics: the decoded tier's counters (those it shares with Statistics, and the
    /// decoders').
    func writeDecodedStatistics(_ w: inout MessageWriter) {
        let s = decoding.statistics
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
    }

    /// A tier's counter by its Statistics key (the image cache's, or the decoded tier's).
    private static func count(_ key: ImageCacheMember.StatisticsKey, _ s: CacheStatistics) -> UInt64 {
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

    /// OpenPixels: what OpenImage would hand out, decoded (see `Decoding`). The decoded
    /// entry's key names the entry it came from, so it answers exactly those who may read that one.
    func openPixels(_ call: inout MethodCall) throws {
        typealias Option = ImageCacheMember.OpenPixelsOption
        let key = try Self.identifier(try call.args.read(String.self))
        let options = try call.args.readVardict()
        try checkOptions(options, of: ImageCacheMember.Method.openPixels.rawValue, Option.self)
        let reader = context.peers.identity(of: call.sender)
        let storage = readKey(key, reader: reader)
        guard let image = imageCache.image(for: storage) else {
            throw NetActivityError(.notFound, "No image '\(key)' in the cache")
        }
        let pixelKey = try PixelAsk(options: options).key(storage)
        if let hit = pixels.entry(pixelKey) { return try PixelsReply(hit, source: .memory).write(to: &call.reply) }
        let reply = context.replyLater(call.message) { (answer: PixelsReply, w) in try answer.write(to: &w) }
        decoding.decode(
            image.body, contentType: image.info.format.mediaType, key: pixelKey,
            owner: imageCache.owner(of: storage) ?? "", reader: reader.leaf
        ) { result in reply(result.map { PixelsReply($0, source: .memory) }) }
        call.deferReply()
    }

    /// DecodedMemoryCapacity or DecodedPreferredMemoryUsageAfterPurge set (nil: kept as it is).
    func setDecodedLimits(capacity: UInt64?, preferred: UInt64?) throws {
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
            pixels.forgetAll()
            return call.reply.append(!imageCache.removeAll().isEmpty)
        }
        call.reply.append(!removeImages(where: { _, owner in owner == caller.leaf }).isEmpty)
    }
}
