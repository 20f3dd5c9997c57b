// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import NetActivityContract

/// An image the agent decoded (`fetchPixels`): premultiplied B8G8R8A8 pixels, rows `stride` bytes
/// apart, in the agent's sealed memory, mapped read-only into this process for as long as the value
/// lives. Every app that shows the image maps the same pages: nothing is decoded or copied here.
///
/// The bytes are what GTK 4 (`GDK_MEMORY_B8G8R8A8_PREMULTIPLIED`), cairo (`CAIRO_FORMAT_ARGB32`) and
/// Qt (`Format_ARGB32_Premultiplied`) take as they are on little-endian machines.
public final class DecodedImage: @unchecked Sendable {
    // @unchecked: every stored property is immutable, and the mapping is read-only for its life.
    public let width: UInt32
    public let height: UInt32
    public let stride: UInt32
    /// The pixel format's name in the contract ("B8G8R8A8_PREMULTIPLIED").
    public let format: String
    /// The image's own size as shown (after its EXIF orientation), before it was fit to the box.
    public let originalWidth: UInt32
    public let originalHeight: UInt32
    /// `.cache` when the agent held the decoded pixels already; `.download` otherwise.
    public let source: ImageSource
    /// The media type of the encoded image ("image/jpeg").
    public let contentType: String
    /// The sealed memfd the pixels are in (read-only); closed with the value.
    public let fd: Int32
    private let mapping: UnsafeRawPointer
    private let length: Int

    init?(
        fd: Int32, width: UInt32, height: UInt32, stride: UInt32, format: String, originalWidth: UInt32,
        originalHeight: UInt32, source: ImageSource, contentType: String
    ) {
        let length = Int(stride) * Int(height)
        var st = stat()
        guard length > 0, stride >= width * 4, fstat(fd, &st) == 0, Int(st.st_size) >= length,
            let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED
        else {
            close(fd)
            return nil
        }
        self.fd = fd
        self.width = width
        self.height = height
        self.stride = stride
        self.format = format
        self.originalWidth = originalWidth
        self.originalHeight = originalHeight
        self.source = source
        self.contentType = contentType
        mapping = UnsafeRawPointer(map)
        self.length = length
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: mapping), length)
        close(fd)
    }

    /// The pixels, `stride` x `height` bytes, valid inside `body` (and for as long as the value lives).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: mapping, count: length))
    }

    /// One pixel's (blue, green, red, alpha) bytes, premultiplied.
    public func pixel(x: Int, y: Int) -> (UInt8, UInt8, UInt8, UInt8) {
        precondition(x >= 0 && x < Int(width) && y >= 0 && y < Int(height), "pixel (\(x), \(y)) outside the image")
        let p = mapping.advanced(by: y * Int(stride) + x * 4).assumingMemoryBound(to: UInt8.self)
        return (p[0], p[1], p[2], p[3])
    }
}
