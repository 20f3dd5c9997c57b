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
            func hasPrefix(_ p: StaticString) -> Bool {
                b.count >= p.utf8CodeUnitCount
                    && (0..<p.utf8CodeUnitCount).allSatisfy {
                        b[$0] | 0x20 == p.utf8Start[$0] | 0x20 || b[$0] == p.utf8Start[$0]
                    }
            }
            let start = hasPrefix("http://") ? 7 : hasPrefix("https://") ? 8 : nil
            guard let start else { return "is not an http or https URL" }
            var end = start
            while end < b.count, b[end] != UInt8(ascii: "/"), b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") {
                end += 1
            }
            // The host: after the last "@" of the authority; up to a ":" unless it is an [IPv6] literal.
            var host = start
            for i in start..<end where b[i] == UInt8(ascii: "@") { host = i + 1 }
            var hostEnd = host
            if hostEnd < end, b[hostEnd] == UInt8(ascii: "[") {
                hostEnd = end
            } else {
                while hostEnd < end, b[hostEnd] != UInt8(ascii: ":") { hostEnd += 1 }
            }
            return hostEnd > host ? nil : "has no host"
        }
        if let problem { throw refuse(problem) }
    }
}
