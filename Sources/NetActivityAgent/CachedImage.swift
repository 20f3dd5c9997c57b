// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore

/// One image in the shared cache: its format facts and its `ImageBody` (large ones a sealed
/// memfd, so `OpenImage` hands out the same memory with no copy and `LookupImage` copies from
/// the mapping). The memory goes when the last reference does (eviction, replacement, removal,
/// and the disk worker done with it).
final class CachedImage {
    let info: ImageInfo
    let body: ImageBody
    /// When it was cached (wall-clock seconds, `DiskCache.now`): what a request's max-age is held to.
    let storedAt = DiskCache.now()

    /// Keeps `body` as it is (a downloaded one, or a client's sealed memfd: no copy).
    init(info: ImageInfo, body: ImageBody) {
        self.info = info
        self.body = body
    }

    /// Whether it was cached less than `maxAge` seconds ago, as HTTP counts freshness (any age
    /// when nil; never for 0, or when the clock says it comes from the future).
    func isYoung(_ maxAge: Double?) -> Bool {
        guard let maxAge else { return true }
        let age = DiskCache.now() - storedAt
        return age >= 0 && age < maxAge
    }

    /// Copies `data` into a body of its own.
    convenience init(info: ImageInfo, data: UnsafeRawBufferPointer) {
        self.init(info: info, body: ImageBody.copy(of: data))
    }

    var size: Int { body.count }

    func withBytes<T>(_ read: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body.withUnsafeBytes(read)
    }

    func openReadOnly() -> Int32? { body.openReadOnly() }

    var isMemfdBacked: Bool { body.isMemfdBacked }
}
