import LinuxKit
import Glibc
import NetActivityCore

/// One image in the shared cache. Large images live in a sealed memfd mapped read-only, so
/// `OpenImage` hands out the same fd with no copy and `LookupImage` copies from the mapping;
/// small ones are a plain array (an fd each would cost more than it saves). The memory goes when
/// the last reference does (eviction, replacement, removal).
final class CachedImage {
    /// Images from this size on are held in a memfd.
    static let memfdThreshold = 64 * 1024
    /// At most this many images hold a memfd at once (`AgentLimits.memfdImages`). The agent's
    /// loop thread is the only one that makes or frees images.
    nonisolated(unsafe) static var maxMemfds = 4096
    nonisolated(unsafe) private(set) static var memfds = 0

    let info: ImageInfo
    let size: Int
    /// The client that added it with AddImage; nil for the downloader's own entries. A download
    /// cache hit counts only the downloader's entries and the caller's own.
    let addedBy: String?
    private let bytes: [UInt8]
    private let fd: Int32
    private let mapping: UnsafeRawPointer?

    /// Copies `data` into the cache's storage.
    init(info: ImageInfo, data: UnsafeRawBufferPointer, addedBy: String? = nil) {
        self.info = info
        size = data.count
        self.addedBy = addedBy
        if data.count >= Self.memfdThreshold, Self.memfds < Self.maxMemfds,
           let fd = SealedMemory.make(name: "netactivity-image", bytes: data)
        {
            guard let map = mmap(nil, data.count, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
                close(fd)
                self.fd = -1
                mapping = nil
                bytes = Array(data.bindMemory(to: UInt8.self))
                return
            }
            self.fd = fd
            mapping = UnsafeRawPointer(map)
            bytes = []
            Self.memfds += 1
        } else {
            // No memfd (an old kernel, out of fds, or the cap reached): an array still works; OpenImage copies.
            fd = -1
            mapping = nil
            bytes = Array(data.bindMemory(to: UInt8.self))
        }
    }

    deinit {
        if let mapping { munmap(UnsafeMutableRawPointer(mutating: mapping), size) }
        if fd >= 0 {
            close(fd)
            Self.memfds -= 1
        }
    }

    func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        if let mapping { return try body(UnsafeRawBufferPointer(start: mapping, count: size)) }
        return try bytes.withUnsafeBytes(body)
    }

    /// A sealed memfd with the image, opened read-only for one client (its own file offset), for
    /// the caller to close: our memfd reopened when the image has one (no copy), else a new one.
    func openReadOnly() -> Int32? {
        if fd >= 0 { return SealedMemory.reopenReadOnly(fd) }
        guard let fresh = bytes.withUnsafeBytes({ SealedMemory.make(name: "netactivity-image", bytes: $0) }) else { return nil }
        defer { close(fresh) }
        return SealedMemory.reopenReadOnly(fresh)
    }

    var isMemfdBacked: Bool { fd >= 0 }
}
