// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract

/// The shared downloader and image cache, for this client: downloads waiting for their
/// DownloadFinished (receipts die with the agent that issued them), FetchImage calls, and the
/// cache's lookups and additions.
final class ClientDownloads: AgentParticipant {
    private unowned let core: ClientCore

    init(core: ClientCore) { self.core = core }

    static let downloaderInterface = NetActivityInterface.downloader.rawValue
    /// Receipts waiting for their DownloadFinished.
    private var downloads: [String: ClientCore.Completion<Void>] = [:]

    /// Asks the agent for a download and calls `done` when it has finished (true: it was cached).
    /// `onReceipt` hears the receipt as soon as the agent gives one (not for a cache hit).
    func download(
        url: String, additionalIdentifier: String, reload: Bool, destination: String? = nil,
        onReceipt: ((_ receipt: String, _ task: String) -> Void)? = nil,
        _ done: @escaping ClientCore.Completion<Bool>
    ) {
        core.query(
            DownloaderMember.Method.downloadImage.rawValue, interface: Self.downloaderInterface,
            destination: destination,
            { w in
                w.append(url)
                var options: [String: DBusValue] = [:]
                if !additionalIdentifier.isEmpty {
                    options[DownloaderMember.DownloadImageOption.additionalIdentifier.rawValue] = .string(
                        additionalIdentifier)
                }
                if reload { options[DownloaderMember.DownloadImageOption.reload.rawValue] = .bool(true) }
                try w.appendVardict(options)
            },
            reply: { [unowned self] result in
                switch result {
                case .failure(let e):
                    done(.failure(e))
                case .success(let reply):
                    var r = reply.reader()
                    guard let receipt = try? r.read(String.self), let task = try? r.readObjectPath(),
                        let cached = try? r.read(Bool.self)
                    else { return done(.failure(NetActivityError(.invalidSignature, "Unexpected reply"))) }
                    if cached { return done(.success(true)) }
                    // The receipt is the issuing agent's: it must still be the one on the bus.
                    guard let sender = reply.sender, sender == self.core.owner else {
                        return done(.failure(NetActivityError(.noReply, "The agent restarted during the download")))
                    }
                    self.downloads[receipt] = { result in done(result.map { false }) }
                    onReceipt?(receipt, task)
                }
            })
    }

    /// What `FetchImage` answered: the image's shared file, where it came from, its media type.
    struct Fetched {
        let file: SharedImageFile
        let source: DownloaderMember.FetchImageSource
        let contentType: String
    }

    /// Receipts this connection has named in FetchImage (each unique among its pending calls).
    private var nextFetchReceipt: UInt64 = 0

    func makeFetchReceipt() -> String {
        nextFetchReceipt += 1
        return "f\(nextFetchReceipt)"
    }

    /// One FetchImage: the reply carries the image (from memory, disk or network) or the error.
    /// `receipt` names the call for `cancelFetch`. No timeout of our own: the agent's transfer
    /// limits end every download, and the call with them.
    func fetch(
        url: String, additionalIdentifier: String, reload: Bool, priority: ImagePriority = .normal,
        cacheKey: String? = nil,
        maxAge: Duration? = nil, receipt: String?, announce: Bool = false, destination: String? = nil,
        _ done: @escaping ClientCore.Completion<Fetched>
    ) {
        typealias Option = DownloaderMember.FetchImageOption
        var options = Self.options(additionalIdentifier, reload, priority, receipt)
        if let cacheKey { options[Option.cacheKey.rawValue] = .string(cacheKey) }
        if let maxAge { options[Option.maxAge.rawValue] = .double(maxAge.seconds) }
        if announce { options[Option.announce.rawValue] = .bool(true) }
        downloadCall(.fetchImage, url: url, options: options, destination: destination, done) { r throws(DBusError) in
            let fd = try r.readFD()
            let size: UInt64
            let info: [String: DBusValue]
            do throws(DBusError) {
                size = try r.read(UInt64.self)
                info = try r.readVardict()
            } catch {
                close(fd)
                throw error
            }
            let file = SharedImageFile(fd: fd, size: size)
            let source =
                info[DownloaderMember.FetchImageInfo.source.rawValue]?.stringValue
                .flatMap(DownloaderMember.FetchImageSource.init(rawValue:)) ?? .network
            let type = info[DownloaderMember.FetchImageInfo.contentType.rawValue]?.stringValue ?? ""
            return .success(Fetched(file: file, source: source, contentType: type))
        }
    }

