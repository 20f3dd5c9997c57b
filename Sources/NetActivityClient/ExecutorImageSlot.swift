// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import Dispatch
import LinuxKit
import Synchronization

/// One place that shows one image at a time, delivering on a `CallbackExecutor`: for a UI that
/// runs its own executor (a GLib main context through `CallbackExecutor.glibMainContext()`) or
/// code off the main actor. `setImage` and `cancel` may be called from any thread. The placeholder
/// shows when no answer has come within `placeholderDelay` (50 ms unless given): a hit in memory
/// answers far sooner and shows none, and neither does a disk hit that quick. A delay of zero shows
/// it at once on every request (the answer follows a moment later). `apply` and the handlers run on
/// `callbacks`, one at a time and in order; `decode` runs off it, on `decodeQueue`: Swift's global
/// queue unless given (a serial queue of the app's bounds how many of its images decode at once,
/// and decodes them in the order their answers came).
public final class ExecutorImageSlot<Image>: Sendable {
    public typealias Success = @Sendable (Image, ImageSource) -> Void
    public typealias Failure = @Sendable (NetActivityError) -> Void

    /// A placeholder or a decoded image on its way to `callbacks`, untouched in between: images
    /// are touched only there (placeholders are the app's, decoded ones were `sending`).
    private struct Carried: @unchecked Sendable {
        let image: Image?
    }

    private let loader: SlotLoader
    private let callbacks: CallbackExecutor
    private let maker: SlotImageMaker<Image>
    private let apply: @Sendable (Image?) -> Void
    private let decodeQueue: DispatchQueue

    /// A slot that decodes the encoded image itself, in `decode`.
    public convenience init(
        _ activity: NetActivity, callbacks: CallbackExecutor, placeholderDelay: Duration = .milliseconds(50),
        decodeQueue: DispatchQueue = .global(qos: .userInitiated),
        decode: @escaping @Sendable ([UInt8]) -> sending Image?, apply: @escaping @Sendable (Image?) -> Void
    ) {
        self.init(
            activity, callbacks: callbacks, placeholderDelay: placeholderDelay, decodeQueue: decodeQueue,
            maker: .decode(decode), box: .unbounded, apply: apply)
    }

    /// A slot whose images the agent decodes (as `ImageSlot`'s `pixels:` face): `pixels` makes the
    /// app's image from the mapped pixels, on `decodeQueue`.
    public convenience init(
        _ activity: NetActivity, callbacks: CallbackExecutor, placeholderDelay: Duration = .milliseconds(50),
        decodeQueue: DispatchQueue = .global(qos: .userInitiated), maxWidth: UInt32 = 0, maxHeight: UInt32 = 0,
        pixels: @escaping @Sendable (DecodedImage) -> sending Image?, apply: @escaping @Sendable (Image?) -> Void
    ) {
        self.init(
            activity, callbacks: callbacks, placeholderDelay: placeholderDelay, decodeQueue: decodeQueue,
            maker: .wrap(pixels), box: PixelBox(maxWidth: maxWidth, maxHeight: maxHeight), apply: apply)
    }

    private init(
        _ activity: NetActivity, callbacks: CallbackExecutor, placeholderDelay: Duration, decodeQueue: DispatchQueue,
        maker: SlotImageMaker<Image>, box: PixelBox, apply: @escaping @Sendable (Image?) -> Void
    ) {
        loader = SlotLoader(
            core: activity.core, placeholderDelay: placeholderDelay.nanoseconds, asking: maker.asking(box))
        self.decodeQueue = decodeQueue
        self.callbacks = callbacks
        self.maker = maker
        self.apply = apply
    }

    /// Shows the image at `url` (the request key is url + additionalIdentifier). An empty `url`
    /// cancels and shows the placeholder.
    public func setImage(
        url: String, additionalIdentifier: String = "", placeholder: Image? = nil,
        success: Success? = nil, failure: Failure? = nil
    ) {
        let placeholder = Carried(image: placeholder)
        let (callbacks, maker, apply, decodeQueue) = (callbacks, maker, apply, decodeQueue)
        // Checked where each answer is used: a newer request drops an older one's answers.
        let isNewest: @Sendable (UInt64) -> Bool = { [weak loader] token in loader?.isNewest(token) == true }
        loader.load(
            url: url, additionalIdentifier: additionalIdentifier,
            events: SlotLoader.Events(
                placeholder: { token in
                    guard placeholder.image != nil else { return }
                    callbacks { if isNewest(token) { apply(placeholder.image) } }
                },
                cleared: { token in callbacks { if isNewest(token) { apply(placeholder.image) } } },
                answer: { answer, source, token in
                    makeOffTheUI(answer, maker, on: decodeQueue) { _, image in
                        let decoded = Carried(image: image)
                        callbacks {
                            guard isNewest(token) else { return }
                            guard let image = decoded.image else {
                                failure?(NetActivityError(.notAnImage, "\(url) could not be decoded"))
                                return
                            }
                            if let success { success(image, source) } else { apply(image) }
                        }
                    }
                },
                failure: { error, _, token in
                    callbacks { if isNewest(token) { failure?(error) } }
                }))
    }

    /// Cancels the slot's download, if any; its handlers are never called.
    public func cancel() { loader.cancel() }

    /// As `ImageSlot.setVisible`: `.high` while visible, `.low` while hidden; from any thread.
    public func setVisible(_ visible: Bool) { setPriority(visible ? .high : .low) }

    /// The priority of the slot's requests, the one under way included (`.normal` until set).
    public func setPriority(_ priority: ImagePriority) { loader.setPriority(priority) }
}

extension ExecutorImageSlot where Image == [UInt8] {
    /// A slot of encoded image bytes (PNG, JPEG, ...), for apps that decode themselves.
    public convenience init(
        _ activity: NetActivity, callbacks: CallbackExecutor, placeholderDelay: Duration = .milliseconds(50),
        decodeQueue: DispatchQueue = .global(qos: .userInitiated), apply: @escaping @Sendable ([UInt8]?) -> Void
    ) {
        self.init(
            activity, callbacks: callbacks, placeholderDelay: placeholderDelay, decodeQueue: decodeQueue,
            decode: { $0 },
            apply: apply)
    }
}

extension ExecutorImageSlot where Image == DecodedImage {
    /// A slot of the agent's decoded pixels, as they are (`DecodedImage`).
    public convenience init(
        _ activity: NetActivity, callbacks: CallbackExecutor, placeholderDelay: Duration = .milliseconds(50),
        maxWidth: UInt32 = 0, maxHeight: UInt32 = 0, apply: @escaping @Sendable (DecodedImage?) -> Void
    ) {
        self.init(
            activity, callbacks: callbacks, placeholderDelay: placeholderDelay, maxWidth: maxWidth,
            maxHeight: maxHeight, pixels: { $0 }, apply: apply)
    }
}
