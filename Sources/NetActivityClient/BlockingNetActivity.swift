// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Dispatch
import Glibc
import LinuxKit
import NetActivityContract
import Synchronization

/// The blocking face of the client library, for command-line tools (the `netactivity` CLI).
///
/// It runs on the same core as `NetActivity` (one thread of the library's own, the same
/// connection handling, the same decoding and the same followers of the status and the task
/// list); each method waits for its answer on the caller's thread. Unlike `NetActivity`, which
/// keeps an app's holdings locally and never fails, every call here is one request to the
/// agent's well-known name (which starts an activatable agent) and reports the agent's own
/// answer: a tool must say when something did not happen. `init` fails when there is no bus.
/// It has no leases: a tool that holds activity while it works (as `netactivity run` does) uses
/// `NetActivity`, whose `NetActivityLease` is the one lease type.
public final class BlockingNetActivity {
    static let busName = NetActivityBus.name
    static let path = NetActivityBus.objectPath
    static let interface = NetActivityInterface.activity.rawValue
    static let taskInterface = NetActivityInterface.task.rawValue
    static let cacheInterface = NetActivityInterface.imageCache.rawValue

    let core = ClientCore()

    /// Connects to the session bus, or to `address`.
    public init(address: String? = nil) throws(NetActivityError) {
        let answer = Answer<Void>()
        core.start(address: address) { answer.put($0) }
        if case .failure(let e) = answer.wait() {
            close()
            throw e
        }
    }

    deinit { close() }

    private func close() {
        core.mailbox.post { [core] in core.shutDown() }
    }

    /// This connection's unique bus name (the key the agent counts under).
    public var uniqueName: String { core.uniqueName }

    /// Runs `body` on the client's thread and waits for its answer.
    private func wait<T>(_ body: @escaping (ClientCore, @escaping (Result<T, NetActivityError>) -> Void) -> Void)
        throws(NetActivityError) -> T
    {
        let answer = Answer<T>()
        // The caller waits until `body` has answered: nothing it captured is used on two threads at once.
        let job = UncheckedSendable { [core] in body(core) { answer.put($0) } }
        let posted = core.mailbox.post { job.value() }
        guard posted else { throw ClientCore.closedError }
        return try answer.wait().get()
    }

    /// One call to the agent's well-known name, its reply decoded on the client's thread.
    private func call<T>(
        _ member: String, interface: String = BlockingNetActivity.interface, path: String = BlockingNetActivity.path,
        _ body: @escaping (inout MessageWriter) throws -> Void = { _ in },
        decode: @escaping (inout MessageReader) throws(DBusError) -> T
    ) throws(NetActivityError) -> T {
        try wait { core, done in
            core.request(
                member, path: path, interface: interface, destination: Self.busName, body, decode: decode, done)
        }
    }

    private func call(
        _ member: String, interface: String = BlockingNetActivity.interface, path: String = BlockingNetActivity.path,
        _ body: @escaping (inout MessageWriter) throws -> Void = { _ in }
    ) throws(NetActivityError) {
        try call(member, interface: interface, path: path, body) { _ throws(DBusError) in }
    }

    public func incrementActivityCount() throws(NetActivityError) {
        try call(ActivityMember.Method.incrementActivityCount.rawValue)
    }

    public func decrementActivityCount() throws(NetActivityError) {
        try call(ActivityMember.Method.decrementActivityCount.rawValue)
    }

    /// Every property of the agent.
    public func status() throws(NetActivityError) -> ActivityStatus {
        try wait { core, done in core.statusMirror.current(destination: Self.busName, done) }
    }

    /// What an app holds of one of the agent's budgets (the `Accounts` method).
    public struct AccountRow: Equatable, Sendable {
        public var app: String
        /// The budget (`ActivityMember.Resource`: leases, tasks, downloads, images...).
        public var resource: String
        public var held: UInt64
        /// The app's share now: the budget divided by the apps holding any.
        public var share: UInt64
        /// Past this total, apps are held to their shares.
        public var budget: UInt64
        /// What no total passes.
        public var limit: UInt64
    }

