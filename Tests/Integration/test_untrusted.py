# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Strangers against the decoded tier, the panel's view and the network (docs/contract.md, "Trust and
isolation"): a decoder that lies, descriptors run out, hit-and-run removals, decoding shared
unfairly, a panel crowded out, a sandbox reaching what its permissions deny. Each test plays the
attack as the attacker would and asserts the promise."""
import ctypes
import fcntl
import json
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import dbus

import contract
from harness import Agent, PrivateBus, connect, decoded_charge, fd_kinds, png, timed, wait_until
from test_agent import AgentTestCase
from test_hostile import Prober
from test_strangers import Cgroups, StrangerTestCase, can_fake_flatpak, can_mount_fuse

HERE = os.path.dirname(os.path.abspath(__file__))
C = contract.ImageCache
D = contract.Downloader


class LyingDecoderTests(unittest.TestCase):
    """The decoder is the process an image may have taken over: whatever it says, the agent lives,
    the request fails as a decode, and the decoder is replaced."""

    def agent_with_decoder(self, *lie):
        folder = tempfile.mkdtemp(prefix="netactivity-liar-")
        script = os.path.join(folder, "netactivity-decoder")
        with open(script, "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 %s %s\n" % (os.path.join(HERE, "lying_decoder.py"), " ".join(lie)))
        os.chmod(script, stat.S_IRWXU)
        self.addCleanup(lambda: (os.unlink(script), os.rmdir(folder)))
        bus = PrivateBus()
        self.addCleanup(bus.stop)
        agent = Agent(bus, env={"NETACTIVITY_DECODER": script, "NETACTIVITY_DECODER_BWRAP": "none"})
        self.addCleanup(agent.stop)
        conn = connect(bus)
        self.addCleanup(conn.close)
        return agent, conn

    def test_sizes_that_overflow_or_do_not_match_fail_the_request_and_replace_the_decoder(self):
        lies = {
            "stride and height of 2^32 - 1": ("1", "0xFFFFFFFF", "0xFFFFFFFF", "4096"),
            "a width whose row overflows 32 bits": ("0x40000001", "1", "4", "4"),
            "more pixels than the limit": ("65536", "65536", "262144", "4096"),
            "a file smaller than its rows": ("2", "2", "8", "8"),
            "a file without its seals": ("1", "1", "4", "4", "none"),
        }
        for what, lie in lies.items():
            with self.subTest(what):
                agent, conn = self.agent_with_decoder(*lie)
                obj = conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
                cache = dbus.Interface(obj, C.INTERFACE)
                cache.AddImage("logo", dbus.ByteArray(png(2, 2)))
                with self.assertRaises(dbus.exceptions.DBusException) as cm:
                    cache.OpenPixels("logo", dbus.Dictionary({}, signature="sv"))
                self.assertEqual(cm.exception.get_dbus_name(), contract.Error.Decode, cm.exception.get_dbus_message())
                self.assertTrue(agent.alive(), agent.logtext()[-2000:])
                statistics = obj.Get(C.INTERFACE, C.DecodedStatistics, dbus_interface=contract.PROPERTIES)
                self.assertGreaterEqual(int(statistics[C.DECODED_STATISTICS_KEY_DECODERS_REPLACED]), 1, "a decoder that lied is not used again")
                self.assertEqual(int(obj.Get(C.INTERFACE, C.DecodedMemoryUsage, dbus_interface=contract.PROPERTIES)), 0)


def sealed_memfd(data):
    fd = os.memfd_create("test-image", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def without_capabilities():
    """In a child before exec: the capability bounding set emptied, so that a root test run's
    agent has a user's rights (a file of mode 0 cannot be opened)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; past the last capability: EINVAL


