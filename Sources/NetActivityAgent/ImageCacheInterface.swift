import DBusKit
import Glibc
import NetActivityCore

extension Agent {
    /// `org.example.NetActivity.ImageCache` (documented in dbus/org.example.NetActivity.ImageCache.xml).
    func makeImageCacheInterface() -> DBusInterface {
        let dataArg = DBusArgument("data", "ay")
        let urlArgs = [DBusArgument("url", "s"), DBusArgument("additional_identifier", "s")]
        return DBusInterface(
            NetActivityNames.imageCacheInterface,
            methods: [
                DBusMethod("AddImage", in: [DBusArgument("identifier", "s"), dataArg]) { [unowned self] call in
                    let key = try Self.identifier(try call.args.read(String.self))
                    try self.addImage(key: key, call: &call)
                },
                DBusMethod("AddImageForRequest", in: urlArgs + [dataArg]) { [unowned self] call in
                    let key = try Self.requestKey(&call.args)
                    try self.addImage(key: key, call: &call)
                },
                DBusMethod("LookupImage", in: [DBusArgument("identifier", "s")], out: [DBusArgument("found", "b"), dataArg]) {
                    [unowned self] call in
                    try self.lookupImage(key: try Self.identifier(try call.args.read(String.self)), reply: &call.reply)
                },
                DBusMethod("LookupImageForRequest", in: urlArgs, out: [DBusArgument("found", "b"), dataArg]) {
                    [unowned self] call in
                    try self.lookupImage(key: try Self.requestKey(&call.args), reply: &call.reply)
                },
                DBusMethod(
                    "OpenImage", in: [DBusArgument("identifier", "s")], out: [DBusArgument("fd", "h"), DBusArgument("size", "t")]
                ) { [unowned self] call in
                    let key = try Self.identifier(try call.args.read(String.self))
                    guard let image = self.imageCache.image(for: key) else {
                        throw DBusError(name: NetActivityNames.errorPrefix + "NotFound", message: "No image '\(key)' in the cache")
                    }
                    guard let fd = image.openReadOnly() else {
                        throw DBusError.failed("Could not share the image: \(String(cString: strerror(errno)))")
                    }
                    defer { close(fd) }
                    try call.reply.appendFD(fd)
                    call.reply.append(UInt64(image.size))
                },
                DBusMethod("RemoveImage", in: [DBusArgument("identifier", "s")], out: [DBusArgument("removed", "b")]) {
                    [unowned self] call in
                    let key = try Self.identifier(try call.args.read(String.self))
                    call.reply.append(self.imageCache.remove(key) != nil)
                },
                DBusMethod("RemoveImageForRequest", in: urlArgs, out: [DBusArgument("removed", "b")]) { [unowned self] call in
                    let key = try Self.requestKey(&call.args)
                    call.reply.append(self.imageCache.remove(key) != nil)
                },
                DBusMethod("RemoveAllImages", out: [DBusArgument("removed", "b")]) { [unowned self] call in
                    call.reply.append(!self.imageCache.removeAll().isEmpty)
                },
            ],
            properties: [
                DBusProperty("Version", "u", emitsChanged: .const) { w, _ in w.append(NetActivityNames.version) },
                DBusProperty("MemoryCapacity", "t", get: { [unowned self] w, _ in w.append(self.imageCache.memoryCapacity) }) {
                    [unowned self] r, _, _ in
                    try self.setCacheLimits(capacity: try r.read(UInt64.self), preferred: self.imageCache.preferredMemoryUsageAfterPurge)
                },
                DBusProperty(
                    "PreferredMemoryUsageAfterPurge", "t",
                    get: { [unowned self] w, _ in w.append(self.imageCache.preferredMemoryUsageAfterPurge) }
                ) { [unowned self] r, _, _ in
                    try self.setCacheLimits(capacity: self.imageCache.memoryCapacity, preferred: try r.read(UInt64.self))
                },
                // These change on every call; read them when needed (no change signal).
                DBusProperty("MemoryUsage", "t", emitsChanged: .false) { [unowned self] w, _ in w.append(self.imageCache.memoryUsage) },
                DBusProperty("ImageCount", "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(clamping: self.imageCache.count))
                },
                DBusProperty("Statistics", "a{st}", emitsChanged: .false) { [unowned self] w, _ in
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

    static func identifier(_ s: String, what: String = "Identifier") throws -> String {
        guard !s.isEmpty else { throw DBusError.invalidArgs("\(what) must not be empty") }
        guard s.utf8.count <= AgentLimits.maxImageKeyBytes else {
            throw DBusError.invalidArgs("\(what) is \(s.utf8.count) bytes long; the limit is \(AgentLimits.maxImageKeyBytes)")
        }
        return s
    }

    /// (url, additional) -> the unambiguous request key (NetActivityCore.ImageRequestKey).
    static func requestKey(_ r: inout MessageReader) throws -> String {
        let url = try identifier(try r.read(String.self), what: "URL")
        let additional = try r.read(String.self)
        guard additional.utf8.count <= AgentLimits.maxImageKeyBytes else {
            throw DBusError.invalidArgs(
                "Additional identifier is \(additional.utf8.count) bytes long; the limit is \(AgentLimits.maxImageKeyBytes)")
        }
        return ImageRequestKey.make(url: url, additional: additional)
    }

    private func addImage(key: String, call: inout MethodCall) throws {
        let capacity = imageCache.memoryCapacity
        let image = try call.args.withBytes { data throws(DBusError) -> CachedImage in
            guard UInt64(data.count) <= capacity else {
                throw DBusError(
                    name: NetActivityNames.errorPrefix + "TooLarge",
                    message: "The image is \(data.count) bytes; the cache holds at most \(capacity) (MemoryCapacity)")
            }
            guard let info = ImageInfo.sniff(data) else {
                throw DBusError(
                    name: NetActivityNames.errorPrefix + "NotAnImage",
                    message: "The \(data.count) bytes for '\(Self.printable(key))' are not a PNG, JPEG, GIF, WebP, BMP, ICO or SVG image (or its header is damaged)")
            }
            return CachedImage(info: info, data: data)
        }
        // Cannot throw: the size was checked against the capacity above.
        _ = try? imageCache.add(image, cost: UInt64(image.size), for: key)
        logger.trace("Cached \(image.info.format.rawValue) \(image.info.width ?? 0)x\(image.info.height ?? 0), \(image.size) bytes")
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
        guard capacity <= AgentLimits.maxCacheCapacity else {
            throw DBusError.invalidArgs("MemoryCapacity \(capacity) is above the limit of \(AgentLimits.maxCacheCapacity) bytes")
        }
        let oldCapacity = imageCache.memoryCapacity, oldPreferred = imageCache.preferredMemoryUsageAfterPurge
        do {
            _ = try imageCache.setLimits(capacity: capacity, preferred: preferred)
        } catch {
            throw DBusError.invalidArgs(
                "PreferredMemoryUsageAfterPurge (\(preferred)) must not be above MemoryCapacity (\(capacity)); lower the preferred usage first, or raise the capacity first")
        }
        var changed: [String] = []
        if capacity != oldCapacity { changed.append("MemoryCapacity") }
        if preferred != oldPreferred { changed.append("PreferredMemoryUsageAfterPurge") }
        server.emitPropertiesChanged(path: NetActivityNames.objectPath, interface: NetActivityNames.imageCacheInterface, changed: changed)
    }

    /// A key for a message: a request key's NUL shown as " + ".
    static func printable(_ key: String) -> String {
        key.replacing("\u{0}", with: " + ")
    }

    /// Memory pressure from PSI or LowMemoryMonitor.
    func memoryPressure(critical: Bool, source: String) {
        let before = imageCache.memoryUsage
        let evicted = imageCache.trim(critical: critical)
        logger.notice(
            "Memory pressure (\(critical ? "critical" : "moderate"), \(source)): evicted \(evicted.count) images, freed \(before - imageCache.memoryUsage) bytes")
    }
}
