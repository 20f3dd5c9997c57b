// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Minimal, well-formed image headers of every format the cache accepts, for tests and the
/// benchmark. `padding` appends bytes so an image can have any size (the cache sniffs headers
/// and does not decode pixels).
public enum TestImages {
    public static func png(width: UInt32, height: UInt32, padding: Int = 0) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + Array("IHDR".utf8) + be32(width) + be32(height)
            + [8, 6, 0, 0, 0] + [0, 0, 0, 0] + pad(padding)
    }

    /// A whole PNG a decoder reads: `width` x `height` pixels of one RGBA colour, its rows deflated
    /// as stored blocks (no compression), with real CRCs and Adler-32.
    public static func decodablePNG(width: UInt32, height: UInt32, rgba: (UInt8, UInt8, UInt8, UInt8)) -> [UInt8] {
        var raw: [UInt8] = []
        for _ in 0..<height {
            raw.append(0)  // filter: none
            for _ in 0..<width { raw += [rgba.0, rgba.1, rgba.2, rgba.3] }
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let n = min(65535, raw.count - offset)
            zlib += [offset + n == raw.count ? 1 : 0] + le16(UInt16(n)) + le16(~UInt16(n))
            zlib += raw[offset..<offset + n]
            offset += n
        } while offset < raw.count
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in raw {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        zlib += be32(b << 16 | a)
        func chunk(_ kind: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(kind.utf8) + data
            return be32(UInt32(data.count)) + body + be32(crc32(body))
        }
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", be32(width) + be32(height) + [8, 6, 0, 0, 0]) + chunk("IDAT", zlib) + chunk("IEND", [])
    }

    /// CRC-32 (ISO 3309, as PNG sums its chunks).
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return ~crc
    }

    public static func jpeg(width: UInt16, height: UInt16, padding: Int = 0) -> [UInt8] {
        // SOI, an APP0 segment, then SOF0 with the size, then EOI.
        [0xFF, 0xD8] + [0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
            + [0xFF, 0xC0, 0x00, 0x11, 0x08] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]
            + pad(padding) + [0xFF, 0xD9]
    }

    public static func gif(width: UInt16, height: UInt16, padding: Int = 0) -> [UInt8] {
        Array("GIF89a".utf8) + le16(width) + le16(height) + [0, 0, 0] + pad(padding) + [0x3B]
    }

    public static func webpLossy(width: UInt16, height: UInt16) -> [UInt8] {
        riff("VP8 ", [0x30, 0x01, 0x00, 0x9D, 0x01, 0x2A] + le16(width) + le16(height) + [0, 0])
    }

    public static func webpLossless(width: UInt32, height: UInt32) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14
        return riff("VP8L", [0x2F] + le32(bits) + [0, 0, 0])
    }

    public static func webpExtended(width: UInt32, height: UInt32) -> [UInt8] {
        riff("VP8X", [0, 0, 0, 0] + Array(le32(width - 1).prefix(3)) + Array(le32(height - 1).prefix(3)))
    }

    public static func bmp(width: Int32, height: Int32) -> [UInt8] {
        Array("BM".utf8) + le32(54) + [0, 0, 0, 0] + le32(54) + le32(40)
            + le32(UInt32(bitPattern: width)) + le32(UInt32(bitPattern: height)) + [1, 0, 24, 0]
            + [UInt8](repeating: 0, count: 24)
    }

    public static func ico(width: UInt8, height: UInt8) -> [UInt8] {
        [0, 0, 1, 0, 1, 0] + [width, height, 0, 0, 1, 0, 32, 0] + le32(40) + le32(22)
    }

    public static func svg(_ text: String = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"16\" height=\"16\"/>")
        -> [UInt8]
    {
        Array(text.utf8)
    }

    static func riff(_ chunk: String, _ payload: [UInt8]) -> [UInt8] {
        let body = Array("WEBP".utf8) + Array(chunk.utf8) + le32(UInt32(payload.count)) + payload
        return Array("RIFF".utf8) + le32(UInt32(body.count)) + body
    }

    static func pad(_ n: Int) -> [UInt8] { [UInt8](repeating: 0xA5, count: n) }
    static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func le32(_ v: UInt32) -> [UInt8] {
        [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
    }

    /// An ISO base media file's start: its "ftyp" box of `brand` (AVIF's "avif", HEIF's "heic"),
    /// and a "meta" box whose "ispe" says `width` x `height`.
    public static func isoMedia(brand: String, width: UInt32, height: UInt32) -> [UInt8] {
        func be32(_ v: UInt32) -> [UInt8] {
            [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
        }
        let ftyp = be32(24) + Array("ftyp".utf8) + Array(brand.utf8) + be32(0) + Array("mif1".utf8) + Array(brand.utf8)
        let ispe = be32(20) + Array("ispe".utf8) + be32(0) + be32(width) + be32(height)
        let meta = be32(UInt32(12 + ispe.count)) + Array("meta".utf8) + be32(0) + ispe
        return ftyp + meta
    }

    /// A JPEG XL codestream's start: its signature and a SizeHeader of `width` x `height` (the
    /// 30-bit form of each side), then default metadata.
    public static func jxl(width: UInt32, height: UInt32) -> [UInt8] {
        var bits: [UInt8] = []
        func put(_ value: UInt32, _ count: Int) { for k in 0..<count { bits.append(UInt8((value >> k) & 1)) } }
        put(0, 1)
        put(3, 2)
        put(height - 1, 30)
        put(0, 3)
        put(3, 2)
        put(width - 1, 30)
        put(1, 1)
        while bits.count % 8 != 0 { bits.append(0) }
        return [0xFF, 0x0A]
            + stride(from: 0, to: bits.count, by: 8).map { at in
                (0..<8).reduce(UInt8(0)) { $0 | bits[at + $1] << $1 }
            }
    }

    /// A decodable animated GIF: a `colors.count` x 1 screen on which frame k paints pixel k in
    /// colour k (r, g, b) and stays `hundredths` of a second; played `repeats` more times after the
    /// first (0: for ever).
    public static func animatedGIF(colors: [(UInt8, UInt8, UInt8)], hundredths: UInt16, repeats: UInt16 = 0) -> [UInt8]
    {
        // A global table of the colours (2^(n+1) entries), then per frame a graphic control block
        // and a one-pixel image of colour k: LZW with a minimum code size of 7 (clear 128, end 129).
        var table: [UInt8] = []
        for (r, g, b) in colors { table += [r, g, b] }
        table += [UInt8](repeating: 0, count: 3 * 128 - table.count)
        var out = Array("GIF89a".utf8) + le16(UInt16(colors.count)) + le16(1) + [0xF6, 0, 0] + table
        out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1] + le16(repeats) + [0]
        for k in 0..<colors.count {
            out += [0x21, 0xF9, 4, 0x04] + le16(hundredths) + [0, 0]  // keep what was drawn
            out += [0x2C] + le16(UInt16(k)) + le16(0) + le16(1) + le16(1) + [0]
            // Codes of 8 bits: clear (128), the index, end (129).
            out += [7, 3, 128, UInt8(k), 129, 0]
        }
        return out + [0x3B]
    }
}
