// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Dispatch
import LinuxKit
import Synchronization

/// A request's place in the queue all apps share (`very-low` ... `very-high`, `normal` unless
/// said): highest first, then fairness between apps, then the order asked. A transfer several apps
/// wait for runs at the highest of their priorities.
public typealias ImagePriority = DownloaderMember.Priority

/// Where a slot's image came from.
public enum ImageSource: Sendable, Equatable {
    /// The shared memory cache (or the app's own memory tier) answered; nothing was downloaded.
    case cache
    /// The shared downloader fetched it (or joined a transfer already under way).
    case download
}

// The two faces of one image place (UIImageView+AFNetworking, UIButton+AFNetworking: give a
// button one slot per state), over the same loader:
//
// - `ImageSlot`, on the main actor: `setImage` shows the placeholder (or an image the app's memory
//   tier holds) before it returns; `apply` and the handlers are main-actor closures that may touch
//   `@MainActor` views and need not be Sendable.
// - `ExecutorImageSlot`, for code that delivers on a `CallbackExecutor` of its own (a GLib main
//   context, a serial queue): `setImage` may be called from any thread; the placeholder shows when
//   no answer has come within `placeholderDelay`.
//
// Rules of both, as in AFNetworking:
// - a request for the URL the slot is already loading does nothing;
// - any other request cancels the slot's previous receipt, whose handlers are then never called;
// - a hit in the shared cache answers with no download;
// - an answer applies only if its request is still the slot's newest: a late answer for an old
//   URL never overwrites a newer image or placeholder.
//
// Each request is one `FetchImage` call, whatever answers it (memory, disk or network). `decode`
// runs off the UI, on Swift's global queue (no image, however large, holds the UI loop), and returns
// a value the slot `sending`s to the UI: `Image` (a GdkPixbuf wrapper, a texture, plain bytes)
// need not be Sendable. A slot made with `pixels:` asks `FetchPixels` instead: the agent decodes
// (once for every app, in its sandboxed decoder), and the closure only wraps the mapped pixels
// (`DecodedImage`) in the app's image type, a texture made from those bytes. With no agent (not running, hung past its reply time, or restarting),
// the placeholder stays, `failure` hears `agentNotRunning` once, and the slot tries again by itself
// when an agent appears.

/// The loader both faces drive: the slot's current request, on the client's thread (through its
/// mailbox). Each new request gets the next token; `isNewest` tells a face, wherever an answer
/// arrives, whether a newer request has overtaken it.
final class SlotLoader: @unchecked Sendable {
    // @unchecked Sendable: `current` is touched only on the client's thread.
    /// What a request reports, each with its token.
    struct Events: Sendable {
        /// No answer within the placeholder delay, no agent, or no image coming.
        let placeholder: @Sendable (_ token: UInt64) -> Void
        /// The app asked for no URL: the slot shows its placeholder, even none.
        let cleared: @Sendable (_ token: UInt64) -> Void
        let answer: @Sendable (SlotAnswer, ImageSource, _ token: UInt64) -> Void
        /// `final`: no image is coming; otherwise the slot waits for an agent.
        let failure: @Sendable (NetActivityError, _ final: Bool, _ token: UInt64) -> Void
    }

    private final class Request {
        let url: String
        let additionalIdentifier: String
        let token: UInt64
        let events: Events
        /// The pending FetchImage's receipt (what cancelling it names).
        var receipt: String?
        var placeholderTimer: TimerID?
        /// Told the app once that there is no agent; showed the placeholder once.
        var reportedAbsence = false
        var showedPlaceholder = false
        init(url: String, additionalIdentifier: String, token: UInt64, events: Events) {
            self.url = url
            self.additionalIdentifier = additionalIdentifier
            self.token = token
            self.events = events
        }
    }

    private let core: ClientCore
    /// Nil: the face shows the placeholder itself.
    private let placeholderDelay: UInt64?
    /// FetchImage's bytes, or FetchPixels' pixels fit to a box.
    private let asking: SlotAsking
    private var current: Request?
    /// What the slot's requests ask for (`setVisible`): the current one's receipt follows it.
    private var priority: ImagePriority = .normal
    private let newest = Atomic<UInt64>(0)

