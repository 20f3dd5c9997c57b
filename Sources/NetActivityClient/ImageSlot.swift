import LinuxKit

/// Where a slot's image came from.
public enum ImageSource: Sendable, Equatable {
    /// The shared memory cache answered; nothing was downloaded.
    case cache
    /// The shared downloader fetched it (or joined a transfer already under way).
    case download
}

/// One place that shows one image at a time: an image view, or one state of a button
/// (UIImageView+AFNetworking and UIButton+AFNetworking; give a button one slot per state).
///
/// `setImage(url:)` rules, as in AFNetworking:
/// - a request for the URL the slot is already loading does nothing;
/// - any other request cancels the slot's previous receipt, whose handlers are then never called;
/// - a hit in the shared cache answers at once, with no download and no placeholder;
/// - otherwise the placeholder shows, the shared downloader fetches, and the answer applies only
///   if its request is still the slot's current one: a late answer for an old URL never
///   overwrites a newer image.
///
/// Each request is one `FetchImage` call, whatever answers it (memory, disk or network). The
/// placeholder shows when no answer has come within `placeholderDelay` (50 ms unless given): a hit
/// in memory answers far sooner and shows none, and neither does a disk hit that quick (no flash of
/// the placeholder before an image already on the machine). A delay of zero shows it at once on
/// every request, a memory hit's too (the answer follows a moment later).
///
/// With no agent (not running, hung past its reply time, or restarting), the placeholder shows,
/// `failure` hears `agentNotRunning` once, and the slot tries again by itself when an agent
/// appears.
///
/// `apply` is the default way to show an image (or a placeholder); a `success` handler given to
/// `setImage` replaces it for that request, and a `failure` handler hears errors (by default the
/// placeholder stays). `decode`, `apply` and the handlers run on the slot's `CallbackExecutor`
/// (the activity's unless given), one at a time and in order, never on the library's thread.
///
/// `Image` is what the app shows (a GdkPixbuf wrapper, a texture, or plain bytes): it need not be
/// `Sendable`, because images are made by `decode` and used by `apply` on the same executor and
/// never cross to another thread. Placeholders are handed back to `apply` on that executor too.
public final class ImageSlot<Image>: @unchecked Sendable {
    // @unchecked Sendable: `current` is touched only on the client's thread (through its mailbox);
    // images (`decode`'s results, placeholders) only on `callbacks`.
    private let core: ClientCore
    private let callbacks: CallbackExecutor
    private let decode: @Sendable ([UInt8]) -> Image?
    private let apply: @Sendable (Image?) -> Void
    private var current: Request?

    public typealias Success = @Sendable (Image, ImageSource) -> Void
    public typealias Failure = @Sendable (NetActivityError) -> Void

    /// A placeholder on its way from the app to `callbacks`, untouched in between.
    private struct Carried: @unchecked Sendable {
        let image: Image?
    }

    private final class Request {
        let url: String
        let additionalIdentifier: String
        let placeholder: Carried
        let success: Success?
        let failure: Failure?
        /// The pending FetchImage's receipt (what cancelling it names).
        var receipt: String?
        var placeholderTimer: TimerID?
        /// Told the app once that there is no agent; showed the placeholder once.
        var reportedAbsence = false
        var showedPlaceholder = false
        init(url: String, additionalIdentifier: String, placeholder: Carried, success: Success?, failure: Failure?) {
            self.url = url
            self.additionalIdentifier = additionalIdentifier
            self.placeholder = placeholder
            self.success = success
            self.failure = failure
        }
    }

    /// How long a request waits for its answer before the placeholder shows (nanoseconds).
    private let placeholderDelay: UInt64

    public init(
        _ activity: NetActivity, callbacks: CallbackExecutor? = nil, placeholderDelay: Duration = .milliseconds(50),
        decode: @escaping @Sendable ([UInt8]) -> Image?, apply: @escaping @Sendable (Image?) -> Void
    ) {
        core = activity.core
        self.callbacks = callbacks ?? activity.callbacks
        self.placeholderDelay = placeholderDelay.nanoseconds
        self.decode = decode
        self.apply = apply
    }

    deinit {
        if let receipt = current?.receipt { core.mailbox.post { [core] in core.cancelFetch(receipt) } }
    }


