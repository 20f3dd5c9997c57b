# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""make install, D-Bus activation from the installed files, and the files' validity."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

import contract
from harness import BIN, LIB_FILE, NAME, PATH, ROOT, PrivateBus, busctl, wait_until

LIB = "lib/" + subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True, text=True).stdout.strip()
FILES = {
    "bin/netactivityd": 0o755,
    "bin/netactivity": 0o755,
    "libexec/netactivity/netactivity-decoder": 0o755,
    # The contract's files are named after its interfaces and bus name.
    **{"share/dbus-1/interfaces/%s.xml" % c.INTERFACE: 0o644
       for c in (contract.Activity, contract.Task, contract.ImageCache, contract.Downloader)},
    "share/dbus-1/services/%s.service" % NAME: 0o644,
    "share/netactivity/waybar-netactivity.jsonc": 0o644,
    "share/netactivity/polybar-netactivity.ini": 0o644,
    "share/doc/netactivity/README.md": 0o644,
    "share/doc/netactivity/CHANGELOG.md": 0o644,
    **{"share/doc/netactivity/docs/" + f: 0o644 for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")},
    **{"share/doc/netactivity/docs/pictures/" + f: 0o644 for f in os.listdir(os.path.join(ROOT, "docs", "pictures"))},
    "share/man/man1/netactivity.1": 0o644,
    "share/man/man1/netactivityd.1": 0o644,
    "share/man/man5/netactivityd.conf.5": 0o644,
    "share/icons/hicolor/scalable/status/netactivity-symbolic.svg": 0o644,
    "share/locale/de/LC_MESSAGES/netactivity.mo": 0o644,
    "share/locale/fr/LC_MESSAGES/netactivity.mo": 0o644,
    "share/gnome-shell/extensions/netactivity@example.org/locale/de/LC_MESSAGES/netactivity.mo": 0o644,
    "share/gnome-shell/extensions/netactivity@example.org/icons/netactivity-symbolic.svg": 0o644,
    "share/gnome-shell/extensions/netactivity@example.org/metadata.json": 0o644,
    "share/gnome-shell/extensions/netactivity@example.org/extension.js": 0o644,
    "share/gnome-shell/extensions/netactivity@example.org/model.js": 0o644,
    # libnetactivity-1, where Debian keeps libraries (PREFIX=/usr: the multiarch folder).
    **{LIB + "/" + f: 0o644 for f in (LIB_FILE, "pkgconfig/netactivity-1.pc",
                                     "girepository-1.0/NetActivity-1.0.typelib")},
    **{"include/netactivity-1/" + f: 0o644 for f in ("netactivity.h", "netactivity-errors.h", "netactivity-generated.h")},
    "share/gir-1.0/NetActivity-1.0.gir": 0o644,
    # its API reference (gi-docgen): the C API, docs/gobject.md, the D-Bus reference
    **{"share/doc/libnetactivity-1/" + f: 0o644 for f in ("index.html", "gobject.html", "dbus.html",
                                                           "method.Downloader.fetch_image_bytes.html")},
    # the library's examples, beside its reference
    **{"share/doc/libnetactivity-1/examples/" + f: 0o644 for f in os.listdir(os.path.join(ROOT, "Examples", "libnetactivity"))},
}
LINKS = {"share/devhelp/books/libnetactivity-1": "../../doc/libnetactivity-1",
         LIB + "/libnetactivity-1.so.0": LIB_FILE, LIB + "/libnetactivity-1.so": "libnetactivity-1.so.0"}


def sh(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def make(*args):
    r = subprocess.run(["make", "-C", ROOT, *args, "INSTALL_BIN=" + BIN], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


class ActivationBus(PrivateBus):
    """A session-type dbus-daemon whose service directory is the installed one."""

    def __init__(self, servicedir, env=None):
        self.config_dir = tempfile.mkdtemp(prefix="netactivity-activation-")
        config = os.path.join(self.config_dir, "bus.conf")
        with open(config, "w") as f:
            f.write("""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s/bus</listen>
  <servicedir>%s</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
""" % (self.config_dir, servicedir))
        super().__init__(config_file=config, env=env)

    def stop(self):
        super().stop()
        shutil.rmtree(self.config_dir, ignore_errors=True)


class InstallTests(unittest.TestCase):
    def setUp(self):
        self.dest = tempfile.mkdtemp(prefix="netactivity-install-")
        self.addCleanup(shutil.rmtree, self.dest, True)

    def test_destdir_layout_and_uninstall(self):
        make("install", "DESTDIR=" + self.dest, "PREFIX=/usr")
        root = os.path.join(self.dest, "usr")
        for rel, mode in FILES.items():
            st = os.stat(os.path.join(root, rel))
            self.assertEqual(stat.S_IMODE(st.st_mode), mode, rel)
        for link, target in LINKS.items():
            self.assertEqual(os.readlink(os.path.join(root, link)), target, link)
        with open(os.path.join(root, LIB, "pkgconfig/netactivity-1.pc")) as f:
            pc = f.read()
        self.assertIn("libdir=/usr/%s\n" % LIB, pc, "without DESTDIR")
        self.assertIn("Cflags: -I${includedir}/netactivity-1", pc)
        autostart = os.path.join(self.dest, "etc/xdg/autostart/netactivityd.desktop")
        self.assertTrue(os.path.exists(autostart), "PREFIX=/usr puts autostart in /etc/xdg")
        with open(os.path.join(root, "share/dbus-1/services/%s.service" % NAME)) as f:
            service = f.read()
        self.assertIn("Exec=/usr/bin/netactivityd --no-private-bus", service, "the bindir, without DESTDIR")
        self.assertIn("SystemdService=netactivityd.service", service)
        self.assertTrue(os.path.exists(os.path.join(root, "lib/systemd/user/netactivityd.service")))
        with open(os.path.join(root, "lib/systemd/user/netactivityd.service")) as f:
            unit = f.read()
        for line in ("Type=dbus", "BusName=" + NAME, "PartOf=graphical-session.target",
                     "After=graphical-session.target", "ExecStart=/usr/bin/netactivityd --no-private-bus"):
            self.assertIn(line, unit)
        with open(autostart) as f:
            self.assertIn("X-systemd-skip=true", f.read())
        doc = os.path.join(root, "share/netactivity")  # what a bar includes is data, not documentation
        with open(os.path.join(doc, "waybar-netactivity.jsonc")) as f:
            text = f.read()
        self.assertNotIn("@", text.replace("@example", ""), "every placeholder filled in")
        self.assertIn('"include": ["/usr/share/netactivity/waybar-netactivity.jsonc"]', text)
        module = json.loads("\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//")))["custom/netactivity"]
        self.assertEqual(module["exec"], "/usr/bin/netactivity watch --format waybar", "no reliance on the bar's PATH")
        self.assertTrue(module["on-click"].startswith("/usr/bin/netactivity status"))
        with open(os.path.join(doc, "polybar-netactivity.ini")) as f:
            text = f.read()
        self.assertIn("include-file = /usr/share/netactivity/polybar-netactivity.ini", text)
        self.assertIn("\nexec = /usr/bin/netactivity watch --format polybar\n", text)
        self.assertIn("libnotify-bin", text)
        make("uninstall", "DESTDIR=" + self.dest, "PREFIX=/usr")
        left = [os.path.join(d, f) for d, _, files in os.walk(self.dest) for f in files]
        self.assertEqual(left, [], "uninstall removes every installed file")

    def installed_where_read(self, prefix, home, destdir=""):
        """Installs with PREFIX=prefix (HOME=home) and returns the unit and autostart entry, after
        checking that their directories are ones systemd and the session read for that HOME."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env["HOME"] = home
        r = subprocess.run(["make", "-C", ROOT, "install", "PREFIX=" + prefix, "DESTDIR=" + destdir, "INSTALL_BIN=" + BIN],
                           capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("note:", r.stdout, "no warning for a prefix the session reads")
        unit_paths = sh(["env", "-i", "HOME=" + home, "systemd-analyze", "--user", "unit-paths"]).stdout.split()
        self.assertTrue(unit_paths, "systemd-analyze lists the user unit paths")
        # The XDG autostart spec: $XDG_CONFIG_HOME/autostart (~/.config) and $XDG_CONFIG_DIRS/autostart (/etc/xdg).
        autostart_dirs = [os.path.join(home, ".config/autostart"), "/etc/xdg/autostart"]

        def ours(d, name):
            """Whether this install put `name` in `d`: only files in the test's own folder count (a
            netactivity installed on this machine has a unit and an entry in the same places)."""
            path = destdir + os.path.join(d, name)
            return path.startswith(self.dest.rstrip("/") + "/") and os.path.exists(path)
        unit = [d for d in unit_paths if ours(d, "netactivityd.service")]
        autostart = [d for d in autostart_dirs if ours(d, "netactivityd.desktop")]
        self.assertEqual(len(unit), 1, "the unit is in a directory systemd searches: %s" % unit_paths)
        self.assertEqual(len(autostart), 1, "the autostart entry is where sessions look")
        return destdir + os.path.join(unit[0], "netactivityd.service"), destdir + os.path.join(autostart[0], "netactivityd.desktop")

    def test_every_usual_prefix_puts_the_unit_and_autostart_where_they_are_read(self):
        home = os.path.join(self.dest, "home")
        os.makedirs(home)
        unit, entry = self.installed_where_read(os.path.join(home, ".local"), home)
        self.assertEqual(unit, os.path.join(home, ".local/share/systemd/user/netactivityd.service"))
        self.assertEqual(entry, os.path.join(home, ".config/autostart/netactivityd.desktop"))
        with open(unit) as f:
            self.assertIn("ExecStart=%s/.local/bin/netactivityd" % home, f.read())
        for prefix in ("/usr", "/usr/local"):
            dest = os.path.join(self.dest, prefix.strip("/").replace("/", "-"))
            unit, entry = self.installed_where_read(prefix, home, destdir=dest)
            self.assertEqual(unit, dest + prefix + "/lib/systemd/user/netactivityd.service")
            self.assertEqual(entry, dest + "/etc/xdg/autostart/netactivityd.desktop")

    def test_an_unusual_prefix_says_where_to_link(self):
        r = make("install", "PREFIX=" + os.path.join(self.dest, "opt"))
        self.assertIn("note: systemd and the session do not read", r.stdout)

    def test_unit_and_desktop_entry_validate(self):
        make("install", "PREFIX=" + self.dest)
        r = sh(["systemd-analyze", "verify", "--man=no", os.path.join(self.dest, "share/systemd/user/netactivityd.service")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = sh(["desktop-file-validate", os.path.join(self.dest, "etc/xdg/autostart/netactivityd.desktop")])
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_dbus_activation_starts_the_installed_agent(self):
        make("install", "PREFIX=" + self.dest)
        bus = ActivationBus(os.path.join(self.dest, "share/dbus-1/services"))
        try:
            started = time.monotonic()
            r = busctl(bus, "get-property", NAME, PATH, contract.Activity.INTERFACE, "Version")
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "u 1"), r.stderr)
            # Activation started it and it answered: in well under the 25 s a call waits for an
            # activated service that never takes its name (what a wrong Exec= line looks like).
            self.assertLess(time.monotonic() - started, 10)
            r = busctl(bus, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "GetConnectionUnixProcessID", "s", NAME)
            pid = int(r.stdout.split()[1])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertEqual(f.read().split(b"\0")[0], os.path.join(self.dest, "bin/netactivityd").encode())
            os.kill(pid, 15)
            wait_until(lambda: not os.path.exists("/proc/%d/status" % pid) or "Z" in open("/proc/%d/stat" % pid).read().split()[2],
                       what="the activated agent to exit")
        finally:
            bus.stop()

    def test_a_test_bus_never_activates_an_installed_agent_but_activates_the_desktops_services(self):
        """What lets make test pass where netactivity is installed: the tests' own buses
        (harness.PrivateBus) still activate the session's services, but not an installed agent,
        which would answer where a test expects no agent or take the name from the test's own."""
        make("install", "PREFIX=" + self.dest)
        services = os.path.join(self.dest, "share/dbus-1/services")
        other = "org.example.NetActivityTestOther"
        with open(os.path.join(self.dest, "other.py"), "w") as f:
            # It owns its name until its bus goes (dbus-python leaves with its connection).
            f.write("import dbus, dbus.mainloop.glib, dbus.service\nfrom gi.repository import GLib\n"
                    "dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)\nbus = dbus.StarterBus()\n"
                    "name = dbus.service.BusName(%r, bus)\nGLib.MainLoop().run()\n" % other)
        with open(os.path.join(services, other + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=/usr/bin/python3 %s\n" % (other, os.path.join(self.dest, "other.py")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}
        env["XDG_DATA_DIRS"] = os.path.join(self.dest, "share") + ":/usr/share"
        bus = PrivateBus(env=env)
        try:
            r = busctl(bus, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "ListActivatableNames")
            activatable = r.stdout.split()
            self.assertIn('"%s"' % other, activatable, "the session's other services are activatable")
            self.assertNotIn('"%s"' % NAME, activatable)
            r = busctl(bus, "get-property", NAME, PATH, contract.Activity.INTERFACE, contract.Activity.Version)
            self.assertNotEqual(r.returncode, 0, "no agent answered: %s" % r.stdout)
            r = busctl(bus, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "StartServiceByName", "su", other, "0", timeout=30)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "u 1"), r.stderr)
        finally:
            bus.stop()


if __name__ == "__main__":
    unittest.main()