    init(core: ClientCore, placeholderDelay: UInt64?, asking: SlotAsking) {
        self.core = core
        self.placeholderDelay = placeholderDelay
        self.asking = asking
    }

    deinit {
        if let receipt = current?.receipt { core.mailbox.post { [core] in core.downloads.cancelFetch(receipt) } }
    }

    func isNewest(_ token: UInt64) -> Bool { newest.load(ordering: .acquiring) == token }

    /// Loads `url` unless it is what the slot is loading; an empty `url` cancels and reports
    /// `cleared`.
    func load(url: String, additionalIdentifier: String, events: Events) {
        core.mailbox.post { [self] in
            if let request = current, request.url == url, request.additionalIdentifier == additionalIdentifier {
                return
            }
            cancelCurrent()
            let token = newest.load(ordering: .relaxed)
            guard !url.isEmpty else { return events.cleared(token) }
            let request = Request(url: url, additionalIdentifier: additionalIdentifier, token: token, events: events)
            current = request
            fetch(request)
        }
    }

    /// Cancels the slot's download, if any; its events never come.
    func cancel() {
        core.mailbox.post { [self] in cancelCurrent() }
    }

    /// The priority of the slot's requests from now on, and of the one under way.
    func setPriority(_ priority: ImagePriority) {
        core.mailbox.post { [self] in
            guard priority != self.priority else { return }
            self.priority = priority
            if let receipt = current?.receipt { core.downloads.setPriority(priority, of: receipt) }
        }
    }

    /// Whatever the slot was doing is overtaken (a newer token from here on).
    private func cancelCurrent() {
        newest.add(1, ordering: .releasing)
        guard let request = current else { return }
        current = nil
        if let timer = request.placeholderTimer { core.loop.cancel(timer) }
        if let receipt = request.receipt { core.downloads.cancelFetch(receipt) }
    }

    private func fetch(_ request: Request) {
        let receipt = core.downloads.makeFetchReceipt()
        request.receipt = receipt
        if let placeholderDelay {
            request.placeholderTimer = core.loop.schedule(afterNanoseconds: placeholderDelay) { [weak self] in
                request.placeholderTimer = nil
                guard let self, current === request else { return }
                showPlaceholder(request)
            }
        }
        // Weak from here on: a slot the app lets go cancels its call (deinit) and applies nothing.
        let answered = { [weak self, core] (result: Result<(SlotAnswer, ImageSource), NetActivityError>) in
            request.receipt = nil
            if let timer = request.placeholderTimer {
                core.loop.cancel(timer)
                request.placeholderTimer = nil
            }
            guard let self, current === request else { return }
            switch result {
            case .success(let (answer, source)):
                current = nil
                request.events.answer(answer, source, request.token)
            case .failure(let error):
                fail(request, error)
            }
        }
        switch asking {
        case .image:
            core.downloads.fetch(
                url: request.url, additionalIdentifier: request.additionalIdentifier, reload: false, priority: priority,
                receipt: receipt
            ) { result in answered(result.map { (.file($0.file), $0.source == .memory ? .cache : .download) }) }
        case .pixels(let box):
            core.downloads.fetchPixels(
                url: request.url, box: box,
                additionalIdentifier: request.additionalIdentifier, reload: false, priority: priority, receipt: receipt
            ) { result in answered(result.map { (.pixels($0), $0.source) }) }
        }
    }

    private func fail(_ request: Request, _ error: NetActivityError) {
        // No agent (or it went away mid-download): the placeholder stays, the app hears it once,
        // and the request is tried again when an agent is there.
        if error.code == .agentNotRunning || error.code == .disconnected {
            showPlaceholder(request)
            if !request.reportedAbsence {
                request.reportedAbsence = true
                request.events.failure(ClientCore.notRunning, false, request.token)
            }
            core.whenAgentAppears { [weak self] in
                guard let self, current === request else { return }
                fetch(request)
            }
            return
        }
        // No image is coming: the placeholder is what the slot shows (however quick the failure).
        current = nil
        showPlaceholder(request)
        request.events.failure(error, true, request.token)
    }

    /// Once per request: retries while there is no agent do not show it again.
    private func showPlaceholder(_ request: Request) {
        guard !request.showedPlaceholder else { return }
        request.showedPlaceholder = true
        request.events.placeholder(request.token)
    }
}

