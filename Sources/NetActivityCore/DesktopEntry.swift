// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// What the desktop shows of an app, from its `.desktop` file (the Desktop Entry
/// Specification): its localized `Name` and its `Icon`. Pure: the agent reads the file.
public struct DesktopEntry: Equatable, Sendable {
    public let name: String
    public let icon: String

    public init(name: String, icon: String) {
        self.name = name
        self.icon = icon
    }

    /// Reads the `[Desktop Entry]` group of `text`, with `Name` localized for `locale` (a POSIX
    /// locale such as `de_DE.UTF-8@euro`: `lang_COUNTRY@MODIFIER`, then `lang_COUNTRY`,
    /// `lang@MODIFIER`, `lang`, then the plain key, as the spec orders them). Nil when the file
    /// has no usable `Name`, is `Hidden`, or is not an `Application`.
    public static func parse(_ text: String, locale: String) -> DesktopEntry? {
        var inGroup = false
        var values: [String: String] = [:]
        // "\r\n" is one Character in Swift: split on both line ends.
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            if line.hasPrefix("[") {
                if inGroup { break }  // the group ended
                inGroup = line == "[Desktop Entry]"
                continue
            }
            guard inGroup, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces()
            let value = line[line.index(after: eq)...].trimmingSpaces()
            guard key.hasPrefix("Name") || key == "Icon" || key == "Hidden" || key == "Type" else { continue }
            if values[String(key)] == nil { values[String(key)] = String(value) }  // the first one counts
        }
        guard values["Hidden"] != "true", (values["Type"] ?? "Application") == "Application" else { return nil }
        for key in localizedKeys("Name", locale: locale) {
            if let value = values[key].map(unescape), !value.isEmpty {
                return DesktopEntry(name: clean(value), icon: clean(unescape(values["Icon"] ?? "")))
            }
        }
        return nil
    }

    /// `Name[de_DE@euro]`, `Name[de_DE]`, `Name[de@euro]`, `Name[de]`, `Name`.
    static func localizedKeys(_ key: String, locale: String) -> [String] {
        var rest = Substring(locale)
        var modifier: Substring?
        if let at = rest.firstIndex(of: "@") {
            modifier = rest[rest.index(after: at)...]
            rest = rest[..<at]
        }
        if let dot = rest.firstIndex(of: ".") { rest = rest[..<dot] }
        var country: Substring?
        if let underscore = rest.firstIndex(of: "_") {
            country = rest[rest.index(after: underscore)...]
            rest = rest[..<underscore]
        }
        let lang = rest
        guard !lang.isEmpty, lang != "C", lang != "POSIX" else { return [key] }
        var keys: [String] = []
        if let country, let modifier { keys.append("\(key)[\(lang)_\(country)@\(modifier)]") }
        if let country { keys.append("\(key)[\(lang)_\(country)]") }
        if let modifier { keys.append("\(key)[\(lang)@\(modifier)]") }
        keys.append("\(key)[\(lang)]")
        keys.append(key)
        return keys
    }

    /// The spec's escapes: `\s`, `\n`, `\t`, `\r`, `\\`.
    static func unescape(_ value: String) -> String {
        guard value.contains("\\") else { return value }
        var out = ""
        var escaped = false
        for c in value {
            if escaped {
                switch c {
                case "s": out.append(" ")
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                default: out.append(c)
                }
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// One line of at most 64 characters, control characters as spaces: a name for a menu row.
    static func clean(_ value: String) -> String {
        let flat = String(value.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : Character($0) })
        return flat.count > 64 ? String(flat.prefix(63)) + "…" : flat
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
