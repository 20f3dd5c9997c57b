// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract

/// The URLs the downloader takes.
public enum DownloadURL {
    /// http or https, with a host, no spaces or control characters, at most 4096 bytes; else
    /// InvalidURL saying why. Read as bytes (every download and prefetch passes here).
    public static func check(_ url: String) throws(NetActivityError) {
        func refuse(_ why: String) -> NetActivityError {
            NetActivityError(.invalidURL, "'\(url.prefix(200))' \(why)")
        }
        var url = url
        let problem: String? = url.withUTF8 { b in
            guard b.count <= NetActivityLimits.maxImageKeyBytes else {
                return "is longer than \(NetActivityLimits.maxImageKeyBytes) bytes"
            }
            guard !b.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
                return "contains spaces or control characters"
            }
            guard let parts = parts(b) else { return "is not an http or https URL" }
            return parts.host.isEmpty ? "has no host" : nil
        }
        if let problem { throw refuse(problem) }
    }

    /// Where an http or https URL's authority lies, as offsets into its bytes.
    struct Parts {
        let https: Bool
        /// After the last "@" of the authority; up to a ":", or, for an [IPv6] literal, up to and
        /// with its "]" (the authority's end when there is none).
        let host: Range<Int>
        /// What follows the host's ":", up to the authority's end (nil: no port given).
        let port: Range<Int>?
    }

    /// The parts of an http or https URL (the scheme in any case), else nil. Read as bytes.
    static func parts(_ b: UnsafeBufferPointer<UInt8>) -> Parts? {
        func hasPrefix(_ p: StaticString) -> Bool {
            b.count >= p.utf8CodeUnitCount
                && (0..<p.utf8CodeUnitCount).allSatisfy {
                    b[$0] | 0x20 == p.utf8Start[$0] | 0x20 || b[$0] == p.utf8Start[$0]
                }
        }
        let https = hasPrefix("https://")
        guard https || hasPrefix("http://") else { return nil }
        let start = https ? 8 : 7
        var end = start
        while end < b.count, b[end] != UInt8(ascii: "/"), b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") {
            end += 1
        }
        var host = start
        for i in start..<end where b[i] == UInt8(ascii: "@") { host = i + 1 }
        var hostEnd = host
        if hostEnd < end, b[hostEnd] == UInt8(ascii: "[") {
            while hostEnd < end, b[hostEnd] != UInt8(ascii: "]") { hostEnd += 1 }
            if hostEnd < end { hostEnd += 1 }
        } else {
            while hostEnd < end, b[hostEnd] != UInt8(ascii: ":") { hostEnd += 1 }
        }
        let port = hostEnd < end && b[hostEnd] == UInt8(ascii: ":") ? (hostEnd + 1)..<end : nil
        return Parts(https: https, host: host..<hostEnd, port: port)
    }
}
