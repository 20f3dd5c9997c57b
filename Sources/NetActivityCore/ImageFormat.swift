// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// What the first bytes of an image say: its format and, for raster formats, its size. Every read
/// is bounds-checked, so truncated or hostile headers give nil, never a crash.
public struct ImageInfo: Equatable, Sendable {
    public enum Format: String, Sendable, CaseIterable {
        case png, jpeg, gif, webp, bmp, ico, svg, avif, heif, jxl

        /// The media type of the format (what the bytes are, whatever a server claimed).
        public var mediaType: String {
            switch self {
            case .png: "image/png"
            case .jpeg: "image/jpeg"
            case .gif: "image/gif"
            case .webp: "image/webp"
            case .bmp: "image/bmp"
            case .ico: "image/vnd.microsoft.icon"
            case .svg: "image/svg+xml"
            case .avif: "image/avif"
            case .heif: "image/heif"
            case .jxl: "image/jxl"
            }
        }
    }

    public let format: Format
    /// Pixels; nil for SVG (a vector format has no fixed size).
    public let width: UInt32?
    public let height: UInt32?

    public init(format: Format, width: UInt32?, height: UInt32?) {
        self.format = format
        self.width = width
        self.height = height
    }

    /// How much of a body sniffing reads at most: the header of every format, and a JPEG's
    /// segments before its frame (EXIF, ICC and XMP included), lie well within it. A body is
    /// sniffed once, whatever its size, in at most about a millisecond.
    public static let sniffedPrefix = 1 << 20
    /// Whitespace allowed before an SVG's first markup.
    static let svgLeadingSpace = 4096

    /// Sniffs `bytes` (their first `sniffedPrefix` bytes); nil when they are not an image of a
    /// known format or the header is damaged (a raster image must have a readable, non-zero width
    /// and height).
    public static func sniff(_ bytes: UnsafeRawBufferPointer) -> ImageInfo? {
        let b = Bytes(UnsafeRawBufferPointer(rebasing: bytes.prefix(sniffedPrefix)))
        if b.matches(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return png(b) }
        if b.matches(0, [0xFF, 0xD8, 0xFF]) { return jpeg(b) }
        if b.matches(0, Array("GIF87a".utf8)) || b.matches(0, Array("GIF89a".utf8)) {
            return raster(.gif, b.le16(6), b.le16(8))
        }
        if b.matches(0, Array("RIFF".utf8)), b.matches(8, Array("WEBP".utf8)) { return webp(b) }
        if b.matches(0, Array("BM".utf8)) { return bmp(b) }
        if b.matches(0, [0, 0, 1, 0]) { return ico(b) }
        if b.matches(4, Array("ftyp".utf8)) { return isoMedia(b) }
        if b.matches(0, [0xFF, 0x0A]) { return jxlCodestream(b, at: 2) }
        if b.matches(0, [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) { return jxlContainer(b) }
        return svg(b)
    }

    public static func sniff(_ bytes: [UInt8]) -> ImageInfo? {
        bytes.withUnsafeBytes { sniff($0) }
    }

    private static func raster(_ format: Format, _ w: UInt32?, _ h: UInt32?) -> ImageInfo? {
        guard let w, let h, w > 0, h > 0 else { return nil }
        return ImageInfo(format: format, width: w, height: h)
    }

    private static func png(_ b: Bytes) -> ImageInfo? {
        // The first chunk must be IHDR: length 13, then width and height, big-endian.
        guard b.matches(12, Array("IHDR".utf8)) else { return nil }
        return raster(.png, b.be32(16), b.be32(20))
    }

    private static func jpeg(_ b: Bytes) -> ImageInfo? {
        // Walk the marker segments to the first start-of-frame, which holds the size.
        var i = 2
        while i + 4 <= b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF {
                i += 1
                continue
            }  // fill byte
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) {
                i += 2
                continue
            }
            guard let length = b.be16(i + 2), length >= 2 else { return nil }
            let isFrame = (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
            if isFrame { return raster(.jpeg, b.be16(i + 7), b.be16(i + 5)) }
            if marker == 0xDA || marker == 0xD9 { return nil }  // scan data or end before any frame
            i += 2 + Int(length)
        }
        return nil
    }

