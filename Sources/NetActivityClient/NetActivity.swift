// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
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
    /// refuses a malformed one. `cancellable`, `suspendable`: panels may ask the app to cancel, or
    /// to pause and resume, the task; the requests arrive in the task's `requests`, and the app
    /// decides (offer only what it does). Answers at once; the task's `path` comes when the agent
    /// has it.
    public func beginTask(
        _ description: String, expectedToSend: UInt64 = 0, expectedToReceive: UInt64 = 0, suspended: Bool = false,
        desktopID: String? = nil, cancellable: Bool = false, suspendable: Bool = false
    ) async throws(NetActivityError) -> NetActivityTask {
        try ClientCore.checkText(description, "description", limit: NetActivityLimits.maxDescriptionBytes)
        if let desktopID, let problem = ActivityMember.desktopIDProblem(desktopID) { throw .invalidArguments(problem) }
        let progress = TaskProgress(expectedToSend: expectedToSend, expectedToReceive: expectedToReceive)
        let state: TaskState = suspended ? .suspended : .running
        let offers = NetActivityTask.Offers(cancellable: cancellable, suspendable: suspendable)
        let id: Int = try await perform { core, done in
            done(
                .success(
                    core.ownTasks.begin(
                        description: description, state: state, progress: progress, desktopID: desktopID,
                        offers: offers)))
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
    public func addImage(_ data: [UInt8], url: String, additionalIdentifier: String = "") async throws(NetActivityError)
    {
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
        try await perform { core, done in
            core.downloads.lookupImage(url: url, additionalIdentifier: additionalIdentifier, done)
        }
    }

    /// The cached image as a read-only file (no copy through the bus: the better path for large
    /// images), or nil.
    public func openImage(identifier: String) async throws(NetActivityError) -> SharedImageFile? {
        try await perform { core, done in core.downloads.openImage(.openImage, { w in w.append(identifier) }, done) }
    }

    /// The image at `url` as a read-only file, from the shared cache or fetched by the shared
    /// downloader (one `FetchImage` call: no copy through the bus, whatever its size). Errors and
    /// cancellation as `downloadImage`. For a look at the cache alone, `image(url:)`.
    public func openImage(url: String, additionalIdentifier: String = "", reload: Bool = false)
        async throws(NetActivityError)
        -> SharedImageFile
    {
        try await fetchImage(url: url, additionalIdentifier: additionalIdentifier, reload: reload).file
    }

    /// Whether an image was removed.
    public func removeImage(identifier: String) async throws(NetActivityError) -> Bool {
        try await cacheCall(ImageCacheMember.Method.removeImage.rawValue, { w in w.append(identifier) }) {
            r throws(DBusError) in try r.read(Bool.self)
        }
    }

    /// Empties the shared cache; whether it held anything.
    public func removeAllImages() async throws(NetActivityError) -> Bool {
        try await cacheCall(ImageCacheMember.Method.removeAllImages.rawValue, { _ in }) { r throws(DBusError) in
            try r.read(Bool.self)
        }
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
        let result: Result<ClientDownloads.Fetched, NetActivityError> = await cancellableFetch { core, receipt, done in
            core.downloads.fetch(
                url: url, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority,
                cacheKey: cacheKey, maxAge: maxAge, receipt: receipt, done)
        }
        let fetched = try result.get()
        return FetchedImage(
            file: fetched.file, source: fetched.source == .memory ? .cache : .download, contentType: fetched.contentType
        )
    }

    /// Fetches an image through the shared downloader and has the agent decode it (`FetchPixels`):
    /// once for every app that asks for it with the same box, in a sandboxed decoder process, the
    /// pixels in sealed memory that this process maps read-only (`DecodedImage`). `maxWidth` and
    /// `maxHeight` are the box to fit in (aspect kept, never enlarged; 0: no limit). `color`: sRGB
    /// (converted from the file's colour profile) or the file's own values (`.asIs`). `animation`:
    /// every frame of an animated GIF, PNG (APNG), WebP or AVIF (up to `maxFrames`), with their durations;
    /// otherwise the first frame. Errors: those of `fetchImage`, `.agent("TooLarge")` for more
    /// pixels than the agent decodes (all frames together), and `.agent("Decode")` for an image it
    /// could not decode. Cancelling the Swift task cancels it.
    public func fetchPixels(
        url: String, maxWidth: UInt32 = 0, maxHeight: UInt32 = 0, color: DecodedImage.ColorSpace = .srgb,
        animation: Bool = false, maxFrames: UInt32 = NetActivityLimits.maxAnimationFrames,
        additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal
    ) async throws(NetActivityError) -> DecodedImage {
        try await cancellableFetch { core, receipt, done in
            core.downloads.fetchPixels(
                url: url, box: PixelBox(maxWidth: maxWidth, maxHeight: maxHeight), color: color,
                maxFrames: animation ? max(1, maxFrames) : 1, additionalIdentifier: additionalIdentifier,
                reload: reload, priority: priority, receipt: receipt, done)
        }.get()
    }

    /// A call to the downloader named by a receipt of its own, which cancelling the Swift task
    /// cancels at the agent (`CancelDownload`): the call is then answered `.agent("Cancelled")`.
    private func cancellableFetch<T: Sendable>(
        _ start: @escaping (ClientCore, String, @escaping (Result<T, NetActivityError>) -> Void) -> Void
    ) async -> Result<T, NetActivityError> {
        let cancel = FetchCancellation()
        let start = UncheckedSendable(start)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let posted = core.mailbox.post { [core] in
                    guard !core.isClosed else { return c.resume(returning: .failure(ClientCore.closedError)) }
                    guard !cancel.requested else { return c.resume(returning: .failure(FetchCancellation.error)) }
                    let receipt = core.downloads.makeFetchReceipt()
                    cancel.receipt = receipt
                    start.value(core, receipt) {
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
    }

    /// Fetches an image through the shared downloader (`fetchImage`) and returns its bytes.
    public func downloadImage(
        url: String, additionalIdentifier: String = "", reload: Bool = false, priority: ImagePriority = .normal,
        cacheKey: String? = nil, maxAge: Duration? = nil
    ) async throws(NetActivityError) -> [UInt8] {
        try await fetchImage(
            url: url, additionalIdentifier: additionalIdentifier, reload: reload, priority: priority,
            cacheKey: cacheKey, maxAge: maxAge
        ).file.readAll()
    }

    /// Removes your app's images whose URL starts with `prefix`, and your cache keys that start
    /// with it, from the shared cache and its disk tier (`RemoveImages`; "" removes them all);
    /// how many went. Other apps' images stay, even of URLs you used too.
    public func removeImages(prefix: String) async throws(NetActivityError) -> Int {
        try await perform { core, done in
            core.request(
                DownloaderMember.Method.removeImages.rawValue, interface: ClientDownloads.downloaderInterface,
                { w in w.append(prefix) },
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
            continuation.onTermination = { [weak core] _ in
                core?.mailbox.post { [weak core] in core?.taskListFollowers.unwatch(key) }
            }
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
        (try? await perform { core, done in core.waitForAgent(within: timeout.nanoseconds) { done(.success($0)) } })
            ?? false
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
