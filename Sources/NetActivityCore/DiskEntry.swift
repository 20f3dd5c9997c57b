// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// One entry of the downloader's disk tier, as bytes: the cache key, the app it is charged to, the
/// HTTP caching facts and the body, followed by a 64-bit checksum of both, so a torn or damaged file is detected and dropped,
/// never served. (Damage, not an attacker, is what it guards against: the checksum takes 32 bytes
/// per step in four independent lanes, at a fraction of a cycle per byte, where SHA-256 in Swift
/// made large downloads CPU-bound.) Header and body are summed apart and the two sums combined, so
/// a body's sum can be taken as its bytes arrive, while they pass through the CPU anyway, and the
/// disk writer copies the body in the kernel without reading it. The file name is the SHA-256 of
/// the key (`fileName(for:)`): no identifier can name a path outside the cache directory, and the
/// stored key settles a (theoretical) collision.
public struct DiskEntry: Equatable, Sendable {
    public var key: String
    /// The leaf the entry is charged to ("" when not known: an entry of the "NAE2" format).
    public var owner: String
    public var info: CachedResponseInfo
    public var body: [UInt8]

    public init(key: String, owner: String = "", info: CachedResponseInfo, body: [UInt8]) {
        self.key = key
        self.owner = owner
        self.info = info
        self.body = body
    }

    /// "NAE3": with the owner after the key. "NAE2" entries (no owner) are still read; those of
    /// the first format ("NAE1", one sum over all) are dropped as damaged.
    static let magic: [UInt8] = Array("NAE3".utf8)
    static let ownerlessMagic: [UInt8] = Array("NAE2".utf8)
    static let absent: UInt16 = 0xFFFF

    public static func fileName(for key: String) -> String {
        SHA256.hex(SHA256.hash(Array(key.utf8)))
    }

    public func encode() -> [UInt8] {
        let header = Self.header(key: key, owner: owner, info: info, bodyCount: body.count)
        let sum = Self.combine(
            header: header.withUnsafeBytes { Self.checksum($0) }, body: body.withUnsafeBytes { Self.checksum($0) })
        return header + body + Self.trailer(sum)
    }

    /// The entry's checksum from its header's and its body's.
    public static func combine(header: UInt64, body: UInt64) -> UInt64 {
        Checksum.finalize(Checksum.mix(Checksum.mix(0x2545_F491_4F6C_DD1D, header), body))
    }