    /// Shows the image at `url` (the request key is url + additionalIdentifier). An empty `url`
    /// cancels and shows the placeholder.
    public func setImage(
        url: String, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        let placeholder = Carried(image: placeholder)
        core.mailbox.post { [self] in
            if let current, current.url == url, current.additionalIdentifier == additionalIdentifier { return }
            cancelCurrent()
            // An empty URL clears the slot to the placeholder, or to nothing.
            guard !url.isEmpty else { return callbacks { [apply] in apply(placeholder.image) } }
            let request = Request(
                url: url, additionalIdentifier: additionalIdentifier, placeholder: placeholder, success: success, failure: failure)
            current = request
            load(request)
        }
    }

    /// Cancels the slot's download, if any; its handlers are never called.
    public func cancel() {
        core.mailbox.post { [self] in cancelCurrent() }
    }

    private func cancelCurrent() {
        guard let request = current else { return }
        current = nil
        if let timer = request.placeholderTimer { core.loop.cancel(timer) }
        if let receipt = request.receipt { core.cancelFetch(receipt) }
    }

    private func showPlaceholder(for request: Request) {
        guard request.placeholder.image != nil, !request.showedPlaceholder else { return }
        request.showedPlaceholder = true
        let placeholder = request.placeholder
        callbacks { [apply] in apply(placeholder.image) }
    }

    /// One FetchImage; the placeholder if it takes longer than `placeholderDelay`.
    private func load(_ request: Request) {
        let receipt = core.makeFetchReceipt()
        request.receipt = receipt
        request.placeholderTimer = core.loop.schedule(afterNanoseconds: placeholderDelay) { [weak self] in
            request.placeholderTimer = nil
            guard let self, current === request else { return }
            showPlaceholder(for: request)
        }
        // Weak from here on: a slot the app lets go cancels its call (deinit) and applies nothing.
        core.fetch(url: request.url, additionalIdentifier: request.additionalIdentifier, reload: false, receipt: receipt) {
            [weak self, core] result in
            request.receipt = nil
            if let timer = request.placeholderTimer {
                core.loop.cancel(timer)
                request.placeholderTimer = nil
            }
            guard let self, current === request else { return }
            switch result {
            case .success(let fetched):
                show(fetched.file, from: fetched.source == .memory ? .cache : .download, for: request)
            case .failure(let error):
                fail(request, error)
            }
        }
    }

    /// Reads (one copy, from the agent's shared memory), decodes and shows, all on `callbacks`.
    private func show(_ file: SharedImageFile, from source: ImageSource, for request: Request) {
        current = nil
        let (decode, apply, success, failure, url) = (decode, apply, request.success, request.failure, request.url)
        callbacks {
            guard let image = decode(file.readAll()) else {
                failure?(NetActivityError(.notAnImage, "\(url) could not be decoded"))
                return
            }
            if let success { success(image, source) } else { apply(image) }
        }
    }

    private func fail(_ request: Request, _ error: NetActivityError) {
        // No agent (or it went away mid-download): the placeholder stays, the app hears it once,
        // and the request is tried again when an agent is there.
        if error.code == .agentNotRunning || error.code == .disconnected {
            showPlaceholder(for: request)
            if !request.reportedAbsence {
                request.reportedAbsence = true
                let failure = request.failure
                callbacks { failure?(ClientCore.notRunning) }
            }
            core.whenAgentAppears { [weak self] in
                guard let self, current === request else { return }
                load(request)
            }
            return
        }
        // No image is coming: the placeholder is what the slot shows (however quick the failure).
        showPlaceholder(for: request)
        current = nil
        let failure = request.failure
        callbacks { failure?(error) }
    }
}

extension ImageSlot where Image == [UInt8] {
    /// A slot of encoded image bytes (PNG, JPEG, ...), for apps that decode themselves.
    public convenience init(
        _ activity: NetActivity, callbacks: CallbackExecutor? = nil, placeholderDelay: Duration = .milliseconds(50),
        apply: @escaping @Sendable ([UInt8]?) -> Void
    ) {
        self.init(activity, callbacks: callbacks, placeholderDelay: placeholderDelay, decode: { $0 }, apply: apply)
    }
}
