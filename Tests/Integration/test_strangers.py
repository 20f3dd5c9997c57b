# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Strangers, round two (docs/contract.md, "Trust and isolation"): each test plays an attack a hostile app
could make on the others through the agent, as that app would make it (raw sockets that never
read, forked processes, look-alike cgroups, a fake /.flatpak-info in a user+mount namespace), and
asserts the promise: the agent keeps answering everyone, shares have a floor, and a sandboxed app
never touches another app's work."""
import fcntl
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import dbus

import contract
from harness import BIN, BROKER, CHILD_PRELUDE, IFACE, NAME, PATH, PROPS, Agent, cli, connect, image_adder, png, timed, wait_until
from rawbus import RawClient, body_strings
from test_agent import AgentTestCase
from test_downloads import DownloadTestCase
from test_hostile import Prober
from test_desktop import events

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = contract.ImageCache.INTERFACE
DOWNLOADER = contract.Downloader.INTERFACE
LIMITS = contract.ERROR_PREFIX + "LimitsExceeded"
TOO_LARGE = contract.ERROR_PREFIX + "TooLarge"
STALL_MS = 50  # the debug build, with the rest of the suite's processes on the same two cores
MIB = 1 << 20


def stats(conn, name):
    """The bus daemon's Debug.Stats for one connection."""
    return conn.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Debug.Stats",
                              "GetConnectionStats", "s", (name,))