/// What a slot asks the agent for.
enum SlotAsking: Sendable, Equatable {
    /// The encoded image (FetchImage): the app decodes.
    case image
    /// The agent's decoded pixels fit to a box (FetchPixels).
    case pixels(PixelBox)

    /// Told apart in the app's memory tier: the same URL asked as bytes and as pixels of a box are
    /// different images.
    func memoryKey(_ additionalIdentifier: String) -> String {
        switch self {
        case .image: additionalIdentifier
        case .pixels(let box): additionalIdentifier + "\u{0}pixels \(box)"
        }
    }
}

/// What came for a slot's request.
enum SlotAnswer: Sendable {
    case file(SharedImageFile)
    case pixels(DecodedImage)
}

/// How a slot makes its `Image`: from encoded bytes, or from the agent's pixels.
enum SlotImageMaker<Image>: Sendable {
    case decode(@Sendable ([UInt8]) -> sending Image?)
    case wrap(@Sendable (DecodedImage) -> sending Image?)

    /// What a slot with this maker and `box` asks for.
    func asking(_ box: PixelBox) -> SlotAsking {
        switch self {
        case .decode: .image
        case .wrap: .pixels(box)
        }
    }
}

/// Makes the image off the UI, on `queue` (Swift's global queue unless the slot was given one),
/// then `deliver` with it and what it costs (encoded bytes read, or pixel bytes mapped).
func makeOffTheUI<Image>(
    _ answer: SlotAnswer, _ maker: SlotImageMaker<Image>, on queue: DispatchQueue = .global(qos: .userInitiated),
    deliver: @escaping @Sendable (_ bytes: Int, _ image: sending Image?) -> Void
) {
    queue.async {
        switch (answer, maker) {
        case (.file(let file), .decode(let decode)):
            let bytes = file.readAll()
            deliver(bytes.count, decode(bytes))
        case (.pixels(let pixels), .wrap(let wrap)):
            deliver(Int(pixels.stride) * Int(pixels.height), wrap(pixels))
        default:
            deliver(0, nil)  // never: a slot asks for what its maker takes
        }
    }
}

/// One place that shows one image at a time, on the main actor: an image view, or one state of a
/// button. `setImage` shows the placeholder (or an image this app already decoded for the same
/// request, from `ImageSlotMemory`) before it returns; the downloaded image follows, decoded off
/// the main actor. `apply` shows an image or a placeholder; a `success` handler given to
/// `setImage` replaces it for that request, and a `failure` handler hears errors (the
/// placeholder stays).
///
/// Under a GTK (GLib) main loop, call `NetActivity.runMainActorOnGLibMainContext()` once at start,
/// so main-actor work runs there.
@MainActor
public final class ImageSlot<Image>: Sendable {
    public typealias Success = @MainActor (Image, ImageSource) -> Void
    public typealias Failure = @MainActor (NetActivityError) -> Void

    private let maker: SlotImageMaker<Image>
    private let asking: SlotAsking
    private let apply: @MainActor (Image?) -> Void
    private let loader: SlotLoader
    /// The newest request's number; answers for older ones are dropped.
    private var token: UInt64 = 0
    /// The request under way: its memory-tier key (type, URL, additional identifier) and handlers.
    private var pending: (key: ImageSlotMemory.Key, success: Success?, failure: Failure?)?

    /// A slot that decodes the encoded image itself, in `decode` (off the main actor).
    public convenience init(
        _ activity: NetActivity, decode: @escaping @Sendable ([UInt8]) -> sending Image?,
        apply: @escaping @MainActor (Image?) -> Void
    ) {
        self.init(activity, maker: .decode(decode), box: .unbounded, apply: apply)
    }

    /// A slot whose images the agent decodes (`fetchPixels`: once for every app, in its sandboxed
    /// decoder), fit to `maxWidth` x `maxHeight` (0: no limit on that side); `pixels` only makes
    /// the app's image from the mapped pixels (off the main actor), a texture from those bytes.
    public convenience init(
        _ activity: NetActivity, maxWidth: UInt32 = 0, maxHeight: UInt32 = 0,
        pixels: @escaping @Sendable (DecodedImage) -> sending Image?, apply: @escaping @MainActor (Image?) -> Void
    ) {
        self.init(activity, maker: .wrap(pixels), box: PixelBox(maxWidth: maxWidth, maxHeight: maxHeight), apply: apply)
    }

