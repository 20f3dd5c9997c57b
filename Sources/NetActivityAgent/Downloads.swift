import DBusKit
import Glibc
import NetActivityCore

/// The shared image downloader on the bus: `ImageDownloader` (the pure queue and coalescing)
/// with `HTTPFetcher` as its transport and the image cache as its store. Each transfer is a task
/// object owned by the agent, suspended while queued and running while it downloads, so a running
/// download is the agent's own activity and a queued one is not. The HTTP side starts on the
/// first download, so an agent that never downloads never loads it.
final class Downloads: ImageDownloader.Observer {
    unowned let agent: Agent
    private var transferTasks: [UInt64: TaskEntry] = [:]
    private var pendingByOwner: [String: Int] = [:]

    init(agent: Agent) { self.agent = agent }

    private lazy var fetcher = HTTPFetcher(loop: agent.loop, limits: .init(maxBytes: maxBodyBytes))

    /// An image must fit in the cache, and a bus message in any case.
    private var maxBodyBytes: Int { Int(min(agent.imageCache.memoryCapacity, 128 << 20)) }

    lazy var core: ImageDownloader = {
        let d = ImageDownloader(
            isCached: { [unowned self] key in self.agent.imageCache.peek(key) != nil },
            store: { [unowned self] key, fetched in self.store(key, fetched) },
            fetch: { [unowned self] request, progress, completion in self.fetch(request, progress, completion) })
        d.observer = self
        return d
    }()

    /// The disk tier (nil when there is no cache directory to use).
    lazy var disk: DiskCache? = DiskCache.defaultDirectory().map { DiskCache(directory: $0, logger: agent.logger) }

    static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Disk first (unless reloading): a fresh entry answers without the network, a stale one is
    /// revalidated with its ETag/Last-Modified; a 200 is written back when HTTP caching allows.
    private func fetch(
        _ request: ImageDownloader.Request, _ progress: @escaping (UInt64, UInt64) -> Void,
        _ completion: @escaping (Result<ImageDownloader.Fetched, ImageDownloader.Failure>) -> Void
    ) -> () -> Void {
        var stale: DiskEntry?
        var conditional: [(String, String)] = []
        if !request.reload, let entry = disk?.read(key: request.key) {
            switch HTTPCachePolicy.decide(entry.info, now: Self.wallClock()) {
            case .fresh:
                // Answered on the next turn of the loop (never inside the downloader's own call).
                let timer = agent.loop.schedule(afterNanoseconds: 0) {
                    completion(.success(ImageDownloader.Fetched(bytes: entry.body)))
                }
                return { [weak self] in self?.agent.loop.cancel(timer) }
            case .revalidate(let headers):
                stale = entry
                conditional = headers
            case .refetch:
                break
            }
        }
        fetcher.limits.maxBytes = maxBodyBytes
        return fetcher.fetch(url: request.url, headers: conditional, progress: progress) { [weak self] result in
            completion(result.flatMap { response in
                if response.status == 304, var entry = stale {
                    entry.info = HTTPCachePolicy.refreshed(entry.info, notModified: response.headers, now: Self.wallClock())
                    self?.disk?.write(entry)
                    return .success(ImageDownloader.Fetched(bytes: entry.body))
                }
                guard response.status == 200 else {
                    return .failure(.failed(name: "HTTP", message: "HTTP \(response.status) for \(request.url)"))
                }
                if let info = HTTPCachePolicy.store(status: 200, headers: response.headers, now: Self.wallClock()) {
                    if response.body.withUnsafeBytes({ ImageInfo.sniff($0) }) != nil {
                        self?.disk?.write(DiskEntry(key: request.key, info: info, body: response.body))
                    }
                } else {
                    self?.disk?.remove(key: request.key)  // no-store: keep no copy, not even an old one
                }
                return .success(ImageDownloader.Fetched(bytes: response.body))
            })
        }
    }

    private func store(_ key: String, _ fetched: ImageDownloader.Fetched) -> Result<Void, ImageDownloader.Failure> {
        let capacity = agent.imageCache.memoryCapacity
        guard UInt64(fetched.bytes.count) <= capacity else {
            return .failure(.failed(name: "TooLarge", message: "The image is \(fetched.bytes.count) bytes; the cache holds at most \(capacity)"))
        }
        return fetched.bytes.withUnsafeBytes { data in
            guard let info = ImageInfo.sniff(data) else {
                return .failure(.failed(name: "NotAnImage", message: "The \(data.count) bytes received are not an image of a known format"))
            }
            _ = try? agent.imageCache.add(CachedImage(info: info, data: data), cost: UInt64(data.count), for: key)
            return .success(())
        }
    }

    // MARK: requests

