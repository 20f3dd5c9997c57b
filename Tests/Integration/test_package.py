# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The Debian package.

PackageTests (make test, through make deb-test, which sets NETACTIVITY_DEB): the package is
extracted with dpkg-deb -x into a temporary root, never installed on this machine. Its agent runs
from there with the Swift toolchain off PATH and LD_LIBRARY_PATH, and D-Bus activation starts it
from the package's own service file on a private bus whose service directory is in that root.

PackageInstallTests (make deb-install-test, root only, sets NETACTIVITY_DEB_INSTALL too): the real
round trip, dpkg -i and dpkg --purge, on a machine where no netactivity package is installed
(a package removed with its configuration left, dpkg's "rc", counts as not installed).

Skipped in a plain run."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import contract
from harness import LIB_FILE, NAME, PATH, ROOT, PrivateBus, busctl, wait_for_name
from test_install import ActivationBus

DEB = os.environ.get("NETACTIVITY_DEB")
# A small Debian 13 root (scripts/debian13-root.sh --base) the packages are installed into with apt.
DEBIAN13_BASE = os.environ.get("NETACTIVITY_DEBIAN13_BASE")
INSTALL = os.environ.get("NETACTIVITY_DEB_INSTALL")
FILES = [
    "/usr/bin/netactivityd", "/usr/bin/netactivity", "/usr/libexec/netactivity/netactivity-decoder",
    "/usr/share/dbus-1/services/%s.service" % NAME,
    "/usr/share/dbus-1/interfaces/%s.xml" % contract.Activity.INTERFACE,
    "/usr/lib/systemd/user/netactivityd.service",
    "/etc/xdg/autostart/netactivityd.desktop",
    "/usr/share/netactivity/waybar-netactivity.jsonc",
    "/usr/share/netactivity/polybar-netactivity.ini",
    "/usr/share/doc/netactivity/copyright",
    "/usr/share/man/man1/netactivity.1.gz",
    "/usr/share/man/man1/netactivityd.1.gz",
    "/usr/share/man/man5/netactivityd.conf.5.gz",
    "/usr/share/doc/netactivity/docs/install.md.gz",
    "/usr/share/icons/hicolor/scalable/status/netactivity-symbolic.svg",
    "/usr/share/locale/de/LC_MESSAGES/netactivity.mo",
]
SERVICE = "/usr/share/dbus-1/services/%s.service" % NAME


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


def installed_state():
    """dpkg's two-letter state of netactivity ("ii" installed, "rc" removed with its
    configuration left), or "" when dpkg has never heard of it."""
    r = sh("dpkg-query", "-W", "-f=${db:Status-Abbrev}", "netactivity")
    return r.stdout.strip() if r.returncode == 0 else ""


class PackageChecks:
    """What holds for the package wherever its files are: `root` is where /usr and /etc are."""
    root = "/"

    def path(self, absolute):
        return os.path.join(self.root, absolute.lstrip("/"))

    def check_binaries_need_no_toolchain(self):
        for binary in ("/usr/bin/netactivityd", "/usr/bin/netactivity"):
            path = self.path(binary)
            ldd = sh("ldd", path, env=toolchain_free_env()).stdout
            self.assertNotIn("not found", ldd)
            self.assertNotIn("swift", ldd.lower(), "the Swift runtime is linked in statically")
            self.assertNotIn("RUNPATH", sh("readelf", "-d", path).stdout, "no path into the build tree")

    def check_agent_runs_without_the_toolchain(self):
        bus = PrivateBus()
        try:
            env = toolchain_free_env(bus)
            agent = subprocess.Popen([self.path("/usr/bin/netactivityd"), "--no-tray"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                wait_for_name(bus, NAME, agent)
                r = sh(self.path("/usr/bin/netactivity"), "status", "--json", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn('"running":true', r.stdout)
                r = sh(self.path("/usr/bin/netactivity"), "run", "--", "true", env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
            finally:
                agent.terminate()
                agent.wait(10)
        finally:
            bus.stop()

    def check_activation(self, servicedir, binary):
        """Activates the agent through `servicedir` on a bus whose environment has no toolchain,
        and checks that `binary` is what runs."""
        home = tempfile.mkdtemp(prefix="netactivity-activated-")
        self.addCleanup(shutil.rmtree, home, True)
        env = toolchain_free_env()
        # The agent it starts keeps its cache and reads its settings here, not in ~/.cache or ~/.config.
        env.update(XDG_CACHE_HOME=os.path.join(home, "cache"), XDG_CONFIG_HOME=os.path.join(home, "config"))
        bus = ActivationBus(servicedir, env=env)
        try:
            r = busctl(bus, "get-property", NAME, PATH, contract.Activity.INTERFACE, "Version")
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "u 1"), r.stderr)
            r = busctl(bus, "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                       "GetConnectionUnixProcessID", "s", NAME)
            pid = int(r.stdout.split()[1])
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertEqual(f.read().split(b"\0")[0], binary.encode())
            os.kill(pid, 15)
        finally:
            bus.stop()


@unittest.skipUnless(DEB, "make deb-test builds the package and runs this")
class PackageTests(unittest.TestCase, PackageChecks):
    """The package extracted into a temporary root: nothing on this machine changes."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="netactivity-deb-")
        cls.control = os.path.join(cls.root, "DEBIAN")
        for cmd in (["dpkg-deb", "-x", DEB, cls.root], ["dpkg-deb", "-e", DEB, cls.control]):
            r = sh(*cmd)
            if r.returncode != 0:
                shutil.rmtree(cls.root, ignore_errors=True)
                raise AssertionError(" ".join(cmd) + ": " + r.stdout + r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def field(self, name):
        return sh("dpkg-deb", "-f", DEB, name).stdout.strip()

    def test_dependencies_come_from_dpkg_shlibdeps_and_name_no_swift_runtime(self):
        depends = self.field("Depends")
        for lib in ("libc6", "libcurl4", "libdbus-1-3"):
            self.assertIn(lib, depends)
        self.assertNotIn("swift", depends.lower())
        self.check_binaries_need_no_toolchain()

    def test_files_are_in_their_system_places(self):
        listed = [line.split()[-1].lstrip(".") for line in sh("dpkg-deb", "-c", DEB).stdout.splitlines()]
        for f in FILES:
            self.assertIn(f, listed)
            self.assertTrue(os.path.exists(self.path(f)), f)
        with open(os.path.join(self.control, "conffiles")) as f:
            self.assertIn("/etc/xdg/autostart/netactivityd.desktop", f.read().split())
        with open(self.path(SERVICE)) as f:
            self.assertIn("Exec=/usr/bin/netactivityd --no-private-bus", f.read())
        # The panel recipes: what docs/install.md tells a package's user to include is where the
        # package puts it, and names the packaged CLI.
        with open(os.path.join(ROOT, "docs", "install.md")) as f:
            docs = f.read()
        for recipe, line in (("waybar-netactivity.jsonc", '"include": ["/usr/share/netactivity/waybar-netactivity.jsonc"],'),
                             ("polybar-netactivity.ini", "`include-file = /usr/share/netactivity/polybar-netactivity.ini`")):
            self.assertIn(line, docs)
            with open(self.path("/usr/share/netactivity/" + recipe)) as f:
                text = f.read()
            self.assertIn("/usr/share/netactivity/" + recipe, text)
            self.assertIn("/usr/bin/netactivity watch --format", text)

    def test_the_packaged_agent_runs_without_the_toolchain(self):
        self.check_agent_runs_without_the_toolchain()

    def test_the_library_comes_in_packages_of_its_own_and_works_from_them(self):
        arch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True, text=True).stdout.strip()
        lib = "/usr/lib/" + arch
        expected = {
            "libnetactivity-1-0": [lib + "/" + LIB_FILE, lib + "/libnetactivity-1.so.0"],
            "gir1.2-netactivity-1.0": [lib + "/girepository-1.0/NetActivity-1.0.typelib"],
            "libnetactivity-1-dev": ["/usr/include/netactivity-1/netactivity.h", lib + "/libnetactivity-1.so",
                                     lib + "/pkgconfig/netactivity-1.pc", "/usr/share/gir-1.0/NetActivity-1.0.gir",
                                     "/usr/share/doc/libnetactivity-1/index.html", "/usr/share/doc/libnetactivity-1/dbus.html",
                                     "/usr/share/doc/libnetactivity-1-dev/examples/gallery.c",
                                     "/usr/share/doc/libnetactivity-1-dev/examples/gallery.py"],
        }
        main = [line.split()[-1].lstrip(".") for line in sh("dpkg-deb", "-c", DEB).stdout.splitlines()]
        self.assertFalse([f for f in main if "netactivity-1" in f], "the agent's package holds none of the library")
        root = tempfile.mkdtemp(prefix="netactivity-lib-deb-")
        self.addCleanup(shutil.rmtree, root, True)
        for name, files in expected.items():
            deb = os.path.join(os.path.dirname(DEB), os.path.basename(DEB).replace("netactivity_", name + "_", 1))
            listed = [line.split(" -> ")[0].split()[-1].lstrip(".") for line in sh("dpkg-deb", "-c", deb).stdout.splitlines()]
            for f in files + ["/usr/share/doc/%s/copyright" % name]:
                self.assertIn(f, listed, name)
            self.assertEqual(sh("dpkg-deb", "-x", deb, root).returncode, 0)
            if name == "libnetactivity-1-0":
                control = tempfile.mkdtemp(prefix="netactivity-lib-control-")
                self.addCleanup(shutil.rmtree, control, True)
                sh("dpkg-deb", "-e", deb, control)
                with open(os.path.join(control, "shlibs")) as f:
                    self.assertTrue(f.read().startswith("libnetactivity-1 0 libnetactivity-1-0 (>= "))
                with open(os.path.join(control, "triggers")) as f:
                    self.assertIn("ldconfig", f.read())
        # From the packages' files alone: pkg-config finds it, and Python loads it through its typelib.
        env = dict(os.environ, PKG_CONFIG_PATH=root + lib + "/pkgconfig", PKG_CONFIG_SYSROOT_DIR=root)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "netactivity-1"], env=env, capture_output=True,
                               text=True)
        self.assertIn("-I%s/usr/include/netactivity-1" % root, flags.stdout, flags.stderr)
        env = dict(os.environ, GI_TYPELIB_PATH=root + lib + "/girepository-1.0", LD_LIBRARY_PATH=root + lib)
        r = subprocess.run([sys.executable, "-c", "import gi; gi.require_version('NetActivity', '1.0')\n"
                            "from gi.repository import NetActivity; print(NetActivity.Error.NOT_FOUND.value_nick)"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "not_found"), r.stderr)

    def test_dbus_activation_from_the_packaged_service_file(self):
        # The package's own file, with its Exec pointing into the extracted root (the only change).
        servicedir = tempfile.mkdtemp(prefix="netactivity-services-")
        self.addCleanup(shutil.rmtree, servicedir, True)
        binary = self.path("/usr/bin/netactivityd")
        with open(self.path(SERVICE)) as f:
            text = f.read()
        self.assertIn("Exec=/usr/bin/netactivityd ", text)
        with open(os.path.join(servicedir, os.path.basename(SERVICE)), "w") as f:
            f.write(text.replace("Exec=/usr/bin/netactivityd ", "Exec=%s " % binary))
        self.check_activation(servicedir, binary)


@unittest.skipUnless(DEB and INSTALL, "make deb-install-test installs the package and runs this (as root)")
class PackageInstallTests(unittest.TestCase, PackageChecks):
    """dpkg -i and dpkg --purge on this machine: its own target, for root, never part of make test."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("dpkg -i needs root")
        state = installed_state()
        if state not in ("", "rc", "un", "pn"):
            raise unittest.SkipTest("a netactivity package is installed already (dpkg state %r); not touching it" % state)
        r = sh("dpkg", "-i", DEB)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        r = sh("dpkg", "--purge", "netactivity")
        assert r.returncode == 0, r.stdout + r.stderr
        left = [f for f in FILES if os.path.exists(f)]
        assert left == [], "dpkg --purge removes every file: %s" % left
        assert installed_state() in ("", "pn", "un"), "purged: dpkg forgets the package"

    def test_installed_files_dependencies_and_conffiles(self):
        self.assertEqual(installed_state(), "ii")
        listed = sh("dpkg", "-L", "netactivity").stdout.split()
        for f in FILES:
            self.assertIn(f, listed)
            self.assertTrue(os.path.exists(f), f)
        self.assertIn("/etc/xdg/autostart/netactivityd.desktop", sh("dpkg-query", "-W", "-f=${Conffiles}", "netactivity").stdout)
        self.check_binaries_need_no_toolchain()

    def test_the_installed_agent_runs_without_the_toolchain(self):
        self.check_agent_runs_without_the_toolchain()

    def test_dbus_activation_from_the_installed_file(self):
        self.check_activation("/usr/share/dbus-1/services", "/usr/bin/netactivityd")


if __name__ == "__main__":
    unittest.main()


def sibling(name, arch=None):
    """The package `name` built beside DEB (same version; `arch`: all for the extension's)."""
    base = os.path.basename(DEB).replace("netactivity_", name + "_", 1)
    if arch:
        base = base.rsplit("_", 1)[0] + "_%s.deb" % arch
    return os.path.join(os.path.dirname(DEB), base)


@unittest.skipUnless(DEB, "make deb-test builds the package and runs this")
class ExtensionPackageTests(unittest.TestCase):
    """The GNOME Shell extension in two packages with the same files: ES modules for 45 to 50, the
    older form for 43 and 44; each depends on the shells it fits, and they conflict."""

    def test_each_package_holds_the_form_its_shells_load(self):
        import json
        main = sh("dpkg-deb", "-c", DEB).stdout
        self.assertNotIn("gnome-shell/extensions", main, "the agent's package holds no extension")
        for name, shells, form, other in (
                ("gnome-shell-extension-netactivity", ["45", "46", "47", "48", "49", "50"], "export default class",
                 "gnome-shell-extension-netactivity-legacy"),
                ("gnome-shell-extension-netactivity-legacy", ["43", "44"], "function init(",
                 "gnome-shell-extension-netactivity")):
            deb = sibling(name, "all")
            root = tempfile.mkdtemp(prefix="netactivity-ext-deb-")
            self.addCleanup(shutil.rmtree, root, True)
            self.assertEqual(sh("dpkg-deb", "-x", deb, root).returncode, 0, deb)
            ext = os.path.join(root, "usr/share/gnome-shell/extensions/netactivity@example.org")
            with open(os.path.join(ext, "metadata.json")) as f:
                self.assertEqual(json.load(f)["shell-version"], shells, name)
            with open(os.path.join(ext, "extension.js")) as f:
                self.assertIn(form, f.read(), name)
            for f in ("model.js", "icons/netactivity-symbolic.svg", "locale/de/LC_MESSAGES/netactivity.mo"):
                self.assertTrue(os.path.isfile(os.path.join(ext, f)), (name, f))
            self.assertTrue(os.path.isfile(os.path.join(root, "usr/share/doc", name, "copyright")), name)
            fields = {k: sh("dpkg-deb", "-f", deb, k).stdout.strip() for k in ("Architecture", "Depends", "Conflicts")}
            self.assertEqual(fields["Architecture"], "all")
            self.assertIn("gnome-shell (>= %s~)" % shells[0], fields["Depends"])
            self.assertIn("gnome-shell (<< %d~)" % (int(shells[-1]) + 1), fields["Depends"])
            self.assertIn("netactivity (>= ", fields["Depends"])
            self.assertEqual(fields["Conflicts"], other)


@unittest.skipUnless(DEB and DEBIAN13_BASE and os.path.isfile(os.path.join(DEBIAN13_BASE or "/", ".complete"))
                     and shutil.which("bwrap") and os.getuid() == 0,
                     "make deb-test runs this as root with a Debian 13 root (NETACTIVITY_DEBIAN13_BASE)")
class Debian13PackageTests(unittest.TestCase):
    """The packages built here (on Debian 12) on Debian 13: apt resolves their dependencies there
    (64-bit-time libraries such as libcurl4t64 provide the old names), they install, D-Bus
    activation starts the agent, and the decoder runs in its bubblewrap sandbox. In a copy of the
    root, through bubblewrap: nothing on this machine changes."""

    def test_the_packages_install_with_apt_and_work_on_debian_13(self):
        work = tempfile.mkdtemp(prefix="netactivity-debian13-")
        self.addCleanup(shutil.rmtree, work, True)
        root, dist = os.path.join(work, "root"), os.path.join(work, "dist")
        self.assertEqual(sh("cp", "-a", DEBIAN13_BASE, root).returncode, 0)
        os.makedirs(dist)
        debs = [DEB, sibling("libnetactivity-1-0"), sibling("gir1.2-netactivity-1.0"),
                sibling("gnome-shell-extension-netactivity", "all"), sibling("gnome-shell-extension-netactivity-legacy", "all")]
        for deb in debs:
            shutil.copy(deb, dist)
        with open(os.path.join(dist, "image.png"), "wb") as f:
            from harness import png
            f.write(bytes(png(width=3, height=2)))
        names = [os.path.basename(d) for d in debs]
        script = """set -e
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends %(main)s >/dist/apt.log 2>&1 || { cat /dist/apt.log; exit 1; }
dpkg-query -W -f='installed ${Package} ${Version} ${Status}\n' netactivity libnetactivity-1-0 gir1.2-netactivity-1.0
# The extension's packages: the one for 45 to 50 fits trixie's gnome-shell 48, the other does not.
apt-get install -s -q --no-install-recommends /dist/%(ext)s >/dev/null 2>&1 && echo "extension installable"
apt-get install -s -q --no-install-recommends /dist/%(legacy)s >/dev/null 2>&1 || echo "legacy extension refused"
export HOME=/tmp XDG_CACHE_HOME=/tmp/cache XDG_CONFIG_HOME=/tmp/config
dbus-daemon --session --fork --address=unix:path=/tmp/bus --print-address=3 3>/tmp/address 2>/tmp/bus.log
export DBUS_SESSION_BUS_ADDRESS=$(head -n1 /tmp/address)
# The first call starts the agent from the package's activation file.
gdbus call --session --dest %(name)s --object-path %(path)s \
    --method org.freedesktop.DBus.Properties.Get %(activity)s %(version)s
netactivity status --json
netactivity cache add picture /dist/image.png
gdbus call --session --dest %(name)s --object-path %(path)s \
    --method %(cache)s.%(open_pixels)s picture '{}'
echo "decoders in bubblewrap: $(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '^[^ ]*bwrap .*netactivity-decoder')" 
cat /tmp/bus.log
""" % {"main": " ".join("/dist/" + n for n in names[:3]), "ext": names[3], "legacy": names[4],
       "name": contract.BUS_NAME, "path": contract.OBJECT_PATH, "activity": contract.Activity.INTERFACE,
       "version": contract.Activity.Version, "cache": contract.ImageCache.INTERFACE,
       "open_pixels": contract.ImageCache.OpenPixels}
        # A PID namespace of its own: the bus daemon (which forks) and the agent it starts end with it.
        r = subprocess.run(["bwrap", "--unshare-pid", "--bind", root, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                            "--bind", dist, "/dist", "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf",
                            "--die-with-parent", "--", "/bin/sh", "-c", script],
                           capture_output=True, text=True, timeout=600, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = r.stdout
        for package in ("netactivity", "libnetactivity-1-0", "gir1.2-netactivity-1.0"):
            self.assertRegex(out, r"installed %s \S+ install ok installed" % package)
        self.assertIn("extension installable", out)
        self.assertIn("legacy extension refused", out)
        self.assertIn("(<uint32 1>,)", out, "activation started the agent")
        self.assertIn('"running":true', out)
        self.assertRegex(out, r"'width': <uint32 3>, 'height': <uint32 2>|'height': <uint32 2>.*'width': <uint32 3>")
        self.assertNotIn("did not start the decoder", out + r.stderr)
        self.assertRegex(out, r"decoders in bubblewrap: [1-9]", "the decoder runs in its bubblewrap sandbox")