def sealed_memfd(data, seals=True):
    fd = os.memfd_create("test-image", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def orphaned_connection(address):
    """A bus connection whose process has exited: a child connects (Hello), hands its socket over
    and exits. Returns a RawClient on that socket and the child's pid."""
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        try:
            raw = RawClient(address)
            socket.send_fds(child, [b"x"], [raw.sock.fileno()])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _, fds, _, _ = socket.recv_fds(parent, 1, 1)
    parent.close()
    child.close()
    raw = RawClient.__new__(RawClient)
    raw.sock, raw.serial = socket.socket(fileno=fds[0]), 100
    return raw, pid


@timed
@unittest.skipIf(BROKER, "dbus-broker answers no Debug.Stats: the guard is off there (HonestReaderTests)")
class NeverReaderTests(AgentTestCase):
    def cache(self, conn=None):
        return dbus.Interface((conn or self.conn).get_object(NAME, PATH, introspect=False), CACHE)

    def test_a_client_that_never_reads_its_socket_gets_nothing_piled_up_and_stops_nobody(self):
        image = bytes(png(extra=MIB - 2048))
        self.assertLessEqual(len(image), MIB)
        self.cache().AddImage("big", dbus.ByteArray(image))
        prober = Prober(self.bus)
        raw = RawClient(self.bus.address)
        self.addCleanup(raw.close)
        # 150 replies of 1 MiB would be 150 MiB queued in the bus for a socket nobody reads.
        for _ in range(150):
            raw.send(NAME, PATH, CACHE, "LookupImage", "s", body_strings("big"))
        log = wait_until(lambda: re.search(r"Client (:\S+) \(.*\) does not read", self.agent.logtext()), timeout=30,
                         what="the agent to find the client that does not read")
        peer = log.group(1)
        # Everyone else is served while it sits there: a polite client reads the same image.
        for _ in range(5):
            found, data = self.cache().LookupImage("big", byte_arrays=True)
            self.assertTrue(found)
            self.assertEqual(bytes(data), image)
        time.sleep(0.5)  # let any reply still in flight reach the bus
        held = int(stats(self.conn, peer)["OutgoingBytes"])
        self.assertLess(held, 48 * MIB, "the bus holds a bounded amount for the client that never reads")
        report = prober.stop()
        self.assertLess(report["max_ms"], STALL_MS * 4, report)
        # It leaves: the agent forgets it.
        raw.close()
        wait_until(lambda: not self.conn.name_has_owner(peer), what="the raw client gone")
        self.assertTrue(self.cache().LookupImage("big", byte_arrays=True)[0])


class Stranger:
    """stranger.py in a process of its own: as a plain host process, as a fake Flatpak (`flatpak`:
    its app id, through sandbox.sh), or moved into a cgroup (`cgroup`: a path under the unified
    hierarchy) before it connects."""

    def __init__(self, bus, flatpak=None, cgroup=None, shared=None):
        """`shared`: the Flatpak's `shared=` permissions (default "network;ipc;")."""
        argv = [sys.executable, os.path.join(HERE, "stranger.py"), bus.address]
        self.root = None
        env = bus.env()
        if flatpak:
            self.root = tempfile.mkdtemp(prefix="netactivity-sandbox-")
            argv = ["unshare", "-rm", "sh", os.path.join(HERE, "sandbox.sh"), self.root, flatpak, *argv]
            if shared is not None:
                env["SANDBOX_SHARED"] = shared
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=(lambda: Cgroups.enter(cgroup)) if cgroup else None)
        self.name = self("ping")

    def __call__(self, *command):
        import json
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the stranger died")
        out = json.loads(line)
        if "error" in out:
            raise dbus.exceptions.DBusException(out["error"][1], name=out["error"][0])
        return out["ok"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
        if self.root:
            os.rmdir(self.root)
            self.root = None


class Cgroups:
    """Cgroups made by root under the unified hierarchy for one test, removed after it."""
    UNIFIED = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"

    def __init__(self):
        self.made = []

    @classmethod
    def usable(cls):
        return os.geteuid() == 0 and os.access(os.path.join(cls.UNIFIED, "cgroup.procs"), os.W_OK)

    def make(self, path):
        full = self.UNIFIED + path
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = os.path.join(self.UNIFIED, *parts[:i])
            if not os.path.isdir(d):
                os.mkdir(d)
                self.made.append(d)
        return full

    @staticmethod
    def enter(full):
        with open(os.path.join(full, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        for d in reversed(self.made):
            deadline = time.monotonic() + 5
            while True:
                try:
                    os.rmdir(d)
                    break
                except OSError:  # a process that just exited may still be counted for a moment
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


def can_fake_flatpak():
    try:
        return subprocess.run(["unshare", "-rm", "true"], timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class StrangerTestCase(AgentTestCase):
    def stranger(self, **kw):
        s = Stranger(self.bus, **kw)
        self.addCleanup(s.close)
        return s

    def by_app(self, conn=None):
        obj = (conn or self.conn).get_object(NAME, PATH, introspect=False)
        return {str(k): int(v) for k, v in obj.Get(CACHE, "MemoryUsageByApp", dbus_interface=PROPS).items()}


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class SandboxTests(StrangerTestCase):
    # The tests' image servers are on loopback, which a sandboxed app reaches only where the user
    # allows it.
    settings = "sandboxed-local-networks = 127.0.0.1\n"
    def test_a_sandboxed_app_is_its_flatpak_id_and_sees_only_its_own_work(self):
        app = self.stranger(flatpak="org.example.Sandboxed")
        image = bytes(png(width=5))
        app("add", "shared-name", image.hex())
        # Its plain identifiers are its own: the host's entry of the same name is another one.
        iface_cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        iface_cache.AddImage("host-only", dbus.ByteArray(png(width=7)))
        self.assertIsNone(app("lookup", "host-only"), "a sandboxed app does not read the host's plain entries")
        self.assertFalse(iface_cache.LookupImage("shared-name", byte_arrays=True)[0], "nor the host the sandbox's")
        self.assertEqual(app("lookup", "shared-name"), image.hex())
        rows = app("usage-by-app")
        self.assertEqual(rows, {"flatpak:org.example.Sandboxed": len(image)}, "only its own row")
        self.assertIn("flatpak:org.example.Sandboxed", self.by_app(), "a host app sees every row")
        # It may empty only what is charged to it.
        self.assertTrue(app("remove-all"))
        self.assertTrue(iface_cache.LookupImage("host-only", byte_arrays=True)[0])

    def test_another_apps_task_and_a_missing_one_answer_alike(self):
        import json
        host = self.observe("task_owner.py", json.dumps({contract.Activity.BEGIN_TASK_OPTION_CANCELLABLE: True,
                                                          contract.Activity.BEGIN_TASK_OPTION_SUSPENDABLE: True}))
        hidden = wait_until(lambda: host.snapshot(), what="the host's task")[0]["path"]
        app = self.stranger(flatpak="org.example.Sandboxed")
        # A path past every task begun so far: one the agent never had.
        own = app("task", "sandboxed work")
        missing = own.rsplit("/", 1)[0] + "/" + str(int(own.rsplit("/", 1)[1]) + 1000)

        def answer(path, *call):
            with self.assertRaises(dbus.exceptions.DBusException) as cm:
                app(call[0], path, *call[1:])
            return cm.exception.get_dbus_name(), cm.exception.get_dbus_message().replace(path, "PATH")
        T = contract.Task
        calls = [("request", "cancel"), ("request", "suspend", True), ("get", T.INTERFACE, T.Description),
                 ("task-call", T.RequestCancel, "", []), ("task-call", T.SetFraction, "d", [0.5]),
                 ("task-call", T.Complete, "s", [""]), ("task-call", "NoSuchMethod", "", [])]
        for call in calls:
            with self.subTest(call=call):
                hidden_answer = answer(hidden, *call)
                self.assertEqual(hidden_answer, answer(missing, *call), "a sandbox tells another app's task from none")
                self.assertEqual(hidden_answer[0], contract.DBusError.UnknownObject)
        # The host's task heard nothing and still runs.
        self.assertFalse([e for e in host.snapshot() if "signal" in e])
        self.assertEqual(self.conn.get_object(NAME, hidden, introspect=False).Get(T.INTERFACE, T.State,
                                                                                 dbus_interface=PROPS), T.STATE_RUNNING)

    def test_a_sandboxed_app_asks_only_for_its_own_apps_tasks(self):
        import json
        host = self.observe("task_owner.py", json.dumps({contract.Activity.BEGIN_TASK_OPTION_CANCELLABLE: True, contract.Activity.BEGIN_TASK_OPTION_SUSPENDABLE: True}), "--obey")
        host_task = wait_until(lambda: host.snapshot(), what="the host's task")[0]["path"]
        app = self.stranger(flatpak="org.example.Sandboxed")
        same_app = self.stranger(flatpak="org.example.Sandboxed")
        other_app = self.stranger(flatpak="org.example.Other")
        T = contract.Task
        for request in (("cancel",), ("suspend", True)):
            with self.assertRaises(dbus.exceptions.DBusException) as cm:
                app("request", host_task, *request)
            self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.UnknownObject)
        own = app("task", "sandboxed work", {contract.Activity.BEGIN_TASK_OPTION_CANCELLABLE: ["b", True]})
        same_app("request", own, "cancel")  # its own app's task
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            other_app("request", own, "cancel")
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.UnknownObject)
        # A host panel asks for any task; the host's owner heard nothing from the sandboxes.
        busctl = subprocess.run(["busctl", "--address=" + self.bus.address, "call", NAME, own, T.INTERFACE, "RequestCancel"],
                                capture_output=True, text=True)
        self.assertEqual(busctl.returncode, 0, busctl.stderr)
        busctl = subprocess.run(["busctl", "--address=" + self.bus.address, "call", NAME, host_task, T.INTERFACE,
                                 "RequestCancel"], capture_output=True, text=True)
        self.assertEqual(busctl.returncode, 0, busctl.stderr)
        wait_until(lambda: [e for e in host.snapshot() if "signal" in e], what="the host's request")
        self.assertEqual([e["signal"] for e in host.snapshot() if "signal" in e], [T.CancelRequested])
        # The agent's own download task: a sandboxed app that asked for the transfer sees it, and
        # may not cancel it for the others.
        from test_downloads import ImageServer
        http = ImageServer()
        self.addCleanup(http.stop)
        _, task, _ = app("download", http.url("/gate/shared.png"))
        wait_until(lambda: http.count("/gate/shared") == 1, what="the transfer")
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("request", task, "cancel")
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertIn("only on its own tasks", cm.exception.get_dbus_message())

    def test_a_cache_key_is_its_apps_own_and_another_apps_same_key_is_another_image(self):
        from test_downloads import ImageServer
        http = ImageServer()
        self.addCleanup(http.stop)
        D = contract.Downloader
        app = self.stranger(flatpak="org.example.Sandboxed")
        mine, source = app("fetch", http.url("/fresh/theirs.png?sig=1"), {D.FETCH_IMAGE_OPTION_CACHE_KEY: ["s", "avatar"]})
        self.assertEqual((bytes.fromhex(mine), source), (http.bodies["/fresh/theirs.png?sig=1"], D.FETCH_IMAGE_SOURCE_NETWORK))
        host = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), D.INTERFACE)
        fd, size, info = host.FetchImage(http.url("/fresh/other.png"), dbus.Dictionary({D.FETCH_IMAGE_OPTION_CACHE_KEY: "avatar"}, signature="sv"))
        fd = fd.take()
        try:
            self.assertEqual(os.pread(fd, size, 0), http.bodies["/fresh/other.png"], "the host's 'avatar' is not the sandbox's")
        finally:
            os.close(fd)
        self.assertEqual(str(info[D.FETCH_IMAGE_INFO_SOURCE]), D.FETCH_IMAGE_SOURCE_NETWORK)
        again, source = app("fetch", http.url("/fresh/theirs.png?sig=2"), {D.FETCH_IMAGE_OPTION_CACHE_KEY: ["s", "avatar"]})
        self.assertEqual((again, source), (mine, D.FETCH_IMAGE_SOURCE_MEMORY), "and the sandbox still reads its own")

    def test_remove_images_takes_only_the_callers_apps_images(self):
        from test_downloads import ImageServer
        http = ImageServer()
        self.addCleanup(http.stop)
        D = contract.Downloader
        host = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), D.INTERFACE)
        os.close(host.FetchImage(http.url("/fresh/shared/host.png"), dbus.Dictionary({}, signature="sv"))[0].take())
        app = self.stranger(flatpak="org.example.Sandboxed")
        app("fetch", http.url("/fresh/shared/app.png"))
        _, source = app("fetch", http.url("/fresh/shared/host.png"))
        self.assertEqual(source, D.FETCH_IMAGE_SOURCE_MEMORY, "it reads the host's image (the downloader's, everyone's)")
        self.assertEqual(app("remove-images", http.url("/fresh/shared/")), 1, "its own image only, not the host's it also read")
        _, source = app("fetch", http.url("/fresh/shared/host.png"))
        self.assertEqual(source, D.FETCH_IMAGE_SOURCE_MEMORY, "the host's stays")
        _, source = app("fetch", http.url("/fresh/shared/app.png"))
        self.assertEqual(source, D.FETCH_IMAGE_SOURCE_NETWORK, "its own went from memory and disk")
        self.assertEqual(app("remove-images", ""), 1)
        self.assertEqual(app("remove-images", ""), 0)

    def test_a_sandboxed_app_may_not_change_settings_that_affect_everyone(self):
        app = self.stranger(flatpak="org.example.Sandboxed")
        for iface, prop, sig, value in [(IFACE, "Enabled", "b", False), (IFACE, "ActivationDelay", "d", 0.0),
                                        (IFACE, "CompletionDelay", "d", 5.0), (CACHE, "MemoryCapacity", "t", 1),
                                        (CACHE, "PreferredMemoryUsageAfterPurge", "t", 0),
                                        (DOWNLOADER, "MaximumActiveDownloads", "u", 1),
                                        (DOWNLOADER, "DownloadPrioritization", "s", contract.Downloader.DOWNLOAD_PRIORITIZATION_LIFO),
                                        (DOWNLOADER, "DiskCapacity", "t", 0)]:
            with self.assertRaises(dbus.exceptions.DBusException) as cm:
                app("set", iface, prop, sig, value)
            self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied, prop)
            self.assertIn("sandboxed", cm.exception.get_dbus_message())
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        self.assertTrue(bool(obj.Get(IFACE, "Enabled", dbus_interface=PROPS)))
        self.assertEqual(int(obj.Get(DOWNLOADER, "MaximumActiveDownloads", dbus_interface=PROPS)), 4)
        # A host app still may.
        obj.Set(DOWNLOADER, "MaximumActiveDownloads", dbus.UInt32(2, variant_level=1), dbus_interface=PROPS)

    def test_sybils_of_the_unscoped_pool_cannot_starve_a_sandboxed_app(self):
        """Forked host processes are one app: however many there are, a newcomer app gets its share
        of tasks and leases."""
        hogs = [self.stranger() for _ in range(6)]
        for h in hogs:
            h("tasks", 700)  # 4,200 wanted; the budget is 3,276, then the pool's processes share it
        app = self.stranger(flatpak="org.example.Newcomer")
        self.assertEqual(app("tasks", 1000), {"granted": 1000, "refusal": None}, "under its share of 3,276/2")
        self.assertEqual(app("leases", 10), {"granted": 10, "refusal": None})


