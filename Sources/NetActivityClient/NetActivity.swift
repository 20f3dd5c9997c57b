import DBusKit
import Glibc
import NetActivityContract

/// The netactivity agent, for apps: say when you use the network, follow the indicator, and
/// publish tasks that panels can show. Async and safe to share between tasks and threads.
///
/// ```swift
/// let activity = await NetActivity.connect()
/// let feed = try await activity.withActivity(reason: "refresh feed") {
///     try await loadFeed()
/// }
/// ```
///
/// Tracking is advisory, so this never fails or delays the app: `connect()` always returns a
/// usable value (offline while there is no bus or no agent, attaching when they appear, again
/// after the bus goes away), and counts, leases, tasks and tracking are kept by the library,
/// answered at once and mirrored to the agent in the background: if the agent restarts, or is
/// hung, the app's work goes on and the new agent gets everything still held. The only errors
/// thrown are about the app's own input (a reason or description over 1,024 bytes, progress
/// going backwards) or a call after `close()`; queries (`status()`, the image cache, downloads)
/// may also say that the agent is not running.
///
/// The connection is served by one thread of its own ("netactivity-cl"); no blocking call runs
/// on Swift's cooperative pool, and the app's callbacks run on a `CallbackExecutor`, never there.
public final class NetActivity: Sendable {
    let core: ClientCore
    /// Where bindings and image slots deliver, unless given their own executor.
    public let callbacks: CallbackExecutor

    private init(core: ClientCore, callbacks: CallbackExecutor?) {
        self.core = core
        self.callbacks = callbacks ?? .serialQueue(label: "netactivity-callbacks")
    }

