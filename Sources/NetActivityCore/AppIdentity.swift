// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Who a client is, for fairness and provenance (docs/contract.md, "Trust and isolation"): the app it
/// belongs to and the leaf of the app that is charged.
///
/// - A Flatpak app is `flatpak:ID`, from `/.flatpak-info` in the process's own root (what
///   xdg-desktop-portal reads); a Snap is `snap:NAME`, from its AppArmor label. Neither can be
///   forged from inside a sandbox: these are hard boundaries.
/// - A host app is `app:ID`, from its systemd app unit (`app[-LAUNCHER]-ID[-RANDOM].scope` or
///   `app[-LAUNCHER]-ID[@RANDOM].service`) under the user's own `app.slice`; a look-alike unit
///   anywhere else in the cgroup tree does not count, and a look-alike Flatpak scope is a host app.
/// - Every other host process belongs to one shared app, `unscoped`, whose leaves are its
///   processes (`unscoped/pid:N`). Forking therefore never multiplies the pool's share of anything.
/// - A connection whose process is not known is a leaf of its own in one more shared app,
///   `unknown` (`unknown/:1.42`), with a sandboxed app's rights: it owns, reads, removes and scopes
///   only what that connection made (its `scope` is its leaf), and however many such connections
///   there are, together they have one app's share.
public struct ClientIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The unit of fairness between apps.
    public let app: String
    /// What is charged: the app itself, or one process of the unscoped pool.
    public let leaf: String
    /// A Flatpak or a Snap, or a caller not known: may not change shared settings, sees only its
    /// own work and its own per-app figures, and publishes only for itself. Its downloads reach
    /// public addresses only (`NetworkAddress`).
    public let isSandboxed: Bool
    /// Whether its sandbox lets it use the network at all (a Flatpak's `shared=network`): one that
    /// may not gets no downloads through the agent either.
    public let mayUseNetwork: Bool

    public static let unscopedApp = "unscoped"
    public static let unknownApp = "unknown"
    /// A caller whose process could not be known (it left before it was known, its pid was
    /// recycled, its files could not be read safely or in time), on connection `peer`: a leaf of
    /// its own in the `unknown` app, with the least rights, a sandboxed app's. Not knowing a caller
    /// never makes it a host app, nor a member of anyone else's app.
    public static func unknown(peer: String) -> ClientIdentity {
        ClientIdentity(app: unknownApp, leaf: unknownApp + "/" + peer, isSandboxed: true)
    }
    /// Whether this caller is not known (for messages: it is no sandbox, just not known).
    public var isUnknown: Bool { app == Self.unknownApp }

    /// What the caller owns and may name (its entries to remove, its cache-keys, its rows): its
    /// app; for a caller not known, its own leaf.
    public var scope: Substring { Self.scope(ofLeaf: leaf) }

    /// The `scope` of whoever was charged as `leaf`.
    public static func scope(ofLeaf leaf: String) -> Substring {
        let app = self.app(ofLeaf: leaf)
        return app == unknownApp ? leaf[...] : app
    }

    public init(app: String, leaf: String? = nil, isSandboxed: Bool = false, mayUseNetwork: Bool = true) {
        self.app = app
        self.leaf = leaf ?? app
        self.isSandboxed = isSandboxed
        self.mayUseNetwork = mayUseNetwork
    }

    public static func unscoped(pid: UInt32) -> ClientIdentity {
        ClientIdentity(app: unscopedApp, leaf: unscopedApp + "/pid:\(pid)")
    }

    /// The app part of a leaf ("unscoped/pid:7" -> "unscoped"): app names never hold a "/".
    public static func app(ofLeaf leaf: String) -> Substring {
        leaf.utf8.firstIndex(of: UInt8(ascii: "/")).map { leaf[..<$0] } ?? leaf[...]
    }

    public var description: String { leaf }
}

public enum AppIdentity {
    /// The identity of process `pid` of user `uid`, from what procfs shows of it: `cgroup` (the
    /// text of `/proc/PID/cgroup`), `flatpakInfo` (the text of `/proc/PID/root/.flatpak-info`,
    /// nil when absent) and `securityLabel` (`/proc/PID/attr/current`, "" when none).
    public static func identify(
        pid: UInt32, uid: UInt32, cgroup: String, flatpakInfo: String?, securityLabel: String = ""
    )
        -> ClientIdentity
    {
        if let info = flatpakInfo, let id = flatpakID(info: info) {
            return ClientIdentity(
                app: "flatpak:" + id, isSandboxed: true, mayUseNetwork: flatpakSharesNetwork(info: info))
        }
        if let snap = snapName(label: securityLabel) {
            return ClientIdentity(app: "snap:" + snap, isSandboxed: true)
        }
        if let id = hostApp(cgroup: cgroup, uid: uid) { return ClientIdentity(app: "app:" + id) }
        return .unscoped(pid: pid)
    }