@unittest.skipUnless(Cgroups.usable(), "needs root to make cgroups")
class ReasonTests(StrangerTestCase):
    """BeginActivity's reason is listed with its app: every app's for host readers, a sandboxed app
    only its own app's; broadcast signals name the property as invalidated and never carry a reason."""

    def reasons(self):
        return {str(k): [str(r) for r in v] for k, v in
                self.conn.get_object(NAME, PATH, introspect=False).Get(IFACE, "Reasons", dbus_interface=PROPS).items()}

    def test_a_host_apps_reason_is_listed_with_it_and_goes_with_its_lease(self):
        watcher = self.observe()
        host = self.stranger()
        host("leases", 2, "Backing up photos")
        host("leases", 1, "")
        listed = wait_until(lambda: self.reasons() or None, what="the reason listed")
        self.assertEqual(listed, {host.name: ["Backing up photos"]})
        wait_until(lambda: any("Reasons" in e.get("invalidated", []) for e in watcher.snapshot()),
                   what="Reasons announced as invalidated")
        self.assertFalse([e for e in watcher.snapshot() if "Reasons" in e.get("changed", {})],
                         "no broadcast carries the reasons")
        status = cli(self.bus, "status")
        self.assertIn("Backing up photos", status.stdout)
        self.assertIn("Backing up photos", cli(self.bus, "status", "--json").stdout)
        host.close()
        wait_until(lambda: self.reasons() == {}, what="the reason gone with its holder")

    @unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
    def test_a_sandboxed_app_reads_only_its_own_apps_reasons(self):
        watcher = self.observe()
        host = self.stranger()
        host("leases", 1, "Syncing the host's secret project")
        app = self.stranger(flatpak="org.example.Sandboxed")
        app("leases", 1, "Fetching mail for alice")
        both = wait_until(lambda: (lambda r: r if len(r) == 2 else None)(self.reasons()), what="both reasons")
        self.assertEqual(both, {host.name: ["Syncing the host's secret project"], app.name: ["Fetching mail for alice"]})
        self.assertEqual(app("reasons"), {app.name: ["Fetching mail for alice"]})
        self.assertEqual(host("reasons"), both, "host apps read every app's")
        seen = json.dumps(watcher.snapshot())
        self.assertNotIn("secret project", seen)
        self.assertNotIn("alice", seen)


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class AccountsTests(StrangerTestCase):
    """One place answers what an app holds of every budget (the Accounts method, netactivity accounts)."""
    agent_args = ("--completed-task-linger", "0.5")

    def test_the_accounts_show_what_an_app_holds_of_every_budget_until_it_leaves(self):
        app = self.stranger(flatpak="org.example.Holder")
        self.assertEqual(app("leases", 3)["granted"], 3)
        self.assertEqual(app("tasks", 2)["granted"], 2)
        flatpak = "flatpak:org.example.Holder"
        accounts = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), IFACE).get_dbus_method(
            contract.Activity.Accounts)

        def held(app_name):
            return {str(r[1]): (int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in accounts(app_name)}

        rows = held(flatpak)
        self.assertEqual(sorted(rows), sorted(contract.Activity.VALUES["Resource"]), "every budget, held or not")
        self.assertEqual(rows[contract.Activity.RESOURCE_LEASES][0], 3)
        self.assertEqual(rows[contract.Activity.RESOURCE_TASKS][0], 2)
        self.assertEqual(rows[contract.Activity.RESOURCE_DOWNLOADS][0], 0)
        for name, (holding, share, budget, limit) in rows.items():
            self.assertTrue(0 < share <= budget <= limit, (name, share, budget, limit))
        everyone = {(str(r[0]), str(r[1])): int(r[2]) for r in accounts("")}
        self.assertEqual(everyone[(flatpak, contract.Activity.RESOURCE_LEASES)], 3, "listed among the apps holding any")
        self.assertNotIn((flatpak, contract.Activity.RESOURCE_DOWNLOADS), everyone, "only what is held")
        # Text for people, from the same method.
        table = cli(self.bus, "accounts", flatpak).stdout
        self.assertRegex(table, r"(?m)^flatpak:org\.example\.Holder +leases +3 ")
        self.assertEqual(len(cli(self.bus, "accounts", "--json", flatpak).stdout.splitlines()), len(rows))
        # What others hold is not a sandboxed app's to read, its own neither.
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("accounts", flatpak)
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            accounts("x" * 513)
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.InvalidArgs)
        app.close()
        # Its tasks end with it; they stay listed (completed) for the linger.
        wait_until(lambda: all(v[0] == 0 for v in held(flatpak).values()) or None,
                   what=lambda: "everything released: %s" % held(flatpak))
        self.assertFalse([k for k in accounts("") if str(k[0]) == flatpak])


