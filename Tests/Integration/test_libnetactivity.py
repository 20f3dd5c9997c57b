# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""libnetactivity-1 (C, GObject, and Python and GJS through its typelib) against the real agent:
the C examples (an image and its pixels, a task's progress), errors in the NET_ACTIVITY_ERROR
domain, leases that end when released, a download answered after 26 s (past GDBus's default
timeout of 25 s) reaching every client, and the gallery examples (Python, GJS) showing the agent's
pixels in a GTK 4 window on Xvfb with a spinner bound to Visible. `make test` builds the library
into .build/libnetactivity and the C examples into .build/examples."""
import os
import signal
import subprocess
import sys
import threading
import unittest

import dbus

import contract
from harness import ROOT, Agent, PrivateBus, connect, wait_until
from test_decoder import png
from test_gtk import Xvfb, count
from test_pixels import PixelServer

LIB = os.path.join(ROOT, ".build", "libnetactivity")
EXAMPLES = os.path.join(ROOT, ".build", "examples")
SOURCES = os.path.join(ROOT, "Examples", "libnetactivity")
RED = png(40, 40, lambda x, y: (255, 0, 0, 255))
GREEN = png(40, 40, lambda x, y: (0, 255, 0, 255))
ERR = contract.ERROR_PREFIX


class Lines:
    """A process's output lines as they come."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, prefix, timeout=30, nth=1):
        """The `nth` line that starts with `prefix`, once it has come."""
        def found():
            lines = [l for l in self.lines if l.startswith(prefix)]
            return lines[nth - 1] if len(lines) >= nth else None
        return wait_until(found, timeout=timeout, what=lambda: "%r (%d) from %s (so far %r; stderr %r)" % (
            prefix, nth, self.proc.args[0], self.lines, self.stderr()))

    def stderr(self):
        err = getattr(self.proc, "err", None)
        if err is None:
            return ""
        err.seek(0)
        return err.read()[-3000:]


@unittest.skipUnless(os.path.exists(os.path.join(LIB, "NetActivity-1.0.typelib")), "libnetactivity is not built (make lib)")
class LibraryTests(unittest.TestCase):
    def setUp(self):
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.agent = Agent(self.bus, "--activation-delay", "0", "--completion-delay", "0")
        self.addCleanup(self.agent.stop)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)
        self.http = PixelServer({"/red.png": RED, "/green.png": GREEN, "/slow.png": RED, "/text": b"not an image"})
        self.addCleanup(self.http.stop)

    def env(self, **extra):
        return self.bus.env(**{"GI_TYPELIB_PATH": LIB, "LD_LIBRARY_PATH": LIB, **extra})

    def start(self, *command, **env):
        import tempfile
        err = tempfile.TemporaryFile(mode="w+")
        self.addCleanup(err.close)
        proc = subprocess.Popen(list(command), env=self.env(**env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True)
        proc.err = err  # what it said on stderr, for a failure's message
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait(10)))
        return Lines(proc)

    def python(self, code):
        """Runs `code` in a Python of its own with the library's typelib; its output."""
        prelude = ("import gi\ngi.require_version('NetActivity', '1.0')\n"
                   "from gi.repository import GLib, Gio, NetActivity\n")
        r = subprocess.run([sys.executable, "-c", prelude + code], env=self.env(), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def count(self):
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
        return int(obj.Get(contract.Activity.INTERFACE, contract.Activity.ActivityCount, dbus_interface=contract.PROPERTIES))

    def test_the_c_example_fetches_an_image_and_its_pixels_and_names_errors_by_domain_and_code(self):
        out = self.start(os.path.join(EXAMPLES, "fetch-image"), self.http.url("/red.png"), "16")
        self.assertEqual(out.wait_for("image"), "image %d image/png network" % len(RED))
        self.assertEqual(out.wait_for("pixels"), "pixels 16x16 64")
        self.assertEqual(out.proc.wait(30), 0)
        missing = self.start(os.path.join(EXAMPLES, "fetch-image"), self.http.url("/missing.png"))
        self.assertEqual(missing.proc.wait(30), 1)
        self.assertRegex(missing.wait_for("error"), r"^error net-activity-error-quark 3 .*404")
        self.assertEqual(missing.wait_for("("), "(an HTTP error status)")

    def test_the_c_example_follows_a_tasks_progress_to_its_end(self):
        agent = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), contract.Activity.INTERFACE)
        path = agent.BeginTask("upload", {contract.Activity.BEGIN_TASK_OPTION_EXPECTED_TO_SEND: dbus.UInt64(1000)})
        task = dbus.Interface(self.conn.get_object(contract.BUS_NAME, path), contract.Task.INTERFACE)
        out = self.start(os.path.join(EXAMPLES, "follow-task"), path)
        self.assertEqual(out.wait_for("task"), "task upload")
        task.SetProgress(dbus.UInt64(500), dbus.UInt64(1000), dbus.UInt64(0), dbus.UInt64(0))
        out.wait_for("progress 50")
        task.Complete("")
        self.assertEqual(out.wait_for("completed"), "completed ")
        self.assertEqual(out.proc.wait(30), 0)

    def test_the_c_example_hears_a_panels_pause_and_cancel_as_gobject_signals(self):
        out = self.start(os.path.join(EXAMPLES, "cancellable-task"))
        path = out.wait_for("task").split()[1]
        task = self.conn.get_object(contract.BUS_NAME, path)
        state = lambda: str(task.Get(contract.Task.INTERFACE, "State", dbus_interface=contract.PROPERTIES))
        panel = dbus.Interface(task, contract.Task.INTERFACE)
        panel.RequestSuspend(True)
        self.assertEqual(out.wait_for("suspend"), "suspend requested 1")
        wait_until(lambda: state() == contract.Task.STATE_SUSPENDED, what="the app to pause its task")
        panel.RequestSuspend(False)
        self.assertEqual(out.wait_for("suspend requested 0"), "suspend requested 0")
        panel.RequestCancel()
        self.assertEqual(out.wait_for("cancel"), "cancel requested")
        self.assertEqual(out.proc.wait(30), 0)
        self.assertEqual(state(), contract.Task.STATE_COMPLETED)
        self.assertEqual(str(task.Get(contract.Task.INTERFACE, "Error", dbus_interface=contract.PROPERTIES)),
                         contract.ERROR_PREFIX + "Cancelled")

    def test_messages_have_no_dbus_prefix_in_any_language_and_no_agent_is_agent_not_running(self):
        bad = self.http.url("/text")
        out = self.python(
            "d = NetActivity.downloader_get_sync(None)\n"
            "for call in (lambda: d.fetch_image_bytes_sync(%r, None, None),\n"
            "             lambda: d.call_set_priority_sync('not a receipt', 'bogus', None)):\n"
            "    try:\n"
            "        call()\n"
            "    except GLib.Error as e:\n"
            "        print(e.domain, e.code, e.message)\n" % bad)
        image, standard = out.splitlines()
        self.assertRegex(image, r"^net-activity-error-quark 5 [^G]")
        self.assertRegex(standard, r"^g-dbus-error-quark \d+ [^G]")
        self.assertNotIn("GDBus.Error", out)
        js = subprocess.run(["gjs", "-c", (
            "imports.gi.versions.NetActivity = '1.0'; const {NetActivity} = imports.gi;"
            "try { NetActivity.downloader_get_sync(null).fetch_image_bytes_sync('%s', null, null); }"
            "catch (e) { print(e.code + ' ' + e.message); }") % bad], env=self.env(), capture_output=True, text=True,
            timeout=60)
        self.assertRegex(js.stdout, r"^5 [^G]", js.stderr)
        self.assertNotIn("GDBus.Error", js.stdout)
        c = self.start(os.path.join(EXAMPLES, "fetch-image"), bad)
        self.assertNotIn("GDBus.Error", c.wait_for("error"))
        # No agent: the library's own code, a message that says what to do, in C as in Python.
        self.agent.stop()
        out = self.python(
            "d = NetActivity.downloader_get_sync(None)\n"
            "try:\n"
            "    d.fetch_image_bytes_sync(%r, None, None)\n"
            "except GLib.Error as e:\n"
            "    print(e.matches(NetActivity.error_quark(), NetActivity.Error.AGENT_NOT_RUNNING), e.message)\n"
            "a = NetActivity.agent_get_sync(None)\n"
            "try:\n"
            "    a.call_increment_activity_count_sync(None)\n"
            "except GLib.Error as e:\n"
            "    print(e.code == NetActivity.Error.AGENT_NOT_RUNNING)\n" % bad)
        self.assertRegex(out, r"^True The netactivity agent is not running on this session bus: start netactivityd")
        self.assertEqual(out.splitlines()[1], "True")
        c = self.start(os.path.join(EXAMPLES, "fetch-image"), bad)
        self.assertRegex(c.wait_for("error"), r"^error net-activity-error-quark 1000 The netactivity agent is not running")

    def test_a_cancelled_fetch_releases_the_agents_transfer_while_the_app_lives(self):
        # GDBus ends a cancelled call at the app's end only; the library tells the agent too.
        gate = self.http.gates["/slow.png"] = threading.Event()
        self.addCleanup(gate.set)
        out = self.python_async(
            "import sys, threading\n"
            "d = NetActivity.downloader_get_sync(None)\n"
            "loop, c = GLib.MainLoop(), Gio.Cancellable()\n"
            "def done(d, res):\n"
            "    try:\n"
            "        d.fetch_pixels_bytes_finish(res)\n"
            "    except GLib.Error as e:\n"
            "        print('done', e.matches(Gio.io_error_quark(), Gio.IOErrorEnum.CANCELLED), flush=True)\n"
            "d.fetch_pixels_bytes(%r, None, c, done)\n"
            "threading.Thread(target=lambda: (sys.stdin.readline(), c.cancel()), daemon=True).start()\n"
            "loop.run()\n" % self.http.url("/slow.png"))
        downloader = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        active = lambda: int(downloader.Get(contract.Downloader.INTERFACE, contract.Downloader.ActiveDownloads,
                                            dbus_interface=contract.PROPERTIES))
        wait_until(lambda: self.http.count("/slow.png") == 1 and active() == 1, timeout=15, what="the transfer")
        out.proc.stdin.write("\n")
        out.proc.stdin.flush()
        self.assertEqual(out.wait_for("done"), "done True")
        wait_until(lambda: active() == 0, timeout=15, what="the agent to let the transfer go")
        self.assertFalse(gate.is_set())
        self.assertIsNone(out.proc.poll(), "the app still lives: the agent let go because it was told")

    def test_image_bytes_with_zero_bytes_go_in_and_out_whole(self):
        # `ay` is a GVariant in the generated calls: a PNG holds 0 bytes, which a C string would end at.
        out = self.python(
            "c = NetActivity.ImageCacheProxy.new_for_bus_sync(Gio.BusType.SESSION, 0, NetActivity.BUS_NAME,\n"
            "                                                 NetActivity.OBJECT_PATH, None)\n"
            "png = bytes.fromhex(%r)\n"
            "c.call_add_image_sync('avatar', GLib.Variant('ay', png), None)\n"
            "found, data = c.call_lookup_image_sync('avatar', None)\n"
            "print(found, bytes(data.unpack()) == png, len(data.unpack()))\n" % RED.hex())
        self.assertEqual(out.strip(), "True True %d" % len(RED))

    def test_errors_come_in_the_libraries_domain_and_a_lease_ends_when_released(self):
        out = self.python(
            "d = NetActivity.downloader_get_sync(None)\n"
            "print(d.get_default_timeout() == GLib.MAXINT32)\n"
            "for url in ('ftp://example.com/x', %r):\n"
            "    try:\n"
            "        d.fetch_image_bytes_sync(url, None, None)\n"
            "    except GLib.Error as e:\n"
            "        print(e.domain, e.code == NetActivity.Error.INVALID_URL,\n"
            "              e.matches(NetActivity.error_quark(), NetActivity.Error.NOT_AN_IMAGE))\n" % self.http.url("/text"))
        self.assertEqual(out.splitlines(), ["True", "net-activity-error-quark True False",
                                            "net-activity-error-quark False True"])
        # A lease held by the object alone: ended by end(), and by the last reference going.
        held = subprocess.Popen([sys.executable, "-u", "-c", (
            "import gi, sys\ngi.require_version('NetActivity', '1.0')\nfrom gi.repository import NetActivity\n"
            "agent = NetActivity.agent_get_sync(None)\n"
            "first = NetActivity.Lease.begin_sync(agent, 'first', None)\n"
            "second = NetActivity.Lease.begin_sync(agent, 'second', None)\n"
            "print('two', flush=True); sys.stdin.readline()\n"
            "first.end(); print(first.is_held(), flush=True); sys.stdin.readline()\n"
            "del second; print('dropped', flush=True); sys.stdin.readline()\n")],
            env=self.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (held.poll() is None and held.kill(), held.wait(10)))
        self.assertEqual(held.stdout.readline().strip(), "two")
        wait_until(lambda: self.count() == 2, what="two leases")
        held.stdin.write("\n")
        held.stdin.flush()
        self.assertEqual(held.stdout.readline().strip(), "False")
        wait_until(lambda: self.count() == 1, what="end() ends the first")
        held.stdin.write("\n")
        held.stdin.flush()
        self.assertEqual(held.stdout.readline().strip(), "dropped")
        wait_until(lambda: self.count() == 0, what="the last reference ends the second (no fd list keeps it)")
        self.assertIsNone(held.poll(), "while the process lives")

    def test_a_download_answered_after_26_seconds_reaches_every_client(self):
        # GDBus's default call timeout is 25 s: the library's downloader waits as long as the call takes.
        gate = self.http.gates["/slow.png"] = threading.Event()
        self.addCleanup(gate.set)
        threading.Timer(26, gate.set).start()
        c = self.start(os.path.join(EXAMPLES, "fetch-image"), self.http.url("/slow.png"))
        py = self.python_async("d = NetActivity.downloader_get_sync(None)\n"
                               "b, info = d.fetch_image_bytes_sync(%r, None, None)\n"
                               "print('image', b.get_size())\n" % self.http.url("/slow.png"))
        js = self.start("gjs", "-c", (
            "imports.gi.versions.NetActivity = '1.0'; const {NetActivity} = imports.gi;"
            "const d = NetActivity.downloader_get_sync(null);"
            "const [b] = d.fetch_image_bytes_sync('%s', null, null); print('image ' + b.get_size());") % self.http.url("/slow.png"))
        expected = "image %d" % len(RED)
        self.assertTrue(c.wait_for("image", timeout=60).startswith(expected))
        self.assertEqual(py.wait_for("image", timeout=60), expected)
        self.assertEqual(js.wait_for("image", timeout=60), expected)
        self.assertEqual(self.http.count("/slow.png"), 1, "one transfer for the three")

    @staticmethod
    def blocks(language, window=None):
        """docs/gobject.md's programs in `language` (its blocks with a main, an import or an
        `imports`), those with a GTK window or those without when `window` says; other blocks for
        other languages."""
        import re
        with open(os.path.join(ROOT, "docs", "gobject.md")) as f:
            found = re.findall(r"```%s\n(.*?)```" % language, f.read(), re.S)
        if window is None:
            return found
        programs = [b for b in found if re.search(r"int main|^import |^imports\.", b, re.M)]
        return [b for b in programs if ("Gtk" in b) == window]

    def test_the_docs_c_python_and_javascript_blocks_work(self):
        import tempfile
        url, expected = self.http.url("/red.png"), "%d bytes" % len(RED)
        (c,), (py,), (js,) = (self.blocks(lang, window=False) for lang in ("c", "python", "js"))
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "app.c"), "w") as f:
                f.write(c.replace("https://example.com/avatar.png", url))
            subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", os.path.join(tmp, "app.c"), *self.page_flags(), "-o",
                            os.path.join(tmp, "app")], check=True, timeout=60)
            r = subprocess.run([os.path.join(tmp, "app")], env=self.env(), capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, expected), r.stderr)
        r = subprocess.run([sys.executable, "-c", py.replace("https://example.com/avatar.png", url)], env=self.env(),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, expected + " of image/png"), r.stderr)
        wait_until(lambda: self.count() == 0, what="the block's lease ended")
        r = subprocess.run(["gjs", "-c", js.replace("https://example.com/avatar.png", url)], env=self.env(),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, expected + " of image/png"), r.stderr)

    def page_flags(self, *more):
        """pkg-config's flags with the environment docs/gobject.md's uninstalled recipe sets."""
        (recipe,) = [b for b in self.blocks("sh") if "make lib" in b]
        exports = "\n".join(l for l in recipe.splitlines() if l.startswith("export "))
        r = subprocess.run(["bash", "-c", exports + "\npkg-config --cflags --libs netactivity-1 %s\n"
                            "echo \"$LD_LIBRARY_PATH $GI_TYPELIB_PATH\"" % " ".join(more)],
                           cwd=ROOT, capture_output=True, text=True, check=True)
        flags, paths = r.stdout.strip().rsplit("\n", 1)
        self.assertEqual(paths.split(), [os.path.join(ROOT, ".build", "libnetactivity")] * 2)
        return flags.split()

    def test_the_docs_first_app_shows_an_image_and_spins_in_c_python_and_javascript(self):
        import tempfile
        (c,), (py,), (js,) = (self.blocks(lang, window=True) for lang in ("c", "python", "js"))
        tmp = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", tmp]))
        paths = {name: os.path.join(tmp, name) for name in ("app.c", "app.py", "app.js")}
        for name, text in zip(paths, (c, py, js)):
            with open(paths[name], "w") as f:
                f.write(text)
        subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", paths["app.c"], *self.page_flags("gtk4"), "-o",
                        os.path.join(tmp, "app")], check=True, timeout=120)
        x = Xvfb()
        self.addCleanup(x.stop)
        for command in (["stdbuf", "-oL", os.path.join(tmp, "app")], [sys.executable, "-u", paths["app.py"]],
                        ["gjs", paths["app.js"]]):
            out = self.start(*command, self.http.url("/red.png"), DISPLAY=x.display, GDK_BACKEND="x11",
                             GSK_RENDERER="cairo", GTK_A11Y="none", NO_AT_BRIDGE="1", XDG_RUNTIME_DIR=self.bus.dir)
            self.assertEqual(out.wait_for("shown", timeout=60), "shown 40x40", command)
            wait_until(lambda: count(x.screenshot(), (255, 0, 0)) > 1000, timeout=30, what="red on the screen")
            out.proc.kill()
            out.proc.wait(10)

    def test_the_flatpak_module_builds_the_library_alone_and_an_app_runs_against_it(self):
        import re
        import tempfile
        with open(os.path.join(ROOT, "docs", "flatpak.md")) as f:
            (module,) = [b for b in re.findall(r"```yaml\n(.*?)```", f.read(), re.S) if "name: libnetactivity-1" in b]
        commands = re.findall(r"^      - (.+)$", module.split("build-commands:", 1)[1].split("sources:", 1)[0], re.M)
        self.assertTrue(commands)
        tmp = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", tmp]))
        source, dest, trap = (os.path.join(tmp, d) for d in ("source", "app", "trap"))
        # The source as a git checkout has it (tracked files only), and a PATH with no Swift, and an
        # apt-get, sudo and swift that say they were called.
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        os.makedirs(source)
        packed = subprocess.run(["tar", "--null", "-T", "-", "-cf", "-"], cwd=ROOT, input=files, capture_output=True,
                                check=True).stdout
        subprocess.run(["tar", "-xf", "-"], cwd=source, input=packed, check=True)
        os.makedirs(trap)
        for tool in ("apt-get", "sudo", "swift", "swiftc"):
            with open(os.path.join(trap, tool), "w") as f:
                f.write("#!/bin/sh\necho called >> %s/called\nexit 1\n" % tmp)
            os.chmod(os.path.join(trap, tool), 0o755)
        env = dict(os.environ, PATH=trap + ":/usr/bin:/bin", FLATPAK_DEST=dest)
        for command in commands:
            r = subprocess.run(["sh", "-c", command], cwd=source, env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
        self.assertFalse(os.path.exists(os.path.join(tmp, "called")), "the module needs no Swift and no apt-get")
        for path in ("lib/libnetactivity-1.so.0", "lib/girepository-1.0/NetActivity-1.0.typelib",
                     "lib/pkgconfig/netactivity-1.pc", "include/netactivity-1/netactivity.h"):
            self.assertTrue(os.path.exists(os.path.join(dest, path)), path)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "netactivity-1"], capture_output=True, text=True,
                               env=dict(os.environ, PKG_CONFIG_PATH=os.path.join(dest, "lib", "pkgconfig")), check=True)
        app = os.path.join(tmp, "fetch-image")
        subprocess.run(["cc", os.path.join(SOURCES, "fetch-image.c"), *flags.stdout.split(), "-o", app], check=True,
                       timeout=60)
        out = self.start(app, self.http.url("/red.png"), LD_LIBRARY_PATH=os.path.join(dest, "lib"))
        self.assertEqual(out.wait_for("image"), "image %d image/png network" % len(RED))
        self.assertEqual(out.proc.wait(30), 0)

    def test_the_docs_tables_are_the_contracts(self):
        import re
        import xml.etree.ElementTree as ET
        with open(os.path.join(ROOT, "docs", "gobject.md")) as f:
            page = f.read()
        method = ET.parse(os.path.join(ROOT, "dbus", contract.Downloader.INTERFACE + ".xml")).getroot().find(
            "interface/method[@name='%s']" % contract.Downloader.FetchPixels)
        for arg, table in (("options", "FetchPixels options"), ("info", "FetchPixels info")):
            note = method.find("arg[@name='%s']/annotation[@name='%s.Keys']" % (arg, contract.BUS_NAME))
            keys = dict(k.split(":") for k in note.get("value").split())
            rows = [r for r in page.split("<!-- keys: %s -->" % table, 1)[1].split("\n\n", 1)[0].splitlines()
                    if r.startswith("| `")]
            documented = {}
            for row in rows:
                names, sig = re.findall(r"\| ([^|]+) \| `(\w+)` \|", row)[0]
                documented.update({n: sig for n in re.findall(r"`([\w-]+)`", names)})
            self.assertEqual(documented, keys, table)
        with open(os.path.join(ROOT, "libnetactivity", "netactivity-errors.h")) as f:
            codes = set(re.findall(r"^    (NET_ACTIVITY_ERROR_\w+) =", f.read(), re.M))
        errors = page.split("### Errors", 1)[1].split("###", 1)[0]
        self.assertEqual({c for c in codes if "`%s`" % c not in errors}, set(), "codes the errors table leaves out")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gobject-calls.py"), "--check",
                            os.path.join(LIB, "netactivity-generated.h")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def python_async(self, code):
        prelude = ("import gi\ngi.require_version('NetActivity', '1.0')\n"
                   "from gi.repository import GLib, Gio, NetActivity\n")
        return self.start(sys.executable, "-u", "-c", prelude + code)

    def gallery(self, command):
        self.x = Xvfb()
        self.addCleanup(self.x.stop)
        return self.start(*command, self.http.url("/red.png"), self.http.url("/green.png"), DISPLAY=self.x.display,
                          GDK_BACKEND="x11", GSK_RENDERER="cairo", GTK_A11Y="none", NO_AT_BRIDGE="1",
                          XDG_RUNTIME_DIR=self.bus.dir)

    def shows_both(self):
        counts = []

        def both():
            raw = self.x.screenshot()
            counts.append((count(raw, (255, 0, 0)), count(raw, (0, 255, 0))))
            return min(counts[-1]) > 4000
        wait_until(both, timeout=30, what="red and green on the screen (%r)" % counts)

    def spins_with(self, out, nth=1):
        agent = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), contract.Activity.INTERFACE)
        agent.IncrementActivityCount()
        out.wait_for("spinning true", nth=nth)
        agent.DecrementActivityCount()
        out.wait_for("spinning false", nth=nth)

    def shows_pixels_and_spins(self, command):
        out = self.gallery(command)
        self.assertEqual(out.wait_for("painted", timeout=60), "painted 2")
        self.shows_both()
        out.wait_for("agent")
        self.spins_with(out)

    def survives_a_late_and_a_restarted_agent(self, command):
        self.agent.stop()
        out = self.gallery(command)
        out.wait_for("waiting for the agent", timeout=60)
        # The agent starts after the app: the gallery hears it come and asks again.
        self.agent = Agent(self.bus, "--activation-delay", "0", "--completion-delay", "0")
        self.addCleanup(self.agent.stop)
        out.wait_for("agent appeared")
        self.assertEqual(out.wait_for("painted", timeout=60), "painted 2")
        self.shows_both()
        self.spins_with(out)
        # It dies and another takes its place: the pictures stay, and the new agent's come.
        self.agent.stop(signal.SIGKILL)
        self.agent = Agent(self.bus, "--activation-delay", "0", "--completion-delay", "0")
        self.addCleanup(self.agent.stop)
        out.wait_for("agent appeared", nth=2)
        self.assertEqual(out.wait_for("painted", timeout=60, nth=2), "painted 2")
        self.shows_both()
        self.spins_with(out, nth=2)
        self.assertFalse([l for l in out.lines if l.startswith("failed")], out.lines)

    def test_the_c_gallery_shows_the_agents_pixels_and_a_spinner_bound_to_visible(self):
        self.shows_pixels_and_spins([os.path.join(EXAMPLES, "gallery")])

    def test_the_python_gallery_shows_the_agents_pixels_and_a_spinner_bound_to_visible(self):
        self.shows_pixels_and_spins([sys.executable, "-u", os.path.join(SOURCES, "gallery.py")])

    def test_the_gjs_gallery_shows_the_agents_pixels_and_a_spinner_bound_to_visible(self):
        self.shows_pixels_and_spins(["gjs", os.path.join(SOURCES, "gallery.js")])

    def test_the_c_gallery_survives_a_late_and_a_restarted_agent(self):
        self.survives_a_late_and_a_restarted_agent([os.path.join(EXAMPLES, "gallery")])

    def test_the_python_gallery_survives_a_late_and_a_restarted_agent(self):
        self.survives_a_late_and_a_restarted_agent([sys.executable, "-u", os.path.join(SOURCES, "gallery.py")])

    def test_the_gjs_gallery_survives_a_late_and_a_restarted_agent(self):
        self.survives_a_late_and_a_restarted_agent(["gjs", os.path.join(SOURCES, "gallery.js")])


if __name__ == "__main__":
    unittest.main()