    /// An entry's bytes before its body: magic, key, owner, caching facts, the body's length, and
    /// the number of zero bytes that follow to put the body at a multiple of `alignBodyTo` (0:
    /// none), with those bytes: a body so placed can be written to the file with `O_DIRECT`.
    public static func header(
        key: String, owner: String, info: CachedResponseInfo, bodyCount: Int, alignBodyTo: Int = 0
    ) -> [UInt8] {
        var out = Self.magic
        func u16(_ v: UInt16) { out += [UInt8(v >> 8), UInt8(v & 0xFF)] }
        func u32(_ v: UInt32) {
            for i in (0..<4).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (UInt32(i) * 8))) }
        }
        func u64(_ v: UInt64) {
            for i in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (UInt64(i) * 8))) }
        }
        func text(_ s: String?) {
            guard let s else { return u16(Self.absent) }
            let bytes = Array(s.utf8.prefix(Int(Self.absent) - 1))
            u16(UInt16(bytes.count))
            out += bytes
        }
        let keyBytes = Array(key.utf8)
        u32(UInt32(keyBytes.count))
        out += keyBytes
        text(owner)
        text(info.etag)
        text(info.lastModified)
        u64(info.storedAt.bitPattern)
        u64(UInt64(bitPattern: Int64(info.freshFor)))
        u64(UInt64(bodyCount))
        let padding = alignBodyTo > 0 ? (alignBodyTo - (out.count + 4) % alignBodyTo) % alignBodyTo : 0
        u32(UInt32(padding))
        out += repeatElement(0, count: padding)
        return out
    }

    /// The most padding a header may announce.
    static let maxPadding = 1 << 16

    /// The 8 bytes after the body: `combine` of the header's and the body's checksums.
    public static func trailer(_ sum: UInt64) -> [UInt8] {
        (0..<8).reversed().map { UInt8(truncatingIfNeeded: sum >> (UInt64($0) * 8)) }
    }

    /// The entry, or nil when the bytes are not a whole, undamaged entry.
    public static func decode(_ bytes: [UInt8]) -> DiskEntry? {
        bytes.withUnsafeBytes { raw in
            parse(raw).map { DiskEntry(key: $0.key, owner: $0.owner, info: $0.info, body: Array(raw[$0.body])) }
        }
    }

    /// Reads a whole entry in place: its key, owner, caching facts and where its body lies; nil
    /// when the bytes are not a whole, undamaged entry.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> (
        key: String, owner: String, info: CachedResponseInfo, body: Range<Int>
    )? {
        guard bytes.count >= magic.count + 8, bytes.starts(with: magic) || bytes.starts(with: ownerlessMagic) else {
            return nil
        }
        let hasOwner = bytes.starts(with: magic)
        let end = bytes.count - 8
        let trailer = bytes[end...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
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
        guard let keyLength = uint(4), keyLength <= UInt64(end), let key = take(Int(keyLength)),
            let owner = hasOwner ? text() : .some(""), let etag = text(),
            let lastModified = text(), let stored = uint(8), let fresh = uint(8), let bodyLength = uint(8),
            let padding = uint(4), padding <= UInt64(maxPadding), take(Int(padding)) != nil,
            bodyLength <= UInt64(end), let body = take(Int(bodyLength)), at == end
        else { return nil }
        let sum = combine(
            header: checksum(UnsafeRawBufferPointer(rebasing: bytes[..<body.lowerBound])),
            body: checksum(UnsafeRawBufferPointer(rebasing: bytes[body])))
        guard sum == trailer else { return nil }
        let info = CachedResponseInfo(
            etag: etag, lastModified: lastModified, storedAt: Double(bitPattern: stored),
            freshFor: Int(truncatingIfNeeded: Int64(bitPattern: fresh)))
        return (String(decoding: bytes[key], as: UTF8.self), owner ?? "", info, body)
    }

    /// The key and owner from the first bytes of an entry (`prefix`: at least its header up to
    /// the owner, as `headPrefix` bytes hold for any key the agent stores), unchecked: what a
    /// scan for entries to remove reads without reading their bodies. Nil when they are not there.
    public static func keyAndOwner(_ prefix: UnsafeRawBufferPointer) -> (key: String, owner: String)? {
        let hasOwner = prefix.starts(with: magic)
        guard hasOwner || prefix.starts(with: ownerlessMagic), prefix.count >= magic.count + 4 else { return nil }
        var at = magic.count
        func uint(_ n: Int) -> Int? {
            guard n <= prefix.count - at else { return nil }
            defer { at += n }
            return prefix[at..<(at + n)].reduce(0) { $0 << 8 | Int($1) }
        }
        guard let keyLength = uint(4), keyLength <= prefix.count - at else { return nil }
        let key = String(decoding: prefix[at..<(at + keyLength)], as: UTF8.self)
        at += keyLength
        guard hasOwner else { return (key, "") }
        guard let ownerLength = uint(2), ownerLength != Int(absent), ownerLength <= prefix.count - at else {
            return nil
        }
        return (key, String(decoding: prefix[at..<(at + ownerLength)], as: UTF8.self))
    }

    /// Bytes that hold the header up to the owner for any key and owner of the agent's (4 KiB
    /// keys, with the scoped key's app and the owner's leaf well under the rest).
    public static let headPrefix = 16 * 1024

    /// A 64-bit checksum in four lanes: each step of a lane (xor a multiplied word, rotate,
    /// multiply by an odd constant) is a bijection of its state, so any change to a single 8-byte
    /// word always changes its lane and so the result; the lanes are independent, so the CPU runs
    /// them side by side. The length is mixed in at the end, and the end is a murmur3 finaliser.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var sum = Checksum()
        sum.add(bytes)
        return sum.finish()
    }

    /// `checksum` fed in pieces, as the bytes come.
    public struct Checksum: Sendable {
        private var a: UInt64 = 0x9E37_79B9_7F4A_7C15
        private var b: UInt64 = 0xBF58_476D_1CE4_E5B9
        private var c: UInt64 = 0x94D0_49BB_1331_11EB
        private var d: UInt64 = 0xD6E8_FEB8_6659_FD93
        /// Bytes of an unfinished 32-byte block, and how many.
        private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        private var pendingCount = 0
        private var length: UInt64 = 0

        public init() {}

        static func mix(_ h: UInt64, _ v: UInt64) -> UInt64 {
            let x = h ^ (v &* 0xFF51_AFD7_ED55_8CCD)
            return (x << 31 | x >> 33) &* 0xC4CE_B9FE_1A85_EC53
        }

        static func finalize(_ value: UInt64) -> UInt64 {
            var h = value
            h ^= h >> 33
            h &*= 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 33
            h &*= 0xC4CE_B9FE_1A85_EC53
            h ^= h >> 33
            return h
        }

        private mutating func block(_ w0: UInt64, _ w1: UInt64, _ w2: UInt64, _ w3: UInt64) {
            a = Self.mix(a, w0)
            b = Self.mix(b, w1)
            c = Self.mix(c, w2)
            d = Self.mix(d, w3)
        }

        public mutating func add(_ bytes: UnsafeRawBufferPointer) {
            guard !bytes.isEmpty else { return }
            length &+= UInt64(bytes.count)
            var i = 0
            if pendingCount > 0 {
                let n = min(32 - pendingCount, bytes.count)
                withUnsafeMutableBytes(of: &pending) { p in
                    p.baseAddress!.advanced(by: pendingCount).copyMemory(from: bytes.baseAddress!, byteCount: n)
                }
                pendingCount += n
                i = n
                guard pendingCount == 32 else { return }
                block(pending.0.littleEndian, pending.1.littleEndian, pending.2.littleEndian, pending.3.littleEndian)
                pending = (0, 0, 0, 0)
                pendingCount = 0
            }
            var (a, b, c, d) = (a, b, c, d)
            while i + 32 <= bytes.count {
                a = Self.mix(a, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                b = Self.mix(b, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)))
                c = Self.mix(c, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self)))
                d = Self.mix(d, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self)))
                i += 32
            }
            (self.a, self.b, self.c, self.d) = (a, b, c, d)
            if i < bytes.count {
                let n = bytes.count - i
                withUnsafeMutableBytes(of: &pending) { p in
                    p.baseAddress!.copyMemory(from: bytes.baseAddress! + i, byteCount: n)
                }
                pendingCount = n
            }
        }

        public func finish() -> UInt64 {
            var h = Self.mix(Self.mix(Self.mix(Self.mix(length, a), b), c), d)
            // The unfinished block's words (zero-padded), then how many bytes it had.
            let words = [pending.0, pending.1, pending.2, pending.3].map(\.littleEndian)
            for w in words.prefix((pendingCount + 7) / 8) { h = Self.mix(h, w) }
            return Self.finalize(Self.mix(h, UInt64(pendingCount)))
        }
    }
}
