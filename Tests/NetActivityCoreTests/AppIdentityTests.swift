import NetActivityCore
import Testing

@Suite("Which app a process belongs to")
struct AppIdentityTests {
    @Test("a desktop app's systemd scope or service; a Flatpak's app id; else the process", arguments: [
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-4411.scope\n", "unit:app-gnome-firefox-4411.scope"),
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope\n", "pid:7"),
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.mozilla.firefox-2211.scope\n", "flatpak:org.mozilla.firefox"),
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-dbus-:1.2-org.example.Agent@0.service\n", "unit:app-dbus-:1.2-org.example.Agent@0.service"),
        ("12:pids:/user.slice\n0::/user.slice/user-1000.slice/session-2.scope\n", "pid:7"),
        ("", "pid:7"),
    ])
    func app(cgroup: String, expected: String) {
        #expect(AppIdentity.app(pid: 7, cgroup: cgroup) == expected)
    }
}
