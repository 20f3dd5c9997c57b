"""make install, D-Bus activation from the installed files, and the files' validity."""
import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

from harness import BIN, NAME, PATH, ROOT, PrivateBus, busctl, wait_until

FILES = {
    "bin/netactivityd": 0o755,
    "bin/netactivity": 0o755,
    "share/dbus-1/interfaces/org.example.NetActivity.xml": 0o644,
    "share/dbus-1/interfaces/org.example.NetActivity.Task.xml": 0o644,
    "share/dbus-1/interfaces/org.example.NetActivity.ImageCache.xml": 0o644,
    "share/dbus-1/interfaces/org.example.NetActivity.Downloader.xml": 0o644,
    "share/dbus-1/services/org.example.NetActivity.service": 0o644,
    "lib/systemd/user/netactivityd.service": 0o644,
    "share/doc/netactivity/waybar-netactivity.jsonc": 0o644,
    "share/doc/netactivity/polybar-netactivity.ini": 0o644,
    "share/doc/netactivity/README.md": 0o644,
}


def sh(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def make(*args):
    r = subprocess.run(["make", "-C", ROOT, *args, "INSTALL_BIN=" + BIN], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


class ActivationBus(PrivateBus):
    """A session-type dbus-daemon whose service directory is the installed one."""

    def __init__(self, servicedir):
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
        super().__init__(config_file=config)

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
        autostart = os.path.join(self.dest, "etc/xdg/autostart/netactivityd.desktop")
        self.assertTrue(os.path.exists(autostart), "PREFIX=/usr puts autostart in /etc/xdg")
        with open(os.path.join(root, "share/dbus-1/services/org.example.NetActivity.service")) as f:
            service = f.read()
        self.assertIn("Exec=/usr/bin/netactivityd --no-private-bus", service, "the bindir, without DESTDIR")
        self.assertIn("SystemdService=netactivityd.service", service)
        with open(os.path.join(root, "lib/systemd/user/netactivityd.service")) as f:
            unit = f.read()
        for line in ("Type=dbus", "BusName=org.example.NetActivity", "PartOf=graphical-session.target",
                     "After=graphical-session.target", "ExecStart=/usr/bin/netactivityd --no-private-bus"):
            self.assertIn(line, unit)
        with open(autostart) as f:
            self.assertIn("X-systemd-skip=true", f.read())
        make("uninstall", "DESTDIR=" + self.dest, "PREFIX=/usr")
        left = [os.path.join(d, f) for d, _, files in os.walk(self.dest) for f in files]
        self.assertEqual(left, [], "uninstall removes every installed file")

    def test_unit_and_desktop_entry_validate(self):
        make("install", "PREFIX=" + self.dest)
        r = sh(["systemd-analyze", "verify", "--man=no", os.path.join(self.dest, "lib/systemd/user/netactivityd.service")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = sh(["desktop-file-validate", os.path.join(self.dest, "etc/xdg/autostart/netactivityd.desktop")])
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_dbus_activation_starts_the_installed_agent(self):
        make("install", "PREFIX=" + self.dest)
        bus = ActivationBus(os.path.join(self.dest, "share/dbus-1/services"))
        try:
            started = time.monotonic()
            r = busctl(bus, "get-property", NAME, PATH, "org.example.NetActivity", "Version")
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "u 1"), r.stderr)
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


if __name__ == "__main__":
    unittest.main()