    /// Connects to the session bus, or to the bus at `address`, and returns once the bus has said
    /// whether the agent is there (a few milliseconds; at once with no bus; 250 ms at most, when
    /// the bus does not answer). If the agent is not running, the bus is asked to start it (D-Bus
    /// activation). Never fails: see the type's notes. Nothing here or later blocks a thread on
    /// the bus: the connection's Hello, match rules and lookup of the agent are answered through
    /// the client's own loop.
    ///
    /// `callbacks` is where bindings and image slots run the app's closures by default: a serial
    /// queue of the library's own unless given (`.dispatch(.main)`, a GLib main context, ...).
    public static func connect(address: String? = nil, callbacks: CallbackExecutor? = nil) async -> NetActivity {
        let activity = NetActivity(core: ClientCore(), callbacks: callbacks)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            activity.core.start(address: address) { _ in c.resume() }
        }
        return activity
    }

    /// The same without waiting: usable at once (calls made before the bus answers are held and
    /// sent when it does), for an app's synchronous start-up code.
    public convenience init(address: String? = nil, callbacks: CallbackExecutor? = nil) {
        self.init(core: ClientCore(), callbacks: callbacks)
        core.start(address: address) { _ in }
    }

    deinit { close() }

    /// Ends the connection: everything held is released.
    public func close() {
        core.mailbox.post { [core] in core.shutDown() }
    }

    /// This connection's unique bus name (the owner of its tasks); "" while offline, and until
    /// the bus has answered the connection's Hello. A new connection after the bus comes back
    /// has a new one.
    public var uniqueName: String { core.uniqueName }

    /// Runs `body` on the client's thread and waits for it to call back.
    func perform<T: Sendable>(
        _ body: @escaping @Sendable (ClientCore, @escaping (Result<T, NetActivityError>) -> Void) -> Void
    ) async throws(NetActivityError) -> T {
        let result: Result<T, NetActivityError> = await withCheckedContinuation { c in
            let posted = core.mailbox.post { [core] in
                if core.isClosed {
                    c.resume(returning: .failure(ClientCore.closedError))
                } else {
                    body(core) { c.resume(returning: $0) }
                }
            }
            if !posted { c.resume(returning: .failure(ClientCore.closedError)) }
        }
        return try result.get()
    }

    // MARK: activity

    /// Adds one to this client's activity count. Answers at once.
    public func incrementActivityCount() async throws(NetActivityError) {
        try await perform { core, done in
            core.holdings.increment()
            done(.success(()))
        }
    }

    /// Removes one from this client's activity count (never below zero). Answers at once.
    public func decrementActivityCount() async throws(NetActivityError) {
        try await perform { core, done in
            core.holdings.decrement()
            done(.success(()))
        }
    }

    /// Begins a lease: the indicator counts it until `end()`, the lease is released, or this
    /// connection closes. `reason` says why, in the user's words ("Fetching new mail"): it is shown
    /// with the app wherever apps are listed, and logged; "" shows none (at most 1024 bytes of
    /// UTF-8, else `invalidArguments`). Answers at once.
    public func beginActivity(reason: String) async throws(NetActivityError) -> NetActivityLease {
        try ClientCore.checkText(reason, "reason", limit: NetActivityLimits.maxReasonBytes)
        let id: Int = try await perform { core, done in done(.success(core.holdings.beginLease(reason: reason))) }
        return NetActivityLease(core: core, id: id)
    }

    /// Runs `body` while holding a lease, and ends the lease however `body` ends.
    public func withActivity<T>(
        reason: String, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        let lease = try await beginActivity(reason: reason)
        defer { lease.end() }
        return try await body()
    }

    // MARK: tasks

    /// Begins a task that panels can list and follow (`org.example.NetActivity.Task`). It counts
    /// as activity while running. Sizes of 0 mean unknown. `description`: at most 1024 bytes of
    /// UTF-8 (else `invalidArguments`). `desktopID`: the app's desktop file name
    /// (`org.example.App.desktop`), for docks to draw the task's progress on its icon; the agent
    /// refuses a malformed one. Answers at once; the task's `path` comes when the agent has it.
    public func beginTask(
        _ description: String, expectedToSend: UInt64 = 0, expectedToReceive: UInt64 = 0, suspended: Bool = false,
        desktopID: String? = nil
    ) async throws(NetActivityError) -> NetActivityTask {
        try ClientCore.checkText(description, "description", limit: NetActivityLimits.maxDescriptionBytes)
        if let desktopID, let problem = ActivityMember.desktopIDProblem(desktopID) { throw .invalidArguments(problem) }
        let progress = TaskProgress(expectedToSend: expectedToSend, expectedToReceive: expectedToReceive)
        let state: TaskState = suspended ? .suspended : .running
        let id: Int = try await perform { core, done in
            done(.success(core.ownTasks.begin(description: description, state: state, progress: progress, desktopID: desktopID)))
        }
        return NetActivityTask(core: core, id: id)
    }

    // MARK: the shared image cache

    static let cacheInterface = NetActivityInterface.imageCache.rawValue

    private func cacheCall<T: Sendable>(
        _ member: String, _ body: @escaping @Sendable (inout MessageWriter) throws -> Void,
        decode: @escaping @Sendable (inout MessageReader) throws(DBusError) -> T
    ) async throws(NetActivityError) -> T {
        try await perform { core, done in
            core.request(member, interface: Self.cacheInterface, body, decode: decode, done)
        }
    }

    /// Stores an image (PNG, JPEG, GIF, WebP, BMP, ICO or SVG) in the cache every app shares.
    /// Images larger than 1 MiB travel as a sealed memfd, smaller ones inline.
    public func addImage(_ data: [UInt8], identifier: String) async throws(NetActivityError) {
        let call = ClientDownloads.addImageCall(data, forRequest: false) { w in w.append(identifier) }
        try await cacheCall(call.member, call.body, decode: { _ throws(DBusError) in })
    }

    /// Stores an image under the request key of (url, additionalIdentifier). For a URL, the entry
    /// is this app's own: other apps keep seeing what the downloader stored (docs/security.md, "Whose images").
    public func addImage(_ data: [UInt8], url: String, additionalIdentifier: String = "") async throws(NetActivityError) {
        let call = ClientDownloads.addImageCall(data, forRequest: true) { w in
            w.append(url)
            w.append(additionalIdentifier)
        }
        try await cacheCall(call.member, call.body, decode: { _ throws(DBusError) in })
    }

    /// The cached image's bytes, or nil (read through its memfd: any size).
    public func image(identifier: String) async throws(NetActivityError) -> [UInt8]? {
        try await openImage(identifier: identifier)?.readAll()
    }

    /// The image cached for (url, additionalIdentifier), or nil.
    public func image(url: String, additionalIdentifier: String = "") async throws(NetActivityError) -> [UInt8]? {
        try await perform { core, done in core.downloads.lookupImage(url: url, additionalIdentifier: additionalIdentifier, done) }
    }

    /// The cached image as a read-only file (no copy through the bus: the better path for large
    /// images), or nil.
    public func openImage(identifier: String) async throws(NetActivityError) -> SharedImageFile? {
        try await perform { core, done in core.downloads.openImage(.openImage, { w in w.append(identifier) }, done) }
    }

    /// The image at `url` as a read-only file, from the shared cache or fetched by the shared
    /// downloader (one `FetchImage` call: no copy through the bus, whatever its size). Errors and
    /// cancellation as `downloadImage`. For a look at the cache alone, `image(url:)`.
    public func openImage(url: String, additionalIdentifier: String = "", reload: Bool = false) async throws(NetActivityError)
        -> SharedImageFile
    {
        try await fetchImage(url: url, additionalIdentifier: additionalIdentifier, reload: reload).file
    }

    /// Whether an image was removed.
    public func removeImage(identifier: String) async throws(NetActivityError) -> Bool {
        try await cacheCall(ImageCacheMember.Method.removeImage.rawValue, { w in w.append(identifier) }) { r throws(DBusError) in try r.read(Bool.self) }
    }

    /// Empties the shared cache; whether it held anything.
    public func removeAllImages() async throws(NetActivityError) -> Bool {
        try await cacheCall(ImageCacheMember.Method.removeAllImages.rawValue, { _ in }) { r throws(DBusError) in try r.read(Bool.self) }
    }

    // MARK: the shared downloader

    /// An image the shared downloader delivered.
    public struct FetchedImage: Sendable {
        /// The bytes, in the agent's sealed memory (read them, or map them).
        public let file: SharedImageFile
        /// `.cache` when the shared memory cache answered; `.download` when the downloader's disk
        /// tier or a transfer did (or the call joined a transfer already under way).
        public let source: ImageSource
        /// The media type of the bytes ("image/png"), as the agent found them to be.
        public let contentType: String
    }

    /// Fetches an image through the downloader all apps share, in one call (`FetchImage`): from
    /// the shared cache, its disk tier, or the network. Requests for the same URL from any app
    /// share one transfer. Errors: `.agent("InvalidURL")`, `.agent("HTTP")`, `.agent("Timeout")`,
    /// `.agent("TooLarge")`, `.agent("NotAnImage")`, `.agent("Network")`, `.agent("LimitsExceeded")`.
    ///
    /// Cancelling the Swift task cancels the call at the agent (the shared transfer stops when no
    /// app is left waiting for it) and throws `.agent("Cancelled")`.
    ///
    /// `priority` orders it in the queue all apps share: highest first, then fairness between
    /// apps, then the order asked. A transfer several apps wait for runs at the highest of their
    /// priorities.
    ///
    /// `cacheKey` names the image instead of its URL, for URLs that change while the image does
    /// not (signed, expiring): every URL fetched with one key is one entry, your app's own.
    /// `maxAge` is how old a cached copy may be for this call (an older one is checked with the
    /// server), whatever the server said; `.zero` always asks it.
    public func fetchImage(
        url: String, additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal,
        cacheKey: String? = nil, maxAge: Duration? = nil
    ) async throws(NetActivityError) -> FetchedImage {
        let cancel = FetchCancellation()
        let result: Result<ClientDownloads.Fetched, NetActivityError> = await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let posted = core.mailbox.post { [core] in
                    guard !core.isClosed else { return c.resume(returning: .failure(ClientCore.closedError)) }
                    guard !cancel.requested else { return c.resume(returning: .failure(FetchCancellation.error)) }
                    let receipt = core.downloads.makeFetchReceipt()
                    cancel.receipt = receipt
                    core.downloads.fetch(
                        url: url, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority, cacheKey: cacheKey,
                        maxAge: maxAge, receipt: receipt
                    ) {
                        cancel.receipt = nil
                        c.resume(returning: $0)
                    }
                }
                if !posted { c.resume(returning: .failure(ClientCore.closedError)) }
            }
        } onCancel: { [core] in
            core.mailbox.post {
                cancel.requested = true
                if let receipt = cancel.receipt { core.downloads.cancelFetch(receipt) }
            }
        }
        let fetched = try result.get()
        return FetchedImage(file: fetched.file, source: fetched.source == .memory ? .cache : .download, contentType: fetched.contentType)
    }

    /// Fetches an image through the shared downloader (`fetchImage`) and returns its bytes.
    public func downloadImage(
        url: String, additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal,
        cacheKey: String? = nil, maxAge: Duration? = nil
    ) async throws(NetActivityError) -> [UInt8] {
        try await fetchImage(
            url: url, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority, cacheKey: cacheKey, maxAge: maxAge
        ).file.readAll()
    }

    /// Removes your app's images whose URL starts with `prefix`, and your cache keys that start
    /// with it, from the shared cache and its disk tier (`RemoveImages`; "" removes them all);
    /// how many went. Other apps' images stay, even of URLs you used too.
    public func removeImages(prefix: String) async throws(NetActivityError) -> Int {
        try await perform { core, done in
            core.request(
                DownloaderMember.Method.removeImages.rawValue, interface: ClientDownloads.downloaderInterface, { w in w.append(prefix) },
                decode: { r throws(DBusError) in Int(try r.read(UInt32.self)) }, done)
        }
    }

    // MARK: the indicator

    /// The agent's properties now (`agentNotRunning` when there is no agent). Answered within
    /// 250 ms of the call, always: if the agent (hung, or very busy) or the bus (stalled) has not
    /// answered by then, the last state the agent published is the answer, or with none yet a
    /// `disconnected` error ("did not answer within 250 ms").
    public func status() async throws(NetActivityError) -> ActivityStatus {
        try await perform { core, done in core.statusMirror.current(fallingBack: true, done) }
    }

    /// The indicator as it changes: the current status first, then one element per change
    /// (Visible, State, counts, clients), and nil while no agent is running. Ends when the
    /// connection closes.
    public func statusUpdates() -> AsyncStream<ActivityStatus?> {
        let (stream, continuation) = AsyncStream<ActivityStatus?>.makeStream(bufferingPolicy: .bufferingNewest(64))
        if !core.mailbox.post({ [core] in core.statusMirror.observe(continuation) }) { continuation.finish() }
        return stream
    }

    /// Every task at the agent, any app's (live and recently completed), by task number.
    public func tasks() async throws(NetActivityError) -> [TaskSnapshot] {
        try await perform { core, done in TaskListFollowers.taskList(core, done) }
    }

    /// The agent's task list as it changes, for panels: `added` for each task there now, then one
    /// event per change, `removed` when a task leaves (every one when the agent goes; a new
    /// agent's are added). Ends when the connection closes.
    public func taskUpdates() -> AsyncStream<TaskEvent> {
        let (stream, continuation) = AsyncStream<TaskEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let posted = core.mailbox.post { [core] in
            let key = core.taskListFollowers.watch(Observer(continuation))
            continuation.onTermination = { [weak core] _ in core?.mailbox.post { [weak core] in core?.taskListFollowers.unwatch(key) } }
        }
        if !posted { continuation.finish() }
        return stream
    }

    /// Waits until the agent has seen every call made so far (counts, leases, tasks and their
    /// latest progress), or until there is no agent, or 1 s. The calls themselves never wait;
    /// this is for code (tests, scripts) that reads the agent's state from elsewhere right after.
    public func settled() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let posted = core.mailbox.post { [core] in core.whenCaughtUp(rounds: 8) { c.resume() } }
            if !posted { c.resume() }
        }
    }

    /// Whether an agent is on the bus now (asked right after `NetActivity(...)`, this waits for
    /// the bus to say, 250 ms at most).
    public func isAgentRunning() async -> Bool {
        (try? await perform { core, done in
            core.whenOwnerKnown(within: ClientCore.firstAnswerDeadline) { done(.success(core.owner != nil)) }
        }) ?? false
    }

    /// Whether an agent is on the bus now, or appears within `timeout` (the bus may be starting
    /// one: `connect` asks it to). Nothing held waits for this: it is for what to tell the user.
    public func waitForAgent(timeout: Duration) async -> Bool {
        (try? await perform { core, done in core.waitForAgent(within: timeout.nanoseconds) { done(.success($0)) } }) ?? false
    }
}

