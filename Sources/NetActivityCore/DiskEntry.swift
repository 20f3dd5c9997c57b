/// One entry of the downloader's disk tier, as bytes: the cache key, the HTTP caching facts and the
/// body, followed by a 64-bit checksum of all of it, so a torn or damaged file is detected and
/// dropped, never served. (Damage, not an attacker, is what it guards against: the checksum reads
/// 8 bytes per step at memory speed, where SHA-256 in Swift made large downloads CPU-bound.) The file name is the SHA-256 of the key (`fileName(for:)`): no identifier can
/// name a path outside the cache directory, and the stored key settles a (theoretical) collision.
public struct DiskEntry: Equatable, Sendable {
    public var key: String
    public var info: CachedResponseInfo
    public var body: [UInt8]

    public init(key: String, info: CachedResponseInfo, body: [UInt8]) {
        self.key = key
        self.info = info
        self.body = body
    }

    static let magic: [UInt8] = Array("NAE1".utf8)
    static let absent: UInt16 = 0xFFFF

    public static func fileName(for key: String) -> String {
        SHA256.hex(SHA256.hash(Array(key.utf8)))
    }

    public func encode() -> [UInt8] {
        var out = Self.header(key: key, info: info, bodyCount: body.count)
        var sum = Checksum(length: out.count + body.count)
        out.withUnsafeBytes { sum.add($0) }
        body.withUnsafeBytes { sum.add($0) }
        out += body
        return out + Self.trailer(sum.finish())
    }

    /// An entry's bytes before its body: magic, key, caching facts and the body's length.
    public static func header(key: String, info: CachedResponseInfo, bodyCount: Int) -> [UInt8] {
        var out = Self.magic
        func u16(_ v: UInt16) { out += [UInt8(v >> 8), UInt8(v & 0xFF)] }
        func u32(_ v: UInt32) { for i in (0..<4).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (UInt32(i) * 8))) } }
        func u64(_ v: UInt64) { for i in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (UInt64(i) * 8))) } }
        func text(_ s: String?) {
            guard let s else { return u16(Self.absent) }
            let bytes = Array(s.utf8.prefix(Int(Self.absent) - 1))
            u16(UInt16(bytes.count))
            out += bytes
        }
        let keyBytes = Array(key.utf8)
        u32(UInt32(keyBytes.count))
        out += keyBytes
        text(info.etag)
        text(info.lastModified)
        u64(info.storedAt.bitPattern)
        u64(UInt64(bitPattern: Int64(info.freshFor)))
        u64(UInt64(bodyCount))
        return out
    }

    /// The 8 bytes after the body: the checksum of header and body.
    public static func trailer(_ sum: UInt64) -> [UInt8] {
        (0..<8).reversed().map { UInt8(truncatingIfNeeded: sum >> (UInt64($0) * 8)) }
    }

    /// The entry, or nil when the bytes are not a whole, undamaged entry.
    public static func decode(_ bytes: [UInt8]) -> DiskEntry? {
        bytes.withUnsafeBytes { raw in
            parse(raw).map { DiskEntry(key: $0.key, info: $0.info, body: Array(raw[$0.body])) }
        }
    }

    /// Reads a whole entry in place: its key, caching facts and where its body lies; nil when the
    /// bytes are not a whole, undamaged entry.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> (key: String, info: CachedResponseInfo, body: Range<Int>)? {
        guard bytes.count >= magic.count + 8, bytes.starts(with: magic) else { return nil }
        let end = bytes.count - 8
        let stored = bytes[end...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard Self.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<end])) == stored else { return nil }
        var at = magic.count
        func take(_ n: Int) -> Range<Int>? {
            guard n >= 0, n <= end - at else { return nil }
            defer { at += n }
            return at..<(at + n)
        }
        func uint(_ n: Int) -> UInt64? {
            take(n).map { bytes[$0].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        }
        func text() -> String?? {
            guard let n = uint(2) else { return nil }
            if n == UInt64(absent) { return .some(nil) }
            return take(Int(n)).map { .some(String(decoding: bytes[$0], as: UTF8.self)) }
        }
        guard let keyLength = uint(4), keyLength <= UInt64(end), let key = take(Int(keyLength)), let etag = text(),
              let lastModified = text(), let stored = uint(8), let fresh = uint(8), let bodyLength = uint(8),
              bodyLength <= UInt64(end), let body = take(Int(bodyLength)), at == end
        else { return nil }
        let info = CachedResponseInfo(
            etag: etag, lastModified: lastModified, storedAt: Double(bitPattern: stored),
            freshFor: Int(truncatingIfNeeded: Int64(bitPattern: fresh)))
        return (String(decoding: bytes[key], as: UTF8.self), info, body)
    }

    /// A 64-bit checksum: every step (xor a multiplied word, rotate, multiply by an odd constant)
    /// is a bijection of the state, so any change to a single 8-byte word always changes the result;
    /// the length is mixed in, and the end is a murmur3 finaliser.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var sum = Checksum(length: bytes.count)
        sum.add(bytes)
        return sum.finish()
    }

    /// `checksum` fed in pieces (a header here, a body in a memfd there), for `length` bytes in all.
    public struct Checksum {
        private var h: UInt64
        /// Bytes of an unfinished word (little-endian), and how many.
        private var partial: UInt64 = 0
        private var partialCount: UInt64 = 0

        public init(length: Int) {
            h = 0x9E37_79B9_7F4A_7C15 ^ UInt64(length)
        }

        private static func mix(_ h: UInt64, _ v: UInt64) -> UInt64 {
            let x = h ^ (v &* 0xFF51_AFD7_ED55_8CCD)
            return (x << 31 | x >> 33) &* 0xC4CE_B9FE_1A85_EC53
        }

        public mutating func add(_ bytes: UnsafeRawBufferPointer) {
            var i = 0
            while partialCount > 0, partialCount < 8, i < bytes.count {
                partial |= UInt64(bytes[i]) << (partialCount * 8)
                partialCount += 1
                i += 1
            }
            if partialCount == 8 {
                h = Self.mix(h, partial)
                partial = 0
                partialCount = 0
            }
            var state = h
            while i + 8 <= bytes.count {
                state = Self.mix(state, bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                i += 8
            }
            h = state
            while i < bytes.count {
                partial |= UInt64(bytes[i]) << (partialCount * 8)
                partialCount += 1
                i += 1
            }
        }

        public func finish() -> UInt64 {
            var h = Self.mix(h, partial)
            h ^= h >> 33
            h &*= 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 33
            h &*= 0xC4CE_B9FE_1A85_EC53
            h ^= h >> 33
            return h
        }
    }
}
