// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("SHA-256 and disk entries")
struct DiskEntryTests {
    @Test(
        "SHA-256 matches the NIST vectors, whole or fed in pieces",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
            ),
        ])
    func vectors(input: String, expected: String) {
        #expect(SHA256.hex(SHA256.hash(Array(input.utf8))) == expected)
        var h = SHA256()
        for byte in input.utf8 { h.update([byte]) }
        #expect(SHA256.hex(h.finish()) == expected)
    }

    @Test("a million 'a's")
    func million() {
        var h = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { h.update(chunk) }
        #expect(SHA256.hex(h.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    let entry = DiskEntry(
        key: "https://example.com/a.png\u{0}thumb", owner: "flatpak:org.example.App",
        info: CachedResponseInfo(etag: "\"v1\"", lastModified: nil, storedAt: 1_700_000_000.25, freshFor: 600),
        body: Array(0..<200).map { UInt8($0) })

    @Test("an entry survives a round trip")
    func roundTrip() {
        #expect(DiskEntry.decode(entry.encode()) == entry)
        let empty = DiskEntry(key: "k", info: CachedResponseInfo(storedAt: 0, freshFor: 0), body: [])
        #expect(DiskEntry.decode(empty.encode()) == empty)
    }

    @Test("every damaged byte and every truncation is detected")
    func damage() {
        let bytes = entry.encode()
        for i in 0..<bytes.count {
            var bad = bytes
            bad[i] ^= 0x01
            #expect(DiskEntry.decode(bad) == nil, "flipped byte \(i)")
        }
        for n in 0..<bytes.count { #expect(DiskEntry.decode(Array(bytes.prefix(n))) == nil) }
        #expect(DiskEntry.decode(bytes + [0]) == nil)
    }

    @Test("the checksum fed in pieces, split anywhere, is the checksum of the whole, and stays what files on disk have")
    func checksumInPieces() {
        for (length, expected) in [
            (200, 0xA917_11FB_6512_5BBF as UInt64), (203, 0x56A4_1196_884C_23B6), (0, 0x03A6_30D8_6A6B_0422),
        ] {
            let bytes = (0..<length).map { UInt8($0) }
            let whole = bytes.withUnsafeBytes { DiskEntry.checksum($0) }
            #expect(whole == expected, "entries written by this version stay readable by later ones")
            for a in 0...length {
                for b in stride(from: a, through: length, by: 7) {
                    var sum = DiskEntry.Checksum()
                    bytes.withUnsafeBytes { raw in
                        sum.add(UnsafeRawBufferPointer(rebasing: raw[..<a]))
                        sum.add(UnsafeRawBufferPointer(rebasing: raw[a..<b]))
                        sum.add(UnsafeRawBufferPointer(rebasing: raw[b...]))
                    }
                    #expect(sum.finish() == whole, "split at \(a) and \(b)")
                }
            }
        }
    }

    @Test("a changed 8-byte word in any lane, or a changed length, always changes the checksum")
    func everyWordCounts() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = bytes.withUnsafeBytes { DiskEntry.checksum($0) }
        for word in 0..<(bytes.count / 8) {
            var bad = bytes
            bad[word * 8 + word % 8] &+= 1
            #expect(bad.withUnsafeBytes { DiskEntry.checksum($0) } != whole, "word \(word)")
        }
        #expect((bytes + [0]).withUnsafeBytes { DiskEntry.checksum($0) } != whole, "a trailing zero byte")
        #expect(Array(bytes.dropLast()).withUnsafeBytes { DiskEntry.checksum($0) } != whole)
    }

    @Test("a header padded to put the body at a 4 KiB boundary reads back the same; its padding is checked too")
    func padded() throws {
        let header = DiskEntry.header(
            key: entry.key, owner: entry.owner, info: entry.info, bodyCount: entry.body.count, alignBodyTo: 4096)
        #expect(header.count % 4096 == 0)
        let sum = DiskEntry.combine(
            header: header.withUnsafeBytes { DiskEntry.checksum($0) },
            body: entry.body.withUnsafeBytes { DiskEntry.checksum($0) })
        let bytes = header + entry.body + DiskEntry.trailer(sum)
        #expect(DiskEntry.decode(bytes) == entry)
        var bad = bytes
        bad[header.count - 1] = 1  // a padding byte
        #expect(DiskEntry.decode(bad) == nil)
    }

    @Test("an entry of the earlier format (one sum over all, NAE1) is not read")
    func earlierFormat() {
        var old = entry.encode()
        old[3] = UInt8(ascii: "1")
        #expect(DiskEntry.decode(old) == nil)
    }

    /// `entry` as the agent before owners wrote it: "NAE2", no owner field.
    func ownerless() -> [UInt8] {
        var header = DiskEntry.header(key: entry.key, owner: "", info: entry.info, bodyCount: entry.body.count)
        header[3] = UInt8(ascii: "2")
        let ownerAt = 4 + 4 + entry.key.utf8.count
        #expect(header[ownerAt..<(ownerAt + 2)] == [0, 0])
        header.removeSubrange(ownerAt..<(ownerAt + 2))
        let sum = DiskEntry.combine(
            header: header.withUnsafeBytes { DiskEntry.checksum($0) },
            body: entry.body.withUnsafeBytes { DiskEntry.checksum($0) })
        return header + entry.body + DiskEntry.trailer(sum)
    }

    @Test("an entry of the format before owners (NAE2) is still read, as nobody's")
    func ownerlessFormat() {
        var expected = entry
        expected.owner = ""
        #expect(DiskEntry.decode(ownerless()) == expected)
    }

    @Test("key and owner come from a file's first bytes, for either format; too few bytes are nil")
    func keyAndOwner() {
        let bytes = entry.encode()
        let found = bytes.withUnsafeBytes { DiskEntry.keyAndOwner($0) }
        #expect(found?.key == entry.key && found?.owner == entry.owner)
        let head = 4 + 4 + entry.key.utf8.count + 2 + entry.owner.utf8.count
        #expect(Array(bytes.prefix(head)).withUnsafeBytes { DiskEntry.keyAndOwner($0) }?.owner == entry.owner)
        for n in [0, 3, 7, 8 + entry.key.utf8.count, head - 1] {
            #expect(Array(bytes.prefix(n)).withUnsafeBytes { DiskEntry.keyAndOwner($0) } == nil, "\(n) bytes")
        }
        let old = ownerless().withUnsafeBytes { DiskEntry.keyAndOwner($0) }
        #expect(old?.key == entry.key && old?.owner == "")
        var other = bytes
        other[3] = UInt8(ascii: "1")
        #expect(other.withUnsafeBytes { DiskEntry.keyAndOwner($0) } == nil)
    }

    @Test("file names are the key's hash: fixed length, hex only, one per key")
    func names() {
        let a = DiskEntry.fileName(for: "../../etc/passwd")
        #expect(a.count == 64 && a.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(a == DiskEntry.fileName(for: "../../etc/passwd"))
        #expect(a != DiskEntry.fileName(for: "../../etc/passwd\u{0}x"))
    }
}