class HandedOutDescriptorTests(AgentTestCase):
    """What one app does to a descriptor it was handed changes nothing for another."""

    def setUp(self):
        self.bus = PrivateBus()
        self.agent = Agent(self.bus, preexec=without_capabilities)
        self.conn = connect(self.bus)
        self.observers = []

    def cache(self, conn=None):
        return dbus.Interface((conn or self.conn).get_object(contract.BUS_NAME, contract.OBJECT_PATH), C.INTERFACE)

    def test_fchmod_on_a_handed_out_image_or_its_pixels_reaches_no_one_else(self):
        big = bytes(png(16, 16, extra=256 << 10))
        fd = sealed_memfd(big)
        os.fchmod(fd, 0o600)
        self.cache().AddImageFromFd("big", dbus.types.UnixFd(fd))
        os.fchmod(fd, 0)  # the adding app's own open, after the agent took the image
        os.close(fd)
        # The agent, without capabilities, cannot read the test's root-owned process's identity:
        # every connection of the test is a caller not known, each its own namespace. The harm
        # to show is to every later hand-out of the same memory, so one connection does all.
        attacker = self.conn
        for _ in range(2):
            f, size = self.cache(attacker).OpenImage("big")
            f = f.take()
            os.fchmod(f, 0)
            os.lseek(f, 1000, os.SEEK_SET)
            os.close(f)
            pixels, _ = self.cache(attacker).OpenPixels("big", dbus.Dictionary({}, signature="sv"))
            pixels = pixels.take()
            os.fchmod(pixels, 0)
            os.close(pixels)
        f, size = self.cache().OpenImage("big")
        f = f.take()
        self.addCleanup(os.close, f)
        self.assertEqual(os.pread(f, size, 0), big)
        pixels, info = self.cache().OpenPixels("big", dbus.Dictionary({}, signature="sv"))
        pixels = pixels.take()
        self.addCleanup(os.close, pixels)
        self.assertEqual(len(os.pread(pixels, 16 * 16 * 4, 0)), 16 * 16 * 4)
        self.assertEqual(int(info[C.OPEN_PIXELS_INFO_SOURCE] == C.OPEN_PIXELS_SOURCE_MEMORY), 1, "the same decoded entry")


@timed
class RemovalTests(AgentTestCase):
    def cache(self):
        return dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), C.INTERFACE)

    def test_removing_thousands_of_images_holds_the_loop_no_longer_than_their_number(self):
        cache = self.cache()
        image = dbus.ByteArray(png(2, 2))
        removed, decoded = 6000, 2000
        for i in range(removed):
            cache.AddImage("http://example.test/gone/%d.png" % i, image)
        for i in range(decoded):
            key = "http://example.test/kept/%d.png" % i
            cache.AddImage(key, image)
            os.close(cache.OpenPixels(key, dbus.Dictionary({}, signature="sv"))[0].take())
        downloader = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        prober = Prober(self.bus)
        time.sleep(0.2)
        self.assertEqual(int(downloader.RemoveImages("http://example.test/gone/")), removed)
        time.sleep(0.2)
        report = prober.stop()
        # Each removed image finds its pixels by one look-up: comparing each with every decoded
        # entry would be 12 million comparisons on the loop.
        self.assertLess(report["max_ms"], 500, report)
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        self.assertEqual(int(obj.Get(C.INTERFACE, C.DecodedMemoryUsage, dbus_interface=contract.PROPERTIES)),
                         decoded * decoded_charge(16), "the pixels of the images kept stay")


class UnknownCallerTests(AgentTestCase):
    """A caller whose process is not known owns only what its connection made."""

    def by_app(self):
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
        return {str(k): int(v) for k, v in obj.Get(C.INTERFACE, C.MemoryUsageByApp,
                                                   dbus_interface=contract.PROPERTIES).items()}

    def test_remove_images_by_a_caller_not_known_takes_nothing_of_the_host_apps(self):
        from rawbus import _pad, _string, body_string_bytes, body_strings
        from test_strangers import orphaned_connection
        cache = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), C.INTERFACE)
        host = bytes(png(width=3))
        cache.AddImageForRequest("https://example.org/host.png", "", dbus.ByteArray(host))
        raw, _ = orphaned_connection(self.bus.address)
        self.addCleanup(raw.sock.close)
        own = bytes(png(width=2))
        raw.send(contract.BUS_NAME, contract.OBJECT_PATH, C.INTERFACE, C.AddImageForRequest, "ssay",
                 _pad(_string(_string(b"", "https://example.org/mine.png"), ""), 4) + struct.pack("<I", len(own)) + own)
        raw.send(contract.BUS_NAME, contract.OBJECT_PATH, D.INTERFACE, D.RemoveImages, "s", body_strings("http"))
        raw.send(contract.BUS_NAME, contract.OBJECT_PATH, C.INTERFACE, C.AddImage, "say",
                 body_string_bytes("marker", bytes(png(width=4))))
        # Its calls are handled in order: once its marker is charged, its RemoveImages has run.
        wait_until(lambda: len(png(width=4)) in self.by_app().values(), what="the marker charged, its own URL image removed")
        found, data = cache.LookupImageForRequest("https://example.org/host.png", "", byte_arrays=True)
        self.assertTrue(found, "the host app's image is not the unknown caller's to remove")
        self.assertEqual(bytes(data), host)


