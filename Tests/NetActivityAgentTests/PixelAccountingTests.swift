// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Testing

@testable import NetActivityAgent

/// What the agent believes of a decoder's sizes, and what the decoded tier charges an entry.
@Suite("Pixel accounting")
struct PixelAccountingTests {
    @Test(
        "sizes a decoder states are taken only when they make sense, with no overflow",
        arguments: [
            (UInt32(1), UInt32(1), UInt32(4), UInt64(4)),
            (10, 5, 40, 200),
            (10, 5, 44, 220),  // padded rows
        ])
    func honest(width: UInt32, height: UInt32, stride: UInt32, bytes: UInt64) {
        #expect(PixelGeometry(width: width, height: height, stride: stride, maxPixels: 32 << 20)?.byteCount == bytes)
    }

    @Test(
        "lies fail: zero sizes, short or unaligned rows, overflowing products, more than the limit",
        arguments: [
            (UInt32(0), UInt32(1), UInt32(4)), (1, 0, 4), (2, 1, 4), (1, 1, 6),
            (0x4000_0001, 1, 4),  // width x 4 overflows 32 bits
            (1, 0xFFFF_FFFF, 0xFFFF_FFFC),  // stride x height over 2^64 / the limit
            (65536, 65536, 262_144),  // 4 Gi pixels
        ])
    func lies(width: UInt32, height: UInt32, stride: UInt32) {
        #expect(PixelGeometry(width: width, height: height, stride: stride, maxPixels: 32 << 20) == nil)
    }

    @Test("an entry is charged its pages, and at least a page and a descriptor's share of the capacity")
    func charge() {
        #expect(PixelTier.charge(4, capacity: 100 << 20, maxEntries: 1 << 20) == 4096)
        #expect(PixelTier.charge(4097, capacity: 100 << 20, maxEntries: 1 << 20) == 8192)
        #expect(PixelTier.charge(4, capacity: 100 << 20, maxEntries: 2500) == (100 << 20) / 2500)
        #expect(PixelTier.charge(12 << 20, capacity: 100 << 20, maxEntries: 2500) == 12 << 20)
        // However small the entries, the capacity holds at most `maxEntries` of them.
        #expect((100 << 20) / PixelTier.charge(0, capacity: 100 << 20, maxEntries: 128) == 128)
    }
}