/// The loop thread's view of one `fetchImage` call's cancellation. @unchecked Sendable: every
/// property is touched only on the client's thread.
final class FetchCancellation: @unchecked Sendable {
    static let error = NetActivityError(.cancelled, "The download was cancelled")
    var requested = false
    /// The pending call's receipt (nil before it is sent and once it is answered).
    var receipt: String?
}

/// A held activity lease from `NetActivity.beginActivity`. It ends with `end()`, when released,
/// or when its connection closes; it survives agent restarts.
public final class NetActivityLease: Sendable {
    let core: ClientCore
    let id: Int

    init(core: ClientCore, id: Int) {
        self.core = core
        self.id = id
    }

    /// Ends the lease, from any thread; ending twice does nothing. The agent's end of the lease
    /// (its fd) is owned by the client's thread, which closes it once: two `end()`s at once can
    /// never close a descriptor number that someone else has reused meanwhile.
    public func end() {
        core.mailbox.post { [core, id] in core.holdings.endLease(id) }
    }

    deinit { end() }
}

/// What a task looks like at one moment.
public struct TaskSnapshot: Sendable, Equatable {
    public enum State: String, Sendable { case running, suspended, completed }

    public var state: State
    public var description: String
    /// The task's object path at the agent; nil while no agent holds it (not yet, or restarting).
    public var path: String?
    /// The unique bus name of the client that began it.
    public var owner: String
    public var countOfBytesSent: UInt64
    public var countOfBytesExpectedToSend: UInt64
    public var countOfBytesReceived: UInt64
    public var countOfBytesExpectedToReceive: UInt64
    public var fractionCompleted: Double
    /// Empty unless the task completed with an error.
    public var error: String