@timed
@unittest.skipUnless(Cgroups.usable() and can_mount_fuse(), "needs root (cgroups), /dev/fuse and user namespaces")
class DesktopFileOnFuseTests(StrangerTestCase):
    """An app's desktop file, looked up for its name, is a link into a FUSE mount whose server never
    answers: the lookup waits, off the loop, and the app keeps its process name."""

    def test_a_desktop_file_linked_into_a_frozen_fuse_mount_holds_no_one_up(self):
        data = tempfile.mkdtemp(prefix="netactivity-data-")
        self.addCleanup(shutil.rmtree, data, True)
        os.mkdir(os.path.join(data, "applications"))
        self.agent.stop()
        self.agent = Agent(self.bus, env={"XDG_DATA_DIRS": data, "XDG_DATA_HOME": os.path.join(data, "none")})
        mnt = tempfile.mkdtemp(prefix="netactivity-fuse-")
        self.addCleanup(os.rmdir, mnt)
        attacker = subprocess.Popen(["unshare", "-rm", sys.executable, os.path.join(HERE, "fuse_attacker.py"), self.bus.address,
                                     "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ, FUSE_MOUNT=mnt))
        self.addCleanup(lambda: (attacker.stdin.close(), attacker.wait(20)))
        pid = json.loads(attacker.stdout.readline())["ok"]
        os.symlink("/proc/%d/root%s/image.png" % (pid, mnt), os.path.join(data, "applications", "org.example.Frozen.desktop"))
        cgroups = Cgroups()
        self.addCleanup(cgroups.remove)
        uid = os.getuid()
        app = self.stranger(cgroup=cgroups.make(
            "/user.slice/user-%d.slice/user@%d.service/app.slice/app-gnome-org.example.Frozen-53.scope" % (uid, uid)))
        prober = Prober(self.bus)
        app("leases", 1)
        time.sleep(1)  # the name's lookup is under way, held by the FUSE server
        self.assertIsNotNone(app("ping"))
        report = prober.stop()
        self.assertLess(report["max_ms"], 200, report)


class DescriptorBudgetTests(StrangerTestCase):
    """Descriptors are a budget: one app asking for an image at thousands of boxes cannot take the
    agent's descriptors, nor evict another app's pixels, nor cost the agent its bus connection."""

    FILE_LIMIT = 1024

    def setUp(self):
        self.bus = PrivateBus()
        limit = self.FILE_LIMIT
        self.agent = Agent(self.bus, preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        self.conn = connect(self.bus)
        self.observers = []

    def test_an_image_at_a_thousand_boxes_holds_at_most_the_tiers_descriptors(self):
        cache = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), C.INTERFACE)
        cache.AddImage("victim", dbus.ByteArray(png(4, 4)))
        os.close(cache.OpenPixels("victim", dbus.Dictionary({}, signature="sv"))[0].take())
        attacker = self.stranger()
        attacker("add", "tiny", bytes(png(1, 1)).hex())
        out = attacker("pixel-boxes", "tiny", self.FILE_LIMIT + 200)
        self.assertTrue(self.agent.alive(), self.agent.logtext()[-2000:])
        memfds = fd_kinds(self.agent.proc.pid).get("memfd", 0)
        self.assertLessEqual(memfds, self.FILE_LIMIT // 8 + 8, "the decoded tier keeps at most its share of descriptors")
        self.assertEqual(out["ok"], self.FILE_LIMIT + 200, out)
        # The victim's entry, within its share, was not evicted for the attacker's.
        _, info = cache.OpenPixels("victim", dbus.Dictionary({}, signature="sv"))
        os.close(_.take())
        self.assertEqual(str(info[C.OPEN_PIXELS_INFO_SOURCE]), C.OPEN_PIXELS_SOURCE_MEMORY)
        # Calls that carry descriptors still work, both ways.
        fd = sealed_memfd(bytes(png(8, 8, extra=70000)))
        cache.AddImageFromFd("by-fd", dbus.types.UnixFd(fd))
        os.close(fd)
        f, size = cache.OpenImage("by-fd")
        f = f.take()
        self.addCleanup(os.close, f)
        self.assertEqual(os.pread(f, 8, 0), b"\x89PNG\r\n\x1a\n")


class LoopbackServer:
    """HTTP on 127.0.0.1 (and on ::1 at the same port with `ipv6`, where it is free), counting the
    connections it accepts and the paths asked for. `respond(path, send)` answers a GET: it returns a
    body, or sends one itself through `send(bytes)` (False once the client is gone) and returns None;
    `self.stopping` is set when the test ends."""

    def __init__(self, respond, ipv6=False):
        import http.server
        import socket as socket_module
        import threading
        server = self
        self.connections, self.paths = 0, []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with server.lock:
                    server.connections += 1

            def log_message(self, *args):
                pass

            def send(self, data):
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                    return True
                except OSError:
                    return False

            def do_GET(self):
                with server.lock:
                    server.paths.append(self.path)
                body, length = respond(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(length if body is None else len(body)))
                self.end_headers()
                if body is None:
                    respond.stream(self.path, self.send, server.stopping)
                else:
                    self.send(body)

        class Server6(http.server.ThreadingHTTPServer):
            address_family = socket_module.AF_INET6

        self.servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)]
        self.port = self.servers[0].server_address[1]
        if ipv6:
            try:
                self.servers.append(Server6(("::1", self.port), Handler))
            except OSError:
                pass  # no IPv6 loopback here: the ::1 forms are refused before any connection anyway
        for httpd in self.servers:
            httpd.daemon_threads = True
            threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        self.stopping.set()
        for httpd in self.servers:
            httpd.shutdown()
            httpd.server_close()


