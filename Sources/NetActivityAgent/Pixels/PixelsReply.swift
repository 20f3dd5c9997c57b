// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import DBusKit
import Glibc
import LinuxKit
import NetActivityContract

/// What FetchPixels and OpenPixels answer: an entry's pixels, and where they came from.
struct PixelsReply {
    let entry: CachedPixels
    let source: DownloaderMember.FetchPixelsSource
    let httpStatus: UInt32

    init(_ entry: CachedPixels, source: DownloaderMember.FetchPixelsSource, httpStatus: UInt32 = 0) {
        self.entry = entry
        self.source = source
        self.httpStatus = httpStatus
    }

    /// `(h pixels, a{sv} info)`: a read-only open of the pixels' sealed memfd for this caller (its
    /// own file offset; the same memory for every caller), and what they are.
    func write(to w: inout MessageWriter) throws {
        let pixels = entry.pixels
        guard let fd = SealedMemory.openForClient(pixels.fd, count: pixels.byteCount) else {
            throw NetActivityError.failed("Could not share the pixels: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        try w.appendFD(fd)
        typealias Info = DownloaderMember.FetchPixelsInfo
        var info: [String: DBusValue] = [
            Info.width.rawValue: .uint32(pixels.width), Info.height.rawValue: .uint32(pixels.height),
            Info.stride.rawValue: .uint32(pixels.stride),
            Info.format.rawValue: .string(DownloaderMember.FetchPixelsFormat.b8g8r8a8Premultiplied.rawValue),
            Info.originalWidth.rawValue: .uint32(pixels.originalWidth),
            Info.originalHeight.rawValue: .uint32(pixels.originalHeight),
            Info.frames.rawValue: .uint32(pixels.frames),
            Info.colorSpace.rawValue: .string(pixels.colorSpace.rawValue),
            Info.colorProfile.rawValue: .string(pixels.colorProfile.rawValue),
            Info.source.rawValue: .string(source.rawValue),
            Info.contentType.rawValue: .string(entry.contentType),
        ]
        if httpStatus != 0 { info[Info.httpStatus.rawValue] = .uint32(httpStatus) }
        if !pixels.frameDurations.isEmpty {
            info[Info.frameDurations.rawValue] = .array(
                elementSignature: "u", pixels.frameDurations.map { .uint32($0) })
            info[Info.loopCount.rawValue] = .uint32(pixels.loopCount)
        }
        try w.appendVardict(info)
    }
}
