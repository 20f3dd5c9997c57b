// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import NetActivityCore
import Testing

@Suite("Who a client is")
struct AppIdentityTests {
    static let slice = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"

    @Test(
        "a host app is its desktop app unit under the user's app.slice; look-alikes elsewhere are unscoped",
        arguments: [
            (slice + "app-gnome-firefox-4411.scope\n", "app:firefox"),
            (slice + "app-gnome-org.gnome.Terminal-4411.scope\n", "app:org.gnome.Terminal"),
            (slice + "app-org.gnome.Terminal.slice/vte-spawn-1.scope\n", "unscoped"),
            (
                slice + "app-dbus\\x2d:1.2\\x2dorg.example.Agent.slice/app-org.example.Agent@0.service\n",
                "app:org.example.Agent"
            ),
            (slice + "app-org.example.Agent@0.service\n", "app:org.example.Agent"),
            (slice + "app-my\\x2dtool-77.scope\n", "app:my-tool"),
            // A look-alike Flatpak scope is a host app of that name, never the Flatpak.
            (slice + "app-flatpak-org.mozilla.firefox-2211.scope\n", "app:org.mozilla.firefox"),
            // The same unit name outside the user's app.slice, or another user's, counts for nothing.
            ("0::/evil/app-gnome-firefox-4411.scope\n", "unscoped"),
            ("0::/user.slice/user-1001.slice/user@1001.service/app.slice/app-gnome-firefox-4411.scope\n", "unscoped"),
            (
                "0::/user.slice/user-1000.slice/user@1000.service/background.slice/app-gnome-firefox-1.scope\n",
                "unscoped"
            ),
            ("12:pids:/user.slice\n0::/user.slice/user-1000.slice/session-2.scope\n", "unscoped"),
            // cgroup v1 with the named systemd hierarchy.
            (
                "9:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-gedit-9.scope\n4:memory:/x\n",
                "app:gedit"
            ),
            ("", "unscoped"),
        ])
    func hostApp(cgroup: String, expected: String) {
        let identity = AppIdentity.identify(pid: 7, uid: 1000, cgroup: cgroup, flatpakInfo: nil)
        #expect(identity.app == expected)
        #expect(identity.leaf == (expected == "unscoped" ? "unscoped/pid:7" : expected))
        #expect(!identity.isSandboxed)
    }

    @Test("a Flatpak is the app id of its .flatpak-info, whatever its cgroup says; a Snap its AppArmor label")
    func sandboxed() {
        let info =
            "[Application]\nname=org.example.Photos\nruntime=runtime/org.gnome.Platform/x86_64/45\n\n[Instance]\ninstance-id=1\n"
        let flatpak = AppIdentity.identify(
            pid: 7, uid: 1000, cgroup: Self.slice + "app-gnome-firefox-1.scope\n", flatpakInfo: info)
        #expect(flatpak == ClientIdentity(app: "flatpak:org.example.Photos", isSandboxed: true, mayUseNetwork: false))
        let online = AppIdentity.identify(
            pid: 7, uid: 1000, cgroup: "", flatpakInfo: info + "[Context]\nshared=network;ipc;\n")
        #expect(online == ClientIdentity(app: "flatpak:org.example.Photos", isSandboxed: true))
        let snap = AppIdentity.identify(
            pid: 7, uid: 1000, cgroup: "", flatpakInfo: nil, securityLabel: "snap.spotify.spotify (enforce)\n")
        #expect(snap == ClientIdentity(app: "snap:spotify", isSandboxed: true))
        // An AppArmor label that is not a snap's, a key file without an app id, or one with a bad id.
        #expect(
            AppIdentity.identify(pid: 7, uid: 1000, cgroup: "", flatpakInfo: nil, securityLabel: "unconfined\n").app
                == "unscoped")
        #expect(AppIdentity.flatpakID(info: "[Runtime]\nname=org.gnome.Platform\n") == nil)
        #expect(AppIdentity.flatpakID(info: "[Application]\nname=../../etc\n") == nil)
        #expect(AppIdentity.flatpakID(info: "[Application]\nname = org.example.Spaced \n") == "org.example.Spaced")
    }

    @Test("the start time of /proc/PID/stat, whatever the command name holds")
    func startTime() {
        let fields = (3...52).map { $0 == 22 ? "123456" : "0" }.joined(separator: " ")
        #expect(
            AppIdentity.startTime(
                stat: "42 (evil) 1 2 3) S " + fields.split(separator: " ").dropFirst().joined(separator: " ")) == 123456
        )
        #expect(AppIdentity.startTime(stat: "42 (x") == nil)
    }

    @Test("the app of a leaf")
    func appOfLeaf() {
        #expect(ClientIdentity.app(ofLeaf: "unscoped/pid:7") == "unscoped")
        #expect(ClientIdentity.app(ofLeaf: "flatpak:org.example.App") == "flatpak:org.example.App")
    }
}