    init(record: TaskRecord, path: String?) {
        state = State(rawValue: record.state.rawValue) ?? .running
        description = record.description
        self.path = path
        owner = record.owner
        countOfBytesSent = record.progress.sent
        countOfBytesExpectedToSend = record.progress.expectedToSend
        countOfBytesReceived = record.progress.received
        countOfBytesExpectedToReceive = record.progress.expectedToReceive
        fractionCompleted = record.fractionCompleted
        self.error = record.error
    }
}

extension TaskSnapshot {
    /// A task as another client sees it: from its `org.example.NetActivity.Task` properties.
    init(path: String, properties: [String: DBusValue]) {
        state = .running
        description = ""
        self.path = path
        owner = ""
        countOfBytesSent = 0
        countOfBytesExpectedToSend = 0
        countOfBytesReceived = 0
        countOfBytesExpectedToReceive = 0
        fractionCompleted = 0
        error = ""
        apply(properties)
    }

    /// Applies the properties present in `p` (all of them, or a PropertiesChanged).
    mutating func apply(_ p: [String: DBusValue]) {
        if let v = p[TaskMember.Property.state.rawValue]?.stringValue.flatMap(State.init(rawValue:)) { state = v }
        if let v = p[TaskMember.Property.description.rawValue]?.stringValue { description = v }
        if let v = p[TaskMember.Property.owner.rawValue]?.stringValue { owner = v }
        if let v = p[TaskMember.Property.countOfBytesSent.rawValue]?.uint64Value { countOfBytesSent = v }
        if let v = p[TaskMember.Property.countOfBytesExpectedToSend.rawValue]?.uint64Value { countOfBytesExpectedToSend = v }
        if let v = p[TaskMember.Property.countOfBytesReceived.rawValue]?.uint64Value { countOfBytesReceived = v }
        if let v = p[TaskMember.Property.countOfBytesExpectedToReceive.rawValue]?.uint64Value { countOfBytesExpectedToReceive = v }
        if let v = p[TaskMember.Property.fractionCompleted.rawValue]?.doubleValue { fractionCompleted = v }
        if let v = p[TaskMember.Property.error.rawValue]?.stringValue { error = v }
    }
}