    /// One FetchPixels: FetchImage's options, a box, the colours and the frames (1: the first, or a
    /// still image; more: an animation's, up to that many); the reply carries the decoded pixels.
    func fetchPixels(
        url: String, box: PixelBox, color: DecodedImage.ColorSpace = .srgb, maxFrames: UInt32 = 1,
        additionalIdentifier: String, reload: Bool, priority: ImagePriority, receipt: String?,
        _ done: @escaping ClientCore.Completion<DecodedImage>
    ) {
        typealias Option = DownloaderMember.FetchPixelsOption
        typealias Info = DownloaderMember.FetchPixelsInfo
        var options = Self.options(additionalIdentifier, reload, priority, receipt)
        if box.maxWidth > 0 { options[Option.maxWidth.rawValue] = .uint32(box.maxWidth) }
        if box.maxHeight > 0 { options[Option.maxHeight.rawValue] = .uint32(box.maxHeight) }
        if color != .srgb { options[Option.color.rawValue] = .string(color.rawValue) }
        if maxFrames > 1 {
            options[Option.animation.rawValue] = .bool(true)
            options[Option.maxFrames.rawValue] = .uint32(min(maxFrames, NetActivityLimits.maxAnimationFrames))
        }
        downloadCall(.fetchPixels, url: url, options: options, done) { r throws(DBusError) in
            let fd = try r.readFD()
            guard let info = try? r.readVardict() else {
                close(fd)
                return .failure(NetActivityError(.invalidSignature, "Unexpected reply"))
            }
            func u32(_ key: Info) -> UInt32 { info[key.rawValue]?.uint32Value ?? 0 }
            let source = info[Info.source.rawValue]?.stringValue
            guard
                let image = DecodedImage(
                    fd: fd, width: u32(.width), height: u32(.height), stride: u32(.stride),
                    format: info[Info.format.rawValue]?.stringValue ?? "",
                    originalWidth: u32(.originalWidth), originalHeight: u32(.originalHeight),
                    source: source == DownloaderMember.FetchPixelsSource.memory.rawValue ? .cache : .download,
                    contentType: info[Info.contentType.rawValue]?.stringValue ?? "",
                    framesInFile: max(1, u32(.frames)),
                    frameDurations: info[Info.frameDurations.rawValue]?.arrayElements?.compactMap { $0.uint32Value }
                        ?? [],
                    loopCount: u32(.loopCount),
                    colorSpace: info[Info.colorSpace.rawValue]?.stringValue.flatMap(DecodedImage.ColorSpace.init)
                        ?? .srgb,
                    colorProfile: info[Info.colorProfile.rawValue]?.stringValue.flatMap(DecodedImage.ColorProfile.init)
                        ?? .none)
            else {
                return .failure(NetActivityError(.invalidSignature, "The pixels could not be mapped"))
            }
            return .success(image)
        }
    }

    /// A download call (FetchImage, FetchPixels): url and options, no timeout of our own (the
    /// agent's transfer limits end every download, and the call with them); `parse` reads the
    /// reply, a reply it cannot read failing the call with that error.
    private func downloadCall<T>(
        _ member: DownloaderMember.Method, url: String, options: [String: DBusValue], destination: String? = nil,
        _ done: @escaping ClientCore.Completion<T>,
        parse: @escaping (inout MessageReader) throws(DBusError) -> Result<T, NetActivityError>
    ) {
        core.query(
            member.rawValue, interface: Self.downloaderInterface, destination: destination,
            { w in
                w.append(url)
                try w.appendVardict(options)
            }, timeout: Self.noTimeout,
            reply: { result in
                done(
                    result.flatMap { reply in
                        var r = reply.reader()
                        do throws(DBusError) {
                            return try parse(&r)
                        } catch {
                            return .failure(NetActivityError(error))
                        }
                    })
            })
    }

