// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Glibc
import LinuxKit
import NetActivityCore

/// Apps' names as the desktop shows them: the identity's desktop-file id (a Flatpak's app id, a
/// host app's systemd app unit, a Snap's `NAME_NAME`) looked up as `ID.desktop` in
/// `$XDG_DATA_HOME/applications` and each of `$XDG_DATA_DIRS`, with `Name` localized for the
/// agent's locale. Each app is read once, off the loop (at most `capacity` remembered; a miss is
/// remembered too).
final class AppNames {
    private let directories: [String]
    private let locale: String
    private var known: [String: DesktopEntry?] = [:]
    private let capacity = 512

    init(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) {
        func value(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        let home = value("XDG_DATA_HOME") ?? value("HOME").map { $0 + "/.local/share" }
        let dirs = (value("XDG_DATA_DIRS") ?? "/usr/local/share/:/usr/share/").split(separator: ":").map(String.init)
        directories = ([home].compactMap { $0 } + dirs).filter { $0.hasPrefix("/") }.map {
            $0.hasSuffix("/") ? $0 + "applications/" : $0 + "/applications/"
        }
        locale = value("LC_ALL") ?? value("LC_MESSAGES") ?? value("LANG") ?? "C"
    }

    /// The desktop-file id of an app identity ("flatpak:org.gnome.Maps" -> "org.gnome.Maps"), or
    /// nil for the unscoped pool.
    static func desktopID(ofApp app: String) -> String? {
        for (prefix, form) in [
            ("flatpak:", { (id: Substring) in String(id) }), ("app:", { String($0) }),
            ("snap:", { "\($0)_\($0)" }),
        ] where app.hasPrefix(prefix) {
            let id = app.dropFirst(prefix.count)
            guard !id.isEmpty, !id.contains("/"), id.first != "." else { return nil }
            return form(id)
        }
        return nil
    }

    /// What is remembered of `app`'s desktop entry: nil when it was never looked up, `.some(nil)`
    /// when it has none. On the loop.
    func remembered(forApp app: String) -> DesktopEntry?? {
        guard let id = Self.desktopID(ofApp: app) else { return .some(nil) }
        return known[id]
    }

    /// Remembers what `lookUp` found for `app`. On the loop.
    func remember(_ entry: DesktopEntry?, forApp app: String) {
        guard let id = Self.desktopID(ofApp: app) else { return }
        if known.count >= capacity { known.removeAll(keepingCapacity: true) }
        known[id] = .some(entry)
    }

    /// Reads an app's desktop entry from the files: never on the loop, since a client can make its
    /// desktop file a link into a FUSE mount whose server never answers, and the open itself waits.
    var lookUp: @Sendable (_ app: String) -> DesktopEntry? {
        let (directories, locale) = (directories, locale)
        return { app in
            guard let id = Self.desktopID(ofApp: app) else { return nil }
            for dir in directories {
                if let text = Self.readSmall(dir, id + ".desktop"), let entry = DesktopEntry.parse(text, locale: locale)
                {
                    return entry
                }
            }
            return nil
        }
    }

    /// A regular file of at most 64 KiB in `directory` (links followed within its mount: Flatpak's
    /// exports are links), never on FUSE.
    static func readSmall(_ directory: String, _ name: String) -> String? {
        guard let (fd, size) = Files.openRegular(in: directory, name, maxBytes: 65536) else { return nil }
        defer { close(fd) }
        guard !Files.isOnFUSE(fd), let bytes = Files.readPrefix(fd, count: size) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
