# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The GNOME Shell extension in a real gnome-shell (headless Wayland, software GL), installed by
`make install` into a prefix the shell is pointed at, following a real agent on the shell's own
session bus. `make test` installs gnome-shell (scripts/setup.sh --gnome); without it this is skipped
and only the extension's logic runs under gjs.

The shell refuses to run as root, so as root the test runs the buses, the shell and the agent as a
system user of its own (netactivity-gs), and talks to them through a bus policy that lets root in.
The probe extension in gnome/netactivity-test@example.org reports the indicator's actors over D-Bus.
NETACTIVITY_SCREENSHOTS=DIR keeps the screenshots (idle, active, menu, menu-cancel; gnome48- for GNOME
Shell 48), NETACTIVITY_KEEP_SHELL_DIR=1 the session's folder (the shell's and the agent's logs)."""
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import dbus
import dbus.lowlevel

from harness import BIN, NAME, PATH, IFACE, ROOT, isolated_services, isolated_session_config, wait_until

UUID = "netactivity@example.org"
PROBE = "netactivity-test@example.org"
# The probe extension's own object and interface (gnome/netactivity-test@example.org), not the contract's.
PROBE_PATH = "/org/example/NetActivityTest"
PROBE_IFACE = "org.example.NetActivityTest"
USER = "netactivity-gs"
HERE = os.path.dirname(os.path.abspath(__file__))
SHELL = shutil.which("gnome-shell")
GJS = shutil.which("gjs")
TASK = IFACE + ".Task"

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%(socket)s</listen>
  <auth>EXTERNAL</auth>
  <standard_session_servicedirs/>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <allow user="%(user)s"/>
    <allow user="root"/>
  </policy>