    private init(
        _ activity: NetActivity, maker: SlotImageMaker<Image>, box: PixelBox,
        apply: @escaping @MainActor (Image?) -> Void
    ) {
        self.maker = maker
        self.apply = apply
        asking = maker.asking(box)
        loader = SlotLoader(core: activity.core, placeholderDelay: nil, asking: asking)
    }

    /// Shows the image at `url` (the request key is url + additionalIdentifier: slots that decode
    /// the same URL differently, say a thumbnail, give each their own). An empty `url` cancels and
    /// shows the placeholder.
    public func setImage(
        url: String, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        let key = ImageSlotMemory.Key(
            type: ObjectIdentifier(Image.self), url: url, additionalIdentifier: asking.memoryKey(additionalIdentifier))
        if let pending, pending.key == key { return }
        token &+= 1
        if !url.isEmpty, let image = ImageSlotMemory.image(for: key) as? Image {
            pending = nil
            loader.cancel()
            if let success { success(image, .cache) } else { apply(image) }
            return
        }
        apply(placeholder)
        guard !url.isEmpty else {
            pending = nil
            loader.cancel()
            return
        }
        pending = (key, success, failure)
        let token = token
        let maker = maker
        // Weak: a slot the app lets go applies nothing (and its loader cancels the call).
        weak let slot = self
        // The placeholder already shows; the loader's token is not needed on the main actor.
        loader.load(
            url: url, additionalIdentifier: additionalIdentifier,
            events: SlotLoader.Events(
                placeholder: { _ in },
                cleared: { _ in },
                answer: { answer, source, _ in
                    makeOffTheUI(answer, maker) { bytes, image in
                        Task { @MainActor [slot] in slot?.show(image, bytes: bytes, from: source, token: token) }
                    }
                },
                failure: { error, final, _ in
                    Task { @MainActor [slot] in slot?.fail(error, final: final, token: token) }
                }))
    }

    /// Cancels the slot's download, if any; its handlers are never called.
    public func cancel() {
        token &+= 1
        pending = nil
        loader.cancel()
    }

    /// Tells the shared downloader whether the slot is on screen: a visible slot's image is
    /// fetched at `.high`, a hidden one's at `.low` (a list scrolled past waits behind what shows).
    /// Applies to the request under way and to later ones.
    public func setVisible(_ visible: Bool) { setPriority(visible ? .high : .low) }

    /// The priority of the slot's requests, the one under way included (`.normal` until set).
    public func setPriority(_ priority: ImagePriority) { loader.setPriority(priority) }

    private func show(_ image: sending Image?, bytes: Int, from source: ImageSource, token: UInt64) {
        guard token == self.token, let request = pending else { return }
        pending = nil
        guard let image else {
            request.failure?(NetActivityError(.notAnImage, "\(request.key.url) could not be decoded"))
            return
        }
        ImageSlotMemory.insert(image, cost: bytes, for: request.key)
        if let success = request.success { success(image, source) } else { apply(image) }
    }

    private func fail(_ error: NetActivityError, final: Bool, token: UInt64) {
        guard token == self.token, let request = pending else { return }
        if final { pending = nil }
        request.failure?(error)
    }
}

extension ImageSlot where Image == [UInt8] {
    /// A slot of encoded image bytes (PNG, JPEG, ...), for apps that decode themselves.
    public convenience init(_ activity: NetActivity, apply: @escaping @MainActor ([UInt8]?) -> Void) {
        self.init(activity, decode: { $0 }, apply: apply)
    }
}

extension ImageSlot where Image == DecodedImage {
    /// A slot of the agent's decoded pixels, as they are (`DecodedImage`).
    public convenience init(
        _ activity: NetActivity, maxWidth: UInt32 = 0, maxHeight: UInt32 = 0,
        apply: @escaping @MainActor (DecodedImage?) -> Void
    ) {
        self.init(activity, maxWidth: maxWidth, maxHeight: maxHeight, pixels: { $0 }, apply: apply)
    }
}