    func download(url: String, options: [String: DBusValue], owner: String) throws -> (receipt: String, task: String, cached: Bool) {
        try Self.checkURL(url)
        for (key, value) in options {
            let expected = ["additional-identifier": "s", "reload": "b"][key]
            guard let expected else {
                throw DBusError.invalidArgs("Unknown DownloadImage option '\(key)'; known options: additional-identifier, reload")
            }
            guard value.signature == expected else {
                throw DBusError.invalidArgs("DownloadImage option '\(key)' must have type '\(expected)', got '\(value.signature)'")
            }
        }
        let additional = options["additional-identifier"]?.stringValue ?? ""
        guard additional.utf8.count <= AgentLimits.maxImageKeyBytes else {
            throw DBusError.invalidArgs("additional-identifier is \(additional.utf8.count) bytes long; the limit is \(AgentLimits.maxImageKeyBytes)")
        }
        let pending = pendingByOwner[owner] ?? 0
        guard pending < AgentLimits.maxPendingDownloadsPerClient else {
            throw DBusError.limitsExceeded("Client \(owner) already waits for \(pending) downloads, the most one client may")
        }
        let key = ImageRequestKey.make(url: url, additional: additional)
        var receipt = ""
        let ticket = core.download(url: url, key: key, owner: owner, reload: options["reload"]?.boolValue ?? false) {
            [unowned self] result in
            self.finished(receipt: receipt, url: url, owner: owner, result)
        }
        switch ticket {
        case .cached:
            return ("", "/", true)
        case .receipt(let r, let transfer):
            receipt = r
            pendingByOwner[owner, default: 0] += 1
            return (r, transferTasks[transfer]?.path ?? "/", false)
        }
    }

    /// DownloadFinished goes to the requester only (a unicast signal).
    private func finished(receipt: String, url: String, owner: String, _ result: Result<Void, ImageDownloader.Failure>) {
        release(owner)
        let (ok, name, message): (Bool, String, String) = switch result {
        case .success: (true, "", "")
        case .failure(.cancelled): (false, NetActivityNames.errorPrefix + "Cancelled", "The download was cancelled")
        case .failure(.failed(let n, let m)): (false, NetActivityNames.errorPrefix + n, m)
        }
        if !ok, name != NetActivityNames.errorPrefix + "Cancelled" {
            for case let notifier as ActivityNotifier in agent.desktopObservers { notifier.downloadFailed(url: url, error: message) }
        }
        agent.connection.emitSignal(
            path: NetActivityNames.objectPath, interface: NetActivityNames.downloaderInterface, member: "DownloadFinished",
            destination: owner
        ) { w in
            w.append(receipt)
            w.append(url)
            w.append(ok)
            w.append(name)
            w.append(message)
        }
    }

    private func release(_ owner: String) {
        guard let n = pendingByOwner[owner] else { return }
        pendingByOwner[owner] = n > 1 ? n - 1 : nil
    }

    func cancel(receipt: String, by caller: String) throws -> Bool {
        guard let owner = core.owner(of: receipt) else { return false }
        guard owner == caller else {
            throw DBusError.accessDenied("Only the owner of receipt \(receipt) (\(owner)) may cancel it; the caller is \(caller)")
        }
        return core.cancel(receipt: receipt)
    }

    func ownerVanished(_ owner: String) {
        guard pendingByOwner.removeValue(forKey: owner) != nil else { return }
        core.ownerVanished(owner)
    }

    /// http or https, with a host, no spaces or control characters, at most 4096 bytes.
    static func checkURL(_ url: String) throws {
        func refuse(_ why: String) -> DBusError {
            DBusError(name: NetActivityNames.errorPrefix + "InvalidURL", message: "'\(url.prefix(200))' \(why)")
        }
        guard url.utf8.count <= AgentLimits.maxImageKeyBytes else { throw refuse("is longer than \(AgentLimits.maxImageKeyBytes) bytes") }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw refuse("contains spaces or control characters") }
        let lower = url.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") { rest = url.dropFirst(7) } else if lower.hasPrefix("https://") { rest = url.dropFirst(8) } else {
            throw refuse("is not an http or https URL")
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last.map { $0.hasPrefix("[") ? $0 : $0.split(separator: ":").first ?? "" } ?? ""
        guard !host.isEmpty else { throw refuse("has no host") }
    }

    // MARK: ImageDownloader.Observer: one task object per transfer

    func transferQueued(_ transfer: UInt64, url: String) {
        transferTasks[transfer] = agent.createTask(
            owner: agent.connection.uniqueName, description: "Download \(url.prefix(AgentLimits.maxDescriptionBytes - 9))",
            state: .suspended)
    }

    func transferStarted(_ transfer: UInt64, url: String) {
        guard let entry = transferTasks[transfer] else { return }
        agent.apply(entry.record.resume(), to: entry)
    }

    func transferProgress(_ transfer: UInt64, received: UInt64, expected: UInt64) {
        guard let entry = transferTasks[transfer] else { return }
        let next = TaskProgress(received: received, expectedToReceive: max(expected, received))
        if (try? entry.record.setProgress(next)) == true { agent.progressChanged(entry) }
    }

    func transferEnded(_ transfer: UInt64, outcome: Result<Void, ImageDownloader.Failure>) {
        guard let entry = transferTasks.removeValue(forKey: transfer) else { return }
        let error: String = switch outcome {
        case .success: ""
        case .failure(.cancelled): NetActivityNames.errorPrefix + "Cancelled"
        case .failure(.failed(let name, let message)): NetActivityNames.errorPrefix + name + ": " + message
        }
        agent.apply(entry.record.complete(error: String(error.prefix(AgentLimits.maxTaskErrorBytes))), to: entry)
    }
}

