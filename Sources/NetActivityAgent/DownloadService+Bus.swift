// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// The Downloader's interface table (dbus/org.example.NetActivity.Downloader.xml) and its
/// handlers: each reads its arguments, calls the service, and writes the reply.
extension DownloadService: BusService {
    typealias Member = DownloaderMember

    // MARK: the interface table

    func handle(_ method: Member.Method, _ call: inout MethodCall) throws {
        switch method {
        case .downloadImage: try downloadImage(&call)
        case .fetchImage: try fetchImage(&call)
        case .fetchPixels: try fetchPixels(&call)
        case .cancelDownload: try cancelDownload(&call)
        case .setPriority: try setPriority(&call)
        case .removeImages: try removeImages(&call)
        case .prefetchImages: try prefetchImages(&call)
        case .cancelPrefetch: try cancelPrefetch(&call)
        }
    }

    static func property(_ property: Member.Property) -> BusProperty<DownloadService> {
        switch property {
        case .version: .version
        case .maximumActiveDownloads:
            .readwrite({ s, w in w.append(UInt32(s.core.maximumActiveDownloads)) }) { s, r in
                try s.setMaximumActiveDownloads(try r.read(UInt32.self))
            }
        case .downloadPrioritization:
            .readwrite({ s, w in w.append(s.core.prioritization.rawValue) }) { s, r in
                try s.setPrioritization(try r.read(String.self))
            }
        case .activeDownloads: .read { s, w in w.append(UInt32(s.core.activeCount + s.core.yieldedCount)) }
        case .queuedDownloads: .read { s, w in w.append(UInt32(s.core.queuedCount)) }
        case .diskCapacity:
            .readwrite({ s, w in w.append(s.disk?.capacity ?? DiskCache.defaultCapacity) }) { s, r in
                try s.setDiskCapacity(try r.read(UInt64.self))
            }
        case .diskUsage:
            .read { s, w in
                s.disk?.start()
                w.append(s.disk?.usage ?? 0)
            }
        case .diskError: .read { s, w in w.append(s.diskError) }
        case .proxy: .read { s, w in w.append(s.proxyInUse) }
        case .deferred: .read { s, w in try s.writeDeferred(&w) }
        }
    }

    /// Deferred: why downloads wait, and how many do (empty when nothing holds them).
    func writeDeferred(_ w: inout MessageWriter) throws {
        typealias Key = DownloaderMember.DeferredKey
        let (metered, powerSaver) = conditions.holdReasons
        var out: [String: DBusValue] = [:]
        if metered { out[Key.metered.rawValue] = .bool(true) }
        if powerSaver { out[Key.powerSaver.rawValue] = .bool(true) }
        if metered || powerSaver {
            out[Key.held.rawValue] = .uint32(UInt32(clamping: core.heldCount))
            out[Key.prefetch.rawValue] = .uint32(UInt32(clamping: prefetching.waitingCount))
        }
        try w.appendVardict(out)
    }

    // MARK: handlers

    func prefetchImages(_ call: inout MethodCall) throws {
        let urls = try call.args.readStrings()
        let options = try call.args.readVardict()
        call.reply.append(try prefetching.prefetch(urls: urls, options: options, owner: call.sender))
    }

    func cancelPrefetch(_ call: inout MethodCall) throws {
        let receipt = try call.args.read(String.self)
        let urls = try call.args.readStrings()
        call.reply.append(try prefetching.cancel(receipt: receipt, urls: urls, by: call.sender))
    }

    func downloadImage(_ call: inout MethodCall) throws {
        let url = try call.args.read(String.self)
        let options = try call.args.readVardict()
        let answer = try download(url: url, options: options, owner: call.sender)
        call.reply.append(answer.receipt)
        try call.reply.appendObjectPath(answer.task)
        call.reply.append(answer.cached)
    }

    func fetchImage(_ call: inout MethodCall) throws {
        let url = try call.args.read(String.self)
        let options = try call.args.readVardict()
        let reply = context.replyLater(call.message) { (answer: Answer, w) in try Self.write(answer, to: &w) }
        guard let answer = try fetch(url: url, options: options, owner: call.sender, reply: reply) else {
            return call.deferReply()
        }
        try Self.write(answer, to: &call.reply)
    }

    func fetchPixels(_ call: inout MethodCall) throws {
        let url = try call.args.read(String.self)
        let options = try call.args.readVardict()
        let reply = context.replyLater(call.message) { (answer: PixelsReply, w) in try answer.write(to: &w) }
        guard let answer = try fetchPixels(url: url, options: options, owner: call.sender, reply: reply) else {
            return call.deferReply()
        }
        try answer.write(to: &call.reply)
    }