class CgroupIdentityTests(StrangerTestCase):
    def setUp(self):
        super().setUp()
        self.cgroups = Cgroups()
        self.addCleanup(self.cgroups.remove)

    def app_slice(self, unit):
        uid = os.getuid()
        return "/user.slice/user-%d.slice/user@%d.service/app.slice/%s" % (uid, uid, unit)

    def test_an_app_unit_under_the_users_app_slice_is_that_app_and_a_look_alike_elsewhere_is_not(self):
        victim = self.stranger(cgroup=self.cgroups.make(self.app_slice("app-gnome-org.example.Victim-41.scope")))
        victim2 = self.stranger(cgroup=self.cgroups.make(self.app_slice("app-gnome-org.example.Victim-42.scope")))
        lookalike = self.stranger(cgroup=self.cgroups.make("/evil.slice/app-gnome-org.example.Victim-43.scope"))
        flatpak_lookalike = self.stranger(
            cgroup=self.cgroups.make(self.app_slice("app-flatpak-org.example.Photos-44.scope")))
        for s, name in [(victim, "v1"), (victim2, "v2"), (lookalike, "look"), (flatpak_lookalike, "fp")]:
            s("add", name, bytes(png(width=len(name))).hex())
        rows = self.by_app()
        self.assertEqual(rows.get("app:org.example.Victim"), 2 * len(png(width=2)),
                         "two launches of one app are one app: %s" % rows)
        self.assertIn("unscoped/pid:%d" % lookalike.proc.pid, rows, "a look-alike outside app.slice is unscoped")
        self.assertIn("app:org.example.Photos", rows, "a look-alike Flatpak scope is a host app, not the Flatpak")
        self.assertNotIn("flatpak:org.example.Photos", rows)
        # The look-alike cannot touch the victim's URL entries: they are the victim's.
        url = "https://example.org/victim.png"
        victim("add-url", url, bytes(png(width=9)).hex())
        self.assertIsNone(lookalike("lookup-url", url))
        self.assertEqual(victim2("lookup-url", url), bytes(png(width=9)).hex(), "one app, one namespace")

    def test_many_forked_processes_do_not_evict_a_polite_apps_images(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(CACHE, "PreferredMemoryUsageAfterPurge", dbus.UInt64(1 << 20, variant_level=1), dbus_interface=PROPS)
        obj.Set(CACHE, "MemoryCapacity", dbus.UInt64(2 << 20, variant_level=1), dbus_interface=PROPS)
        polite = self.stranger(cgroup=self.cgroups.make(self.app_slice("app-org.example.Polite@1.service")))
        images = [bytes(png(width=i + 1, extra=20_000)) for i in range(40)]
        for i, image in enumerate(images):
            polite("add", "polite%d" % i, image.hex())
        sybil = bytes(png(extra=30_000))
        procs = [subprocess.Popen(image_adder(self.bus, sybil, ["sybil-%d-%d" % (n, i) for i in range(6)], refusals_ok=True))
                 for n in range(100)]
        for p in procs:
            self.assertEqual(p.wait(60), 0)
        kept = [polite("lookup", "polite%d" % i) is not None for i in range(40)]
        self.assertEqual(kept, [True] * 40, "the app within its share kept every image")
        self.assertLessEqual(int(obj.Get(CACHE, "MemoryUsage", dbus_interface=PROPS)), 2 << 20)


@timed
class ManagedObjectsLoadTests(AgentTestCase):
    def test_callers_of_get_managed_objects_at_the_maximum_stall_no_one(self):
        """3,276 task objects (the budget); three apps asking for all of them in a loop used to hold
        the loop for the whole of each reply. Now each is built a slice per turn."""
        from test_hostile import Hog
        hog = Hog(self.bus, "tasks", 4, 1024, 1000)
        self.addCleanup(hog.stop)
        self.assertEqual(hog.report["granted"], 3276)
        code = CHILD_PRELUDE + """
import sys, time, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
obj = bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
n = 0
end = time.monotonic() + 3
while time.monotonic() < end:
    n = len(obj.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=60))
print(n)
"""
        prober = Prober(self.bus)
        callers = [subprocess.Popen([sys.executable, "-c", code, self.bus.address], stdout=subprocess.PIPE, text=True)
                   for _ in range(3)]
        counts = [int(c.communicate(timeout=120)[0]) for c in callers]
        report = prober.stop()
        # The tree lists 200 of them (one app's share of the listing budget): ~0.4 MB a reply.
        self.assertEqual(counts, [200] * 3)
        # Each reply is ~5 MB, and the bus takes it from the agent's one socket before anything the
        # agent sends after it (a Ping's reply included): ~0.1 s of waiting per reply in flight,
        # release build, which no slicing of the agent's own work removes. Built in one go, each
        # reply also held the loop for its whole marshalling (0.35 s here, debug), and with three
        # callers asking in a loop, most Pings waited behind one: the 99th percentile says that.
        # One Ping may still meet a scheduling hiccup of this 2-core machine (522 ms once, with
        # p99 at 155 ms), so the worst case is only bounded well above a whole reply's hold.
        self.assertLess(report["p99_ms"], 300, report)
        self.assertLess(report["max_ms"], 1000, report)


@timed
class HugeFirstCallTests(AgentTestCase):
    def test_a_first_call_of_64_mib_is_refused_at_once_and_holds_nobody_up(self):
        """Held while the registry learned its app, a 64 MiB call kept libdbus's incoming queue
        over its 63 MiB limit: the registry's own reply could not be read, and everyone waited
        5 s for its timeout. Now it is refused at once, before anything is asked about it."""
        prober = Prober(self.bus)
        code = CHILD_PRELUDE + """
import sys, time, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
cache = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                       contract.ImageCache.INTERFACE)
data = dbus.ByteArray(b"\\x89PNG" + bytes((64 << 20) - 4100))
t = time.monotonic()
try:
    cache.AddImage("huge", data, timeout=60)
    print("accepted", time.monotonic() - t)
except dbus.exceptions.DBusException as e:
    print(e.get_dbus_name(), time.monotonic() - t)
"""
        r = subprocess.run([sys.executable, "-c", code, self.bus.address], capture_output=True, text=True, timeout=120)
        name, seconds = r.stdout.split()
        self.assertEqual(name, TOO_LARGE, r.stderr)
        self.assertLess(float(seconds), 3.0, "answered without waiting for a timeout")
        report = prober.stop()
        # Moving 64 MiB through the bus takes ~0.15 s here in a release build (libdbus reads 2 KiB
        # at a time); the 5 s wait is gone.
        self.assertLess(report["max_ms"], 1500, report)
        self.assertNotIn("GetConnectionUnixProcessID", self.agent.logtext())


class RawHTTPServer:
    """A loopback TCP server that answers every connection with fixed bytes and closes."""

    def __init__(self, answer):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]

        def serve():
            while True:
                try:
                    c, _ = self.sock.accept()
                except OSError:
                    return
                c.recv(65536)
                c.sendall(answer)
                c.close()
        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.sock.close()


class SlotHostageTests(DownloadTestCase):
    def setUp(self):
        super().setUp()
        from test_hostile import HostileServer
        HostileServer.install(self.http)

    def waited(self, client, done):
        """How long a client's image waited, by the client's own clock: from the reply that queued it
        to the DownloadFinished it heard (a process's start is not in it). Its wake-up is, so each
        bound leaves a second and more above the half second the rule takes."""
        requested = self.events(client, "requested")[0]
        return done["t"] - requested["t"]

    def test_stalled_transfers_give_their_slots_to_another_apps_tiny_image(self):
        """Four transfers whose servers send 200 KB and stall hold every slot; another app's tiny
        image used to wait until they ended (34 s here), then about 3.4 s. Moving no byte for half
        a second while others wait, they give their slots up at once and go on."""
        stalled = ["/held/%d/%d/stall%d.png" % (400_000, 200_000, i) for i in range(4)]
        hog = self.client(*[self.http.url(p) for p in stalled])
        wait_until(lambda: self.http.count("/held/") == 4, what="four stalled transfers running")
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        self.assertEqual(int(obj.Get(DOWNLOADER, "ActiveDownloads", dbus_interface=PROPS)), 4)
        polite = self.client(self.http.url("/img/tiny.png"))
        done = self.finished(polite, 1, timeout=15)[0]
        self.assertTrue(done["ok"], done)
        self.assertLess(self.waited(polite, done), 2, "a slot was given up half a second after the tiny image came")
        self.assertIn("moved no byte for", self.agent.logtext())
        self.assertEqual(int(obj.Get(DOWNLOADER, "ActiveDownloads", dbus_interface=PROPS)), 4,
                         "the stalled transfers go on")
        for p in stalled:
            self.http.gate(p).set()
        self.assertTrue(all(e["ok"] for e in self.finished(hog, 4, timeout=30)), "nothing they received was lost")


    def test_a_tiny_image_waits_less_than_a_second_or_two_behind_a_hundred_stalled_transfers(self):
        """One process asks for 100 images whose servers stall; another process of the same unscoped
        pool, running nothing, is not held by them (the pool's floor is per process)."""
        stalled = ["/held/%d/%d/many%d.png" % (400_000, 1_000, i) for i in range(100)]
        hog = self.client(*[self.http.url(p) for p in stalled])
        wait_until(lambda: self.http.count("/held/") >= 4, what="stalled transfers running")
        polite = self.client(self.http.url("/img/tiny-behind-100.png"))
        done = self.finished(polite, 1, timeout=15)[0]
        self.assertTrue(done["ok"], done)
        self.assertLess(self.waited(polite, done), 2, "not behind the other process's hundred")
        for p in stalled:
            self.http.gate(p).set()

    def test_one_slot_held_by_a_stalled_transfer_is_given_up_at_once(self):
        """A host app set MaximumActiveDownloads to 1, and the one transfer stalls."""
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(DOWNLOADER, contract.Downloader.MaximumActiveDownloads, dbus.UInt32(1, variant_level=1), dbus_interface=PROPS)
        stalled = "/held/%d/%d/alone.png" % (400_000, 200_000)
        hog = self.client(self.http.url(stalled))
        wait_until(lambda: self.http.count("/held/") == 1, what="the stalled transfer running")
        polite = self.client(self.http.url("/img/tiny.png"))
        done = self.finished(polite, 1, timeout=15)[0]
        self.assertTrue(done["ok"], done)
        self.assertLess(self.waited(polite, done), 2, "the one slot given up half a second after the tiny image came")
        self.http.gate(stalled).set()
        self.assertTrue(self.finished(hog, 1, timeout=30)[0]["ok"])


