// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import LinuxKit
import NetActivityContract

/// What a decode makes of a file's colours: sRGB (the default), or its own values.
typealias PixelColor = DownloaderMember.FetchPixelsColor

/// Why an image was not decoded.
enum DecodeFailure: Error, Equatable {
    /// Not a format the decoder reads.
    case notAnImage(String)
    /// More pixels than allowed, known from the header.
    case tooLarge(String)
    /// Damaged bytes, a decoder that failed, crashed or ran out of time, or no decoder at all.
    case failed(String)
    /// Too many images of this owner, or of all, wait for a decoder already.
    case busy(String)
}

/// Pixels a decoder made: a memfd sealed against every change, of `stride` x `height` bytes of
/// premultiplied B8G8R8A8 for each frame (one, or an animation's). Closed when the last reference
/// goes.
final class DecodedPixels {
    let fd: Int32
    let width: UInt32
    let height: UInt32
    let stride: UInt32
    /// The image's own size, as shown (after its EXIF orientation).
    let originalWidth: UInt32
    let originalHeight: UInt32
    /// What the file said of its colours, what the pixels' values are, and the frames in the file.
    let colorProfile: DownloaderMember.FetchPixelsColorProfile
    let colorSpace: DownloaderMember.FetchPixelsColorSpace
    let frames: UInt32
    /// An animation's frames in the memfd: each one's time on screen (ms); empty for one frame.
    let frameDurations: [UInt32]
    /// How often the animation plays (0: for ever).
    let loopCount: UInt32

    init(
        fd: Int32, width: UInt32, height: UInt32, stride: UInt32, originalWidth: UInt32, originalHeight: UInt32,
        colorProfile: DownloaderMember.FetchPixelsColorProfile = .none, colorSpace: PixelColor = .srgb,
        frames: UInt32 = 1, frameDurations: [UInt32] = [], loopCount: UInt32 = 0
    ) {
        self.fd = fd
        self.width = width
        self.height = height
        self.stride = stride
        self.originalWidth = originalWidth
        self.originalHeight = originalHeight
        self.colorProfile = colorProfile
        self.colorSpace = colorSpace
        self.frames = frames
        self.frameDurations = frameDurations
        self.loopCount = loopCount
    }

    /// The frames in the memfd.
    var frameCount: Int { max(1, frameDurations.count) }
    /// Checked at receipt (`PixelGeometry`): at most `NetActivityLimits`' pixel limit's bytes.
    var byteCount: Int { Int(stride) * Int(height) * frameCount }

    deinit { Closer.close(fd) }
}

/// The sizes of a block of 4-byte pixels as an untrusted process states them, accepted only when
/// they make sense: a width and height of at least one, rows of at least `width` x 4 bytes, 4-byte
/// aligned, and at most `maxPixels` pixels (rows included, over all frames). Every product is computed with
/// overflow checks, so no value can trap or wrap.
struct PixelGeometry: Equatable {
    let byteCount: UInt64

    init?(width: UInt32, height: UInt32, stride: UInt32, frames: UInt32 = 1, maxPixels: UInt64) {
        guard width > 0, height > 0, frames > 0, stride % 4 == 0 else { return nil }
        let (row, rowOverflow) = UInt64(width).multipliedReportingOverflow(by: 4)
        guard !rowOverflow, UInt64(stride) >= row else { return nil }
        let (frame, frameOverflow) = UInt64(stride).multipliedReportingOverflow(by: UInt64(height))
        let (bytes, overflow) = frame.multipliedReportingOverflow(by: UInt64(frames))
        guard !frameOverflow else { return nil }
        let (limit, limitOverflow) = maxPixels.multipliedReportingOverflow(by: 4)
        guard !overflow, limitOverflow || bytes <= limit else { return nil }
        byteCount = bytes
    }
}
