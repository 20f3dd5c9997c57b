// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// What may be published about a URL to every client on the bus (task descriptions and errors,
/// notifications, info logs): the scheme, host, port and path. The userinfo
/// (`alice:hunter2@`), the query (`?access_token=...`) and the fragment stay with the app that
/// asked.
public enum PublishedURL {
    /// The Description of the agent's task for a transfer of `url` (what a client that asked for
    /// it looks for in the task list to follow its progress).
    public static func downloadDescription(_ url: String) -> String {
        String("Download \(redact(url))".prefix(utf8Bytes: NetActivityLimits.maxDescriptionBytes))
    }

    public static func redact(_ url: String) -> String {
        // On bytes: every delimiter is ASCII, and an ASCII byte never occurs inside a multi-byte
        // character; a delimiter followed by a combining mark still delimits (as a URL parser
        // reads it), where a walk over Characters would not have seen it.
        var url = url
        return url.withUTF8 { b in
            func first(from: Int, to: Int, _ match: (UInt8) -> Bool) -> Int? {
                var i = from
                while i < to {
                    if match(b[i]) { return i }
                    i += 1
                }
                return nil
            }
            var schemeEnd = 0
            var start = 0
            if b.count >= 3,
                let colon = (0...(b.count - 3)).first(where: {
                    b[$0] == UInt8(ascii: ":") && b[$0 + 1] == UInt8(ascii: "/") && b[$0 + 2] == UInt8(ascii: "/")
                })
            {
                schemeEnd = colon + 3
                let authorityEnd =
                    first(from: schemeEnd, to: b.count) {
                        $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
                    } ?? b.count
                start = (schemeEnd..<authorityEnd).last { b[$0] == UInt8(ascii: "@") }.map { $0 + 1 } ?? schemeEnd
                // A userinfo holding "/", "?" or "#" ends the authority early for every parser,
                // leaving its tail in the path or query ("http://alice:pa?ss@host" has host "alice"
                // and port "pa"): when an "@" follows the authority, or the port is not a number,
                // nothing after the scheme is published.
                let hostEnd = first(from: start, to: authorityEnd) { $0 == UInt8(ascii: "]") }.map { $0 + 1 } ?? start
                let portStart = first(from: hostEnd, to: authorityEnd) { $0 == UInt8(ascii: ":") }
                let badPort =
                    portStart.map { p in (p + 1..<authorityEnd).contains { b[$0] < 0x30 || b[$0] > 0x39 } } ?? false
                if badPort || first(from: authorityEnd, to: b.count, { $0 == UInt8(ascii: "@") }) != nil {
                    return String(decoding: UnsafeBufferPointer(rebasing: b[..<schemeEnd]), as: UTF8.self) + "…"
                }
            }
            let end = first(from: start, to: b.count) { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? b.count
            return String(decoding: UnsafeBufferPointer(rebasing: b[..<schemeEnd]), as: UTF8.self)
                + String(decoding: UnsafeBufferPointer(rebasing: b[start..<end]), as: UTF8.self)
        }
    }
}

extension String {
    /// The longest prefix of at most `maxBytes` UTF-8 bytes that ends on a character boundary
    /// (limits on the bus count bytes, not characters).
    public func prefix(utf8Bytes maxBytes: Int) -> String {
        guard utf8.count > maxBytes else { return self }
        var bytes = 0
        var end = startIndex
        for index in indices {
            let next = self.index(after: index)
            let size = self[index..<next].utf8.count
            guard bytes + size <= maxBytes else { break }
            bytes += size
            end = next
        }
        return String(self[..<end])
    }
}
