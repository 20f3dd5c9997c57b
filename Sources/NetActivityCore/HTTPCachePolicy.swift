// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The parts of HTTP caching (RFC 9111) the downloader's disk tier honours, pure: which responses
/// may be kept, how long they stay fresh, and how a stale one is revalidated with its validators
/// (ETag, Last-Modified) and refreshed by a 304. Times are wall-clock seconds since the epoch,
/// passed in (entries outlive the agent, so a monotonic clock would not do).
public struct CacheControl: Equatable, Sendable {
    public var noStore = false
    public var noCache = false
    public var mustRevalidate = false
    /// Seconds; nil when absent or unreadable.
    public var maxAge: Int?

    public init(noStore: Bool = false, noCache: Bool = false, mustRevalidate: Bool = false, maxAge: Int? = nil) {
        self.noStore = noStore
        self.noCache = noCache
        self.mustRevalidate = mustRevalidate
        self.maxAge = maxAge
    }

    /// Parses a Cache-Control value (several headers joined with commas). Directives are
    /// case-insensitive; unknown ones are ignored; a max-age that is not a non-negative integer
    /// is ignored (huge values are clamped to a year); `no-cache="field"` counts as no-cache.
    public static func parse(_ value: String) -> CacheControl {
        var result = CacheControl()
        for part in splitOutsideQuotes(value) {
            let trimmed = part.trimmingASCIISpaces()
            guard !trimmed.isEmpty else { continue }
            let (name, argument) = splitDirective(trimmed)
            switch name.lowercased() {
            case "no-store": result.noStore = true
            case "no-cache": result.noCache = true
            case "must-revalidate", "proxy-revalidate": result.mustRevalidate = true
            case "max-age":
                if result.maxAge == nil, let argument, let seconds = parseSeconds(argument) { result.maxAge = seconds }
            default: break
            }
        }
        return result
    }

    static let maxSeconds = 365 * 24 * 3600

    static func parseSeconds(_ s: String) -> Int? {
        let digits = s.hasPrefix("\"") && s.hasSuffix("\"") && s.count >= 2 ? String(s.dropFirst().dropLast()) : s
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        // Many digits means "a very long time": clamp instead of overflowing.
        guard digits.utf8.count <= 10, let n = Int(digits) else { return maxSeconds }
        return min(n, maxSeconds)
    }

    private static func splitDirective(_ s: Substring) -> (Substring, String?) {
        guard let eq = s.firstIndex(of: "=") else { return (s, nil) }
        return (s[..<eq].trimmingASCIISpaces(), String(s[s.index(after: eq)...].trimmingASCIISpaces()))
    }

    /// Splits at commas that are not inside a quoted string.
    private static func splitOutsideQuotes(_ s: String) -> [Substring] {
        var parts: [Substring] = []
        var start = s.startIndex
        var quoted = false
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            if c == "\"" {
                quoted.toggle()
            } else if c == ",", !quoted {
                parts.append(s[start..<i])
                start = s.index(after: i)
            }
            i = s.index(after: i)
        }
        parts.append(s[start...])
        return parts
    }
}

/// What the disk tier keeps about a stored response, besides its bytes.
public struct CachedResponseInfo: Equatable, Sendable {
    public var etag: String?
    public var lastModified: String?
    /// When the response was received (or last revalidated), seconds since the epoch.
    public var storedAt: Double
    /// Seconds it is fresh from `storedAt` (max-age minus Age); 0 means it must be revalidated.
    public var freshFor: Int

    public init(etag: String? = nil, lastModified: String? = nil, storedAt: Double, freshFor: Int) {
        self.etag = etag
        self.lastModified = lastModified
        self.storedAt = storedAt
        self.freshFor = freshFor
    }

    public var hasValidators: Bool { etag != nil || lastModified != nil }
}

public enum HTTPCachePolicy {
    /// What to do with a stored response now.
    public enum Decision: Equatable, Sendable {
        /// Serve it without asking the server.
        case fresh
        /// Ask the server with these conditional headers; a 304 means the stored bytes stand.
        case revalidate([(String, String)])
        /// Nothing to revalidate with: fetch it again.
        case refetch

