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
/// `apply` is the default way to show an image (or a placeholder); a `success` handler given to
/// `setImage` replaces it for that request, and a `failure` handler hears errors (by default the
/// placeholder stays). Handlers run on the client's thread, one at a time; hop to the UI thread there.
///
/// `Image` is what the app shows (a GdkPixbuf wrapper, a texture, or plain bytes); `decode`
/// turns downloaded bytes into one, and nil is reported as `NotAnImage`.
public final class ImageSlot<Image: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `current` is touched only on the client's thread (through its mailbox).
    private let core: ClientCore
    private let decode: @Sendable ([UInt8]) -> Image?
    private let apply: @Sendable (Image?) -> Void
    private var current: Request?

    public typealias Success = @Sendable (Image, ImageSource) -> Void
    public typealias Failure = @Sendable (NetActivityError) -> Void

    private final class Request {
        let url: String
        let additionalIdentifier: String
        let success: Success?
        let failure: Failure?
        var receipt: String?
        init(url: String, additionalIdentifier: String, success: Success?, failure: Failure?) {
            self.url = url
            self.additionalIdentifier = additionalIdentifier
            self.success = success
            self.failure = failure
        }
    }

    public init(
        _ activity: NetActivity, decode: @escaping @Sendable ([UInt8]) -> Image?, apply: @escaping @Sendable (Image?) -> Void
    ) {
        core = activity.core
        self.decode = decode
        self.apply = apply
    }

    deinit {
        if let receipt = current?.receipt { core.mailbox.post { [core] in core.cancelDownload(receipt) } }
    }

    /// Shows the image at `url` (the request key is url + additionalIdentifier). An empty `url`
    /// cancels and shows the placeholder.
    public func setImage(
        url: String, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        core.mailbox.post { [self] in
            if let current, current.url == url, current.additionalIdentifier == additionalIdentifier { return }
            cancelCurrent()
            guard !url.isEmpty else { return apply(placeholder) }
            let request = Request(url: url, additionalIdentifier: additionalIdentifier, success: success, failure: failure)
            current = request
            // Weak from here on: a slot the app lets go cancels its receipt (deinit) and applies nothing.
            core.lookupImage(url: url, additionalIdentifier: additionalIdentifier) { [weak self] result in
                guard let self, current === request else { return }
                switch result {
                case .success(let bytes?):
                    show(bytes, from: .cache, for: request)
                case .success(nil):
                    if let placeholder { apply(placeholder) }
                    download(request)
                case .failure(let error):
                    fail(request, error)
                }
            }
        }
    }

    /// Cancels the slot's download, if any; its handlers are never called.
    public func cancel() {
        core.mailbox.post { [self] in cancelCurrent() }
    }

    private func cancelCurrent() {
        guard let request = current else { return }
        current = nil
        if let receipt = request.receipt { core.cancelDownload(receipt) }
    }

    private func download(_ request: Request) {
        core.download(url: request.url, additionalIdentifier: request.additionalIdentifier, reload: false, onReceipt: {
            [weak self, core] receipt in
            // The slot moved on (or went) while DownloadImage was out: give the receipt straight back.
            guard let self, current === request else { return core.cancelDownload(receipt) }
            request.receipt = receipt
        }) { [weak self] result in
            guard let self, current === request else { return }
            switch result {
            case .success(let cached):
                core.lookupImage(url: request.url, additionalIdentifier: request.additionalIdentifier) { [weak self] result in
                    guard let self, current === request else { return }
                    switch result {
                    case .success(let bytes?):
                        show(bytes, from: cached ? .cache : .download, for: request)
                    case .success(nil):
                        fail(request, NetActivityError(
                            .notFound, "\(request.url) was downloaded but is no longer cached"))
                    case .failure(let error):
                        fail(request, error)
                    }
                }
            case .failure(let error):
                fail(request, error)
            }
        }
    }

    private func show(_ bytes: [UInt8], from source: ImageSource, for request: Request) {
        current = nil
        guard let image = decode(bytes) else {
            request.failure?(NetActivityError(
                .notAnImage, "\(request.url) could not be decoded"))
            return
        }
        if let success = request.success { success(image, source) } else { apply(image) }
    }

    private func fail(_ request: Request, _ error: NetActivityError) {
        current = nil
        request.failure?(error)
    }
}

extension ImageSlot where Image == [UInt8] {
    /// A slot of encoded image bytes (PNG, JPEG, ...), for apps that decode themselves.
    public convenience init(_ activity: NetActivity, apply: @escaping @Sendable ([UInt8]?) -> Void) {
        self.init(activity, decode: { $0 }, apply: apply)
    }
}