/// A task this app began: report progress, suspend, resume, complete. A value; copies refer to
/// the same task. Calls after completion are harmless no-ops.
public struct NetActivityTask: Sendable, Hashable {
    let core: ClientCore
    let id: Int

    public static func == (a: NetActivityTask, b: NetActivityTask) -> Bool { a.core === b.core && a.id == b.id }
    public func hash(into h: inout Hasher) {
        h.combine(ObjectIdentifier(core))
        h.combine(id)
    }

    func perform(_ change: @escaping @Sendable (inout TaskRecord) throws(NetActivityError) -> Void) async throws(NetActivityError) {
        let result: Result<Void, NetActivityError> = await withCheckedContinuation { c in
            let posted = core.mailbox.post { [core, id] in
                if core.isClosed {
                    c.resume(returning: .failure(ClientCore.closedError))
                } else {
                    c.resume(returning: Result { () throws(NetActivityError) in try core.ownTasks.update(id, change) })
                }
            }
            if !posted { c.resume(returning: .failure(ClientCore.closedError)) }
        }
        try result.get()
    }

    /// Reports byte progress; a size left out (nil) keeps its value, and 0 means unknown.
    /// Counters only grow and stay within known sizes (`invalidArguments` otherwise). Answers at
    /// once and is cheap to call often: the library sends the agent the latest values with at
    /// most one update in flight.
    public func setProgress(
        sent: UInt64? = nil, expectedToSend: UInt64? = nil, received: UInt64? = nil, expectedToReceive: UInt64? = nil
    ) async throws(NetActivityError) {
        try await perform { record throws(NetActivityError) in
            let now = record.progress
            let next = TaskProgress(
                sent: sent ?? now.sent, expectedToSend: expectedToSend ?? now.expectedToSend,
                received: received ?? now.received, expectedToReceive: expectedToReceive ?? now.expectedToReceive)
            do throws(TaskProgress.Refusal) {
                _ = try record.setProgress(next)
            } catch {
                throw .invalidArguments(error.message)
            }
        }
    }

