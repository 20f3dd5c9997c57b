// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityContract
import NetActivityCore
import Testing

@Suite("What is published about URLs and how strings are cut")
struct PublishingTests {
    @Test(
        "userinfo, query and fragment never leave; scheme, host, port and path do",
        arguments: [
            ("http://alice:hunter2@host/a.png?access_token=secret", "http://host/a.png"),
            ("https://user@example.com:8443/img/x.png#frag", "https://example.com:8443/img/x.png"),
            ("https://example.com?x=1", "https://example.com"),
            ("https://a@b@example.com/p", "https://example.com/p"),
            ("http://[::1]:8080/p?q", "http://[::1]:8080/p"),
            ("https://example.com/plain.png", "https://example.com/plain.png"),
            ("not a url?with=query", "not a url"),
            // A delimiter followed by a combining mark is one Character, but still a delimiter.
            ("https://ex.com/é.png?\u{301}token=secret", "https://ex.com/é.png"),
            ("https://ü:pässword@ex.com/ö#\u{301}frag", "https://ex.com/ö"),
            // A password holding "?", "#" or "/" ends the authority early: nothing of it is published.
            ("http://alice:pa?ss@host/a.png", "http://…"),
            ("http://alice:pa#ss@host/a.png", "http://…"),
            ("http://alice:pa/ss@host/a.png", "http://…"),
            ("http://alice:secret/a.png", "http://…"),
            ("http://host:8080/a@b.png", "http://…"),
        ])
    func redaction(url: String, published: String) {
        #expect(PublishedURL.redact(url) == published)
    }

    @Test("cuts count UTF-8 bytes and never split a character")
    func utf8Prefix() {
        let s = String(repeating: "é", count: 600)  // 2 bytes each: 1200 bytes
        let cut = s.prefix(utf8Bytes: 1024)
        #expect(cut.utf8.count == 1024)
        #expect(cut.count == 512)
        let emoji = String(repeating: "👍", count: 10)  // 4 bytes each
        #expect(emoji.prefix(utf8Bytes: 7).utf8.count == 4)
        #expect("short".prefix(utf8Bytes: 100) == "short")
        #expect("abc".prefix(utf8Bytes: 0) == "")
    }
}

@Suite("Apps' text as one line of a menu")
struct DisplayTextTests {
    @Test(
        "controls and bidi overrides become single spaces; ends are trimmed",
        arguments: [
            ("Syncing mail", "Syncing mail"),
            ("  two\n\nlines\t ", "two lines"),
            ("evil\u{202E}gnp.exe", "evil gnp.exe"),
            ("bell\u{07}\u{1B}[31mred", "bell [31mred"),
            ("\u{85}next\u{2066}isolate\u{2069}", "next isolate"),
            ("", ""),
        ])
    func cleaned(text: String, shown: String) {
        #expect(DisplayText.line(text) == shown)
    }

    @Test("a long text is cut at whole characters and ends in an ellipsis")
    func cut() {
        let long = String(repeating: "é", count: 60)
        let line = DisplayText.line(long, maxCharacters: 10)
        #expect(line == String(repeating: "é", count: 9) + "…")
        #expect(DisplayText.line("👩‍👩‍👧‍👦 family", maxCharacters: 2) == "👩‍👩‍👧‍👦…")
        #expect(DisplayText.line("exactly10!", maxCharacters: 10) == "exactly10!")
    }
}