class SmallLeaksTests(DownloadTestCase):
    def test_an_http_09_answer_is_an_http_error_not_a_bad_url(self):
        server = RawHTTPServer(bytes(png()))  # no status line at all
        self.addCleanup(server.close)
        done = self.fetch_url("http://127.0.0.1:%d/old.png" % server.port)
        self.assertFalse(done["ok"])
        self.assertEqual(done["error_name"], contract.ERROR_PREFIX + "HTTP", done)
        self.assertIn("HTTP/0.9", done["error_message"])

    def fetch_url(self, url):
        c = self.client(url)
        return self.finished(c, 1)[0]

    def test_a_password_holding_a_query_delimiter_is_never_published(self):
        done = self.fetch_url("http://alice:pa?ss@127.0.0.1:1/x.png")
        self.assertFalse(done["ok"])
        self.assertIn("http://…", done["error_message"])
        for part in ("alice", ":pa", "ss@"):
            self.assertNotIn(part, done["error_message"])

    def test_the_cli_escapes_bidi_controls_from_another_apps_description(self):
        iface = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), IFACE)
        iface.BeginTask("evil\u202egnp.exe", dbus.Dictionary({}, signature="sv"))
        r = subprocess.run([os.path.join(BIN, "netactivity"), "tasks"], env=self.bus.env(), capture_output=True,
                           text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\u202e", r.stdout)
        self.assertIn("evil\\u{202e}gnp.exe", r.stdout)

    def test_a_symlink_in_place_of_the_cache_dir_is_not_followed_and_its_target_keeps_its_mode(self):
        self.agent.stop()
        target = tempfile.mkdtemp(prefix="netactivity-target-")
        self.addCleanup(shutil.rmtree, target, True)
        os.chmod(target, 0o755)
        os.makedirs(self.bus.cache_home, exist_ok=True)
        os.symlink(target, os.path.join(self.bus.cache_home, "netactivity"))
        self.agent = Agent(self.bus, *self.agent_args)
        self.assertTrue(self.fetch_url(self.http.url("/img/a.png"))["ok"], "the memory cache goes on")
        wait_until(lambda: "not a directory of its own" in self.agent.logtext(), what="the refusal logged")
        self.assertEqual(os.stat(target).st_mode & 0o777, 0o755, "the link's target kept its mode")
        self.assertEqual(os.listdir(target), [])


@timed
class SettingsReloadTests(unittest.TestCase):
    """A settings file no one should write, and a storm of SIGHUPs: each reload stays cheap, the log
    stays short, and an unusable file never reverts the settings in force."""

    def setUp(self):
        from harness import PrivateBus
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.path = os.path.join(self.bus.config_home, "netactivity", "netactivityd.conf")
        os.makedirs(os.path.dirname(self.path))
        with open(self.path, "w") as f:
            f.write("completion-delay = 0.25\n")
        self.agent = Agent(self.bus)
        self.addCleanup(self.agent.stop)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)

    def delay(self):
        return float(self.conn.get_object(NAME, PATH, introspect=False).Get(IFACE, "CompletionDelay", dbus_interface=PROPS))

    def reloaded(self, n):
        return self.agent.logtext().count("Reloaded the settings") >= n

    def test_bad_lines_are_logged_a_few_times_and_a_huge_file_keeps_the_settings_in_force(self):
        import signal
        self.assertEqual(self.delay(), 0.25)
        with open(self.path, "w") as f:
            f.write("completion-delay = 0.5\n" + "this is not a setting\n" * 2000)
        self.agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.reloaded(1), what="the reload")
        self.assertEqual(self.delay(), 0.5, "the good line applies")
        log = self.agent.logtext()
        self.assertLessEqual(log.count("expected key = value"), 5, "five bad lines described at most")
        self.assertIn("and 1995 more bad lines", log)
        with open(self.path, "w") as f:
            f.write("completion-delay = 0\n" + "#" * (1 << 20))
        self.agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "the settings in force stay" in self.agent.logtext(), what="the refusal")
        self.assertEqual(self.delay(), 0.5, "a file over 64 KiB changes nothing, and is never taken for no file")

    def test_a_storm_of_sighups_never_stalls_the_agent(self):
        import signal
        with open(self.path, "w") as f:
            f.write("completion-delay = 0.5\n" + "# comment\n" * 6000)
        prober = Prober(self.bus)
        for _ in range(300):
            self.agent.proc.send_signal(signal.SIGHUP)
            time.sleep(0.002)
        wait_until(lambda: self.reloaded(1), what="a reload")
        time.sleep(0.3)  # the last coalesced reload
        report = prober.stop()
        self.assertLess(report["max_ms"], STALL_MS * 2, report)
        self.assertLessEqual(self.agent.logtext().count("Reloaded the settings"), 15, "at most one reload per 100 ms")
        self.assertEqual(self.delay(), 0.5)


class DepartedProcessTests(StrangerTestCase):
    def test_connections_whose_process_has_gone_are_leaves_of_one_app_apart_from_the_host_pool(self):
        """A process can connect, hand its bus socket to another and exit: the connection's pid
        then names no process. Such connections are leaves of one app, `unknown`, so they never add
        up to more than one app's share, and none of them is part of the host apps' pool."""
        from rawbus import body_string_bytes
        raws = [orphaned_connection(self.bus.address)[0] for _ in range(3)]
        for n, raw in enumerate(raws):
            raw.send(NAME, PATH, CACHE, "AddImage", "say", body_string_bytes("gone%d" % n, bytes(png(width=n + 1))))
        rows = wait_until(lambda: (lambda r: r if len([k for k in r if k.startswith("unknown/")]) == 3 else None)(
            self.by_app()), what="the three images charged")
        self.assertEqual(sorted(v for k, v in rows.items() if k.startswith("unknown/")),
                         sorted(len(png(width=n + 1)) for n in range(3)), "each connection its own leaf")
        self.assertFalse([k for k in rows if k.startswith("unscoped/")])
        for raw in raws:
            raw.sock.close()


    def test_a_connection_whose_process_is_gone_has_the_least_rights(self):
        """Its app cannot be known: it may not change a setting that affects everyone (a
        fire-and-forget call from a client that left before it was known is the same case)."""
        from rawbus import _pad, _string
        raw, _ = orphaned_connection(self.bus.address)
        self.addCleanup(raw.sock.close)
        body = _pad(_string(_string(_string(b"", IFACE), contract.Activity.Enabled), "b", sig=True), 4) + struct.pack("<I", 0)
        raw.send(NAME, PATH, PROPS, "Set", "ssv", body)
        raw.send(NAME, PATH, CACHE, contract.ImageCache.AddImage, "say",
                 __import__("rawbus").body_string_bytes("gone-image", bytes(png(width=2))))
        # Its calls are handled in order: once its image is charged, its Set was refused.
        wait_until(lambda: [v for k, v in self.by_app().items() if k.startswith("unknown/")] == [len(png(width=2))],
                   what="its image charged as not known")
        self.assertTrue(bool(self.conn.get_object(NAME, PATH, introspect=False).Get(IFACE, contract.Activity.Enabled,
                                                                                  dbus_interface=PROPS)))