</busconfig>
"""


class ModelTests(unittest.TestCase):
    """The extension's logic (model.js) under bare gjs: what the indicator shows for a given state."""

    @unittest.skipUnless(GJS, "gjs is not installed (make test installs it)")
    def test_model(self):
        # The ES module (45 and later) and the legacy script written from it for 43 and 44.
        legacy = tempfile.mkdtemp(prefix="netactivity-ext-")
        self.addCleanup(shutil.rmtree, legacy, True)
        out = os.path.join(legacy, UUID)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gnome-extension.py"),
                        os.path.join(ROOT, "desktop", "gnome-shell", UUID), out, "--legacy"], check=True, timeout=60)
        results = []
        for args in ([os.path.join(ROOT, "desktop", "gnome-shell", UUID)], [out, "legacy"]):
            r = subprocess.run([GJS, "-m", os.path.join(HERE, "gnome", "model_test.js"), *args],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            results.append(r.stdout.strip())
        self.assertRegex(results[0], r"^ok \d+$")
        self.assertEqual(results[0], results[1], "the same checks pass on both forms")


# A Debian 13 root with GNOME Shell 48 (scripts/debian13-root.sh; make test makes it in the build
# tree): the same tests run there too, the shell inside the root, the agent on this machine.
DEBIAN13 = os.environ.get("NETACTIVITY_DEBIAN13")


def in_root(root, argv, binds=()):
    """argv run with `root` as its /, through bubblewrap: the root read-only, this machine's /sys,
    a /tmp of its own, and `binds` (paths bound at the same place: the test's folder)."""
    if not root:
        return argv
    out = ["bwrap", "--ro-bind", root, "/", "--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys",
           "--tmpfs", "/tmp", "--die-with-parent"]
    for source, target in binds:
        out += ["--ro-bind" if target.startswith("/etc/") else "--bind", source, target]
    return out + ["--", *argv]


def shell_major(root=None):
    """The gnome-shell's major version, this machine's or the root's (0 when there is none)."""
    try:
        r = subprocess.run(in_root(root, [(SHELL if not root else None) or "gnome-shell", "--version"]),
                           capture_output=True, text=True, timeout=30)
    except OSError:
        return 0
    words = r.stdout.split()
    return int(words[2].split(".")[0]) if len(words) > 2 and words[2].split(".")[0].isdigit() else 0


def have_imagemagick():
    """Whether `convert` is ImageMagick's (a machine may have a stand-in of that name that reads
    nothing but `convert FILE ppm:-`)."""
    try:
        r = subprocess.run(["convert", "-version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return False
    return r.returncode == 0 and "ImageMagick" in r.stdout


def ensure_user():
    """(the user the shell runs as, whether the test created it): ours, or when we are root a system
    user of the test's own, removed again at the end."""
    if os.getuid() != 0:
        return pwd.getpwuid(os.getuid()), False
    try:
        return pwd.getpwnam(USER), False
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", USER], check=True, capture_output=True)
        return pwd.getpwnam(USER), True


def png_max_brightness(path, x, y, width, height):
    """The brightest grey level (0..1) in a rectangle of a PNG, by ImageMagick."""
    r = subprocess.run(["convert", path, "-crop", "%dx%d+%d+%d" % (width, height, x, y), "+repage",
                        "-colorspace", "Gray", "-format", "%[fx:maxima]", "info:"],
                       capture_output=True, text=True, timeout=30, check=True)
    return float(r.stdout.strip())


class ShellSession(unittest.TestCase):
    """A headless gnome-shell with `extensions` enabled and the agent on its session bus (with
    its tray item when `tray`); with `root`, the shell runs in that root, and the buses (with the
    dconf service they start, whose database the shell reads), the agent and the apps on this
    machine (a bus in the root's user namespace would see this test, root outside it, as nobody)."""
    extensions = (UUID, PROBE)
    tray = False
    root = None
    shot_prefix = "gnome-"

    @classmethod
    def _wrap(cls, argv):
        """argv in the root, run as the test user. When this test is root, bwrap runs as root (the
        root may be in a clone that only root may enter: a mode-700 home or mktemp folder) and the
        root's setpriv becomes the test user inside, keeping no capability; `_spawn` then starts
        it as root (`by_root`)."""
        if not cls.root:
            return argv
        if cls._by_root():
            argv = ["setpriv", "--reuid=%d" % cls.user.pw_uid, "--regid=%d" % cls.user.pw_gid, "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--", *argv]
        return in_root(cls.root, argv, [(cls.dir, cls.dir)] + [(os.path.join(cls.dir, "etc", name), "/etc/" + name)
                                                                 for name in ("passwd", "group", "machine-id")])

    @classmethod
    def _by_root(cls):
        """Whether a wrapped command starts as root and becomes the test user inside the root."""
        return bool(cls.root) and os.getuid() == 0

    @classmethod
    def _root_identity(cls, home):
        """The test user in the root's passwd and group files, and a machine id (what the bus and
        the shell look up), bound over the root's own."""
        etc = cls._owned_dir("etc", mode=0o755)
        for name, entry in (("passwd", "%s:x:%d:%d::%s:/bin/sh\n" % (cls.user.pw_name, cls.user.pw_uid, cls.user.pw_gid, home)),
                            ("group", "%s:x:%d:\n" % (cls.user.pw_name, cls.user.pw_gid))):
            with open(os.path.join(cls.root, "etc", name)) as f:
                text = f.read()
            with open(os.path.join(etc, name), "w") as f:
                f.write(text + entry)
        with open(os.path.join(etc, "machine-id"), "w") as f:
            f.write(subprocess.run(["dbus-uuidgen"], capture_output=True, text=True, check=True).stdout)

    @classmethod
    def setUpClass(cls):
        cls.user, cls.created_user = ensure_user()
        cls.dir = tempfile.mkdtemp(prefix="netactivity-gs-")
        os.chmod(cls.dir, 0o755)
        cls.procs = []
        cls.logs = {}
        try:
            cls._start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _owned_dir(cls, *parts, mode=0o700):
        path = os.path.join(cls.dir, *parts)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        os.chown(path, cls.user.pw_uid, cls.user.pw_gid)
        return path

    @classmethod
    def _spawn(cls, name, argv, env, by_root=False):
        log = open(os.path.join(cls.dir, name + ".log"), "w")
        cls.logs[name] = log.name
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cls.dir,
                                **({} if by_root else cls._as_user()))
        cls.procs.append(proc)
        return proc

    @classmethod
    def _bus(cls, name):
        folder = cls._owned_dir(name, mode=0o755)
        socket = os.path.join(folder, "bus")
        config = os.path.join(folder, "bus.conf")
        with open(config, "w") as f:
            # The desktop's services, but never a netactivity installed on this machine (the test's
            # own prefix is kept).
            services = isolated_services(os.path.join(folder, "services"), cls.base_env, own=cls.prefix)
            f.write(isolated_session_config(BUS_CONFIG % {"socket": socket, "user": cls.user.pw_name}, services))
        cls._spawn(name, ["dbus-daemon", "--config-file=" + config, "--nofork", "--nopidfile"], cls.base_env)
        wait_until(lambda: os.path.exists(socket), 10, what=name + " socket")
        return "unix:path=" + socket

    @classmethod
    def _start(cls):
        home = cls._owned_dir("home")
        runtime = cls._owned_dir("runtime")
        cls.shots = cls._owned_dir("shots", mode=0o755)
        # The extension where `make install` puts it, in a prefix the shell reads through XDG_DATA_DIRS.
        prefix = cls.prefix = os.path.join(cls.dir, "prefix")
        major = shell_major(cls.root)
        r = subprocess.run(["make", "-C", ROOT, "install", "PREFIX=" + prefix, "INSTALL_BIN=" + BIN,
                            "EXTENSION_SHELL=%d" % (43 if major < 45 else 45)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # The probe, as a user extension, in the form this shell loads.
        probe = os.path.join(home, ".local", "share", "gnome-shell", "extensions", PROBE)
        os.makedirs(os.path.dirname(probe), exist_ok=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gnome-extension.py"), os.path.join(HERE, "gnome", PROBE),
                        probe, *(["--legacy"] if major < 45 else [])], check=True, timeout=60)
        if cls.root:
            cls._root_identity(home)
        for folder, _, files in os.walk(os.path.join(home, ".local")):
            for name in [folder] + [os.path.join(folder, f) for f in files]:
                os.chown(name, cls.user.pw_uid, cls.user.pw_gid)
        cls.base_env = {
            "PATH": "/usr/bin:/bin", "HOME": home, "USER": cls.user.pw_name, "LANG": "C.UTF-8",
            "XDG_RUNTIME_DIR": runtime, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_DATA_DIRS": os.path.join(prefix, "share") + ":/usr/share",
        }
        # Without a system bus the shell stops in its login-manager start-up; a second private bus
        # stands in for it.
        system = cls._bus("system")
        cls.address = cls._bus("session")
        cls.env = dict(cls.base_env, DBUS_SESSION_BUS_ADDRESS=cls.address, DBUS_SYSTEM_BUS_ADDRESS=system)
        r = subprocess.run((["gsettings", "set", "org.gnome.shell", "enabled-extensions",
                            str(list(cls.extensions))]), env=cls.env, capture_output=True, text=True,
                           timeout=30, **cls._as_user())
        assert r.returncode == 0, r.stderr
        cls.conn = dbus.bus.BusConnection(cls.address)
        # The agent first: the indicator must find it already running, and again after a restart.
        cls.agent = cls._start_agent()
        cls.shell = cls._spawn("gnome-shell", cls._wrap([
            "gnome-shell" if cls.root else SHELL, "--headless", "--wayland", "--no-x11", "--virtual-monitor", "1280x800"]),
            dict(cls.env, LIBGL_ALWAYS_SOFTWARE="1", GNOME_SHELL_SESSION_MODE="user"), by_root=cls._by_root())
        def enabled():
            if cls.shell.poll() is not None:
                raise AssertionError("gnome-shell exited: " + cls.log("gnome-shell"))
            if not cls.conn.name_has_owner("org.gnome.Shell"):
                return False
            extensions = cls.conn.get_object("org.gnome.Shell", "/org/gnome/Shell", introspect=False)
            try:
                states = [extensions.GetExtensionInfo(u, dbus_interface="org.gnome.Shell.Extensions")
                          for u in cls.extensions]
            except dbus.DBusException:
                return False
            # 1.0 = ENABLED; 3.0 = ERROR (with the error text in "error").
            # (GNOME Shell 45 and later say ERROR with no error text while an extension loads.)
            for info in states:
                if float(info.get("state", 0)) == 3.0 and str(info.get("error", "")):
                    raise AssertionError("extension error: %s\ngnome-shell: %s" % (dict(info), cls.log("gnome-shell")))
            return all(float(info.get("state", 0)) == 1.0 for info in states)
        wait_until(enabled, 60, 0.1, "the shell with both extensions enabled")
        cls.probe = cls.conn.get_object("org.gnome.Shell", PROBE_PATH, introspect=False)
        # The shell's screenshot API answers only allow-listed names; this one is on its list.
        cls.conn.request_name("org.gnome.Screenshot")

    @classmethod
    def _as_user(cls):
        return {"user": cls.user.pw_uid, "group": cls.user.pw_gid, "extra_groups": []} if os.getuid() == 0 else {}

    @classmethod
    def _start_agent(cls):
        # The installed copy: the test user may not be able to enter the build folder.
        proc = cls._spawn("netactivityd", [os.path.join(cls.prefix, "bin", "netactivityd"), "--config", "",
                                          "--tray" if cls.tray else "--no-tray",
                                          "--activation-delay", "0", "--completion-delay", "0"], cls.env)
        wait_until(lambda: cls.conn.name_has_owner(NAME) or proc.poll() is not None, 20, what="the agent")
        assert proc.poll() is None, cls.log("netactivityd")
        return proc

    @classmethod
    def log(cls, name):
        with open(cls.logs[name]) as f:
            return f.read()[-4000:]

    @classmethod
    def tearDownClass(cls):
        for proc in reversed(cls.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if hasattr(cls, "conn"):
            cls.conn.close()
        if not os.environ.get("NETACTIVITY_KEEP_SHELL_DIR"):
            shutil.rmtree(cls.dir, ignore_errors=True)
        if cls.created_user:
            subprocess.run(["userdel", USER], capture_output=True)

    def indicator(self):
        return json.loads(str(self.probe.Indicator(dbus_interface=PROBE_IFACE)))

    def wait_indicator(self, predicate, what):
        return wait_until(lambda: (lambda i: i if predicate(i) else None)(self.indicator()), 10, 0.05, what)

    def screenshot(self, name):
        path = os.path.join(self.shots, name + ".png")
        shell = self.conn.get_object("org.gnome.Shell.Screenshot", "/org/gnome/Shell/Screenshot",
                                     introspect=False)
        ok, written = shell.Screenshot(False, False, path, dbus_interface="org.gnome.Shell.Screenshot")
        self.assertTrue(ok, "the shell took no screenshot")
        keep = os.environ.get("NETACTIVITY_SCREENSHOTS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(str(written), os.path.join(keep, self.shot_prefix + name + ".png"))
        return str(written)

    def agent_obj(self, conn=None):
        return (conn or self.conn).get_object(NAME, PATH, introspect=False)


@unittest.skipUnless(SHELL and GJS and have_imagemagick(),
                     "gnome-shell and imagemagick are not installed (make test installs them)")
class GnomeShellTests(ShellSession):
    """Our own extension."""

    def test_1_follows_visible_clients_and_tasks(self):
        idle = self.wait_indicator(lambda i: i and not i["visible"] and i["online"], "an idle indicator")
        self.assertTrue(idle["inPanel"])
        idle_shot = self.screenshot("idle")

        # An app (its own connection) starts using the network and publishes a task with progress.
        app = dbus.bus.BusConnection(self.address)
        try:
            obj = self.agent_obj(app)
            obj.IncrementActivityCount(dbus_interface=IFACE)
            # A lease that says why: the menu names the reason with the app.
            lease = obj.BeginActivity("Syncing mail", dbus_interface=IFACE).take()
            self.addCleanup(os.close, lease)
            task_path = obj.BeginTask("backup photos", dbus.Dictionary({"expected-to-receive": dbus.UInt64(4000000)}, signature="sv"),
                                      dbus_interface=IFACE)
            app.get_object(NAME, task_path, introspect=False).SetProgress(
                dbus.UInt64(0), dbus.UInt64(0), dbus.UInt64(1000000), dbus.UInt64(4000000), dbus_interface=TASK)
            shown = self.wait_indicator(
                # (a size only once the shell has laid the new actor out: null before)
                lambda i: i["visible"] and i["mapped"] and (i["width"] or 0) > 0 and "python3 (3) — Syncing mail" in json.dumps(i["menu"], ensure_ascii=False)
                and len(i["menu"]) == 2 and "25 %" in json.dumps(i["menu"]),
                "the indicator laid out, its menu with the app's 3 activities, its reason and the task at 25 %")
            active_shot = self.screenshot("active")
            # Pixels: the icon is drawn (light on the dark bar) where the probe says the indicator is,
            # and that place is plain dark bar when idle.
            box = (int(shown["x"]), int(shown["y"]), int(shown["width"]), int(shown["height"]))
            self.assertGreater(png_max_brightness(active_shot, *box), 0.6, "no light icon pixels in %r" % (box,))
            self.assertLess(png_max_brightness(idle_shot, *box), 0.3, "the idle bar is not plain at %r" % (box,))

            # The menu as drawn: the app and the task with its progress.
            items = json.loads(str(self.probe.OpenMenu(dbus_interface=PROBE_IFACE)))
            self.screenshot("menu")
            self.probe.CloseMenu(dbus_interface=PROBE_IFACE)
            self.assertEqual(items[0], "Using the network")
            self.assertIn("python3 (3) — Syncing mail", items)
            self.assertIn("Tasks", items)
            self.assertIn("backup photos — 25 % of 4.0 MB", items)
            # ... and under the task, a progress bar filled a quarter of the way.
            bars = self.indicator()["bars"]
            self.assertEqual([(b["fraction"], b["filled"] * 4 == b["width"]) for b in bars], [(0.25, True)], bars)
        finally:
            app.close()  # the app leaves: its count and task go with it
        self.wait_indicator(lambda i: not i["visible"], "the indicator hidden again")

    def test_2_ignores_signals_from_others(self):
        self.wait_indicator(lambda i: not i["visible"] and i["online"], "an idle indicator")
        liar = dbus.bus.BusConnection(self.address)
        try:
            msg = dbus.lowlevel.SignalMessage(PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged")
            msg.append(IFACE, {"Visible": True, "ActivityCount": dbus.UInt32(99)}, dbus.Array([], signature="s"),
                       signature="sa{sv}as")
            liar.send_message(msg)
            # Once the bus answers the liar, it has routed the fake signal; the shell reads its socket
            # in order, so by the time it answers the probe it has seen (and dropped) the fake.
            liar.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus", introspect=False).GetId(
                dbus_interface="org.freedesktop.DBus")
            after = self.indicator()
            self.assertFalse(after["visible"], after)
        finally:
            liar.close()

    def test_3_follows_agent_restart(self):
        type(self).agent.send_signal(signal.SIGTERM)
        type(self).agent.wait(10)
        gone = self.wait_indicator(lambda i: not i["online"], "the indicator offline")
        self.assertFalse(gone["visible"])
        type(self).agent = self._start_agent()
        self.wait_indicator(lambda i: i["online"], "the indicator online again")
        app = dbus.bus.BusConnection(self.address)
        try:
            self.agent_obj(app).IncrementActivityCount(dbus_interface=IFACE)
            self.wait_indicator(lambda i: i["visible"] and "python3" in json.dumps(i["menu"]), "the indicator after the restart")
        finally:
            app.close()
        self.wait_indicator(lambda i: not i["visible"], "the indicator hidden")
        self.assertIsNone(self.shell.poll(), "gnome-shell died")

    def test_4_a_task_is_cancelled_from_the_menu(self):
        self.wait_indicator(lambda i: not i["visible"] and i["online"], "an idle indicator")
        run = subprocess.Popen([os.path.join(self.prefix, "bin", "netactivity"), "run", "--task", "backup", "--cancellable",
                                "--", "sleep", "60"], env=self.env, **self._as_user())
        try:
            shown = self.wait_indicator(lambda i: i["visible"] and any(
                r.get("actions") for s in i["menu"] for r in s["rows"]), "the task with its buttons in the menu")
            path = [r["actions"]["path"] for s in shown["menu"] for r in s["rows"] if r.get("actions")][0]
            items = json.loads(str(self.probe.OpenMenu(dbus_interface=PROBE_IFACE)))
            self.assertIn("backup", items)
            self.screenshot("menu-cancel")
            self.assertEqual(self.indicator()["buttons"], [{"path": path, "action": "cancel", "name": "Cancel"}],
                             "a cancellable task that cannot be paused: Cancel alone")
            self.assertTrue(bool(self.probe.Click(path, "cancel", dbus_interface=PROBE_IFACE)))
            self.assertEqual(run.wait(10), 128 + 15, "the command ended by the panel's cancel")
            self.probe.CloseMenu(dbus_interface=PROBE_IFACE)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        self.wait_indicator(lambda i: not i["visible"], "the indicator hidden once the task ended")


class GnomeShell48Tests(GnomeShellTests):
    """The same, on Debian 13's GNOME Shell 48 (the ES-module extension), in the root
    NETACTIVITY_DEBIAN13 names (make test makes it: scripts/debian13-root.sh)."""
    root = DEBIAN13
    shot_prefix = "gnome48-"
    # Not GnomeShellTests' condition, which is this machine's shell.
    __unittest_skip__ = not (DEBIAN13 and os.path.isfile(os.path.join(DEBIAN13 or "/", ".complete")) and
                             shutil.which("bwrap") and have_imagemagick())
    __unittest_skip_why__ = "no Debian 13 root (NETACTIVITY_DEBIAN13; make test makes one) or no bwrap"

    def test_0_the_shell_is_48_and_loads_the_es_module(self):
        self.assertEqual(shell_major(self.root), 48)
        info = self.conn.get_object("org.gnome.Shell", "/org/gnome/Shell", introspect=False).GetExtensionInfo(
            UUID, dbus_interface="org.gnome.Shell.Extensions")
        self.assertEqual((float(info["state"]), [str(v) for v in info["shell-version"]][:1]), (1.0, ["45"]))
        with open(os.path.join(self.prefix, "share", "gnome-shell", "extensions", UUID, "extension.js")) as f:
            self.assertIn("export default class", f.read())


APPINDICATOR = "ubuntu-appindicators@ubuntu.com"


@unittest.skipUnless(SHELL and GJS and have_imagemagick() and
                     os.path.isdir("/usr/share/gnome-shell/extensions/" + APPINDICATOR),
                     "gnome-shell, imagemagick and the AppIndicator extension are not installed (make test installs them)")
class AppIndicatorTests(ShellSession):
    """Ubuntu's default desktop: GNOME with the AppIndicator extension as the tray, and the agent's
    StatusNotifierItem in it (the extension refuses an item without a dbusmenu Menu)."""
    extensions = (APPINDICATOR, PROBE)
    tray = True

    def status_area(self):
        return json.loads(str(self.probe.StatusArea(dbus_interface=PROBE_IFACE)))

    def our_item(self):
        area = self.status_area()
        # The running agent's item (one an agent before it left may still be drawn).
        keys = [k for k in area if k.startswith("appindicator-") and k.endswith("StatusNotifierItem-%d-1" % self.agent.pid)]
        return (keys[0], area[keys[0]]) if keys else None

    def registered_and_alive(self):
        """Waits for the extension to take the agent's item and set up its proxy for it.

        The extension has a race of its own: for an item that registers while the shell starts
        it sometimes fails to set up its proxy, "Error: Argument two may not be null" in the
        shell's log for the item (from its property refresh, "While initalizing proxy for ...",
        or from its first read, "..., Impossible to get basic properties"), and keeps a dead icon
        that never changes: 2 to 3 shell starts in 10 here, on the landed agent as on this one,
        and never otherwise. What a user would do then, restart the agent so that it registers
        anew, is done here, only on that message for the running agent's item, and at most twice:
        one restart recovered 4 of the 5 races seen in 55 runs here; the fifth still failed after
        it (its log was not kept), and a second restart, on the same message only, is allowed for that."""
        watcher = self.conn.get_object("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher", introspect=False)
        items = lambda: [str(i) for i in watcher.Get("org.kde.StatusNotifierWatcher", "RegisteredStatusNotifierItems",
                                                      dbus_interface="org.freedesktop.DBus.Properties")]
        for attempt in (1, 2, 3):
            wait_until(lambda: self.conn.name_has_owner("org.kde.StatusNotifierWatcher") and
                       any("StatusNotifierItem-%d-1" % self.agent.pid in i for i in items()), 20, 0.1,
                       "the extension to accept the agent's item")
            try:
                return wait_until(lambda: (lambda f: f if f and f[1]["ready"] else None)(self.our_item()), 10, 0.1,
                                  "the extension's proxy for the item")
            except AssertionError:
                item = "org.kde.StatusNotifierItem-%d-1" % self.agent.pid
                broken = any(item in line and "Argument two may not be null" in line for line in self.log("gnome-shell").splitlines())
                if attempt == 3 or not broken:
                    raise AssertionError("the extension never set up the item, after %d agent restarts (status area %r)\n"
                                         "gnome-shell: %s" % (attempt - 1, self.status_area(), self.log("gnome-shell")[-3000:]))
                sys.stderr.write("(the AppIndicator extension failed its proxy for the item; restarting the agent) ")
                type(self).agent.send_signal(signal.SIGTERM)
                type(self).agent.wait(10)
                type(self).agent = self._start_agent()

    def test_the_tray_item_shows_with_its_menu_while_visible(self):
        self.registered_and_alive()
        idle_shot = self.screenshot("appindicator-idle")
        item = self.conn.get_object("org.kde.StatusNotifierItem-%d-1" % self.agent.pid, "/StatusNotifierItem", introspect=False)
        icon = [str(item.Get("org.kde.StatusNotifierItem", p, dbus_interface="org.freedesktop.DBus.Properties"))
                for p in ("IconName", "IconThemePath")]
        self.assertEqual(icon, ["netactivity-symbolic", os.path.join(self.prefix, "share", "icons")],
                         "the installed agent names its own symbolic icon and where it is")
        app = dbus.bus.BusConnection(self.address)
        try:
            obj = self.agent_obj(app)
            obj.IncrementActivityCount(dbus_interface=IFACE)
            task_path = obj.BeginTask("backup photos", dbus.Dictionary({}, signature="sv"), dbus_interface=IFACE)
            app.get_object(NAME, task_path, introspect=False).SetFraction(0.4, dbus_interface=TASK)
            key, shown = wait_until(
                lambda: (lambda f: f if f and f[1]["visible"] and f[1]["mapped"] and (f[1]["width"] or 0) > 0 else None)(
                    self.our_item()), 20, 0.1, "the item in the top bar (status area: %s)" % list(self.status_area()))
            active_shot = self.screenshot("appindicator-active")
            box = (int(shown["x"]), int(shown["y"]), int(shown["width"]), int(shown["height"]))
            self.assertGreater(png_max_brightness(active_shot, *box), 0.6, "no light icon pixels in %r" % (box,))
            self.assertLess(png_max_brightness(idle_shot, *box), 0.3, "the idle bar is not plain at %r" % (box,))
            seen = []

            def menu():
                seen[:] = [json.loads(str(self.probe.OpenStatusMenu(key, dbus_interface=PROBE_IFACE)))]
                return seen[0] if seen[0] and "backup photos — 40 %" in seen[0] else None
            try:
                texts = wait_until(menu, 10, 0.1, "the task in the item's menu")
            except AssertionError:
                raise AssertionError("the task is not in the item's menu, which shows %r\ngnome-shell: %s\nnetactivityd: %s" % (
                    seen, self.log("gnome-shell")[-3000:], self.log("netactivityd")[-3000:]))
            self.screenshot("appindicator-menu")
            self.probe.CloseStatusMenu(key, dbus_interface=PROBE_IFACE)
            self.assertEqual(texts[0], "Using the network", texts)
            self.assertIn("Show network activity", texts)
            # A row that stays and changes its text reaches the host (ItemsPropertiesUpdated: the
            # extension reads the labels of new rows only).
            app.get_object(NAME, task_path, introspect=False).SetFraction(0.7, dbus_interface=TASK)
            wait_until(lambda: (lambda t: t if t and "backup photos — 70 %" in t else None)(
                json.loads(str(self.probe.OpenStatusMenu(key, dbus_interface=PROBE_IFACE)))),
                10, 0.1, "the task's new progress in the item's menu")
            self.probe.CloseStatusMenu(key, dbus_interface=PROBE_IFACE)
        finally:
            app.close()
        wait_until(lambda: (lambda f: f is None or not f[1]["visible"])(self.our_item()), 10, 0.1,
                   "the item hidden again (Passive)")


if __name__ == "__main__":
    unittest.main()