def image_server(ipv6=False):
    """A LoopbackServer answering every path with a 2 x 2 PNG."""
    return LoopbackServer(lambda path: (bytes(png(2, 2)), 0), ipv6=ipv6)


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class NetworkReachTests(StrangerTestCase):
    """A sandbox's network reach is its own: the agent is no way around it."""

    def setUp(self):
        super().setUp()
        self.http = image_server(ipv6=True)
        self.addCleanup(self.http.stop)

    def refused(self, app, url):
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("fetch", url)
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied, cm.exception.get_dbus_message())
        return cm.exception.get_dbus_message()

    def test_a_flatpak_without_network_gets_no_downloads(self):
        app = self.stranger(flatpak="org.example.Offline", shared="ipc;")
        url = "http://127.0.0.1:%d/a.png" % self.http.port
        self.assertIn("may not use the network", self.refused(app, url))
        for command in (("download", url),):
            with self.assertRaises(dbus.exceptions.DBusException) as cm:
                app(*command)
            self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertEqual(self.http.connections, 0)
        # Not even what another app already fetched: the host's image is in the cache now.
        host = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        os.close(host.FetchImage(url, dbus.Dictionary({}, signature="sv"), timeout=60)[0].take())
        self.refused(app, url)

    def test_a_sandboxed_apps_download_never_connects_to_this_machine(self):
        app = self.stranger(flatpak="org.example.Scanner")
        port = self.http.port
        for host in ("127.0.0.1", "127.1.2.3", "localhost", "[::1]", "[::ffff:127.0.0.1]", "2130706433", "0.0.0.0"):
            with self.subTest(host):
                message = self.refused(app, "http://%s:%d/probe.png" % (host, port))
                self.assertIn("public addresses only", message)
        self.assertEqual(self.http.connections, 0, "no connection was made for the sandboxed app")
        # A connection a host app's download left open is not reused for it either.
        host = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        os.close(host.FetchImage("http://127.0.0.1:%d/host.png" % port, dbus.Dictionary({}, signature="sv"),
                                 timeout=60)[0].take())
        self.refused(app, "http://127.0.0.1:%d/pooled.png" % port)
        self.assertEqual(self.http.paths, ["/host.png"], "only the host app's request reached the server")


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class AllowedLocalNetworkTests(StrangerTestCase):
    settings = "sandboxed-local-networks = 127.0.0.0/8, ::1\n"

    def test_the_users_settings_let_a_local_range_through(self):
        http = image_server()
        self.addCleanup(http.stop)
        app = self.stranger(flatpak="org.example.Local")
        data, source = app("fetch", "http://127.0.0.1:%d/allowed.png" % http.port)
        self.assertEqual(bytes.fromhex(data), bytes(png(2, 2)))
        self.assertEqual(http.paths, ["/allowed.png"])


def can_make_network_namespaces():
    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("nsenter") is not None


# One connection's log line per accept, then the answer: a tiny PNG.
NETNS_SERVER = r"""
import http.server, sys
body = bytes.fromhex(sys.argv[3])
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_GET(self):
        with open(sys.argv[2], "a") as log:
            log.write(self.path + "\n")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
httpd = http.server.HTTPServer((sys.argv[1], 8080), Handler)
print("ready", flush=True)
httpd.serve_forever()
"""