    /// Reports progress that is not bytes ("60 %"): a fraction from 0 to 1, which may also go
    /// down. Panels show it as a percentage while no expected size is known; `invalidArguments`
    /// for anything outside 0...1. Cheap to call often, like `setProgress`.
    public func setFraction(_ fraction: Double) async throws(NetActivityError) {
        try await perform { record throws(NetActivityError) in
            do throws(TaskProgress.Refusal) {
                _ = try record.setFraction(fraction)
            } catch {
                throw .invalidArguments(error.message)
            }
        }
    }

    public func suspend() async throws(NetActivityError) {
        try await perform { record in _ = record.suspend() }
    }

    public func resume() async throws(NetActivityError) {
        try await perform { record in _ = record.resume() }
    }

    /// Completes the task; an empty `error` is success.
    public func complete(error: String = "") async throws(NetActivityError) {
        try await perform { record in _ = record.complete(error: error) }
    }

    /// The task's object path at the agent (`org.example.NetActivity.Task`), for panels and for
    /// `bind(toTaskAt:)` in other processes; nil while no agent holds it (just begun, no agent, or
    /// the agent restarting: a restarted agent gives it a new path), and after completion.
    public var path: String? {
        get async { await snapshot()?.path }
    }

    /// The task now; nil once it has completed and left the library.
    public func snapshot() async -> TaskSnapshot? {
        await withCheckedContinuation { c in
            let posted = core.mailbox.post { [core, id] in c.resume(returning: core.ownTasks.snapshot(of: id)) }
            if !posted { c.resume(returning: nil) }
        }
    }

    /// The task's states: the current one first, then one per change (including a new `path`
    /// after an agent restart); ends after `completed`.
    public var states: AsyncStream<TaskSnapshot> {
        let (stream, continuation) = AsyncStream<TaskSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(64))
        if !core.mailbox.post({ [core, id] in core.ownTasks.observe(id, continuation) }) { continuation.finish() }
        return stream
    }
}

/// A cached image shared as a sealed, read-only memfd: read it or map it; it closes with the value.
public final class SharedImageFile: Sendable {
    public let fd: Int32
    public let size: UInt64

    init(fd: Int32, size: UInt64) {
        self.fd = fd
        self.size = size
    }

    deinit { close(fd) }

    /// The whole image (one copy, from the shared memory into the array).
    public func readAll() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(size))
        var done = 0
        while done < out.count {
            let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            done += n
        }
        return Array(out[0..<done])
    }
}
