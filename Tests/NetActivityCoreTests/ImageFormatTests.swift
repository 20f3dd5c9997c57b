// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import NetActivityTesting
import Testing

@Suite("Image sniffing")
struct ImageFormatTests {
    static let samples: [([UInt8], ImageInfo)] = [
        (TestImages.png(width: 640, height: 480), ImageInfo(format: .png, width: 640, height: 480)),
        (TestImages.jpeg(width: 1920, height: 1080), ImageInfo(format: .jpeg, width: 1920, height: 1080)),
        (TestImages.gif(width: 16, height: 9), ImageInfo(format: .gif, width: 16, height: 9)),
        (TestImages.webpLossy(width: 300, height: 200), ImageInfo(format: .webp, width: 300, height: 200)),
        (TestImages.webpLossless(width: 5000, height: 1), ImageInfo(format: .webp, width: 5000, height: 1)),
        (TestImages.webpExtended(width: 70000, height: 3), ImageInfo(format: .webp, width: 70000, height: 3)),
        (TestImages.bmp(width: 12, height: -34), ImageInfo(format: .bmp, width: 12, height: 34)),
        (TestImages.ico(width: 0, height: 48), ImageInfo(format: .ico, width: 256, height: 48)),
        (TestImages.svg(), ImageInfo(format: .svg, width: nil, height: nil)),
        (
            TestImages.isoMedia(brand: "avif", width: 4032, height: 3024),
            ImageInfo(format: .avif, width: 4032, height: 3024)
        ),
        (TestImages.isoMedia(brand: "heic", width: 512, height: 7), ImageInfo(format: .heif, width: 512, height: 7)),
        (TestImages.jxl(width: 100_000, height: 3), ImageInfo(format: .jxl, width: 100_000, height: 3)),
        (
            [0, 0, 0, 0x0C] + Array("JXL \r\n".utf8) + [0x87, 0x0A] + [0, 0, 0, 29] + Array("jxlc".utf8)
                + TestImages.jxl(width: 640, height: 480),
            ImageInfo(format: .jxl, width: 640, height: 480)
        ),
        (
            TestImages.svg("\u{FEFF}<?xml version=\"1.0\"?>\n<!-- logo -->\n<svg viewBox=\"0 0 1 1\"></svg>"),
            ImageInfo(format: .svg, width: nil, height: nil)
        ),
    ]

    @Test("each format and its size are read from the header", arguments: samples)
    func sniff(bytes: [UInt8], expected: ImageInfo) {
        #expect(ImageInfo.sniff(bytes) == expected)
    }

    @Test(
        "not images",
        arguments: [
            [UInt8](), Array("hello".utf8), Array("<html><body>svg</body></html>".utf8), Array("<svgfoo/>".utf8),
            [0x89, 0x50, 0x4E, 0x47], Array("GIF89a".utf8) + [0, 0, 0, 0], TestImages.png(width: 0, height: 5),
            TestImages.bmp(width: -4, height: 4), Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPJUNK".utf8),
        ])
    func rejects(bytes: [UInt8]) {
        #expect(ImageInfo.sniff(bytes) == nil)
    }

    @Test("every truncation of every sample is either refused or read the same, never a crash")
    func truncations() {
        for (bytes, expected) in Self.samples where expected.format != .svg {
            for n in 0..<bytes.count {
                let result = ImageInfo.sniff(Array(bytes.prefix(n)))
                #expect(result == nil || result == expected, "\(expected.format) cut at \(n)")
            }
        }
    }

    @Test("hostile bytes after every magic number never crash")
    func hostile() {
        var rng = SplitMix(seed: 42)
        let magics: [[UInt8]] = [
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], [0xFF, 0xD8, 0xFF], Array("GIF89a".utf8),
            Array("RIFF".utf8), Array("BM".utf8), [0, 0, 1, 0], Array("<".utf8),
        ]
        for _ in 0..<2000 {
            let magic = magics[Int(rng.next() % UInt64(magics.count))]
            var bytes = magic + (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if magic == Array("RIFF".utf8), bytes.count > 12 { bytes.replaceSubrange(8..<12, with: Array("WEBP".utf8)) }
            if let info = ImageInfo.sniff(bytes), info.format != .svg {
                #expect((info.width ?? 0) > 0 && (info.height ?? 0) > 0)
            }
        }
    }
}