@unittest.skipUnless(can_make_network_namespaces() and can_fake_flatpak(), "needs root, iproute2 and user namespaces")
class PrivateNetworkTests(StrangerTestCase):
    """A private (RFC 1918) address the agent can reach: inside a network namespace the test makes for
    the agent alone, with a server on 10.55.0.1 in it. Nothing leaves this machine."""

    def setUp(self):
        self.bus = PrivateBus()
        libc = ctypes.CDLL(None, use_errno=True)
        self.agent = Agent(self.bus, preexec=lambda: libc.unshare(0x40000000))  # CLONE_NEWNET
        self.conn = connect(self.bus)
        self.observers = []
        netns = ["nsenter", "--net=/proc/%d/ns/net" % self.agent.proc.pid]
        # The address on the namespace's own loopback device: no kernel module, no link anywhere.
        for command in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", "10.55.0.1/32", "dev", "lo"]):
            subprocess.run(netns + command, check=True, timeout=10)
        self.log = tempfile.NamedTemporaryFile(prefix="netactivity-netns-", delete=False).name
        self.addCleanup(os.unlink, self.log)
        server = subprocess.Popen(netns + [sys.executable, "-c", NETNS_SERVER, "10.55.0.1", self.log, bytes(png(2, 2)).hex()],
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (server.kill(), server.wait(10)))
        self.assertEqual(server.stdout.readline().strip(), "ready")

    def requests(self):
        with open(self.log) as f:
            return f.read().split()

    def test_a_sandboxed_app_cannot_reach_a_private_network_that_a_host_app_can(self):
        app = self.stranger(flatpak="org.example.Lan")
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("fetch", "http://10.55.0.1:8080/router.png")
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertIn("a private address", cm.exception.get_dbus_message())
        self.assertEqual(self.requests(), [])
        host = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        fd, size, _ = host.FetchImage("http://10.55.0.1:8080/host.png", dbus.Dictionary({}, signature="sv"), timeout=60)
        fd = fd.take()
        self.addCleanup(os.close, fd)
        self.assertEqual(os.pread(fd, size, 0), bytes(png(2, 2)))
        self.assertEqual(self.requests(), ["/host.png"], "the address is there for a host app")


@unittest.skipUnless(can_fake_flatpak() and shutil.which("convert"), "needs user namespaces and ImageMagick")
class FairDecodingTests(StrangerTestCase):
    """One app's costly images never make another app's small one wait behind them all."""

    def test_a_sandboxed_apps_decode_bombs_do_not_hold_another_apps_image(self):
        from test_decoder import progressive_bomb
        bomb = progressive_bomb(3000)
        attacker = self.stranger(flatpak="org.example.Bomber")
        for i in range(16):
            attacker("add", "bomb%d" % i, bomb.hex())
        cache = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), C.INTERFACE)
        cache.AddImage("small", dbus.ByteArray(png(8, 8)))
        attacker("open-pixels-async", ["bomb%d" % i for i in range(16)])
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        wait_until(lambda: int(obj.Get(C.INTERFACE, C.DecodedStatistics, dbus_interface=contract.PROPERTIES)
                               [C.DECODED_STATISTICS_KEY_DECODERS_STARTED]) >= 1, timeout=10, what="the bombs at the decoders")
        start = time.monotonic()
        fd, info = cache.OpenPixels("small", dbus.Dictionary({}, signature="sv"), timeout=120)
        os.close(fd.take())
        waited = time.monotonic() - start
        self.assertEqual(int(info[C.OPEN_PIXELS_INFO_WIDTH]), 8)
        self.assertLess(waited, 5, "the small image went next, whatever the other app still had waiting")


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class PanelViewTests(StrangerTestCase):
    """A panel's view of the tasks cannot be crowded out: neither by apps that read the tree many
    times over, nor by apps that fill the tree with tasks."""

    def host_task(self, description):
        agent = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), contract.Activity.INTERFACE)
        return str(agent.BeginTask(description, dbus.Dictionary({}, signature="sv")))

    def announced(self, panel, path):
        return any(e["signal"] == "InterfacesAdded" and e["path"] == path for e in panel.snapshot())

    def test_a_panel_that_starts_after_sixteen_apps_of_sixteen_readers_hears_new_tasks(self):
        first = self.observe("task_observer.py")
        crowd = [self.stranger(flatpak="org.example.Crowd%d" % i) for i in range(16)]
        for app in crowd:
            app("tree-readers", 16)
        late = self.observe("task_observer.py")
        path = self.host_task("a host app's upload")
        wait_until(lambda: self.announced(late, path), timeout=10, what="the late panel hearing the new task")
        wait_until(lambda: self.announced(first, path), timeout=10, what="the first panel still hearing")

    def test_an_app_under_its_share_is_listed_and_announced_when_the_tree_is_full(self):
        panel = self.observe("task_observer.py")
        for i in range(7):
            self.stranger(flatpak="org.example.Filler%d" % i)("tasks", 300)
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False)
        self.assertGreaterEqual(len(obj.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER, timeout=60)), 480)
        path = self.host_task("a host app's backup")
        wait_until(lambda: self.announced(panel, path), timeout=10, what="the host app's task announced")
        managed = obj.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER, timeout=60)
        self.assertIn(path, [str(p) for p in managed])
        self.assertLessEqual(len(managed), 500, "the tree stays bounded: another app's newest task gave way")