    /// What `app` holds of every budget the agent keeps for apps, or ("") what every app holding
    /// anything holds; a host app's to read (a sandboxed one gets AccessDenied).
    public func accounts(of app: String = "") throws(NetActivityError) -> [AccountRow] {
        try call(ActivityMember.Method.accounts.rawValue, { w in w.append(app) }) { r throws(DBusError) in
            var array = try r.enterArray()
            var rows: [AccountRow] = []
            while !array.isAtEnd() {
                var s = try array.enterStruct()
                rows.append(
                    AccountRow(
                        app: try s.read(), resource: try s.read(), held: try s.read(), share: try s.read(),
                        budget: try s.read(), limit: try s.read()))
            }
            return rows
        }
    }

    /// The proxy the agent's latest download request went through: scheme://host:port,
    /// "direct", or "" before the first (the Downloader's Proxy property).
    public func proxy() throws(NetActivityError) -> String {
        try call("Get", interface: "org.freedesktop.DBus.Properties") { w in
            w.append(NetActivityInterface.downloader.rawValue)
            w.append(DownloaderMember.Property.proxy.rawValue)
        } decode: { r throws(DBusError) in
            var (_, inner) = try r.enterVariant()
            return (try? inner.read(String.self)) ?? ""
        }
    }

    public func setEnabled(_ enabled: Bool) throws(NetActivityError) {
        try setProperty(ActivityMember.Property.enabled.rawValue, .bool(enabled))
    }

    public func setActivationDelay(seconds: Double) throws(NetActivityError) {
        try setProperty(ActivityMember.Property.activationDelay.rawValue, .double(seconds))
    }

    public func setCompletionDelay(seconds: Double) throws(NetActivityError) {
        try setProperty(ActivityMember.Property.completionDelay.rawValue, .double(seconds))
    }

    func setProperty(_ name: String, _ value: DBusValue) throws(NetActivityError) {
        try call("Set", interface: "org.freedesktop.DBus.Properties") { w in
            w.append(Self.interface)
            w.append(name)
            try w.append(.variant(value))
        }
    }

    /// The pid of a bus client (for tools that act on other clients).
    public func processID(of busName: String) throws(NetActivityError) -> UInt32 {
        try wait { core, done in
            core.request(
                "GetConnectionUnixProcessID", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                destination: "org.freedesktop.DBus", { w in w.append(busName) },
                decode: { r throws(DBusError) in try r.read(UInt32.self) },
                done)
        }
    }

    /// The process name of a bus client ("" when it has left or cannot be read).
    public func processName(of busName: String) -> String {
        (try? processID(of: busName)).map { ServiceProcess.processName(pid: $0) } ?? ""
    }

    /// Follows the agent: calls `onChange` with the current status at once, then after every
    /// change, and with nil while the agent is not on the bus (or the bus is away: the client
    /// reconnects when it comes back). No polling: it sleeps until a signal arrives. Returns when
    /// `onChange` returns false.
    public func watch(_ onChange: @escaping (ActivityStatus?) -> Bool) throws(NetActivityError) {
        let inbox = Inbox<ActivityStatus?>()
        let key = try wait { core, done in
            done(.success(core.statusMirror.observe(Observer(yield: inbox.put, finish: inbox.end))))
        }
        while let status = inbox.take(), onChange(status) {}
        core.mailbox.post { [core] in core.statusMirror.unobserve(key) }
    }

    // MARK: tasks

    /// Every task the agent holds (live and recently completed), ordered by task number.
    public func tasks() throws(NetActivityError) -> [TaskSnapshot] {
        try wait { core, done in TaskListFollowers.taskList(core, destination: Self.busName, done) }
    }

