// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The box decoded pixels must fit in (FetchPixels' and OpenPixels' "max-width" and "max-height"):
/// aspect kept, never enlarged; 0 is no limit on that side. Part of a decoded entry's identity, in
/// the agent's tier as in an app's: a 64 px avatar and the whole photo are two entries.
public struct PixelBox: Hashable, Sendable, CustomStringConvertible {
    public var maxWidth: UInt32
    public var maxHeight: UInt32

    public init(maxWidth: UInt32 = 0, maxHeight: UInt32 = 0) {
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
    }

    /// No bound on either side: the image's own size (within the pixel limit).
    public static let unbounded = PixelBox()

    public var description: String { "\(maxWidth)x\(maxHeight)" }
}