    /// FetchImage's (h image, t size, a{sv} info): the body's sealed memfd, opened read-only for
    /// the caller (the same memory as the cache's when it is one, else a new one).
    static func write(_ answer: Answer, to w: inout MessageWriter) throws {
        guard let fd = answer.body.sealedReadOnly() else {
            throw NetActivityError.failed("Could not share the image: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try w.appendFD(fd)
        w.append(UInt64(answer.body.count))
        typealias Info = DownloaderMember.FetchImageInfo
        w.appendArray(elementSignature: "{sv}") { a in
            a.appendDictEntry { e in
                e.append(Info.source.rawValue)
                e.appendVariant(signature: "s") { v in v.append(answer.source.rawValue) }
            }
            a.appendDictEntry { e in
                e.append(Info.contentType.rawValue)
                e.appendVariant(signature: "s") { v in v.append(answer.info.format.mediaType) }
            }
            guard answer.httpStatus != 0 else { return }
            a.appendDictEntry { e in
                e.append(Info.httpStatus.rawValue)
                e.appendVariant(signature: "u") { v in v.append(answer.httpStatus) }
            }
        }
    }

    /// RemoveImages: the caller's app's entries under `prefix`, from memory at once and from the
    /// disk on its worker; the reply counts both (an entry in both counts once).
    func removeImages(_ call: inout MethodCall) throws {
        let prefix = try call.args.read(String.self)
        guard prefix.utf8.count <= NetActivityLimits.maxImageKeyBytes else {
            throw NetActivityError.invalidArgs(
                "A prefix must be at most \(NetActivityLimits.maxImageKeyBytes) bytes long, got \(prefix.utf8.count)")
        }
        let app = String(context.peers.identity(of: call.sender).scope)
        guard !removing.contains(app) else {
            throw NetActivityError.limitsExceeded(
                "A RemoveImages of \(app) is still reading the disk; ask again when it has answered")
        }
        let matches: @Sendable (String, String) -> Bool = { key, owner in
            ImageRequestKey.removable(key: key, owner: owner, prefix: prefix, by: app[...])
        }
        let fromMemory = images.removeImages(where: matches)
        context.logger.debug("RemoveImages('\(prefix.prefix(100))') by \(app): \(fromMemory.count) from memory")
        guard let disk else { return call.reply.append(UInt32(clamping: fromMemory.count)) }
        let message = call.message
        removing.insert(app)
        disk.removeImages(
            where: matches,
            bound(self) { me, fromDisk in
                me.removing.remove(app)
                let count = Set(fromMemory).union(fromDisk).count
                try? me.context.server.respond(to: message) { w in w.append(UInt32(clamping: count)) }
            })
        call.deferReply()
    }

    func cancelDownload(_ call: inout MethodCall) throws {
        call.reply.append(try cancel(receipt: try call.args.read(String.self), by: call.sender))
    }

    func setPriority(_ call: inout MethodCall) throws {
        let receipt = try call.args.read(String.self)
        call.reply.append(try setPriority(receipt: receipt, priority: try call.args.read(String.self), by: call.sender))
    }

    func setMaximumActiveDownloads(_ n: UInt32) throws(NetActivityError) {
        let range = NetActivityLimits.activeDownloads
        guard range.contains(n) else {
            throw .invalidArgs(
                "MaximumActiveDownloads must be between \(range.lowerBound) and \(range.upperBound), got \(n)")
        }
        guard Int(n) != core.maximumActiveDownloads else { return }
        core.maximumActiveDownloads = Int(n)
        prefetching.pumpSoon()
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.maximumActiveDownloads.rawValue])
    }

    func setPrioritization(_ value: String) throws(NetActivityError) {
        guard let order = ImageDownloader.Prioritization(rawValue: value) else {
            throw .invalidArgs("DownloadPrioritization must be 'fifo' or 'lifo', got '\(value.prefix(100))'")
        }
        guard order != core.prioritization else { return }
        core.prioritization = order
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.downloadPrioritization.rawValue])
    }

    func setDiskCapacity(_ bytes: UInt64) throws(NetActivityError) {
        guard bytes <= NetActivityLimits.maxCacheCapacity else {
            throw .invalidArgs(
                "DiskCapacity \(bytes) is above the limit of \(NetActivityLimits.maxCacheCapacity) bytes")
        }
        guard let disk, bytes != disk.capacity else { return }
        disk.setCapacity(bytes)
        context.emitPropertiesChanged(.downloader, [DownloaderMember.Property.diskCapacity.rawValue])
    }

    var diskError: String {
        guard let disk else { return "no cache directory: neither XDG_CACHE_HOME nor HOME is set" }
        disk.start()  // the directory is checked on first use, on the worker: a later read reports it
        return disk.lastError
    }
}
