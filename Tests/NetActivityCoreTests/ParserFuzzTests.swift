// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import NetActivityCore
import NetActivityTesting
import Testing

/// Seeded property-based fuzzing of the pure parsers that read bytes from outside: image headers
/// (any app's data), HTTP cache headers (any server's), and disk entries (a damaged disk). Each
/// run is the same (fixed seeds), bounded in count, and under `make asan` any read past a buffer
/// would abort. Set NETACTIVITY_FUZZ_ROUNDS to run longer (the soak does).
@Suite("Parser fuzzing")
struct ParserFuzzTests {
    static let rounds: Int = {
        if let v = getenvString("NETACTIVITY_FUZZ_ROUNDS"), let n = Int(v), n > 0 { return n }
        return 1
    }()

    static let seeds: [[UInt8]] = [
        TestImages.png(width: 640, height: 480), TestImages.jpeg(width: 1920, height: 1080),
        TestImages.gif(width: 16, height: 9),
        TestImages.webpLossy(width: 300, height: 200), TestImages.webpLossless(width: 5000, height: 1),
        TestImages.webpExtended(width: 70000, height: 3), TestImages.bmp(width: 12, height: -34),
        TestImages.ico(width: 0, height: 48), TestImages.svg(),
        TestImages.isoMedia(brand: "avif", width: 640, height: 480),
        TestImages.isoMedia(brand: "heic", width: 4032, height: 3024), TestImages.jxl(width: 800, height: 600),
    ]

    /// One random edit: flip a bit, set a byte to an edge value, insert, delete, duplicate a run,
    /// or splice in a piece of another seed.
    static func mutate(_ input: [UInt8], _ rng: inout SplitMix) -> [UInt8] {
        var b = input
        let edges: [UInt8] = [0, 1, 0x7F, 0x80, 0xFE, 0xFF, UInt8(ascii: "<"), UInt8(ascii: ">")]
        for _ in 0...(rng.next() % 4) {
            let pos = b.isEmpty ? 0 : Int(rng.next() % UInt64(b.count))
            switch rng.next() % 6 {
            case 0 where !b.isEmpty: b[pos] ^= UInt8(1 << (rng.next() % 8))
            case 1 where !b.isEmpty: b[pos] = edges[Int(rng.next() % UInt64(edges.count))]
            case 2: b.insert(UInt8(truncatingIfNeeded: rng.next()), at: pos)
            case 3 where !b.isEmpty: b.remove(at: pos)
            case 4 where !b.isEmpty:
                let end = min(b.count, pos + 1 + Int(rng.next() % 16))
                b.insert(contentsOf: b[pos..<end], at: pos)
            default:
                let other = seeds[Int(rng.next() % UInt64(seeds.count))]
                let from = Int(rng.next() % UInt64(other.count))
                b.insert(contentsOf: other[from..<min(other.count, from + 1 + Int(rng.next() % 32))], at: pos)
            }
        }
        return b
    }

    @Test(
        "image sniffing: 100,000 mutated headers, never a crash, raster sizes always > 0, same answer from any buffer")
    func sniffing() {
        var rng = SplitMix(seed: 0x5EED_0001)
        var found = [ImageInfo.Format: Int]()
        for _ in 0..<(100_000 * Self.rounds) {
            let seed = Self.seeds[Int(rng.next() % UInt64(Self.seeds.count))]
            let bytes = Self.mutate(seed, &rng)
            let info = ImageInfo.sniff(bytes)
            if let info {
                found[info.format, default: 0] += 1
                if info.format != .svg {
                    #expect((info.width ?? 0) > 0 && (info.height ?? 0) > 0)
                }
            }
            // The same bytes at the very end of a larger allocation: a read past the end would
            // see the padding (and ASan would stop it); the answer must not change.
            let padded = [UInt8](repeating: 0xAA, count: 32) + bytes
            let again = padded.withUnsafeBytes { ImageInfo.sniff(UnsafeRawBufferPointer(rebasing: $0[32...])) }
            #expect(again == info)
        }
        // The mutations kept enough of each format alive to exercise its parser.
        #expect(found.keys.count == ImageInfo.Format.allCases.count, "\(found)")
    }

    @Test("Cache-Control: 50,000 random values from its own vocabulary; max-age only ever 0...1 year")
    func cacheControl() {
        var rng = SplitMix(seed: 0x5EED_0002)
        let words = [
            "no-store", "NO-CACHE", "no-cache=\"set-cookie, x\"", "max-age", "=", ",", " ", "\"", "must-revalidate",
            "max-age=0", "max-age=60", "max-age=-1", "max-age=99999999999999999999", "max-age=\"30\"", "max-age=1e3",
            "private", "\u{0}", "é", "💥", "\t", "max-age= 5", "s-maxage=5", ";", "max-age=18446744073709551616",
        ]
        for _ in 0..<(50_000 * Self.rounds) {
            let value = (0..<Int(rng.next() % 12)).map { _ in words[Int(rng.next() % UInt64(words.count))] }.joined()
            let parsed = CacheControl.parse(value)
            if let age = parsed.maxAge { #expect(age >= 0 && age <= 365 * 24 * 3600, "\(value)") }
            // Storing a response with it never traps, and freshness is never negative.
            let headers = HTTPCachePolicy.Headers([("Cache-Control", value), ("ETag", value), ("Last-Modified", value)])
            if let info = HTTPCachePolicy.store(
                status: [200, 203, 304, 404, 0, -1][Int(rng.next() % 6)], headers: headers,
                now: Double(rng.next() % 4_000_000_000))
            {
                #expect(info.freshFor >= 0)
                _ = HTTPCachePolicy.decide(info, now: Double(rng.next() % 4_000_000_000) - 1e9)
                _ = HTTPCachePolicy.refreshed(info, notModified: headers, now: .infinity)
            }
        }
    }

    @Test(
        "disk entries: every single-byte change of an encoding is refused; random damage never decodes to another entry"
    )
    func diskEntries() {
        var rng = SplitMix(seed: 0x5EED_0003)
        let entry = DiskEntry(
            key: "https://example.com/a.png\u{0}thumb",
            info: CachedResponseInfo(
                etag: "\"v1\"", lastModified: "Tue, 15 Nov 1994 08:12:31 GMT", storedAt: 1_700_000_000, freshFor: 60),
            body: TestImages.png(width: 3, height: 3, padding: 300))
        let encoded = entry.encode()
        for i in 0..<encoded.count {
            for bit in [0, 3, 7] {
                var damaged = encoded
                damaged[i] ^= UInt8(1 << bit)
                #expect(DiskEntry.decode(damaged) == nil, "byte \(i) bit \(bit)")
            }
        }
        for _ in 0..<(20_000 * Self.rounds) {
            let damaged = Self.mutate(encoded, &rng)
            if let decoded = DiskEntry.decode(damaged) {
                // Only an undamaged encoding may decode, and then to the same entry.
                #expect(damaged == encoded && decoded == entry)
            }
        }
        #expect(DiskEntry.decode(Array(encoded.prefix(encoded.count - 1))) == nil)
        #expect(DiskEntry.decode([]) == nil)
    }
}

func getenvString(_ name: String) -> String? {
    guard let v = getenv(name) else { return nil }
    return String(cString: v)
}