class InlineLimitTests(AgentTestCase):
    def cache(self):
        return dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)

    def test_large_images_travel_by_fd_and_never_inline(self):
        big = bytes(png(extra=2 * MIB))
        msg = self.expect_error(TOO_LARGE, lambda: self.cache().AddImage("big", dbus.ByteArray(big)))
        self.assertIn("AddImageFromFd", msg)
        fd = sealed_memfd(big)
        self.cache().AddImageFromFd("big", dbus.types.UnixFd(fd))
        os.close(fd)
        msg = self.expect_error(TOO_LARGE, lambda: self.cache().LookupImage("big", byte_arrays=True))
        self.assertIn("OpenImage", msg)
        f, size = self.cache().OpenImage("big")
        f = f.take()
        self.addCleanup(os.close, f)
        self.assertEqual(size, len(big))
        self.assertEqual(os.pread(f, size, 0), big, "the same bytes, from the agent's memfd")
        # The library and the CLI take the fd path on their own.
        with tempfile.NamedTemporaryFile(suffix=".png") as src:
            src.write(big)
            src.flush()
            r = subprocess.run([os.path.join(BIN, "netactivity"), "cache", "add", "cli-big", src.name],
                               env=self.bus.env(), capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([os.path.join(BIN, "netactivity"), "cache", "get", "cli-big"], env=self.bus.env(),
                           capture_output=True, timeout=30)
        self.assertEqual(r.stdout, big)

    def test_small_images_by_fd_are_copied_and_hold_no_descriptor(self):
        from harness import fd_kinds
        before = sum(fd_kinds(self.agent.proc.pid).values())
        for i in range(200):
            fd = sealed_memfd(bytes(png(width=i + 1)))
            self.cache().AddImageFromFd("small%d" % i, dbus.types.UnixFd(fd))
            os.close(fd)
        self.assertLess(sum(fd_kinds(self.agent.proc.pid).values()) - before, 10, "200 tiny images, no fd each")
        self.assertEqual(bytes(self.cache().LookupImage("small7", byte_arrays=True)[1]), bytes(png(width=8)))

    def test_only_sealed_memfds_are_taken(self):
        image = bytes(png())
        unsealed = sealed_memfd(image, seals=False)
        read_end, write_end = os.pipe()
        for fd in (unsealed, read_end):
            msg = self.expect_error(contract.DBusError.InvalidArgs,
                                    lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(fd)))
            self.assertIn("sealed", msg)
        for fd in (unsealed, read_end, write_end):
            os.close(fd)
        empty = sealed_memfd(b"")
        self.expect_error(contract.DBusError.InvalidArgs,
                          lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(empty)))
        os.close(empty)
        text = sealed_memfd(b"not an image at all")
        self.expect_error(contract.ERROR_PREFIX + "NotAnImage",
                          lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(text)))
        os.close(text)
        self.assertFalse(self.cache().LookupImage("x", byte_arrays=True)[0])


class AppNameTests(StrangerTestCase):
    """Clients are named as the desktop names them: the .desktop file of the app's identity (its
    Flatpak id, its systemd app unit), with Name localized for the agent's locale; a process name
    only where no such file is found; never a bus name."""

    def setUp(self):
        super().setUp()
        self.data = tempfile.mkdtemp(prefix="netactivity-data-")
        self.addCleanup(shutil.rmtree, self.data, True)
        apps = os.path.join(self.data, "applications")
        os.mkdir(apps)
        for app_id, names in (("org.example.Photos", ("Photos", "Fotos")), ("org.example.Sandboxed", ("Sandbox", "Sandkasten"))):
            with open(os.path.join(apps, app_id + ".desktop"), "w") as f:
                f.write("[Desktop Entry]\nType=Application\nName=%s\nName[de]=%s\nIcon=%s\nExec=true\n" % (names + (app_id,)))
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args, env={
            "XDG_DATA_DIRS": self.data, "XDG_DATA_HOME": os.path.join(self.data, "none"), "LANG": "de_DE.UTF-8"})

    def names(self):
        return {str(bus): str(name) for bus, name, count in
                self.conn.get_object(NAME, PATH, introspect=False).Get(IFACE, "Clients", dbus_interface=PROPS)}

    @unittest.skipUnless(Cgroups.usable(), "needs root to make cgroups")
    def test_a_host_app_in_its_app_scope_is_its_desktop_name_in_the_agent_s_language(self):
        cgroups = Cgroups()
        self.addCleanup(cgroups.remove)
        uid = os.getuid()
        scope = "/user.slice/user-%d.slice/user@%d.service/app.slice/app-gnome-org.example.Photos-51.scope" % (uid, uid)
        photos = self.stranger(cgroup=cgroups.make(scope))
        lookalike = self.stranger(cgroup=cgroups.make("/evil.slice/app-gnome-org.example.Photos-52.scope"))
        photos("leases", 1)
        lookalike("leases", 1)
        names = wait_until(lambda: (lambda n: n if n.get(photos.name) and n.get(lookalike.name) else None)(self.names()),
                           what="both clients named")
        self.assertEqual(names[photos.name], "Fotos")
        self.assertEqual(names[lookalike.name], "python3", "a look-alike outside app.slice keeps its process name")

    @unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
    def test_a_flatpak_is_its_desktop_name(self):
        app = self.stranger(flatpak="org.example.Sandboxed")
        app("leases", 1)
        names = wait_until(lambda: (lambda n: n if n.get(app.name) else None)(self.names()), what="the Flatpak named")
        self.assertEqual(names[app.name], "Sandkasten")
        for bus, name in names.items():
            self.assertFalse(name.startswith(":"), "no bus name as a name: %r" % names)


# Round three: a sandbox speaks only for itself and reads only its own work, a caller whose app is
# not known has the least rights, and nothing a client points at blocks the loop.

TASK = contract.Task.INTERFACE


def fake_flatpak(test, app_id):
    """The argv prefix that runs a command as a fake Flatpak `app_id` (see sandbox.sh)."""
    root = tempfile.mkdtemp(prefix="netactivity-sandbox-")
    test.addCleanup(os.rmdir, root)
    return ["unshare", "-rm", "sh", os.path.join(HERE, "sandbox.sh"), root, app_id]


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class OwnWorkTests(StrangerTestCase):
    def test_a_sandboxed_app_publishes_a_dock_badge_only_for_its_own_app(self):
        app = self.stranger(flatpak="org.example.Sandboxed")
        D = contract.Activity.BEGIN_TASK_OPTION_DESKTOP_ID
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("task", "badge", {D: ["s", "org.mozilla.firefox.desktop"]})
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertIn("names another app", cm.exception.get_dbus_message())
        self.assertTrue(app("task", "badge", {D: ["s", "org.example.Sandboxed.desktop"]}).startswith(contract.OBJECT_PATH))
        # A host app may still name any desktop file (host apps of one user are one trust domain).
        self.assertTrue(self.stranger()("task", "badge", {D: ["s", "org.mozilla.firefox.desktop"]}))

    def test_a_sandboxed_app_reads_and_hears_only_its_own_tasks(self):
        host_panel = self.observe("task_observer.py")
        sandbox_panel = self.observe("task_observer.py", prefix=fake_flatpak(self, "org.example.Sandboxed"))
        host = self.stranger()
        secret = "host: upload tax-return-2026.pdf to accountant"
        host_path = host("task", secret)
        app = self.stranger(flatpak="org.example.Sandboxed")
        own_path = app("task", "sandbox: syncing")

        def added(panel):
            return {e["path"] for e in panel.snapshot() if e["signal"] == "InterfacesAdded"}
        wait_until(lambda: added(host_panel) >= {host_path, own_path}, what="the host panel told of both tasks")
        # Signals reach a panel in order: the host's task, begun first, would be told before the sandbox's own.
        wait_until(lambda: own_path in added(sandbox_panel), what="the sandboxed panel told of its own task")
        host.close()  # its task completes (ClientVanished): a PropertiesChanged, then InterfacesRemoved
        second = app("task", "sandbox: second")
        wait_until(lambda: second in added(sandbox_panel), what="the sandboxed panel told of its second task")
        seen = json.dumps(sandbox_panel.snapshot())
        self.assertNotIn(host_path, seen, "no signal about the host's task reaches the sandbox")
        self.assertNotIn("tax-return", seen)
        self.assertEqual(app("managed"), {own_path: "sandbox: syncing", second: "sandbox: second"})
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("get", host_path, TASK, contract.Task.Description)
        self.assertEqual(cm.exception.get_dbus_name(), "org.freedesktop.DBus.Error.UnknownObject")
        self.assertEqual(app("get", own_path, TASK, contract.Task.Description), "sandbox: syncing")
        # Host readers see every app's tasks, as before.
        managed = self.conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(
            dbus_interface="org.freedesktop.DBus.ObjectManager")
        self.assertTrue({own_path, second} <= {str(p) for p in managed})
        self.assertIn(secret, json.dumps([e for e in host_panel.snapshot() if e.get("path") == host_path]))


