import NetActivityCore

/// One image in the shared cache: its format facts and its `ImageBody` (large ones a sealed
/// memfd, so `OpenImage` hands out the same memory with no copy and `LookupImage` copies from
/// the mapping). The memory goes when the last reference does (eviction, replacement, removal,
/// and the disk worker done with it).
final class CachedImage {
    let info: ImageInfo
    /// The client that added it with AddImage; nil for the downloader's own entries. A download
    /// cache hit counts only the downloader's entries and the caller's own.
    let addedBy: String?
    let body: ImageBody

    /// Keeps `body` as it is (a downloaded one: no copy).
    init(info: ImageInfo, body: ImageBody, addedBy: String? = nil) {
        self.info = info
        self.body = body
        self.addedBy = addedBy
    }

    /// Copies `data` into a body of its own.
    convenience init(info: ImageInfo, data: UnsafeRawBufferPointer, addedBy: String? = nil) {
        self.init(info: info, body: ImageBody.copy(of: data), addedBy: addedBy)
    }

    var size: Int { body.count }

    func withBytes<T>(_ read: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body.withUnsafeBytes(read)
    }

    func openReadOnly() -> Int32? { body.openReadOnly() }

    var isMemfdBacked: Bool { body.isMemfdBacked }
}