        public static func == (a: Decision, b: Decision) -> Bool {
            switch (a, b) {
            case (.fresh, .fresh), (.refetch, .refetch): true
            case (.revalidate(let x), .revalidate(let y)): x.elementsEqual(y) { $0 == $1 }
            default: false
            }
        }
    }

    /// The headers of a response, as the policy needs them (names matched case-insensitively).
    public struct Headers: Sendable {
        public var fields: [(String, String)]
        public init(_ fields: [(String, String)]) { self.fields = fields }

        /// All values of `name`, joined with ", " as RFC 9110 allows for list headers. Names are
        /// compared as ASCII without regard to case, on their bytes (no lowercased copies).
        public subscript(_ name: String) -> String? {
            var found: String?
            for (field, value) in fields where Self.sameName(field, name) {
                found = found.map { $0 + ", " + value } ?? value
            }
            return found
        }

        static func sameName(_ a: String, _ b: String) -> Bool {
            a.utf8.count == b.utf8.count
                && zip(a.utf8, b.utf8).allSatisfy { x, y in
                    x == y
                        || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a") && (x | 0x20) <= UInt8(ascii: "z"))
                }
        }
    }

    /// The stored information for a 200 response, or nil when it must not be stored (no-store, or
    /// a status other than 200) or would be useless stored (never fresh, and no validator).
    public static func store(status: Int, headers: Headers, now: Double) -> CachedResponseInfo? {
        guard status == 200 else { return nil }
        let control = CacheControl.parse(headers["Cache-Control"] ?? "")
        guard !control.noStore else { return nil }
        let info = CachedResponseInfo(
            etag: headers["ETag"], lastModified: headers["Last-Modified"], storedAt: now,
            freshFor: freshness(control, headers))
        // Never fresh and nothing to revalidate with: `decide` would always refetch it whole, so a
        // copy on disk would only cost its write.
        guard info.freshFor > 0 || info.etag != nil || info.lastModified != nil else { return nil }
        return info
    }

    /// A 304 for a revalidated entry: new validators and freshness when the server sent them.
    public static func refreshed(_ info: CachedResponseInfo, notModified headers: Headers, now: Double)
        -> CachedResponseInfo
    {
        var updated = info
        let control = CacheControl.parse(headers["Cache-Control"] ?? "")
        updated.storedAt = now
        updated.freshFor = freshness(control, headers)
        if let etag = headers["ETag"] { updated.etag = etag }
        if let lastModified = headers["Last-Modified"] { updated.lastModified = lastModified }
        return updated
    }

    /// `maxAge`: seconds the request allows instead of the server's freshness (a request's
    /// `max-age` option), if it gave any.
    public static func decide(_ info: CachedResponseInfo, now: Double, maxAge: Double? = nil) -> Decision {
        // A clock that went backwards (or an entry from the future) is not trusted to be fresh.
        let age = now - info.storedAt
        if age >= 0, age < maxAge ?? Double(info.freshFor) { return .fresh }
        var conditional: [(String, String)] = []
        if let etag = info.etag { conditional.append(("If-None-Match", etag)) }
        if let lastModified = info.lastModified { conditional.append(("If-Modified-Since", lastModified)) }
        return conditional.isEmpty ? .refetch : .revalidate(conditional)
    }

    /// Seconds of freshness: max-age minus the Age the response already had; 0 with no-cache or
    /// without max-age (no heuristic freshness: a stored image is revalidated, never guessed fresh).
    static func freshness(_ control: CacheControl, _ headers: Headers) -> Int {
        guard !control.noCache, let maxAge = control.maxAge else { return 0 }
        let age = headers["Age"].flatMap { CacheControl.parseSeconds($0.trimmingASCIISpaces().description) } ?? 0
        return max(0, maxAge - age)
    }
}

extension StringProtocol {
    func trimmingASCIISpaces() -> SubSequence {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