class TreeBoundTests(StrangerTestCase):
    def test_the_object_tree_is_bounded_and_a_newcomers_task_is_listed_at_once(self):
        """3,276 tasks of one app: the tree lists 200, so each GetManagedObjects reply stays small;
        a newcomer's task is in the tree at once, and a waiting task enters it as a listed one ends."""
        from test_hostile import Hog
        hog = Hog(self.bus, "tasks", 4, 1024, 1000)
        self.addCleanup(hog.stop)
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        managed = obj.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=60)
        self.assertEqual(len(managed), 200)
        newcomer = self.stranger()
        path = newcomer("task", "a newcomer's upload")
        managed = obj.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=60)
        self.assertIn(path, {str(p) for p in managed})
        self.assertEqual(str(self.conn.get_object(NAME, path, introspect=False).Get(TASK, contract.Task.Description, dbus_interface=PROPS)),
                         "a newcomer's upload")


@unittest.skipUnless(shutil.which("bwrap") and shutil.which("xdg-dbus-proxy"), "bubblewrap and xdg-dbus-proxy are not installed")
class HitAndRunTests(StrangerTestCase):
    """A client in a real Flatpak-like sandbox (bubblewrap, its own /.flatpak-info, the bus through
    xdg-dbus-proxy --filter --talk=NAME, as flatpak runs apps) that opens a connection, sends a call
    and leaves at once: its app is never known, and it gets the least rights, never a host app's."""

    BWRAP = ["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev",
             "--die-with-parent"]

    def sandbox(self):
        d = tempfile.mkdtemp(prefix="netactivity-flatpak-")
        self.addCleanup(shutil.rmtree, d, True)
        info = os.path.join(d, "flatpak-info")
        with open(info, "w") as f:
            f.write("[Application]\nname=org.example.HitAndRun\nruntime=runtime/org.example.Platform/x86_64/1\n")
        bus_dir = os.path.dirname(self.bus.address.split("path=", 1)[1].split(",")[0])
        proxy = subprocess.Popen([*self.BWRAP, "--bind", bus_dir, bus_dir, "--bind", d, d, "--ro-bind", info, "/.flatpak-info",
                                  "xdg-dbus-proxy", self.bus.address, d + "/bus", "--filter", "--talk=" + NAME])
        self.addCleanup(lambda: (proxy.terminate(), proxy.wait(10)))
        wait_until(lambda: os.path.exists(d + "/bus"), what="the proxy's socket")
        return d, info

    def shared_settings(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        D = contract.Downloader
        return [obj.Get(iface, prop, dbus_interface=PROPS) for iface, prop in
                [(DOWNLOADER, D.MaximumActiveDownloads), (IFACE, contract.Activity.Enabled), (DOWNLOADER, D.DiskCapacity)]]

    def test_a_sandboxed_client_that_calls_and_leaves_at_once_gains_nothing(self):
        d, info = self.sandbox()
        settings = self.shared_settings()
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        host_image = bytes(png(width=3))
        cache.AddImage("host-image", dbus.ByteArray(host_image))
        cache.AddImageForRequest("https://example.org/host.png", "", dbus.ByteArray(host_image))
        code = CHILD_PRELUDE + r"""
import struct, sys
from rawbus import RawClient, _string, _pad, body_strings, body_string_bytes
P = "org.freedesktop.DBus.Properties"
def setter(iface, prop, sig, packed):
    body = _string(_string(b"", iface), prop)
    body = _string(body, sig, sig=True)
    return _pad(body, 8 if sig == "t" else 4) + packed
D, A, C = contract.Downloader, contract.Activity, contract.ImageCache
calls = [
    (P, "Set", "ssv", setter(D.INTERFACE, D.MaximumActiveDownloads, "u", struct.pack("<I", 1))),
    (P, "Set", "ssv", setter(A.INTERFACE, A.Enabled, "b", struct.pack("<I", 0))),
    (P, "Set", "ssv", setter(D.INTERFACE, D.DiskCapacity, "t", struct.pack("<Q", 0))),
    (C.INTERFACE, C.RemoveAllImages, "", b""),
    (D.INTERFACE, D.RemoveImages, "s", body_strings("http")),
    (C.INTERFACE, C.AddImageForRequest, "ssay",
     _pad(_string(_string(b"", "https://example.org/host.png"), ""), 4) + struct.pack("<I", 8) + b"\x89PNG\r\n\x1a\n"),
]
iface, member, sig, body = calls[int(sys.argv[2])]
raw = RawClient(sys.argv[1])
raw.send(contract.BUS_NAME, contract.OBJECT_PATH, iface, member, sig, body)
raw.sock.close()
"""
        from dbus.mainloop.glib import DBusGMainLoop
        from gi.repository import GLib
        watcher = dbus.bus.BusConnection(self.bus.address, mainloop=DBusGMainLoop())
        self.addCleanup(watcher.close)
        gone = []
        watcher.add_signal_receiver(lambda name, old, new: gone.append(str(name)) if not new and name.startswith(":") else None,
                                    signal_name="NameOwnerChanged", dbus_interface="org.freedesktop.DBus")
        tries = 48
        for i in range(tries):
            subprocess.run([*self.BWRAP, "--ro-bind", HERE, HERE, "--bind", d, d, "--ro-bind", info, "/.flatpak-info",
                            "--unshare-pid", "--unshare-net", "/usr/bin/python3", "-c", code, "unix:path=%s/bus" % d, str(i % 6)],
                           check=True, timeout=30)
        # Each of the proxy's connections for them left, and the agent heard of it before this round trip.
        context = GLib.MainContext.default()
        wait_until(lambda: context.iteration(False) or len(gone) >= tries, timeout=30, what="the hit-and-run clients gone")
        self.assertEqual(self.shared_settings(), settings, "no hit-and-run setter took effect")
        self.assertEqual(bytes(cache.LookupImage("host-image", byte_arrays=True)[1]), host_image)
        self.assertEqual(bytes(cache.LookupImageForRequest("https://example.org/host.png", "", byte_arrays=True)[1]), host_image)


def can_mount_fuse():
    return os.path.exists("/dev/fuse") and can_fake_flatpak()


@timed
@unittest.skipUnless(can_mount_fuse(), "no /dev/fuse or no user namespaces")
class FuseTests(StrangerTestCase):
    """A FUSE server of the client's own that stops answering: nothing the agent does for that
    client may wait for it."""

    def attacker(self, mode, *args):
        mnt = tempfile.mkdtemp(prefix="netactivity-fuse-")
        self.addCleanup(os.rmdir, mnt)
        proc = subprocess.Popen(["unshare", "-rm", sys.executable, os.path.join(HERE, "fuse_attacker.py"), self.bus.address, mode, *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ, FUSE_MOUNT=mnt))

        def stop():
            proc.stdin.close()
            proc.wait(20)
        self.addCleanup(stop)
        line = proc.stdout.readline()
        self.assertTrue(line, "the attacker died")
        return json.loads(line)

    def test_a_process_rooted_in_a_frozen_fuse_mount_is_not_known_and_holds_no_one_up(self):
        prober = Prober(self.bus)
        out = self.attacker("chroot", bytes(png(width=6)).hex())
        report = prober.stop()
        self.assertIn("ok", out, out)
        self.assertLess(out["seconds"], 5, out)
        self.assertLess(report["max_ms"], STALL_MS * 4, report)
        self.assertEqual([v for k, v in self.by_app().items() if k.startswith("unknown/")], [len(png(width=6))],
                         "its image is charged as a caller not known")

    def test_a_fuse_file_passed_as_an_image_is_refused_without_waiting(self):
        prober = Prober(self.bus)
        out = self.attacker("fd")
        report = prober.stop()
        self.assertEqual(out.get("error", [None])[0], contract.DBusError.InvalidArgs, out)
        self.assertIn("sealed", out["error"][1])
        self.assertLess(out["seconds"], 5, out)
        self.assertLess(report["max_ms"], STALL_MS * 4, report)
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        cache.AddImage("after", dbus.ByteArray(png()))
        self.assertTrue(cache.LookupImage("after", byte_arrays=True)[0])


@timed
class SniffTests(AgentTestCase):
    def test_huge_bodies_are_sniffed_by_a_bounded_prefix(self):
        """64 MiB of spaces before '<svg/>', or a JPEG padded with 48 MiB of fill bytes, cost the
        loop a whole scan per call; now only the first bytes are read."""
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        frame = b"\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03" + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
        bodies = [b" " * (64 << 20) + b"<svg/>", b"\xff\xd8" + b"\xff" * (48 << 20) + frame + b"\xff\xd9"]
        fds = [sealed_memfd(b) for b in bodies]
        prober = Prober(self.bus)
        for _ in range(4):
            for fd in fds:
                self.expect_error(contract.Error.NotAnImage, lambda: cache.AddImageFromFd("x", dbus.types.UnixFd(fd)))
        report = prober.stop()
        for fd in fds:
            os.close(fd)
        self.assertLess(report["max_ms"], STALL_MS, report)


@unittest.skipUnless(os.geteuid() == 0 and os.access("/proc/sys/kernel/ns_last_pid", os.W_OK) and can_fake_flatpak(),
                     "needs root to choose the next pid")
class RecycledPidTests(StrangerTestCase):
    def test_a_connection_never_takes_the_identity_of_the_next_process_with_its_pid(self):
        """A process connects, hands its socket on and exits; a sandboxed app then gets its pid. The
        connection's first call comes after that: it is not the sandbox's, and has the least rights."""
        from rawbus import body_string_bytes
        raw, pid = orphaned_connection(self.bus.address)
        self.addCleanup(raw.sock.close)
        time.sleep(0.03)  # the next process starts at a later tick of the clock that start times count
        for attempt in range(20):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
            victim = self.stranger(flatpak="org.example.Victim")
            if victim.proc.pid == pid:
                break
        else:
            self.skipTest("another process took the pid each time")
        raw.send(NAME, PATH, CACHE, contract.ImageCache.AddImage, "say", body_string_bytes("planted", bytes(png(width=5))))
        rows = wait_until(lambda: (lambda r: r if any(k.startswith("unknown/") for k in r) else None)(self.by_app()),
                          what="the planted image charged")
        self.assertNotIn("flatpak:org.example.Victim", rows)
        self.assertIsNone(victim("lookup", "planted"), "the victim does not read it as its own")


class MarkupTests(StrangerTestCase):
    """Another app's text (a lease reason) reaches surfaces that read markup as text."""
    agent_args = ("--activation-delay", "0", "--completion-delay", "0", "--notify", "--notify-after", "0.3")
    REASON = 'Tom & Jerry <span size="40000">HUGE</span>'
    ESCAPED = "Tom &amp; Jerry &lt;span size=&quot;40000&quot;&gt;HUGE&lt;/span&gt;"

    def test_waybar_tooltips_and_notify_send_bodies_escape_other_apps_text(self):
        watch = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", "waybar"],
                                 env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (watch.kill(), watch.wait()))
        self.assertEqual(json.loads(watch.stdout.readline())["class"], "idle")
        holder = self.stranger()
        holder("leases", 1, self.REASON)
        while True:
            line = json.loads(watch.stdout.readline())
            if "Jerry" in line["tooltip"]:
                break
        self.assertIn(self.ESCAPED, line["tooltip"])
        self.assertNotIn("<span", line["tooltip"])
        # The recipes' click: `netactivity status --markup | notify-send`.
        self.assertIn(self.ESCAPED, cli(self.bus, "status", "--markup").stdout)
        self.assertIn(self.REASON, cli(self.bus, "status").stdout, "a terminal gets the text as it is")

    def test_a_notification_body_is_escaped_only_for_a_server_that_reads_markup(self):
        for capabilities, expected in (((), self.REASON), (("body-markup",), self.ESCAPED)):
            server = self.observe("fake_desktop.py", "notifications", *capabilities)
            holder = self.stranger()
            holder("leases", 1, self.REASON)
            note = wait_until(lambda: events(server, "Notify"), what="the notification")[0]
            self.assertIn(expected, note["body"], capabilities)
            holder.close()
            wait_until(lambda: events(server, "Close"), what="the notification closed")
            server.proc.kill()
            server.proc.wait()
            self.observers.remove(server)