    /// Follows every task: `added` for each one there now, then one event per change, with
    /// `removed` when a task leaves (or the agent stops). Survives agent restarts. No polling.
    /// Returns when `onEvent` returns false.
    public func watchTasks(_ onEvent: @escaping (TaskEvent) -> Bool) throws(NetActivityError) {
        let inbox = Inbox<TaskEvent>()
        let key = try wait { core, done in
            done(.success(core.taskListFollowers.watch(Observer(yield: inbox.put, finish: inbox.end))))
        }
        while let event = inbox.take(), onEvent(event) {}
        core.mailbox.post { [core] in core.taskListFollowers.unwatch(key) }
    }

    // MARK: image cache

    /// Stores `data` (an image) under `identifier` in the shared cache (above 1 MiB, as a sealed memfd).
    public func addImage(_ data: [UInt8], identifier: String) throws(NetActivityError) {
        let add = ClientDownloads.addImageCall(data, forRequest: false) { w in w.append(identifier) }
        try call(add.member, interface: Self.cacheInterface, add.body)
    }

    /// The image as a sealed read-only memfd (close it when done) and its size; nil on a miss.
    public func openImage(identifier: String) throws(NetActivityError) -> (fd: Int32, size: UInt64)? {
        do {
            return try call(
                ImageCacheMember.Method.openImage.rawValue, interface: Self.cacheInterface,
                { w in w.append(identifier) }
            ) {
                r throws(DBusError) in (try r.readFD(), (try? r.read(UInt64.self)) ?? 0)
            }
        } catch  where error.code == .notFound {
            return nil
        }
    }

    /// Whether an image was removed.
    public func removeImage(identifier: String) throws(NetActivityError) -> Bool {
        try call(
            ImageCacheMember.Method.removeImage.rawValue, interface: Self.cacheInterface, { w in w.append(identifier) }
        ) {
            r throws(DBusError) in try r.read(Bool.self)
        }
    }

    /// Whether the cache held anything.
    public func removeAllImages() throws(NetActivityError) -> Bool {
        try call(ImageCacheMember.Method.removeAllImages.rawValue, interface: Self.cacheInterface) {
            r throws(DBusError) in
            try r.read(Bool.self)
        }
    }

    /// The cache's properties: "MemoryCapacity", "PreferredMemoryUsageAfterPurge", "MemoryUsage",
    /// "ImageCount", and the "Statistics" counters by name.
    public func cacheStatus() throws(NetActivityError) -> (properties: [String: UInt64], statistics: [(String, UInt64)])
    {
        let report = try cacheReport()
        return (report.properties, report.statistics)
    }

    /// Both tiers of the cache, in one call: the encoded images' and the decoded pixels'.
    public struct CacheReport: Sendable {
        /// The numeric properties by name: "MemoryCapacity", "MemoryUsage", "ImageCount",
        /// "DecodedMemoryCapacity", "DecodedMemoryUsage", and the others.
        public var properties: [String: UInt64]
        /// The "Statistics" counters (the encoded images), by name, in the agent's order.
        public var statistics: [(String, UInt64)]
        /// The "DecodedStatistics" counters (the decoded pixels: hits, decodes, shared decodes,
        /// decoders started and replaced...), by name, in the agent's order.
        public var decodedStatistics: [(String, UInt64)]
    }

    /// The cache's properties and both tiers' counters (see ``CacheReport``).
    public func cacheReport() throws(NetActivityError) -> CacheReport {
        let all = try call(
            "GetAll", interface: "org.freedesktop.DBus.Properties", { w in w.append(Self.cacheInterface) }
        ) {
            r throws(DBusError) in try r.readVardict()
        }
        var properties: [String: UInt64] = [:]
        for (k, v) in all {
            if let n = v.uint64Value { properties[k] = n } else if let n = v.uint32Value { properties[k] = UInt64(n) }
        }
        func counters(_ name: ImageCacheMember.Property) -> [(String, UInt64)] {
            guard case .dict(_, _, let entries)? = all[name.rawValue] else { return [] }
            return entries.compactMap { k, v in k.stringValue.flatMap { name in v.uint64Value.map { (name, $0) } } }
        }
        return CacheReport(
            properties: properties, statistics: counters(.statistics), decodedStatistics: counters(.decodedStatistics))
    }