    /// `name=` of the `[Application]` group of a `.flatpak-info` key file (flatpak-metadata(5)).
    public static func flatpakID(info: String) -> String? {
        keyFileValue(info, group: "[Application]", key: "name").flatMap { isAppID($0) ? String($0) : nil }
    }

    /// Whether the `[Context]` group of a `.flatpak-info` lists `network` in `shared=` (what
    /// `--share=network` writes; without it the app has no network of its own).
    public static func flatpakSharesNetwork(info: String) -> Bool {
        let shared = keyFileValue(info, group: "[Context]", key: "shared") ?? ""
        return shared.split(separator: ";").contains { $0.trimmingWhitespace == "network" }
    }

    /// The first value of `key` in `group` of a key file (the desktop-entry syntax), trimmed.
    static func keyFileValue(_ text: String, group: String, key: String) -> Substring? {
        var inGroup = false
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingWhitespace
            if line.hasPrefix("[") {
                inGroup = line == group
            } else if inGroup, line.hasPrefix(key) {
                let rest = line.dropFirst(key.count).trimmingWhitespace
                guard rest.first == "=" else { continue }
                return rest.dropFirst().trimmingWhitespace
            }
        }
        return nil
    }

    /// An AppArmor label `snap.NAME.APP (enforce)` -> NAME (a host process cannot take one).
    public static func snapName(label: String) -> String? {
        let profile = label.split(separator: " ", maxSplits: 1).first ?? ""
        guard profile.hasPrefix("snap.") else { return nil }
        let parts = profile.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false)
        guard let name = parts.first, parts.count >= 2, isAppID(name) else { return nil }
        return String(name)
    }

    /// The app id of a systemd app unit directly under the user's `app.slice` (or a slice within
    /// it): `/user.slice/user-UID.slice/user@UID.service/app.slice/[...slice/]UNIT[/...]`, from the
    /// unified (v2) line or the named systemd (v1) one.
    public static func hostApp(cgroup: String, uid: UInt32) -> String? {
        let prefix = ["user.slice", "user-\(uid).slice", "user@\(uid).service", "app.slice"]
        for line in cgroup.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[1].isEmpty || fields[1] == "name=systemd" else { continue }
            let path = fields[2].split(separator: "/")
            guard path.count > prefix.count, zip(path, prefix).allSatisfy({ $0 == $1 }) else { continue }
            // Slices may nest inside app.slice; the first unit below them is the app's.
            for component in path[prefix.count...] {
                if component.hasSuffix(".slice") { continue }
                return appID(unit: component)
            }
        }
        return nil
    }

    /// `app-gnome-org.gnome.Terminal-4411.scope` -> `org.gnome.Terminal`;
    /// `app-org.example.Agent@0.service` -> `org.example.Agent` (systemd's desktop-app naming:
    /// `app[-LAUNCHER]-ID[-RANDOM].scope`, `app[-LAUNCHER]-ID[@RANDOM].service`, dashes inside
    /// the id escaped as `\x2d`).
    public static func appID(unit: Substring) -> String? {
        var body: Substring
        let isScope = unit.hasSuffix(".scope")
        if isScope {
            body = unit.dropLast(6)
        } else if unit.hasSuffix(".service") {
            body = unit.dropLast(8)
            if let at = body.firstIndex(of: "@") { body = body[..<at] }
        } else {
            return nil
        }
        guard body.hasPrefix("app-") else { return nil }
        var parts = body.dropFirst(4).split(separator: "-", omittingEmptySubsequences: false)
        // A scope's last part is its random instance; a launcher may stand before the id.
        if isScope, parts.count >= 2, parts.last!.allSatisfy({ $0.isHexDigit }) { parts.removeLast() }
        guard let id = parts.last, !id.isEmpty else { return nil }
        let unescaped = String(id).replacing("\\x2d", with: "-")
        return isAppID(unescaped[...]) ? unescaped : nil
    }

    /// An id we are willing to name an app by: printable ASCII without "/" or ":" (so leaves and
    /// the kinds' prefixes stay unambiguous), at most 255 bytes.
    static func isAppID(_ s: Substring) -> Bool {
        !s.isEmpty && s.utf8.count <= 255
            && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: ":") }
    }

    /// The start time of a process (field 22 of `/proc/PID/stat`, clock ticks since boot), or nil.
    /// Read after the last ")" so a command name holding ") " cannot shift the fields.
    public static func startTime(stat: String) -> UInt64? {
        guard let close = stat.utf8.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After ")": state is field 3, so start time (22) is the 20th.
        guard fields.count >= 20 else { return nil }
        return UInt64(fields[19])
    }
}

extension Substring {
    var trimmingWhitespace: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s.removeLast() }
        return s
    }
}
