// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract
import NetActivityCore
import NetActivityTesting
import Testing

@testable import NetActivityAgent

/// FetchPixels through the real DownloadService, its fake transport and real decoders (built
/// beside the tests): one decode for every request of an image and box, the tier's hits, a box
/// of its own.
@Suite("Decoding: one decode per image and box, then the tier", .serialized, .timeLimit(.minutes(1)))
struct DecodingTests {
    typealias O = DownloaderMember.FetchPixelsOption
    static let url = "https://img.example.org/photo.png"
    let h = DriverHarness()

    func fetchPixels(_ caller: String, width: UInt32) throws {
        try h.call(caller, DownloaderMember.Method.fetchPixels.rawValue, interface: .downloader) { w in
            w.append(Self.url)
            try w.appendVardict([O.maxWidth.rawValue: .uint32(width), O.maxHeight.rawValue: .uint32(width)])
        }
    }

    /// The FetchPixels answers sent so far: each its width (a return) or its error name.
    func answers() -> [String] {
        h.sink.sent.compactMap { entry in
            let m = entry.message
            if m.kind == .error { return m.errorName }
            guard m.kind == .methodReturn else { return nil }
            var r = m.reader()
            guard (try? r.readFD()).map({ close($0) }) != nil, let info = try? r.readVardict(),
                let width = info[DownloaderMember.FetchPixelsInfo.width.rawValue]?.uint32Value
            else { return nil }
            return "width \(width)"
        }
    }

    /// Runs the decoders' loop and the manual clock until `count` answers are out (or 20 s).
    func run(until count: Int) {
        let deadline = EventLoop.now() + 20_000_000_000
        var t = Double(h.scheduler.nowNanoseconds) / 1e9
        while answers().count < count, EventLoop.now() < deadline {
            h.loop.runOnce(maxWaitNanoseconds: 20_000_000)
            t += 0.001
            h.at(t)
        }
    }

    @Test("three callers of one image and box: one transfer, one decode; later callers hit the tier; a new box decodes")
    func oneDecode() throws {
        try #require(DecoderRunnerTests.decoder != nil, "the decoder is built beside the tests")
        for caller in [":1.7", ":1.8", ":1.9"] { try fetchPixels(caller, width: 16) }
        #expect(h.transport.requested == [Self.url], "one transfer for all")
        h.transport.respond(Self.url, bytes: TestImages.decodablePNG(width: 64, height: 64, rgba: (9, 8, 7, 255)))
        run(until: 3)
        #expect(answers() == ["width 16", "width 16", "width 16"])
        let pixels = h.downloads.decoding.statistics
        #expect(pixels.decodes == 1, "one decode answered all three")
        #expect(pixels.sharedDecodes == 2)
        // The same image and box again: the tier's, no decode.
        try fetchPixels(":1.10", width: 16)
        run(until: 4)
        #expect(h.downloads.decoding.statistics.decodes == 1)
        #expect(h.downloads.decoding.statistics.tier.hits == 1)
        // Another box: a decode of its own, of the image kept in the cache (no transfer).
        try fetchPixels(":1.10", width: 32)
        run(until: 5)
        #expect(answers().last == "width 32")
        #expect(h.downloads.decoding.statistics.decodes == 2)
        #expect(h.transport.requested.count == 1)
    }

    @Test("bytes that are no image: every caller hears NotAnImage, and nothing is kept")
    func notAnImage() throws {
        try #require(DecoderRunnerTests.decoder != nil)
        try fetchPixels(":1.7", width: 16)
        try fetchPixels(":1.8", width: 16)
        h.transport.respond(Self.url, bytes: Array("<html>not an image</html>".utf8))
        run(until: 2)
        #expect(answers().count == 2)
        #expect(answers() == Array(repeating: NetActivityError.Name.notAnImage.rawValue, count: 2))
        #expect(h.downloads.decoding.statistics.tier.insertions == 0)
    }
}
