// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Text from apps (task descriptions, lease reasons) as one line of a menu or tooltip.
public enum DisplayText {
    /// One line of at most `maxCharacters` characters: control and bidi-override characters
    /// become spaces, runs of spaces one, and a longer text ends in "…".
    public static func line(_ text: String, maxCharacters: Int = 48) -> String {
        var out = String.UnicodeScalarView()
        var lastWasSpace = true  // drops leading spaces
        for u in text.unicodeScalars {
            let space = u.properties.isWhitespace || isControl(u)
            if space {
                if !lastWasSpace { out.append(" ") }
            } else {
                out.append(u)
            }
            lastWasSpace = space
        }
        var line = String(out)
        while line.last == " " { line.removeLast() }
        guard line.count > maxCharacters else { return line }
        return String(line.prefix(max(0, maxCharacters - 1))) + "…"
    }

    /// `text` as literal text inside Pango markup (waybar's tooltips, a notification body on a server
    /// with `body-markup`): `&`, `<`, `>`, `"` and `'` become entities, so another app's text
    /// never becomes markup.
    public static func markupEscaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 }) else {
            return text
        }
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// C0, DEL, C1 and the bidi embedding, override and isolate controls (which would reorder
    /// the rest of a row).
    static func isControl(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0..<0x20, 0x7F..<0xA0, 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }
}
