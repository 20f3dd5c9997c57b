// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

/// Apps' names from their .desktop files (the Desktop Entry Specification's localized keys).
@Suite("Desktop entries")
struct DesktopEntryTests {
    let file = """
        # a comment
        [Desktop Entry]
        Type=Application
        Name=Photos
        Name[de]=Fotos
        Name[de_AT]=Fotos (AT)
        Name[sr@latin]=Fotografije
        Name[fr]=Photos\\sde\\tvacances
        Icon=org.example.Photos
        Exec=photos %U

        [Desktop Action New]
        Name=New Window
        """

    @Test(
        "Name localized in the spec's order: lang_COUNTRY@MODIFIER, lang_COUNTRY, lang@MODIFIER, lang, plain",
        arguments: [
            ("C", "Photos"), ("", "Photos"), ("de_DE.UTF-8", "Fotos"), ("de_AT.UTF-8", "Fotos (AT)"), ("de", "Fotos"),
            ("sr_RS@latin", "Fotografije"), ("sr_RS", "Photos"), ("fr_FR.UTF-8", "Photos de vacances"),
            ("ja_JP", "Photos"),
        ])
    func localized(locale: String, expected: String) {
        #expect(DesktopEntry.parse(file, locale: locale) == DesktopEntry(name: expected, icon: "org.example.Photos"))
    }

    @Test("hidden entries, other types, no Name, and keys outside [Desktop Entry] give nothing")
    func refused() {
        #expect(DesktopEntry.parse("[Desktop Entry]\nName=X\nHidden=true\n", locale: "C") == nil)
        #expect(DesktopEntry.parse("[Desktop Entry]\nName=X\nType=Link\n", locale: "C") == nil)
        #expect(DesktopEntry.parse("[Desktop Entry]\nIcon=x\n", locale: "C") == nil)
        #expect(DesktopEntry.parse("[Other]\nName=X\n", locale: "C") == nil)
        #expect(DesktopEntry.parse("", locale: "C") == nil)
    }

    @Test("a hostile name is one line of at most 64 characters")
    func hostile() {
        let long = String(repeating: "é", count: 500)
        let entry = DesktopEntry.parse("[Desktop Entry]\r\nName=\(long)\\n\u{7}evil\r\n", locale: "C")
        #expect(entry?.name.count == 64)
        #expect(entry?.name.contains("\n") == false)
        let control = DesktopEntry.parse("[Desktop Entry]\nName=a\\nb\u{1b}c\n", locale: "C")
        #expect(control?.name == "a b c")
    }
}