    /// The options FetchImage and FetchPixels share, as far as they differ from the defaults.
    private static func options(
        _ additionalIdentifier: String, _ reload: Bool, _ priority: ImagePriority, _ receipt: String?
    ) -> [String: DBusValue] {
        typealias Option = DownloaderMember.FetchImageOption
        var options: [String: DBusValue] = [:]
        if !additionalIdentifier.isEmpty {
            options[Option.additionalIdentifier.rawValue] = .string(additionalIdentifier)
        }
        if reload { options[Option.reload.rawValue] = .bool(true) }
        if priority != .normal { options[Option.priority.rawValue] = .string(priority.rawValue) }
        if let receipt { options[Option.receipt.rawValue] = .string(receipt) }
        return options
    }

    /// libdbus's "no timeout" (DBUS_TIMEOUT_INFINITE).
    static let noTimeout: Int32 = 0x7fff_ffff

    /// A new priority for the pending FetchImage named `receipt` (SetPriority).
    func setPriority(_ priority: ImagePriority, of receipt: String) {
        core.send(
            DownloaderMember.Method.setPriority.rawValue, interface: Self.downloaderInterface,
            { w in
                w.append(receipt)
                w.append(priority.rawValue)
            }, reply: { _ in })
    }

    /// Cancels the pending FetchImage named `receipt`: it is answered `Cancelled`.
    func cancelFetch(_ receipt: String) {
        core.send(
            DownloaderMember.Method.cancelDownload.rawValue, interface: Self.downloaderInterface,
            { w in w.append(receipt) }, reply: { _ in })
    }

    // MARK: prefetch

    /// Prefetches waiting for their PrefetchFinished, by receipt.
    private var prefetches: [String: (String) -> Void] = [:]

    /// PrefetchImages: `done` hears the receipt (or why not); `finished` is called when the agent
    /// has tried every URL (or the agent left).
    func prefetch(
        _ urls: [String], _ done: @escaping ClientCore.Completion<String>,
        finished: @escaping (_ receipt: String) -> Void
    ) {
        core.query(
            DownloaderMember.Method.prefetchImages.rawValue, interface: Self.downloaderInterface,
            { w in
                w.appendArray(elementSignature: "s") { a in for url in urls { a.append(url) } }
                try w.appendVardict([:])
            },
            reply: { [unowned self] result in
                done(
                    result.flatMap { reply in
                        var r = reply.reader()
                        guard let receipt = try? r.read(String.self), reply.sender == self.core.owner else {
                            return .failure(NetActivityError(.invalidSignature, "Unexpected reply"))
                        }
                        self.prefetches[receipt] = finished
                        return .success(receipt)
                    })
            })
    }

    /// CancelPrefetch: `urls` of the prefetch `receipt`, or all of it when empty.
    func cancelPrefetch(_ receipt: String, urls: [String]) {
        if urls.isEmpty { prefetches[receipt] = nil }
        core.send(
            DownloaderMember.Method.cancelPrefetch.rawValue, interface: Self.downloaderInterface,
            { w in
                w.append(receipt)
                w.appendArray(elementSignature: "s") { a in for url in urls { a.append(url) } }
            }, reply: { _ in })
    }

    /// The cached image's bytes for (url, additionalIdentifier), or nil on a miss: read through
    /// its memfd (OpenImageForRequest), which serves images of any size (LookupImage carries at
    /// most 1 MiB).
    func lookupImage(url: String, additionalIdentifier: String, _ done: @escaping ClientCore.Completion<[UInt8]?>) {
        openImage(url: url, additionalIdentifier: additionalIdentifier) { result in done(result.map { $0?.readAll() }) }
    }

