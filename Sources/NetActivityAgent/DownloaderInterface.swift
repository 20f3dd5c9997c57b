// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// The Downloader's interface table (dbus/org.example.NetActivity.Downloader.xml) and its
/// handlers: each reads its arguments, calls the service, and writes the reply.
extension DownloadService {
    // MARK: the interface table

    /// `org.example.NetActivity.Downloader` (dbus/org.example.NetActivity.Downloader.xml).
    public func makeInterface() -> DBusInterface {
        typealias M = DownloaderMember.Method
        typealias P = DownloaderMember.Property
        return DBusInterface(
            NetActivityInterface.downloader.rawValue,
            methods: [
                DBusMethod(
                    M.downloadImage.rawValue, in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("receipt", "s"), DBusArgument("task", "o"), DBusArgument("cached", "b")]
                ) { [unowned self] in try self.downloadImage(&$0) },
                DBusMethod(
                    M.fetchImage.rawValue, in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("image", "h"), DBusArgument("size", "t"), DBusArgument("info", "a{sv}")]
                ) { [unowned self] in try self.fetchImage(&$0) },
                DBusMethod(
                    M.fetchPixels.rawValue, in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("pixels", "h"), DBusArgument("info", "a{sv}")]
                ) { [unowned self] in try self.fetchPixels(&$0) },
                DBusMethod(
                    M.cancelDownload.rawValue, in: [DBusArgument("receipt", "s")], out: [DBusArgument("cancelled", "b")]
                ) {
                    [unowned self] in try self.cancelDownload(&$0)
                },
                DBusMethod(
                    M.setPriority.rawValue, in: [DBusArgument("receipt", "s"), DBusArgument("priority", "s")],
                    out: [DBusArgument("changed", "b")]
                ) { [unowned self] in try self.setPriority(&$0) },
                DBusMethod(
                    M.removeImages.rawValue, in: [DBusArgument("prefix", "s")], out: [DBusArgument("removed", "u")]
                ) {
                    [unowned self] in try self.removeImages(&$0)
                },
                DBusMethod(
                    M.prefetchImages.rawValue, in: [DBusArgument("urls", "as"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("receipt", "s")]
                ) { [unowned self] call in
                    let urls = try call.args.readStrings()
                    let options = try call.args.readVardict()
                    call.reply.append(try self.prefetching.prefetch(urls: urls, options: options, owner: call.sender))
                },
                DBusMethod(
                    M.cancelPrefetch.rawValue, in: [DBusArgument("receipt", "s"), DBusArgument("urls", "as")],
                    out: [DBusArgument("cancelled", "u")]
                ) { [unowned self] call in
                    let receipt = try call.args.read(String.self)
                    let urls = try call.args.readStrings()
                    call.reply.append(try self.prefetching.cancel(receipt: receipt, urls: urls, by: call.sender))
                },
            ],
            properties: [
                .contractVersion,
                DBusProperty(
                    P.maximumActiveDownloads.rawValue, "u",
                    get: { [unowned self] w, _ in w.append(UInt32(self.core.maximumActiveDownloads)) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "MaximumActiveDownloads")
                    try self.setMaximumActiveDownloads(try r.read(UInt32.self))
                },
                DBusProperty(
                    P.downloadPrioritization.rawValue, "s",
                    get: { [unowned self] w, _ in w.append(self.core.prioritization.rawValue) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "DownloadPrioritization")
                    try self.setPrioritization(try r.read(String.self))
                },
                DBusProperty(P.activeDownloads.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.core.activeCount + self.core.yieldedCount))
                },
                DBusProperty(P.queuedDownloads.rawValue, "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.core.queuedCount))
                },
                DBusProperty(
                    P.diskCapacity.rawValue, "t",
                    get: { [unowned self] w, _ in w.append(self.disk?.capacity ?? DiskCache.defaultCapacity) }
                ) { [unowned self] r, _, sender in
                    try self.context.requireHost(sender, toSet: "DiskCapacity")
                    try self.setDiskCapacity(try r.read(UInt64.self))
                },
                DBusProperty(P.diskUsage.rawValue, "t", emitsChanged: .false) { [unowned self] w, _ in
                    self.disk?.start()
                    w.append(self.disk?.usage ?? 0)
                },
                DBusProperty(P.diskError.rawValue, "s", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.diskError)
                },
                DBusProperty(P.proxy.rawValue, "s", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.proxyInUse)
                },
                DBusProperty(P.deferred.rawValue, "a{sv}", emitsChanged: .invalidates) { [unowned self] w, _ in
                    typealias Key = DownloaderMember.DeferredKey
                    let (metered, powerSaver) = self.conditions.holdReasons
                    var out: [String: DBusValue] = [:]
                    if metered { out[Key.metered.rawValue] = .bool(true) }
                    if powerSaver { out[Key.powerSaver.rawValue] = .bool(true) }
                    if metered || powerSaver {
                        out[Key.held.rawValue] = .uint32(UInt32(clamping: self.core.heldCount))
                        out[Key.prefetch.rawValue] = .uint32(UInt32(clamping: self.prefetching.waitingCount))
                    }
                    try w.appendVardict(out)
                },
            ],
            signals: [
                DBusSignal(
                    DownloaderMember.Signal.downloadFinished.rawValue,
                    [
                        DBusArgument("receipt", "s"), DBusArgument("url", "s"), DBusArgument("ok", "b"),
                        DBusArgument("error_name", "s"), DBusArgument("error_message", "s"),
                    ]),
                DBusSignal(
                    DownloaderMember.Signal.prefetchFinished.rawValue,
                    [
                        DBusArgument("receipt", "s"), DBusArgument("stored", "u"), DBusArgument("failed", "u"),
                    ]),
            ]
        )
    }

    // MARK: handlers

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
        let reply = context.replyLater(call.message) { (answer: PixelPipeline.Answer, w) in
            try Self.write(answer, to: &w)
        }
        guard let answer = try fetchPixels(url: url, options: options, owner: call.sender, reply: reply) else {
            return call.deferReply()
        }
        try Self.write(answer, to: &call.reply)
    }

    /// FetchPixels' (h pixels, a{sv} info): a read-only open of the decoded pixels' sealed memfd
    /// for this caller (its own file offset; the same memory for every caller).
    static func write(_ answer: PixelPipeline.Answer, to w: inout MessageWriter) throws {
        guard let fd = SealedMemory.openForClient(answer.pixels.fd, count: answer.pixels.byteCount) else {
            throw NetActivityError.failed("Could not share the pixels: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try w.appendFD(fd)
        typealias Info = DownloaderMember.FetchPixelsInfo
        var info: [String: DBusValue] = [
            Info.width.rawValue: .uint32(answer.pixels.width), Info.height.rawValue: .uint32(answer.pixels.height),
            Info.stride.rawValue: .uint32(answer.pixels.stride),
            Info.format.rawValue: .string(DownloaderMember.FetchPixelsFormat.b8g8r8a8Premultiplied.rawValue),
            Info.originalWidth.rawValue: .uint32(answer.pixels.originalWidth),
            Info.originalHeight.rawValue: .uint32(answer.pixels.originalHeight),
            Info.source.rawValue: .string(answer.source.rawValue),
            Info.contentType.rawValue: .string(answer.contentType),
        ]
        if answer.httpStatus != 0 { info[Info.httpStatus.rawValue] = .uint32(answer.httpStatus) }
        try w.appendVardict(info)
    }

    /// FetchImage's (h image, t size, a{sv} info): the body's sealed memfd, opened read-only for
    /// the caller (the same memory as the cache's when it is one, else a new one).
    static func write(_ answer: Answer, to w: inout MessageWriter) throws {
        let fd: Int32? =
            if let body = answer.body as? ImageBody { body.openReadOnly() } else {
                answer.body.withUnsafeBytes { SealedMemory.make(name: "netactivity-image", bytes: $0) }
            }
        guard let fd else {
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
        disk.removeImages(where: matches) { [unowned self] fromDisk in
            removing.remove(app)
            let count = Set(fromMemory).union(fromDisk).count
            try? self.context.server.respond(to: message) { w in w.append(UInt32(clamping: count)) }
        }
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