    private static func webp(_ b: Bytes) -> ImageInfo? {
        if b.matches(12, Array("VP8 ".utf8)) {
            // Lossy: a key frame's start code, then 14-bit width and height.
            guard b.matches(23, [0x9D, 0x01, 0x2A]) else { return nil }
            return raster(.webp, b.le16(26).map { $0 & 0x3FFF }, b.le16(28).map { $0 & 0x3FFF })
        }
        if b.matches(12, Array("VP8L".utf8)) {
            guard b.count > 24, b[20] == 0x2F, let bits = b.le32(21) else { return nil }
            return raster(.webp, (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
        }
        if b.matches(12, Array("VP8X".utf8)) {
            return raster(.webp, b.le24(24).map { $0 + 1 }, b.le24(27).map { $0 + 1 })
        }
        return nil
    }

    private static func bmp(_ b: Bytes) -> ImageInfo? {
        guard let header = b.le32(14) else { return nil }
        if header == 12 { return raster(.bmp, b.le16(18), b.le16(20)) }  // OS/2 BITMAPCOREHEADER
        guard header >= 40, let w = b.le32(18), let h = b.le32(22) else { return nil }
        // Signed: a negative height means top-down rows.
        let width = Int32(bitPattern: w)
        let height = Int32(bitPattern: h)
        guard width > 0, height != 0, height != .min else { return nil }
        return raster(.bmp, UInt32(width), UInt32(abs(height)))
    }

    private static func ico(_ b: Bytes) -> ImageInfo? {
        // The first directory entry (16 bytes) must be there; 0 means 256 pixels.
        guard let count = b.le16(4), count > 0, b.count >= 22 else { return nil }
        return raster(.ico, b[6] == 0 ? 256 : UInt32(b[6]), b[7] == 0 ? 256 : UInt32(b[7]))
    }

    /// AVIF and HEIF (ISO base media files): the brands of the "ftyp" box say which; the size is
    /// the first image spatial extent ("ispe", a box of 20 bytes) in the prefix, where the
    /// metadata comes before the image data.
    private static func isoMedia(_ b: Bytes) -> ImageInfo? {
        guard let length = b.be32(0), length >= 16, length % 4 == 0 else { return nil }
        let avif = ["avif", "avis"].map { Array($0.utf8) }
        let heif = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].map { Array($0.utf8) }
        var brands: [Int] = [8]  // the major brand, then the compatible ones after the minor version
        brands += stride(from: 16, to: min(Int(length), b.count) - 3, by: 4)
        let format: Format
        if brands.contains(where: { at in avif.contains { b.matches(at, $0) } }) {
            format = .avif
        } else if brands.contains(where: { at in heif.contains { b.matches(at, $0) } }) {
            format = .heif
        } else {
            return nil
        }
        let ispe = Array("ispe".utf8)
        var i = Int(length)
        while i + 16 <= b.count {
            if b.matches(i, ispe), b.be32(i - 4) == 20 { return raster(format, b.be32(i + 8), b.be32(i + 12)) }
            i += 1
        }
        return nil  // no size where every writer puts it: damaged or cut short
    }

    /// A JPEG XL codestream's SizeHeader at `at` (after its two signature bytes): bits read from the
    /// least significant of each byte up.
    private static func jxlCodestream(_ b: Bytes, at start: Int) -> ImageInfo? {
        var bit = start * 8
        func read(_ count: Int) -> UInt32? {
            var value: UInt32 = 0
            for k in 0..<count {
                guard bit / 8 < b.count else { return nil }
                value |= UInt32((b[bit / 8] >> (bit % 8)) & 1) << k
                bit += 1
            }
            return value
        }
        func side(small: Bool) -> UInt32? {
            if small { return read(5).map { ($0 + 1) * 8 } }
            guard let selector = read(2), let value = read([9, 13, 18, 30][Int(selector)]) else { return nil }
            return value + 1
        }
        guard let small = read(1), let height = side(small: small == 1), let ratio = read(3) else { return nil }
        let ratios: [(UInt64, UInt64)] = [(1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1)]
        let width: UInt32?
        if ratio == 0 {
            width = side(small: small == 1)
        } else {
            let (n, d) = ratios[Int(ratio) - 1]
            width = UInt32(exactly: UInt64(height) * n / d)
        }
        return raster(.jxl, width, height)
    }

    /// A JPEG XL container: the codestream in its "jxlc" box (or the first "jxlp", after its index).
    private static func jxlContainer(_ b: Bytes) -> ImageInfo? {
        var i = 12
        while let size = b.be32(i), size >= 8 || size == 0 {
            if b.matches(i + 4, Array("jxlc".utf8)), b.matches(i + 8, [0xFF, 0x0A]) {
                return jxlCodestream(b, at: i + 10)
            }
            if b.matches(i + 4, Array("jxlp".utf8)), b.matches(i + 12, [0xFF, 0x0A]) {
                return jxlCodestream(b, at: i + 14)
            }
            guard size != 0 else { break }
            i += Int(size)
        }
        return nil
    }

    private static func svg(_ b: Bytes) -> ImageInfo? {
        // Text that opens with markup (after an optional BOM and whitespace) and has an <svg
        // element early on: an XML declaration, comments or a DOCTYPE may come first.
        var i = b.matches(0, [0xEF, 0xBB, 0xBF]) ? 3 : 0
        let spaceEnd = min(b.count, i + svgLeadingSpace)
        while i < spaceEnd, [0x20, 0x09, 0x0A, 0x0D].contains(b[i]) { i += 1 }
        guard i < spaceEnd, b[i] == UInt8(ascii: "<") else { return nil }
        let window = min(b.count, i + 4096)
        let needle = Array("<svg".utf8)
        var j = i
        while j + needle.count <= window {
            if b.matches(j, needle) {
                let after = j + needle.count < b.count ? b[j + needle.count] : 0
                if [0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ">"), UInt8(ascii: "/")].contains(after) {
                    return ImageInfo(format: .svg, width: nil, height: nil)
                }
            }
            j += 1
        }
        return nil
    }
}

