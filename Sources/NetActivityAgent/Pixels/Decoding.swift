// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore

/// One decode per image and box for every asker: an image's bytes decoded in a `DecoderRunner`'s
/// sandboxed processes (never the agent), kept in the `PixelTier`, and every request for the same
/// entry that comes while it is decoded answered by that one decode. The one place decoder
/// failures become the contract's errors.
final class Decoding {
    private let tier: PixelTier
    private let context: AgentContext
    private let loop: EventLoop
    /// Started at the first decode (none without an installed decoder).
    private lazy var decoders: DecoderRunner? = DecoderSandbox.installed().map { [context, loop] sandbox in
        let runner = DecoderRunner(
            sandbox: sandbox, loop: loop, scheduler: context.scheduler, accounts: context.accounts)
        runner.warn = { context.logger.warning("\($0)") }
        return runner
    }
    /// Replies waiting for the decode of an entry under way.
    private var underWay: [PixelKey: [(Result<CachedPixels, NetActivityError>) -> Void]] = [:]

    /// What the tier and its decoders did since the agent started (DecodedStatistics).
    struct Statistics: Equatable {
        var tier = CacheStatistics()
        /// Images decoded, and decodes that failed.
        var decodes: UInt64 = 0
        var decodeFailures: UInt64 = 0
        /// Requests answered by another request's decode, under way when they came.
        var sharedDecodes: UInt64 = 0
        var decodersStarted: UInt64 = 0
        var decodersReplaced: UInt64 = 0
    }
    private var counts = Statistics()
    var statistics: Statistics {
        var s = counts
        s.tier = tier.statistics
        s.decodersStarted = decoders?.started ?? 0
        s.decodersReplaced = decoders?.replaced ?? 0
        return s
    }

    init(tier: PixelTier, context: AgentContext, loop: EventLoop) {
        self.tier = tier
        self.context = context
        self.loop = loop
    }

    /// Decodes `body` (an image of `contentType`) for `reader` (its queue share), keeps the pixels
    /// under `key` charged to `owner` (the app that asked first: one app's churn evicts its own
    /// entries first), and answers `reply` on a later turn. A decode of `key` under way already
    /// answers this request too.
    func decode(
        _ body: any FetchedBody, contentType: String, key: PixelKey, owner: String, reader: String,
        reply: @escaping (Result<CachedPixels, NetActivityError>) -> Void
    ) {
        if underWay[key] != nil {
            underWay[key]!.append(reply)
            counts.sharedDecodes += 1
            return
        }
        underWay[key] = [reply]
        let fd = body.sealedReadOnly()
        let finish = bound(self) { (me, result: Result<CachedPixels, NetActivityError>) in
            for reply in me.underWay.removeValue(forKey: key) ?? [] { reply(result) }
        }
        guard let fd, let decoders else {
            if let fd { Closer.close(fd) }
            let why =
                decoders == nil
                ? "the image decoder (netactivity-decoder) is not installed" : "the image could not be handed over"
            context.scheduler.schedule(afterNanoseconds: 0) { finish(.failure(NetActivityError(.decode, why))) }
            return
        }
        // SVG goes to a decoder of its own (librsvg's), the rest to the raster decoders.
        let kind: DecoderPool.Kind = contentType == ImageInfo.Format.svg.mediaType ? .svg : .images
        _ = decoders.decode(image: fd, ask: key.ask, kind: kind, owner: reader) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let pixels):
                counts.decodes += 1
                let entry = CachedPixels(
                    pixels: pixels, contentType: contentType, storedAt: context.scheduler.nowNanoseconds)
                // Too large for the tier is still an answer: kept or not, the askers get it.
                tier.keep(entry, key, owner: owner)
                finish(.success(entry))
            case .failure(let failure):
                if case .busy = failure {} else { counts.decodeFailures += 1 }
                finish(.failure(Self.error(failure)))
            }
        }
    }

    /// The contract's error for a decode that failed.
    static func error(_ failure: DecodeFailure) -> NetActivityError {
        switch failure {
        case .notAnImage(let why): NetActivityError(.notAnImage, why)
        case .tooLarge(let why): NetActivityError(.tooLarge, why)
        case .failed(let why): NetActivityError(.decode, why)
        case .busy(let why): NetActivityError(.limitsExceeded, why)
        }
    }
}