extension Agent {
    /// `org.example.NetActivity.Downloader` (dbus/org.example.NetActivity.Downloader.xml).
    func makeDownloaderInterface() -> DBusInterface {
        DBusInterface(
            NetActivityNames.downloaderInterface,
            methods: [
                DBusMethod(
                    "DownloadImage", in: [DBusArgument("url", "s"), DBusArgument("options", "a{sv}")],
                    out: [DBusArgument("receipt", "s"), DBusArgument("task", "o"), DBusArgument("cached", "b")]
                ) { [unowned self] call in
                    let url = try call.args.read(String.self)
                    let options = try call.args.readVardict()
                    let answer = try self.downloads.download(url: url, options: options, owner: call.sender)
                    call.reply.append(answer.receipt)
                    try call.reply.appendObjectPath(answer.task)
                    call.reply.append(answer.cached)
                },
                DBusMethod("CancelDownload", in: [DBusArgument("receipt", "s")], out: [DBusArgument("cancelled", "b")]) {
                    [unowned self] call in
                    call.reply.append(try self.downloads.cancel(receipt: try call.args.read(String.self), by: call.sender))
                },
            ],
            properties: [
                DBusProperty("Version", "u", emitsChanged: .const) { w, _ in w.append(NetActivityNames.version) },
                DBusProperty(
                    "MaximumActiveDownloads", "u", get: { [unowned self] w, _ in w.append(UInt32(self.downloads.core.maximumActiveDownloads)) }
                ) { [unowned self] r, _, _ in
                    let n = try r.read(UInt32.self)
                    guard (1...64).contains(n) else { throw DBusError.invalidArgs("MaximumActiveDownloads must be between 1 and 64, got \(n)") }
                    guard Int(n) != self.downloads.core.maximumActiveDownloads else { return }
                    self.downloads.core.maximumActiveDownloads = Int(n)
                    self.server.emitPropertiesChanged(
                        path: NetActivityNames.objectPath, interface: NetActivityNames.downloaderInterface, changed: ["MaximumActiveDownloads"])
                },
                DBusProperty(
                    "DownloadPrioritization", "s", get: { [unowned self] w, _ in w.append(self.downloads.core.prioritization.rawValue) }
                ) { [unowned self] r, _, _ in
                    let value = try r.read(String.self)
                    guard let order = ImageDownloader.Prioritization(rawValue: value) else {
                        throw DBusError.invalidArgs("DownloadPrioritization must be 'fifo' or 'lifo', got '\(value.prefix(100))'")
                    }
                    guard order != self.downloads.core.prioritization else { return }
                    self.downloads.core.prioritization = order
                    self.server.emitPropertiesChanged(
                        path: NetActivityNames.objectPath, interface: NetActivityNames.downloaderInterface, changed: ["DownloadPrioritization"])
                },
                DBusProperty("ActiveDownloads", "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.downloads.core.activeCount))
                },
                DBusProperty("QueuedDownloads", "u", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(UInt32(self.downloads.core.queuedCount))
                },
                DBusProperty(
                    "DiskCapacity", "t",
                    get: { [unowned self] w, _ in w.append(self.downloads.disk?.capacity ?? DiskCache.defaultCapacity) }
                ) { [unowned self] r, _, _ in
                    let bytes = try r.read(UInt64.self)
                    guard bytes <= AgentLimits.maxCacheCapacity else {
                        throw DBusError.invalidArgs("DiskCapacity \(bytes) is above the limit of \(AgentLimits.maxCacheCapacity) bytes")
                    }
                    guard let disk = self.downloads.disk, bytes != disk.capacity else { return }
                    disk.setCapacity(bytes)
                    self.server.emitPropertiesChanged(
                        path: NetActivityNames.objectPath, interface: NetActivityNames.downloaderInterface, changed: ["DiskCapacity"])
                },
                DBusProperty("DiskUsage", "t", emitsChanged: .false) { [unowned self] w, _ in
                    w.append(self.downloads.disk?.usage ?? 0)
                },
                DBusProperty("DiskError", "s", emitsChanged: .false) { [unowned self] w, _ in
                    guard let disk = self.downloads.disk else { return w.append("no cache directory: neither XDG_CACHE_HOME nor HOME is set") }
                    _ = disk.usage  // the directory is checked on first use
                    w.append(disk.lastError)
                },
            ],
            signals: [DBusSignal("DownloadFinished", [
                DBusArgument("receipt", "s"), DBusArgument("url", "s"), DBusArgument("ok", "b"),
                DBusArgument("error_name", "s"), DBusArgument("error_message", "s"),
            ])]
        )
    }
}
