/// What may be published about a URL to every client on the bus (task descriptions and errors,
/// notifications, info logs): the scheme, host, port and path. The userinfo
/// (`alice:hunter2@`), the query (`?access_token=...`) and the fragment stay with the app that
/// asked.
public enum PublishedURL {
    public static func redact(_ url: String) -> String {
        var rest = Substring(url)
        var scheme = ""
        if let colon = rest.firstRange(of: "://") {
            scheme = String(rest[..<colon.upperBound])
            rest = rest[colon.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        }
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        return scheme + rest
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