    /// The cached image for (url, additional identifier) as bytes, or nil.
    public func cachedImage(url: String, additionalIdentifier: String = "") throws(NetActivityError) -> [UInt8]? {
        try call(
            ImageCacheMember.Method.lookupImageForRequest.rawValue, interface: Self.cacheInterface,
            { w in
                w.append(url)
                w.append(additionalIdentifier)
            }, decode: ClientDownloads.decodeLookup)
    }

    // MARK: tasks of this connection

    /// Begins a task owned by this connection and returns its object path. It runs until
    /// `completeTask` or until this connection closes (then it completes with `ClientVanished`).
    public func beginTask(_ description: String, desktopID: String? = nil) throws(NetActivityError) -> String {
        try call(
            ActivityMember.Method.beginTask.rawValue,
            { w in
                w.append(description)
                var options: [String: DBusValue] = [:]
                if let desktopID { options[ActivityMember.BeginTaskOption.desktopID.rawValue] = .string(desktopID) }
                try w.appendVardict(options)
            }
        ) { r throws(DBusError) in try r.readObjectPath() }
    }

    /// Asks the owner of the task at `task` to cancel it (`RequestCancel`): a panel's Cancel.
    /// `NetActivityError.Code.other` with the name `org.example.NetActivity.Error.NotSupported`
    /// when the task does not offer it.
    public func requestCancel(task: String) throws(NetActivityError) {
        try call(TaskMember.Method.requestCancel.rawValue, interface: Self.taskInterface, path: task) { _ in }
    }

    /// Asks the owner of the task at `task` to pause (`suspended`) or resume it (`RequestSuspend`).
    public func requestSuspend(task: String, suspended: Bool) throws(NetActivityError) {
        try call(TaskMember.Method.requestSuspend.rawValue, interface: Self.taskInterface, path: task) { w in
            w.append(suspended)
        }
    }

    /// Sets a task's byte counters (an expected size of 0 is unknown; counters only grow).
    public func setTaskProgress(
        _ task: String, sent: UInt64 = 0, expectedToSend: UInt64 = 0, received: UInt64, expectedToReceive: UInt64
    ) throws(NetActivityError) {
        try call(TaskMember.Method.setProgress.rawValue, interface: Self.taskInterface, path: task) { w in
            for v in [sent, expectedToSend, received, expectedToReceive] { w.append(v) }
        }
    }

    /// Reports a task's progress as a fraction from 0 to 1 (work that is not bytes).
    public func setTaskFraction(_ task: String, _ fraction: Double) throws(NetActivityError) {
        try call(TaskMember.Method.setFraction.rawValue, interface: Self.taskInterface, path: task) { w in
            w.append(fraction)
        }
    }

    /// Completes a task: successfully when `error` is nil.
    public func completeTask(_ task: String, error: String? = nil) throws(NetActivityError) {
        try call(TaskMember.Method.complete.rawValue, interface: Self.taskInterface, path: task) { w in
            w.append(error ?? "")
        }
    }

    // MARK: downloads

    /// What a waiting `download` or `fetch` hears from the client's thread.
    fileprivate enum DownloadEvent<T> {
        case progress(TaskSnapshot)
        case finished(Result<T, NetActivityError>)
    }

    /// Waits for the outcome, passing the transfer's progress on (received never goes back).
    fileprivate func wait<T>(_ inbox: Inbox<DownloadEvent<T>>, progress: ((UInt64, UInt64) -> Void)?)
        throws(NetActivityError) -> T
    {
        var received: UInt64 = 0
        while let event = inbox.take() {
            switch event {
            case .progress(let t):
                received = max(received, t.countOfBytesReceived)
                progress?(received, t.countOfBytesExpectedToReceive)
            case .finished(let result):
                return try result.get()
            }
        }
        throw ClientCore.closedError
    }

