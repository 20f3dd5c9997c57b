"""The Debian package (make deb-test sets NETACTIVITY_DEB): installed with dpkg -i into this
machine, the agent run from /usr/bin with the Swift toolchain off PATH and LD_LIBRARY_PATH, started
by D-Bus activation from the installed file, then removed again. Skipped in a plain run."""
import os
import shutil
import subprocess
import unittest

from harness import NAME, PATH, PrivateBus, busctl, wait_for_name
from test_install import ActivationBus

DEB = os.environ.get("NETACTIVITY_DEB")
FILES = [
    "/usr/bin/netactivityd", "/usr/bin/netactivity",
    "/usr/share/dbus-1/services/org.example.NetActivity.service",
    "/usr/share/dbus-1/interfaces/org.example.NetActivity.xml",
    "/usr/lib/systemd/user/netactivityd.service",
    "/etc/xdg/autostart/netactivityd.desktop",
    "/usr/share/doc/netactivity/waybar-netactivity.jsonc",
    "/usr/share/doc/netactivity/polybar-netactivity.ini",
    "/usr/share/doc/netactivity/copyright",
    "/usr/share/gnome-shell/extensions/netactivity@example.org/extension.js",
]


def sh(*cmd, env=None):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, env=env)


def toolchain_free_env(bus=None):
    """No Swift toolchain to find: a PATH of system directories only, no LD_LIBRARY_PATH."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    if bus:
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        env["XDG_CACHE_HOME"] = bus.cache_home
        env["XDG_CONFIG_HOME"] = bus.config_home
    return env


@unittest.skipUnless(DEB, "make deb-test builds the package and runs this")
class PackageTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("dpkg -i needs root")
        if sh("dpkg", "-s", "netactivity").returncode == 0:
            raise unittest.SkipTest("a netactivity package is installed already; not touching it")
        r = sh("dpkg", "-i", DEB)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        r = sh("dpkg", "--purge", "netactivity")
        assert r.returncode == 0, r.stdout + r.stderr
        left = [f for f in FILES if os.path.exists(f)]
        assert left == [], "dpkg --purge removes every file: %s" % left

    def test_dependencies_come_from_dpkg_shlibdeps_and_name_no_swift_runtime(self):
        depends = sh("dpkg-query", "-W", "-f=${Depends}", "netactivity").stdout
        for lib in ("libc6", "libcurl4", "libdbus-1-3"):
            self.assertIn(lib, depends)
        self.assertNotIn("swift", depends.lower())
        for binary in ("/usr/bin/netactivityd", "/usr/bin/netactivity"):
            ldd = sh("ldd", binary, env=toolchain_free_env()).stdout
            self.assertNotIn("not found", ldd)
            self.assertNotIn("swift", ldd.lower(), "the Swift runtime is linked in statically")
            self.assertNotIn("RUNPATH", sh("readelf", "-d", binary).stdout, "no path into the build tree")

    def test_files_are_in_their_system_places(self):
        listed = sh("dpkg", "-L", "netactivity").stdout.split()
        for f in FILES:
            self.assertIn(f, listed)
            self.assertTrue(os.path.exists(f), f)
        self.assertIn("/etc/xdg/autostart/netactivityd.desktop", sh("dpkg-query", "-W", "-f=${Conffiles}", "netactivity").stdout)
        with open("/usr/share/dbus-1/services/org.example.NetActivity.service") as f:
            self.assertIn("Exec=/usr/bin/netactivityd --no-private-bus", f.read())

    def test_the_installed_agent_runs_without_the_toolchain(self):
        bus = PrivateBus()
        try:
            agent = subprocess.Popen(["/usr/bin/netactivityd", "--no-tray"], env=toolchain_free_env(bus),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                wait_for_name(bus, NAME, agent)
                r = sh("/usr/bin/netactivity", "status", "--json", env=toolchain_free_env(bus))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn('"running":true', r.stdout)
                r = sh("/usr/bin/netactivity", "run", "--", "true", env=toolchain_free_env(bus))
                self.assertEqual(r.returncode, 0, r.stderr)
            finally:
                agent.terminate()
                agent.wait(10)
        finally:
            bus.stop()

    def test_dbus_activation_from_the_installed_file(self):
        bus = ActivationBus("/usr/share/dbus-1/services")
        try:
            r = busctl(bus, "get-property", NAME, PATH, "org.example.NetActivity", "Version")
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "u 1"), r.stderr)
            r = busctl(bus, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "GetConnectionUnixProcessID", "s", NAME)
            pid = int(r.stdout.split()[1])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertEqual(f.read().split(b"\0")[0], b"/usr/bin/netactivityd")
            os.kill(pid, 15)
        finally:
            bus.stop()


if __name__ == "__main__":
    unittest.main()
