// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later

/// A proxy setting as libcurl will be given it, read by the agent first: one libcurl would refuse
/// is refused here with words that never hold its user name or password (libcurl's own error
/// quotes the whole setting), and what is shown of any proxy is its scheme, host and port.
public enum ProxyURI {
    /// The schemes libcurl takes for a proxy.
    public static let schemes: Set<String> = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

    /// The parts of `uri` (scheme://[userinfo@]host[:port][/]); the userinfo is whatever lies
    /// before the last `@` of the rest (libcurl's reading), so a `/` in a password cannot make
    /// its end look like a path to be shown.
    private static func split(_ uri: String) -> (scheme: Substring, userinfo: Substring?, rest: Substring)? {
        guard let range = uri.firstRange(of: "://") else { return nil }
        let scheme = uri[..<range.lowerBound]
        let after = uri[range.upperBound...]
        guard let at = after.lastIndex(of: "@") else { return (scheme, nil, after) }
        return (scheme, after[..<at], after[after.index(after: at)...])
    }

    /// Why libcurl could not use `uri` as a proxy, in words without its credentials; nil when it can.
    public static func problem(_ uri: String) -> String? {
        guard let (scheme, userinfo, rest) = split(uri) else { return "it is not a URI (scheme://host:port)" }
        guard schemes.contains(scheme.lowercased()) else {
            return "its scheme is not one a proxy may have (\(schemes.sorted().joined(separator: ", ")))"
        }
        if let userinfo, !validUserinfo(userinfo) {
            return "its user name or password holds a character that must be percent-encoded"
        }
        var authority = rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.contains(where: { "/?#".contains($0) }) else { return "it has a path, a query or a fragment" }
        let host: Substring
        var port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return "its host is not a name or an address" }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let tail = authority[authority.index(after: close)...]
            if !tail.isEmpty {
                guard tail.hasPrefix(":") else { return "its host is not a name or an address" }
                port = tail.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                return "its host is not a name or an address"
            }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = authority[..<colon]
                port = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
            guard !host.isEmpty, host.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || "-._".contains($0) })
            else { return "its host is not a name or an address" }
        }
        if let port {
            guard port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port), (1...65535).contains(number)
            else {
                return "its port is not a number from 1 to 65535"
            }
        }
        return nil
    }

    /// RFC 3986's userinfo: unreserved, sub-delims, ':' and percent-encoded bytes.
    private static func validUserinfo(_ text: Substring) -> Bool {
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, isHex(bytes[i + 1]), isHex(bytes[i + 2]) else { return false }
                i += 3
                continue
            }
            let allowed =
                (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
                || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || Array("-._~!$&'()*+,;=:".utf8).contains(b)
            guard allowed else { return false }
            i += 1
        }
        return true
    }

    private static func isHex(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))
            || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F"))
    }

    /// `uri` as it may be shown (logs, errors, properties): scheme, host and port, never what
    /// lies before the last `@`; a trailing `/` left out.
    public static func shown(_ uri: String) -> String {
        guard let (scheme, _, rest) = split(uri) else { return "(a proxy setting that is not a URI)" }
        var text = scheme + "://" + rest
        while text.hasSuffix("/") { text.removeLast() }
        return String(text)
    }

    /// `text` (libcurl's words about a transfer through `uri`) with the proxy's user name and
    /// password, should it quote them, left out.
    public static func scrub(_ text: String, proxy uri: String) -> String {
        guard let (_, userinfo, _) = split(uri), let userinfo, !userinfo.isEmpty else { return text }
        var out = text.replacing(userinfo + "@", with: "").replacing(userinfo, with: "…")
        // The password alone (a message may quote it decoded or apart from the user name); one
        // too short to be told from other words is left to the lines above.
        if let colon = userinfo.firstIndex(of: ":"), userinfo.distance(from: colon, to: userinfo.endIndex) > 3 {
            out = out.replacing(userinfo[userinfo.index(after: colon)...], with: "…")
        }
        return out
    }
}