/// Bounds-checked reads; nil past the end.
private struct Bytes {
    let raw: UnsafeRawBufferPointer
    init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }
    var count: Int { raw.count }
    subscript(i: Int) -> UInt8 { raw[i] }

    func matches(_ at: Int, _ pattern: [UInt8]) -> Bool {
        guard at >= 0, at + pattern.count <= raw.count else { return false }
        for (k, p) in pattern.enumerated() where raw[at + k] != p { return false }
        return true
    }

    func be16(_ at: Int) -> UInt32? {
        guard at >= 0, at + 2 <= raw.count else { return nil }
        return UInt32(raw[at]) << 8 | UInt32(raw[at + 1])
    }

    func be32(_ at: Int) -> UInt32? {
        guard at >= 0, at + 4 <= raw.count else { return nil }
        return UInt32(raw[at]) << 24 | UInt32(raw[at + 1]) << 16 | UInt32(raw[at + 2]) << 8 | UInt32(raw[at + 3])
    }

    func le16(_ at: Int) -> UInt32? {
        guard at >= 0, at + 2 <= raw.count else { return nil }
        return UInt32(raw[at]) | UInt32(raw[at + 1]) << 8
    }

    func le24(_ at: Int) -> UInt32? {
        guard at >= 0, at + 3 <= raw.count else { return nil }
        return UInt32(raw[at]) | UInt32(raw[at + 1]) << 8 | UInt32(raw[at + 2]) << 16
    }

    func le32(_ at: Int) -> UInt32? {
        guard at >= 0, at + 4 <= raw.count else { return nil }
        return UInt32(raw[at]) | UInt32(raw[at + 1]) << 8 | UInt32(raw[at + 2]) << 16 | UInt32(raw[at + 3]) << 24
    }
}

/// A response body as a transport holds it: an array, or memory of its own (the agent's sealed
/// memfd) that the cache and the disk tier read in place.
public protocol FetchedBody: Sendable {
    var count: Int { get }
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// `DiskEntry.checksum` of the bytes when it was taken already (as they arrived); nil otherwise.
    var knownChecksum: UInt64? { get }
}

extension FetchedBody {
    public var knownChecksum: UInt64? { nil }
}

extension Array: FetchedBody where Element == UInt8 {}
