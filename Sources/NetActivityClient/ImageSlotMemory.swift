// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Dispatch
import LinuxKit
import Synchronization

/// The app's own memory of images its `ImageSlot`s decoded, so showing one again (a list scrolled
/// back, a view rebuilt) is synchronous: at most `countLimit` images and `byteLimit` bytes (counted
/// as the encoded images' sizes), least recently used out first. Keyed by the image type, the URL
/// and the additional identifier. The agent's shared cache stays the app's real cache; this only
/// saves decoding and a round trip.
@MainActor
public enum ImageSlotMemory {
    public static var countLimit = 128 {
        didSet { trim() }
    }

    public static var byteLimit = 16 << 20 {
        didSet { trim() }
    }

    /// Forgets every image (under memory pressure, say).
    public static func removeAll() {
        entries.removeAll()
        bytes = 0
    }

    /// How many images it holds now.
    public static var count: Int { entries.count }

    struct Key: Hashable {
        let type: ObjectIdentifier
        let url: String
        let additionalIdentifier: String
    }

    private struct Entry {
        let image: Any
        let cost: Int
        var used: UInt64
    }

    private static var entries: [Key: Entry] = [:]
    private static var bytes = 0
    private static var clock: UInt64 = 0

    static func image(for key: Key) -> Any? {
        guard let entry = entries[key] else { return nil }
        clock += 1
        entries[key]?.used = clock
        return entry.image
    }

    static func insert(_ image: Any, cost: Int, for key: Key) {
        guard cost <= byteLimit else { return }
        clock += 1
        if let old = entries.updateValue(Entry(image: image, cost: cost, used: clock), forKey: key) {
            bytes -= old.cost
        }
        bytes += cost
        trim()
    }

    /// Least recently used out until within both limits: O(count) per eviction, with count small.
    private static func trim() {
        while entries.count > max(0, countLimit) || bytes > byteLimit,
            let oldest = entries.min(by: { $0.value.used < $1.value.used })
        {
            entries[oldest.key] = nil
            bytes -= oldest.value.cost
        }
    }
}