    /// AddImage[ForRequest] for an image of at most 1 MiB; AddImageFromFd[ForRequest], with the
    /// bytes in a sealed memfd, for a larger one (the agent keeps that memory, no copy). `key`
    /// writes the identifier, or the url and additional identifier.
    static func addImageCall(_ data: [UInt8], forRequest: Bool, key: @escaping @Sendable (inout MessageWriter) -> Void)
        -> (member: String, body: @Sendable (inout MessageWriter) throws -> Void)
    {
        typealias M = ImageCacheMember.Method
        guard data.count > NetActivityLimits.maxInlineImageBytes else {
            return (
                (forRequest ? M.addImageForRequest : M.addImage).rawValue,
                { w in
                    key(&w)
                    try w.appendBytes(data)
                }
            )
        }
        return (
            (forRequest ? M.addImageFromFdForRequest : M.addImageFromFd).rawValue,
            { w in
                key(&w)
                guard let fd = data.withUnsafeBytes({ SealedMemory.make(name: "netactivity-image", bytes: $0) }) else {
                    throw DBusError.failed("Could not put the image in a memfd: \(String(cString: strerror(errno)))")
                }
                defer { close(fd) }
                try w.appendFD(fd)
            }
        )
    }

    /// The cached image for (url, additionalIdentifier) as a shared read-only file, or nil on a
    /// miss: no copy through the bus, whatever its size (the reader copies once, off this thread).
    func openImage(url: String, additionalIdentifier: String, _ done: @escaping ClientCore.Completion<SharedImageFile?>)
    {
        openImage(
            .openImageForRequest,
            { w in
                w.append(url)
                w.append(additionalIdentifier)
            }, done)
    }

    /// OpenImage or OpenImageForRequest: the sealed memfd, or nil on a miss.
    func openImage(
        _ member: ImageCacheMember.Method, _ body: @escaping (inout MessageWriter) throws -> Void,
        _ done: @escaping ClientCore.Completion<SharedImageFile?>
    ) {
        core.request(
            member.rawValue, interface: NetActivity.cacheInterface, body,
            decode: { r throws(DBusError) in
                let fd = try r.readFD()
                return SharedImageFile(fd: fd, size: (try? r.read(UInt64.self)) ?? 0)
            }
        ) { result in
            if case .failure(let e) = result, e.code == .notFound { return done(.success(nil)) }
            done(result.map { $0 })
        }
    }

    /// A lookup's (b found, ay data).
    static func decodeLookup(_ r: inout MessageReader) throws(DBusError) -> [UInt8]? {
        let found = try r.read(Bool.self)
        let data = try r.readBytes()
        return found ? data : nil
    }

    // MARK: the bus and the agent

    /// DownloadFinished is sent to us alone: no match rule, only a handler.
    func connected(_ c: Connection) {
        c.onSignal(
            SignalMatch(
                path: ClientCore.path, interface: Self.downloaderInterface,
                member: DownloaderMember.Signal.downloadFinished.rawValue)
        ) {
            [unowned self] message in
            guard message.sender == self.core.owner else { return }
            var r = message.reader()
            guard let receipt = try? r.read(String.self), (try? r.read(String.self)) != nil,
                let ok = try? r.read(Bool.self),
                let name = try? r.read(String.self), let text = try? r.read(String.self),
                let done = self.downloads.removeValue(forKey: receipt)
            else { return }
            done(ok ? .success(()) : .failure(NetActivityError(name: name, message: text)))
        }
        c.onSignal(
            SignalMatch(
                path: ClientCore.path, interface: Self.downloaderInterface,
                member: DownloaderMember.Signal.prefetchFinished.rawValue)
        ) {
            [unowned self] message in
            guard message.sender == self.core.owner else { return }
            var r = message.reader()
            guard let receipt = try? r.read(String.self), let finished = self.prefetches.removeValue(forKey: receipt)
            else { return }
            finished(receipt)
        }
    }

    /// Receipts die with the agent that issued them.
    func agentLeft() { failAll(NetActivityError(.noReply, "The agent restarted during the download")) }

    func shutDown() { failAll(ClientCore.closedError) }

    private func failAll(_ error: NetActivityError) {
        let orphaned = downloads
        downloads = [:]
        for done in orphaned.values { done(.failure(error)) }
        let prefetching = prefetches
        prefetches = [:]
        for (receipt, finished) in prefetching { finished(receipt) }
    }
}