class Paced:
    """/paced/NAME.png promises 1 MiB and sends 2.5 KiB every 0.2 s (never quiet for the half second
    that counts as stalled, and 25 KiB per 2 s, above the 16 KiB that counts as dribbling), for at
    most 60 s; any other path, an 8 x 8 PNG at once."""

    body = bytes(png(16, 16, extra=1 << 20))

    def __call__(self, path):
        return (None, len(self.body)) if path.startswith("/paced/") else (bytes(png(8, 8)), 0)

    def stream(self, path, send, stopping):
        for at in range(0, 300 * 2560, 2560):
            if stopping.wait(0.2) or not send(self.body[at:at + 2560]):
                return


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class PacedTransferTests(StrangerTestCase):
    settings = "sandboxed-local-networks = 127.0.0.1\n"

    def test_an_app_holding_every_slot_with_paced_transfers_gives_one_up_to_another_apps_image(self):
        server = LoopbackServer(Paced())
        self.addCleanup(server.stop)
        app = self.stranger(flatpak="org.example.Pacer")
        app("fetch-async", [server.url("/paced/%d.png" % i) for i in range(4)])
        wait_until(lambda: len([p for p in server.paths if p.startswith("/paced/")]) == 4, timeout=10,
                   what="four paced transfers holding the four slots")
        downloader = dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        start = time.monotonic()
        fd, size, _ = downloader.FetchImage(server.url("/small.png"), dbus.Dictionary({}, signature="sv"), timeout=120)
        os.close(fd.take())
        self.assertLess(time.monotonic() - start, 8, "a window of 2 s, then the pacer's slowest gives its slot up")


class DecodedChargeTests(StrangerTestCase):
    def test_another_apps_churn_of_downloaded_pixels_evicts_its_own_not_this_apps(self):
        # /img/N.png: a 64 x 64 PNG, each of its own bytes.
        server = LoopbackServer(lambda path: (bytes(png(64, 64, extra=int(path.split("/")[-1].split(".")[0]) % 7)), 0))
        self.addCleanup(server.stop)
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        obj.Set(C.INTERFACE, C.DecodedPreferredMemoryUsageAfterPurge, dbus.UInt64(512 << 10, variant_level=1),
                dbus_interface=contract.PROPERTIES)
        obj.Set(C.INTERFACE, C.DecodedMemoryCapacity, dbus.UInt64(1 << 20, variant_level=1), dbus_interface=contract.PROPERTIES)
        downloader = dbus.Interface(obj, D.INTERFACE)

        def thumbnail():
            fd, info = downloader.FetchPixels(server.url("/img/0.png"), dbus.Dictionary({}, signature="sv"), timeout=60)
            os.close(fd.take())
            return str(info[D.FETCH_PIXELS_INFO_SOURCE])
        self.assertEqual(thumbnail(), D.FETCH_PIXELS_SOURCE_NETWORK)
        churner = self.stranger()
        churner("fetch-pixels", [server.url("/img/%d.png" % n) for n in range(1, 120)])  # 119 x 16 KiB into a tier of 1 MiB

        def decodes():
            return int(obj.Get(C.INTERFACE, C.DecodedStatistics, dbus_interface=contract.PROPERTIES)
                       [C.DECODED_STATISTICS_KEY_DECODES])
        before = decodes()
        thumbnail()
        self.assertEqual(decodes(), before, "this app's decoded entry, within its share, stayed: no decode again")