    /// Downloads `url` through the shared downloader into the shared cache and waits for it:
    /// `progress` gets (received, expected; 0 = unknown) as the transfer's task reports them.
    /// Returns true when it was already cached. Errors are the agent's (`code` `.agent("HTTP")`,
    /// `.agent("Timeout")`, ...).
    @discardableResult
    public func download(
        url: String, additionalIdentifier: String = "", reload: Bool = false,
        progress: @escaping (UInt64, UInt64) -> Void = { _, _ in }
    ) throws(NetActivityError) -> Bool {
        let inbox = Inbox<DownloadEvent<Bool>>()
        // The transfer's task, followed the way task bindings follow one.
        let follow = DownloadFollow()
        let posted = core.mailbox.post { [core] in
            core.downloads.download(
                url: url, additionalIdentifier: additionalIdentifier, reload: reload, destination: Self.busName,
                onReceipt: {
                    _, task in
                    follow.key = core.watchTask(path: task) { snapshot in
                        if let snapshot { inbox.put(.progress(snapshot)) }
                    }
                }
            ) { result in
                if let key = follow.key { core.unwatchTask(key) }
                inbox.put(.finished(result))
            }
        }
        guard posted else { throw ClientCore.closedError }
        return try wait(inbox, progress: progress)
    }
}

extension BlockingNetActivity {
    /// Fetches `url` through the shared downloader in one call (`FetchImage`) and waits for it:
    /// the image as a read-only file, from memory, disk or the network. With `progress`, the
    /// transfer's task is published at once (`announce`) and followed: `progress` gets
    /// (received, expected; 0 = unknown) as it reports them. Errors are the agent's.
    public func fetch(
        url: String, additionalIdentifier: String = "", reload: Bool = false,
        progress: ((UInt64, UInt64) -> Void)? = nil
    ) throws(NetActivityError) -> SharedImageFile {
        let inbox = Inbox<DownloadEvent<ClientDownloads.Fetched>>()
        let follow = DownloadFollow()
        let description = PublishedURL.downloadDescription(url)
        let wantsProgress = progress != nil
        let posted = core.mailbox.post { [core] in
            if wantsProgress {
                // The transfer's task is the agent's, the same whoever asked: found by its description.
                follow.key = core.taskListFollowers.watch(
                    Observer(
                        yield: { event in
                            switch event {
                            case .added(let t) where t.description == description,
                                .changed(let t) where t.description == description:
                                inbox.put(.progress(t))
                            default: break
                            }
                        }, finish: {}))
            }
            core.downloads.fetch(
                url: url, additionalIdentifier: additionalIdentifier, reload: reload, receipt: nil,
                announce: wantsProgress,
                destination: Self.busName
            ) { result in
                if let key = follow.key { core.taskListFollowers.unwatch(key) }
                inbox.put(.finished(result))
            }
        }
        guard posted else { throw ClientCore.closedError }
        return try wait(inbox, progress: progress).file
    }
}

/// The transfer's task follower of one `download`, set and read on the client's thread.
private final class DownloadFollow: @unchecked Sendable {
    var key: Int?
}

/// One answer handed from the client's thread to a waiting caller.
final class Answer<T>: @unchecked Sendable {
    // @unchecked: `value` is written once before `ready` is signalled, and read after the wait.
    private var value: Result<T, NetActivityError>?
    private let ready = DispatchSemaphore(value: 0)

    func put(_ result: Result<T, NetActivityError>) {
        value = result
        ready.signal()
    }

    func wait() -> Result<T, NetActivityError> {
        ready.wait()
        return value!
    }
}

/// Values handed from the client's thread to a caller that takes them one at a time; nil once
/// the sender has ended it.
final class Inbox<T>: @unchecked Sendable {
    // @unchecked: `items` is guarded by `lock`; `available` counts items and the end.
    private let lock = Mutex(())
    private var items: [T?] = []
    private let available = DispatchSemaphore(value: 0)

    func put(_ item: T) { push(item) }
    func end() { push(nil) }

    private func push(_ item: T?) {
        lock.withLock { _ in items.append(item) }
        available.signal()
    }

    func take() -> T? {
        available.wait()
        return lock.withLock { _ in items.removeFirst() }
    }
}
