// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("Request keys: cache-keys in their app's namespace, and what RemoveImages takes")
struct ImageRequestKeyTests {
    @Test("a cache-key is its app's: another app's same key is another key, and no URL or identifier equals one")
    func scoped() {
        let mine = ImageRequestKey.scoped(app: "flatpak:org.example.A", cacheKey: "avatar/1", additional: "")
        #expect(mine != ImageRequestKey.scoped(app: "flatpak:org.example.B", cacheKey: "avatar/1", additional: ""))
        #expect(mine != ImageRequestKey.scoped(app: "flatpak:org.example.A", cacheKey: "avatar/1", additional: "thumb"))
        #expect(ImageRequestKey.isScoped(mine) && !ImageRequestKey.isScoped("https://example.com/a.png"))
        let parts = ImageRequestKey.cacheKey(of: mine)
        #expect(parts?.app == "flatpak:org.example.A" && parts?.cacheKey == "avatar/1")
        #expect(ImageRequestKey.cacheKey(of: "https://example.com/a.png") == nil)
        #expect(ImageRequestKey.cacheKey(of: "\u{0}other\u{0}x\u{0}y") == nil, "a NUL-led key of another kind")
    }

    @Test(
        "RemoveImages takes the caller's app's entries under the prefix, and its own cache-keys; nothing of another app's"
    )
    func removable() {
        func takes(_ key: String, _ owner: String, _ prefix: String, by app: Substring = "flatpak:org.example.A")
            -> Bool
        {
            ImageRequestKey.removable(key: key, owner: owner, prefix: prefix, by: app)
        }
        let url = "https://example.com/avatars/1.png"
        #expect(takes(url, "flatpak:org.example.A", "https://example.com/avatars/"))
        #expect(takes(url, "flatpak:org.example.A", ""), "an empty prefix: all of them")
        #expect(!takes(url, "flatpak:org.example.A", "https://example.com/photos/"))
        #expect(!takes(url, "flatpak:org.example.B", "https://example.com/"), "charged to another app")
        #expect(takes(url + "\u{0}thumb", "flatpak:org.example.A", url), "a request key: its URL counts")
        #expect(
            !takes(url + "\u{0}thumb", "flatpak:org.example.A", url + "\u{0}"),
            "the prefix is matched against the URL only")
        #expect(
            takes(url + "\u{0}\u{0}unscoped/pid:7", "unscoped/pid:7", "https://", by: "unscoped"),
            "an own entry, by its leaf's app")
        #expect(takes(url, "", "https://", by: "unscoped"), "an older agent's disk entry: the unscoped pool's")
        #expect(!takes(url, "", "https://"))
        let key = ImageRequestKey.scoped(app: "flatpak:org.example.A", cacheKey: "avatar/1", additional: "")
        #expect(takes(key, "flatpak:org.example.B", "avatar/"), "its own cache-key, whoever was charged")
        #expect(
            !takes(key, "flatpak:org.example.A", "avatar/", by: "flatpak:org.example.B"),
            "another app's cache-key never")
        #expect(!takes(key, "flatpak:org.example.A", "photo/"))
        #expect(!takes("\u{0}key\u{0}broken", "flatpak:org.example.A", ""), "a malformed scoped key is nobody's")
    }
}
