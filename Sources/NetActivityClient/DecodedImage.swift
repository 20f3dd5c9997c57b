// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import NetActivityContract

/// An image the agent decoded (`fetchPixels`): premultiplied B8G8R8A8 pixels, rows `stride` bytes
/// apart, in the agent's sealed memory, mapped read-only into this process for as long as the value
/// lives. Every app that shows the image maps the same pages: nothing is decoded or copied here.
///
/// The bytes are what GTK 4 (`GDK_MEMORY_B8G8R8A8_PREMULTIPLIED`), cairo (`CAIRO_FORMAT_ARGB32`) and
/// Qt (`Format_ARGB32_Premultiplied`) take as they are on little-endian machines.
///
/// An animation asked for as one (`fetchPixels(…, animation: true)`) holds `frameCount` whole frames
/// of `width` x `height`, one after another, each shown for its `frameDurations` entry.
public final class DecodedImage: @unchecked Sendable {
    /// What the pixels' values are: sRGB (converted from the file's profile when it had one), or
    /// the file's own values (asked for with `.asIs`).
    public typealias ColorSpace = DownloaderMember.FetchPixelsColorSpace
    /// What the file said of its colours.
    public typealias ColorProfile = DownloaderMember.FetchPixelsColorProfile

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
    /// The frames in the file (more than 1 for an animation, whatever was asked).
    public let framesInFile: UInt32
    /// Each frame's time on screen; empty when the pixels hold one frame.
    public let frameDurations: [Duration]
    /// How often an animation plays (0: for ever).
    public let loopCount: UInt32
    public let colorSpace: ColorSpace
    public let colorProfile: ColorProfile
    /// The frames the pixels hold: 1, or an animation's.
    public var frameCount: Int { max(1, frameDurations.count) }
    /// The sealed memfd the pixels are in (read-only); closed with the value.
    public let fd: Int32
    private let mapping: UnsafeRawPointer
    private let length: Int

    init?(
        fd: Int32, width: UInt32, height: UInt32, stride: UInt32, format: String, originalWidth: UInt32,
        originalHeight: UInt32, source: ImageSource, contentType: String, framesInFile: UInt32 = 1,
        frameDurations: [UInt32] = [], loopCount: UInt32 = 0, colorSpace: ColorSpace = .srgb,
        colorProfile: ColorProfile = .none
    ) {
        let (frame, overflow) = Int(stride).multipliedReportingOverflow(by: Int(height))
        let (length, framesOverflow) = frame.multipliedReportingOverflow(by: max(1, frameDurations.count))
        var st = stat()
        guard !overflow, !framesOverflow, length > 0, UInt64(stride) >= UInt64(width) * 4, fstat(fd, &st) == 0,
            Int(st.st_size) >= length,
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
        self.framesInFile = framesInFile
        self.frameDurations = frameDurations.map { .milliseconds($0) }
        self.loopCount = loopCount
        self.colorSpace = colorSpace
        self.colorProfile = colorProfile
        mapping = UnsafeRawPointer(map)
        self.length = length
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: mapping), length)
        close(fd)
    }

    /// Frame `frame`'s pixels (the first unless said), `stride` x `height` bytes, valid inside
    /// `body` (and for as long as the value lives).
    public func withUnsafeBytes<R>(frame: Int = 0, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        precondition(frame >= 0 && frame < frameCount, "frame \(frame) of \(frameCount)")
        let size = length / frameCount
        return try body(UnsafeRawBufferPointer(start: mapping.advanced(by: frame * size), count: size))
    }

    /// One pixel's (blue, green, red, alpha) bytes, premultiplied, of frame `frame`.
    public func pixel(x: Int, y: Int, frame: Int = 0) -> (UInt8, UInt8, UInt8, UInt8) {
        precondition(x >= 0 && x < Int(width) && y >= 0 && y < Int(height), "pixel (\(x), \(y)) outside the image")
        precondition(frame >= 0 && frame < frameCount, "frame \(frame) of \(frameCount)")
        let at = (frame * Int(height) + y) * Int(stride) + x * 4
        let p = mapping.advanced(by: at).assumingMemoryBound(to: UInt8.self)
        return (p[0], p[1], p[2], p[3])
    }
}