from test_prefetch import PrefetchTestCase


class PrefetchPoolTests(PrefetchTestCase):
    def test_one_process_of_the_unscoped_pool_never_takes_anothers_first_url(self):
        """4,096 prefetched URLs is one app's cap; in the unscoped pool it is each live process's."""
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(2, variant_level=1))  # one slot for prefetch
        greedy = self.prefetcher()
        urls = [self.http.url("/fresh/gate-p.png")] + [self.http.url("/fresh/p%d.png" % i) for i in range(4095)]
        self.assertEqual(self.tell(greedy, "prefetch", *urls)["event"], "prefetching")
        wait_until(lambda: self.http.count("/fresh/gate-p") == 1, what="the first URL under way, the rest waiting")
        more = self.tell(greedy, "prefetch", self.http.url("/fresh/more.png"))
        self.assertEqual(more["event"], "refused")
        self.assertIn("unscoped/pid:%d has 4096" % greedy.proc.pid, more["message"], "the refusal names its holder")
        other = self.prefetcher()
        self.assertEqual(self.tell(other, "prefetch", self.http.url("/fresh/other.png"))["event"], "prefetching")
        self.http.gate("/fresh/gate").set()


@timed
class ManyAnswersTests(DownloadTestCase):
    def test_thousands_of_callers_of_one_image_are_answered_without_holding_the_loop(self):
        """3,200 FetchImage calls (one app's share of pending downloads) wait for one transfer;
        when it ends they were all answered in one turn of the loop (3,600 took 86-102 ms, release
        build). Now a slice per turn."""
        code = CHILD_PRELUDE + """
import os, sys, dbus, dbus.mainloop.glib
from gi.repository import GLib
loop = dbus.mainloop.glib.DBusGMainLoop()
url, n = sys.argv[2], int(sys.argv[3])
conns = [dbus.bus.BusConnection(sys.argv[1], mainloop=loop) for _ in range(4)]
answered = [0]
def done(fd, size, info):
    os.close(fd.take())
    answered[0] += 1
    if answered[0] == n * len(conns):
        main.quit()
def failed(e):
    print("failed", e, flush=True)
    main.quit()
for c in conns:
    d = dbus.Interface(c.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False), contract.Downloader.INTERFACE)
    for _ in range(n):
        d.FetchImage(url, dbus.Dictionary({}, signature="sv"), reply_handler=done, error_handler=failed, timeout=120)
# Each connection's calls reached the agent before its Ping's answer.
for c in conns:
    c.call_blocking(contract.BUS_NAME, contract.OBJECT_PATH, "org.freedesktop.DBus.Peer", "Ping", "", ())
print("waiting", flush=True)
main = GLib.MainLoop()
main.run()
print(answered[0], flush=True)
"""
        proc = subprocess.Popen([sys.executable, "-c", code, self.bus.address, self.http.url("/gate/many.png"), "800"],
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        self.assertEqual(proc.stdout.readline().strip(), "waiting")
        prober = Prober(self.bus)
        self.http.gate("/gate/many.png").set()
        self.assertEqual(proc.stdout.readline().strip(), "3200")
        report = prober.stop()
        self.assertEqual(self.http.count("/gate/many"), 1, "one transfer for all of them")
        self.assertLess(report["max_ms"], STALL_MS * 2, report)


class HonestReaderTests(AgentTestCase):
    def test_a_client_that_reads_every_reply_is_never_cut_off(self):
        """dbus-broker answers Debug.Stats with Error.Failed, which the agent took for "this client
        never reads": a client reading every reply was silenced after 57 lookups of 70 KB, a panel
        after 3 GetManagedObjects of 1,000 tasks. On either bus, an honest client is never cut off."""
        from test_hostile import Hog
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        image = bytes(png(extra=70_000))
        cache.AddImage("mid", dbus.ByteArray(image))
        for _ in range(120):
            found, data = cache.LookupImage("mid", byte_arrays=True, timeout=10)
            self.assertEqual(bytes(data), image)
        hog = Hog(self.bus, "tasks", 1, 1000, 1000)
        self.addCleanup(hog.stop)
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        for _ in range(10):
            self.assertEqual(len(obj.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER, timeout=10)), 200)
        self.assertNotIn("does not read", self.agent.logtext())


if __name__ == "__main__":
    unittest.main()
