// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Continuing a body that stopped part-way (the system slept) with a range request (RFC 9110
/// §14, §13.1.5), pure: whether the bytes so far may be continued at all, what to ask, and whether
/// the answer continues them. `If-Range` makes it safe: a representation that changed since comes
/// back whole (200), never as a tail glued to the old bytes.
public enum RangeResume {
    /// Bytes below this are fetched again whole: a round trip costs more than they do.
    public static let minimumBytes = 128 * 1024

    /// The `If-Range` validator for a 200 response's body: its ETag when strong (a weak one must
    /// not be sent), else its Last-Modified when that is a strong validator (§8.8.2.2: a Date at
    /// least 60 seconds later, both IMF-fixdate); nil when neither (the body cannot be continued).
    public static func validator(status: Int, headers: HTTPCachePolicy.Headers) -> String? {
        guard status == 200 else { return nil }
        if let etag = headers["ETag"]?.trimmingASCIISpaces() {
            // One strong tag: "opaque". A weak tag, or a list (two ETag fields), is no validator.
            guard etag.count >= 2, etag.first == "\"", etag.last == "\"", !etag.dropFirst().dropLast().contains("\"")
            else { return nil }
            return String(etag)
        }
        guard let modified = headers["Last-Modified"], let date = headers["Date"],
            let m = httpDate(modified), let d = httpDate(date), d - m >= 60
        else { return nil }
        return String(modified.trimmingASCIISpaces())
    }

    /// The request headers asking for the bytes from `offset` on, if `validator` still holds.
    public static func request(from offset: Int, validator: String) -> [(String, String)] {
        [("Range", "bytes=\(offset)-"), ("If-Range", validator)]
    }

    /// What an answer to `request(from: offset, ...)` means for the bytes so far.
    public enum Answer: Equatable, Sendable {
        /// A 206 with exactly the rest (`bytes offset-(total-1)/total`): append it.
        case continues
        /// Anything else a server may rightly send (the whole representation again: it changed,
        /// or the server ignores ranges; or an error status): start over from this answer.
        case startsOver
        /// A 206 that is not the rest asked for (another start, a part, another length): a broken
        /// or lying server. Its bytes must not be used.
        case wrongRange(String)
    }

    /// `expectedTotal`: the whole body's length the first answer announced, if it did.
    public static func answer(status: Int, headers: HTTPCachePolicy.Headers, offset: Int, expectedTotal: Int?) -> Answer
    {
        guard status == 206 else { return .startsOver }
        guard let range = headers["Content-Range"].flatMap(contentRange) else {
            return .wrongRange(
                "a 206 without a single byte range (Content-Range: \(headers["Content-Range"]?.prefix(80) ?? "none"))")
        }
        guard range.first == offset else {
            return .wrongRange("bytes from \(range.first) when \(offset) were asked for")
        }
        if let total = range.total {
            guard range.last == total - 1 else {
                return .wrongRange("bytes up to \(range.last) of \(total), not the rest")
            }
            if let expectedTotal, total != expectedTotal {
                return .wrongRange("a body of \(total) bytes where the first answer had \(expectedTotal)")
            }
        } else if let expectedTotal, range.last != expectedTotal - 1 {
            return .wrongRange("bytes up to \(range.last), not the rest of \(expectedTotal)")
        }
        return .continues
    }

    /// `bytes first-last/total` (total may be `*`); nil when it is not that.
    static func contentRange(_ value: String) -> (first: Int, last: Int, total: Int?)? {
        let v = value.trimmingASCIISpaces()
        guard v.hasPrefix("bytes ") else { return nil }
        let spec = v.dropFirst(6).trimmingASCIISpaces()
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = decimal(bounds[0]), let last = decimal(bounds[1]), first <= last else {
            return nil
        }
        if parts[1] == "*" { return (first, last, nil) }
        guard let total = decimal(parts[1]), last < total else { return nil }
        return (first, last, total)
    }

    /// A non-negative decimal of at most 18 digits (no sign, no spaces).
    private static func decimal(_ s: Substring) -> Int? {
        guard !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(s)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form
    /// servers must send; nil for anything else (the obsolete forms are not strong enough to rely on).
    static func httpDate(_ value: String) -> Int? {
        let fields = value.trimmingASCIISpaces().split(separator: " ")
        guard fields.count == 6, fields[0].count == 4, fields[0].last == ",", fields[5] == "GMT",
            fields[1].count == 2, let day = decimal(fields[1]), (1...31).contains(day),
            let month = months.firstIndex(of: String(fields[2])),
            fields[3].count == 4, let year = decimal(fields[3]), year >= 1970
        else { return nil }
        let clock = fields[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let h = decimal(clock[0]), let mi = decimal(clock[1]), let s = decimal(clock[2]),
            h < 24, mi < 60, s < 61
        else { return nil }
        return daysSinceEpoch(year: year, month: month + 1, day: day) * 86400 + h * 3600 + mi * 60 + s
    }

    /// Days from 1970-01-01 to the given civil date (proleptic Gregorian; Howard Hinnant's algorithm).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }
}
