# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The shared downloader against a local HTTP server on 127.0.0.1 (never the internet)."""
import hashlib
import http.server
import os
import signal
import struct
import subprocess
import sys
import threading
import time

import dbus

from harness import NAME, PATH, PROPS, Agent, PrivateBus, busctl, connect, iface, png, prop, timed, wait_until
from test_agent import AgentTestCase
import contract

HERE = os.path.dirname(os.path.abspath(__file__))

DOWNLOADER = contract.Downloader.INTERFACE
CACHE = contract.ImageCache.INTERFACE
ERR = contract.ERROR_PREFIX


class ImageServer:
    """Serves /img/NAME.png, /gate/NAME.png (held until released), /flow/NAME.png (held until released,
    moving bytes: see flow), /slow.png (dribbles), /fresh/NAME.png (cacheable; 256 KiB more when NAME
    starts with big; held until gate("/fresh/gate") is set, flowing, when NAME starts with gate), /tagged/NAME.png (with an ETag; 3 MiB more when NAME starts with big; /img/ and /big.png have no validator, so the disk tier does not keep them),
    /redirect, /redirect-to/PATH (302 to PATH), /loop, /text, /big.png, /ranged/NAME.png (see serve_ranged) and 404s; counts requests and concurrent
    transfers."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []
        self.active = 0
        self.peak = 0
        self.gates = {}
        self.full = []
        self.revalidated = []
        server = self

        self.connections = 0
        self.bodies = {}
        self.ranged = {}
        self.ranges = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with server.lock:
                    server.connections += 1

            def log_message(self, *args):
                pass

            def do_GET(self):
                with server.lock:
                    server.requests.append(self.path)
                    server.active += 1
                    server.peak = max(server.peak, server.active)
                try:
                    server.serve(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server.lock:
                        server.active -= 1

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # A client that hangs up (the agent cancelling a transfer) is normal here, not worth a traceback.
        self.httpd.handle_error = lambda request, address: None
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def gate(self, name):
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def count(self, prefix):
        with self.lock:
            return len([p for p in self.requests if p.startswith(prefix)])

    def head(self, h, status, body, ctype="image/png", extra=()):
        """The status and headers of `body`, which is kept as the last body served at its path
        (png() is random)."""
        with self.lock:
            self.bodies[h.path] = body
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            h.send_header(k, v)
        h.end_headers()

    def send(self, h, status, body, ctype="image/png", extra=()):
        self.head(h, status, body, ctype, extra)
        h.wfile.write(body)

    # A test that holds a download slot to queue other work behind it must not depend on how soon
    # it looks: the downloader lets a slot go when its transfer moves no byte for half a second,
    # or too few over two seconds, while other work waits (SlowTransferRule), and a loaded machine
    # can make a test that late. /flow/ (and /fresh/gate) transfers are held until released, like
    # /gate/ ones, but move 16 KiB every 50 ms all along: above both floors, and above the floor of
    # an app beyond its share of slots (256 KiB in two seconds). FLOW_BYTES last six seconds and
    # more; then the rest waits for the gate.
    FLOW_PIECE = 16 * 1024
    FLOW_BYTES = 2 << 20

    def flow(self, h, gate, extra=()):
        """The body flows from a process of its own (flow_writer.py), which a loaded machine wakes
        on time; this thread releases it when the gate opens."""
        body = png(extra=self.FLOW_BYTES)
        self.head(h, 200, body, extra=extra)
        h.wfile.flush()
        sock = h.connection.fileno()
        writer = subprocess.Popen([sys.executable, os.path.join(HERE, "flow_writer.py"), str(sock), str(self.FLOW_PIECE)],
                                  stdin=subprocess.PIPE, pass_fds=(sock,))
        try:
            writer.stdin.write(struct.pack(">Q", len(body)) + body)
            writer.stdin.flush()
            gate.wait(20)
            writer.stdin.write(b"g")
            writer.stdin.close()
        except BrokenPipeError:  # it ended: the agent hung up
            pass
        writer.wait(30)

    def serve(self, h):
        path = h.path
        if path.startswith("/img/"):
            self.send(h, 200, png())
        elif path.startswith("/gate/"):
            self.gate(path).wait(20)
            self.send(h, 200, png())
        elif path.startswith("/flow/"):
            self.flow(h, self.gate(path))
        elif path == "/slow.png":
            body = png(extra=20000)
            h.send_response(200)
            h.send_header("Content-Type", "image/png")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            for i in range(0, len(body), 1000):
                h.wfile.write(body[i:i + 1000])
                h.wfile.flush()
                time.sleep(0.05)
        elif path.startswith("/etag/") or path.startswith("/fresh/") or path.startswith("/nostore/"):
            control = {"etag": "max-age=0", "fresh": "max-age=3600", "nostore": "no-store"}[path.split("/")[1]]
            if path.startswith("/etag/") and h.headers.get("If-None-Match") == '"v1"':
                with self.lock:
                    self.revalidated.append(path)
                h.send_response(304)
                h.send_header("ETag", '"v1"')
                h.send_header("Cache-Control", control)
                h.end_headers()
                return
            with self.lock:
                self.full.append(path)
            if path.startswith("/fresh/gate"):  # held until the test releases gate("/fresh/gate"), flowing
                return self.flow(h, self.gate("/fresh/gate"), extra=[("ETag", '"v1"'), ("Cache-Control", control)])
            body = png(extra=256 * 1024) if "/big" in path else png()  # /fresh/big...: a memfd-sized entry
            self.send(h, 200, body, extra=[("ETag", '"v1"'), ("Cache-Control", control)])
        elif path == "/redirect":
            self.send(h, 302, b"", "text/plain", [("Location", "/img/target.png")])
        elif path.startswith("/redirect-to/"):
            self.send(h, 302, b"", "text/plain", [("Location", path[len("/redirect-to"):])])
        elif path == "/loop":
            self.send(h, 302, b"", "text/plain", [("Location", "/loop")])
        elif path == "/text":
            self.send(h, 200, b"hello, world", "text/plain")
        elif path == "/big.png":
            self.send(h, 200, png(extra=3 * 1024 * 1024))
        elif path.startswith("/ranged/"):
            self.serve_ranged(h, path)
        elif path.startswith("/tagged/"):  # as /img/ and /big.png, with an ETag: the disk tier keeps it
            body = png(extra=3 * 1024 * 1024) if path.startswith("/tagged/big") else png()
            self.send(h, 200, body, extra=[("ETag", '"t1"')])
        else:
            self.send(h, 404, b"not found", "text/plain")

    def serve_ranged(self, h, path):
        """/ranged/NAME.png: 16 MiB (1 MiB when NAME starts with small) with the strong ETag "r1" (W/"r1" when NAME
        starts with weak). A whole answer stops after its first half until gate(path) is set. A Range request is
        logged in self.ranges as (path, Range, If-Range) and answered with the rest (206) while If-Range holds; when
        NAME starts with changed, the body and ETag are new by then and the answer is the whole new body (200); when it
        starts with lying, the answer is a 206 of the whole body (a range other than the one asked for)."""
        name = path.rsplit("/", 1)[-1]
        size = (1 << 20) if "small" in name else (16 << 20)
        tag = 'W/"r1"' if name.startswith("weak") else '"r1"'
        wanted = h.headers.get("Range")
        with self.lock:
            if path not in self.ranged or (wanted and name.startswith("changed")):
                self.ranged[path] = (png(extra=size), tag if path not in self.ranged else '"r2"')
            body, tag = self.ranged[path]
            self.bodies[path] = body
            if wanted:
                self.ranges.append((path, wanted, h.headers.get("If-Range")))
        if wanted and h.headers.get("If-Range") == tag and not tag.startswith("W/"):
            start = 0 if name.startswith("lying") else int(wanted[len("bytes="):-1])
            h.send_response(206)
            h.send_header("Content-Type", "image/png")
            h.send_header("Content-Length", str(len(body) - start))
            h.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(body) - 1, len(body)))
            h.send_header("ETag", tag)
            h.end_headers()
            h.wfile.write(body[start:])
            return
        h.send_response(200)
        h.send_header("Content-Type", "image/png")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", tag)
        h.end_headers()
        half = len(body) // 2
        h.wfile.write(body[:half])
        h.wfile.flush()
        if not wanted:
            self.gate(path).wait(20)
        h.wfile.write(body[half:])

    def stop(self):
        for g in list(self.gates.values()):
            g.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class DownloadTestCase(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "0")

    def setUp(self):
        super().setUp()
        self.http = ImageServer()
        self.addCleanup(self.http.stop)

    def downloader(self, conn=None):
        return dbus.Interface((conn or self.conn).get_object(NAME, PATH, introspect=False), DOWNLOADER)

    def set_dprop(self, name, value):
        self.conn.get_object(NAME, PATH, introspect=False).Set(DOWNLOADER, name, value, dbus_interface=PROPS)

    def client(self, *args):
        return self.observe("download_client.py", *args)

    def active(self):
        """ActiveDownloads now."""
        return int(self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, contract.Downloader.ActiveDownloads, dbus_interface=PROPS))

    @staticmethod
    def events(c, kind):
        return [e for e in c.snapshot() if e["event"] == kind]

    def finished(self, c, n, timeout=10):
        return wait_until(lambda: len(self.events(c, "finished")) >= n and self.events(c, "finished"), timeout=timeout,
                          what="%d DownloadFinished" % n)

    def open_image(self, url):
        """The cached image's bytes (read from the fd OpenImageForRequest hands out), and what that fd is."""
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        fd_obj, size = cache.OpenImageForRequest(url, "")
        fd = fd_obj.take()
        try:
            return os.pread(fd, size + 1, 0), os.readlink("/proc/self/fd/%d" % fd)
        finally:
            os.close(fd)

    def disk_entries(self, n, at_most=None):
        """The disk tier's entry files once its worker has written them (DownloadFinished does not
        wait for the disk): n entries (or any number up to at_most), no temporary file left, and
        DiskUsage equal to their sizes, which the agent reports only after its worker's writes."""
        import os
        folder = os.path.join(self.bus.cache_home, "netactivity")
        props = self.conn.get_object(NAME, PATH, introspect=False)

        def settled():
            names = os.listdir(folder) if os.path.isdir(folder) else []
            entries = sorted(n for n in names if not n.startswith("tmp-"))
            if len(entries) != len(names) or (len(entries) > at_most if at_most is not None else len(entries) != n):
                return None
            usage = int(props.Get(DOWNLOADER, contract.Downloader.DiskUsage, dbus_interface=PROPS))
            return entries if usage == sum(os.path.getsize(os.path.join(folder, e)) for e in entries) else None
        return wait_until(settled, what="%s disk entries written" % (n if at_most is None else "at most %d" % at_most))


class TransportTests(DownloadTestCase):
    """One copy into the cache's memfd, connections reused, the disk read back exactly."""

    def test_a_large_download_is_the_cache_s_sealed_memfd_byte_for_byte(self):
        url = self.http.url("/big.png")
        self.assertTrue(self.finished(self.client(url), 1)[0]["ok"])
        data, target = self.open_image(url)
        self.assertEqual(data, self.http.bodies["/big.png"], "written in order, chunk by chunk, nothing lost")
        self.assertIn("memfd:netactivity-image", target)

    def test_sequential_downloads_from_one_host_reuse_one_connection(self):
        for i in range(5):
            self.assertTrue(self.finished(self.client(self.http.url("/img/seq%d.png" % i)), 1)[0]["ok"])
        self.assertEqual(self.http.connections, 1, "libcurl's pool kept the connection for the next transfer")

    def test_a_disk_hit_delivers_the_same_bytes_after_a_restart(self):
        url = self.http.url("/fresh/big-on-disk.png")
        self.assertTrue(self.finished(self.client(url), 1)[0]["ok"])
        self.disk_entries(1)
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)
        self.conn.close()
        self.conn = connect(self.bus)
        self.assertTrue(self.finished(self.client(url), 1)[0]["ok"])
        self.assertEqual(self.http.full.count("/fresh/big-on-disk.png"), 1, "served from the disk")
        data, target = self.open_image(url)
        self.assertEqual(data, self.http.bodies["/fresh/big-on-disk.png"])
        self.assertIn("memfd:netactivity-image", target, "a large entry comes back in a memfd")


class LibcurlLoadingTests(DownloadTestCase):
    """libcurl (and its TLS, Kerberos and LDAP libraries) is mapped at the first download only."""

    def mapped(self):
        with open("/proc/%d/maps" % self.agent.proc.pid) as f:
            return f.read()

    def test_libcurl_is_loaded_at_the_first_download(self):
        iface(self.conn).IncrementActivityCount()  # an agent in use, but not downloading
        iface(self.conn).DecrementActivityCount()
        self.assertNotIn("libcurl", self.mapped())
        c = self.client(self.http.url("/img/one.png"))
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.assertIn("libcurl", self.mapped())

    def test_a_missing_libcurl_fails_downloads_clearly_and_nothing_else(self):
        from harness import Agent
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args, env={"NETACTIVITY_LIBCURL": "libnetactivity-missing.so.4"})
        for _ in range(2):  # the second try fails the same way (nothing half-loaded)
            c = self.client(self.http.url("/img/one.png"))
            done = self.finished(c, 1)[0]
            self.assertFalse(done["ok"])
            self.assertEqual(done["error_name"], contract.DBusError.Failed)
            self.assertIn("libcurl", done["error_message"])
            self.assertIn("libnetactivity-missing.so.4", done["error_message"])
            c.close()
        self.assertEqual(self.http.count("/img/"), 0)
        iface(self.conn).IncrementActivityCount()  # the rest of the agent works on
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1)


class CoalescingTests(DownloadTestCase):
    def test_fifty_requests_from_five_clients_make_one_http_request(self):
        url = self.http.url("/gate/shared.png")
        clients = [self.client("--times", "10", url) for _ in range(5)]
        for c in clients:
            wait_until(lambda: len(self.events(c, "requested")) == 10, what="10 receipts")
        tasks = {e["task"] for c in clients for e in self.events(c, "requested")}
        self.assertEqual(len(tasks), 1, "one transfer, one task object")
        self.http.gate("/gate/shared.png").set()
        for c in clients:
            done = self.finished(c, 10)
            self.assertTrue(all(e["ok"] for e in done))
            mine = {e["receipt"] for e in self.events(c, "requested")}
            self.assertEqual({e["receipt"] for e in done}, mine, "each client hears only its own receipts")
        self.assertEqual(self.http.count("/gate/"), 1)
        found, _ = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE).LookupImageForRequest(url, "")
        self.assertTrue(found, "the image landed in the shared cache under the request key")
        receipt, task, cached = self.downloader().DownloadImage(url, dbus.Dictionary({}, signature="sv"))
        self.assertEqual((receipt, task, cached), ("", "/", True))

    def test_download_finished_reaches_only_the_requester(self):
        # The bystander waits for an image of its own, which comes after the requester's: any
        # signal about the requester's would have reached it first.
        bystander = self.client(self.http.url("/gate/bystander.png"))
        wait_until(lambda: self.events(bystander, "requested"), what="the bystander's receipt")
        requester = self.client(self.http.url("/img/solo.png"))
        self.finished(requester, 1)
        self.http.gate("/gate/bystander.png").set()
        done = self.finished(bystander, 1)
        self.assertEqual([e["url"] for e in done], [self.http.url("/gate/bystander.png")])


class QueueTests(DownloadTestCase):
    def let_go(self):
        """Transfers the slow-transfer rule let go on outside the limit so far, by the agent's log."""
        return self.agent.logtext().count("gives its slot to queued work")

    def test_never_more_than_maximum_active_downloads(self):
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(2, variant_level=1))
        urls = [self.http.url("/flow/q%d.png" % i) for i in range(6)]
        c = self.client(*urls)
        wait_until(lambda: len(self.events(c, "requested")) == 6, what="6 receipts")
        wait_until(lambda: self.http.active == 2, what="two transfers at the server")
        props = self.conn.get_object(NAME, PATH, introspect=False).GetAll(DOWNLOADER, dbus_interface=PROPS)
        active, queued = int(props[contract.Downloader.ActiveDownloads]), int(props[contract.Downloader.QueuedDownloads])
        running = int(prop(self.conn, contract.Activity.ActivityCount))
        # Two transfers hold the two slots. One more runs only where the slow-transfer rule let a
        # slot holder go on outside the limit, which the agent logs each time: these flow, but a
        # test process not scheduled for half a second (a loaded machine) stops its server too.
        let_go = self.let_go()
        self.assertEqual(active + queued, 6, "every transfer running or waiting")
        self.assertTrue(2 <= active <= running <= 2 + let_go, "running downloads are the agent's activity, two in "
                        "the slots: %d active, %d running, %d let go" % (active, running, let_go))
        for i in range(6):
            self.http.gate("/flow/q%d.png" % i).set()
        self.finished(c, 6)
        self.assertLessEqual(self.http.peak, 2 + self.let_go())
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="activity released")

    def test_lifo_order(self):
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(1, variant_level=1))
        self.set_dprop("DownloadPrioritization", dbus.String(contract.Downloader.DOWNLOAD_PRIORITIZATION_LIFO, variant_level=1))
        first = self.client(self.http.url("/flow/first.png"))
        wait_until(lambda: self.http.count("/flow/first") == 1, what="the first transfer")
        rest = self.client(*[self.http.url("/img/%s.png" % n) for n in ("b", "c", "d")])
        wait_until(lambda: len(self.events(rest, "requested")) == 3, what="3 queued")
        self.http.gate("/flow/first.png").set()
        self.finished(rest, 3)
        self.assertEqual([p for p in self.http.requests if p.startswith("/img/")], ["/img/d.png", "/img/c.png", "/img/b.png"])
        self.finished(first, 1)

    def test_bad_property_values(self):
        for name, value in ((contract.Downloader.MaximumActiveDownloads, dbus.UInt32(0, variant_level=1)),
                            (contract.Downloader.MaximumActiveDownloads, dbus.UInt32(65, variant_level=1)),
                            ("DownloadPrioritization", dbus.String("random", variant_level=1))):
            self.expect_error(contract.DBusError.InvalidArgs, lambda: self.set_dprop(name, value))


class PriorityTests(DownloadTestCase):
    """Priorities across apps: a transfer runs at the highest priority of its live receipts."""

    def queue(self, tag, joiner):
        """One slot, held by a gated transfer; this app queues x (very-low), y, z (normal), then
        `joiner` asks for x at very-high. Returns this app's receipts and the joiner's."""
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(1, variant_level=1))
        D = contract.Downloader
        opts = lambda p: dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_PRIORITY: p}, signature="sv")
        blocker = self.downloader().DownloadImage(self.http.url("/flow/%s.png" % tag), opts(D.PRIORITY_NORMAL))[0]
        wait_until(lambda: self.http.count("/flow/%s" % tag) == 1, what="the blocker at the server")
        mine = [self.downloader().DownloadImage(self.http.url("/img/%s-%s.png" % (tag, n)), opts(p))[0]
                for n, p in (("x", D.PRIORITY_VERY_LOW), ("y", D.PRIORITY_NORMAL), ("z", D.PRIORITY_NORMAL))]
        theirs = joiner(self.http.url("/img/%s-x.png" % tag), opts(D.PRIORITY_VERY_HIGH))
        return blocker, mine, theirs

    def order(self, tag):
        """Releases the blocker; the order the server saw the queued images in."""
        self.http.gate("/flow/%s.png" % tag).set()
        wait_until(lambda: self.http.count("/img/%s-" % tag) == 3, what="three transfers")
        return [p.split("-")[1] for p in self.http.requests if p.startswith("/img/%s-" % tag)]

    def test_another_apps_very_high_request_lifts_a_very_low_transfer_over_the_queue(self):
        other = connect(self.bus)
        self.addCleanup(other.close)
        self.queue("lift", lambda url, o: self.downloader(other).DownloadImage(url, o)[0])
        self.assertEqual(self.order("lift"), ["x.png", "y.png", "z.png"])

    def test_it_drops_back_when_that_receipt_is_cancelled(self):
        other = connect(self.bus)
        self.addCleanup(other.close)
        _, _, theirs = self.queue("cancel", lambda url, o: self.downloader(other).DownloadImage(url, o)[0])
        self.assertTrue(self.downloader(other).CancelDownload(theirs))
        self.assertEqual(self.order("cancel"), ["y.png", "z.png", "x.png"])

    def test_it_drops_back_when_that_app_leaves_the_bus(self):
        other = connect(self.bus)
        name = other.get_unique_name()
        self.queue("leave", lambda url, o: self.downloader(other).DownloadImage(url, o)[0])
        other.close()
        bus = self.conn.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus", introspect=False)
        wait_until(lambda: not bus.NameHasOwner(name, dbus_interface="org.freedesktop.DBus"), what="the bus to see it leave")
        # The bus told the agent before it answered us; a call after that is handled after the departure.
        self.conn.get_object(NAME, PATH, introspect=False).Ping(dbus_interface="org.freedesktop.DBus.Peer")
        self.assertEqual(self.order("leave"), ["y.png", "z.png", "x.png"])

    def test_set_priority_moves_a_pending_receipt_and_checks_its_input(self):
        other = connect(self.bus)
        self.addCleanup(other.close)
        D = contract.Downloader
        blocker, mine, theirs = self.queue("set", lambda url, o: self.downloader(other).DownloadImage(url, o)[0])
        self.assertTrue(self.downloader(other).SetPriority(theirs, D.PRIORITY_VERY_LOW))
        self.assertTrue(self.downloader().SetPriority(mine[2], D.PRIORITY_HIGH))
        msg = self.expect_error(contract.DBusError.AccessDenied, lambda: self.downloader(other).SetPriority(mine[0], D.PRIORITY_HIGH))
        self.assertIn("may change the priority of it", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: self.downloader().SetPriority(mine[0], "urgent"))
        self.assertIn("very-low, low, normal, high, very-high", msg)
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.downloader().DownloadImage(
            self.http.url("/img/bad.png"), dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_PRIORITY: "urgent"}, signature="sv")))
        self.assertFalse(self.downloader().SetPriority("r999999", D.PRIORITY_HIGH))
        self.assertEqual(self.order("set"), ["z.png", "y.png", "x.png"])
        self.assertFalse(self.downloader().SetPriority(blocker, D.PRIORITY_HIGH), "finished")


@timed
class SystemConditionsTests(DownloadTestCase):
    """Stand-in NetworkManager and power-profiles-daemon (fake_system.py) on a second private bus
    that plays the system bus: on a metered connection or in power-saver, very-low work waits."""

    def setUp(self):
        self.system = PrivateBus()
        self.addCleanup(self.system.stop)
        self.services = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_system.py"), self.system.address,
                                          "--metered", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_services)
        self.assertEqual(self.services.stdout.readline().strip(), "ready")
        self.lines = []
        threading.Thread(target=lambda: [self.lines.append(line.strip()) for line in self.services.stdout], daemon=True).start()
        self.agent_args = DownloadTestCase.agent_args + ("--system-bus-address", self.system.address)
        super().setUp()

    def stop_services(self):
        self.services.stdin.close()
        self.services.kill()
        self.services.wait()

    def tell(self, line):
        """A command to the stand-ins; returns once it is done (its property change or signal sent)."""
        done = len([l for l in self.lines if l.startswith(("set ", "sent "))])
        self.services.stdin.write(line + "\n")
        self.services.stdin.flush()
        wait_until(lambda: len([l for l in self.lines if l.startswith(("set ", "sent "))]) > done, what="the stand-in to do " + line)

    def said(self, prefix):
        return [l for l in self.lines if l.startswith(prefix)]

    def deferred(self):
        d = self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, contract.Downloader.Deferred, dbus_interface=PROPS)
        return {str(k): (bool(v) if isinstance(v, dbus.Boolean) else int(v)) for k, v in d.items()}

    def ask(self, path, priority):
        opts = dbus.Dictionary({contract.Downloader.DOWNLOAD_IMAGE_OPTION_PRIORITY: priority}, signature="sv")
        return self.downloader().DownloadImage(self.http.url(path), opts)[0]

    def test_metered_holds_very_low_work_until_it_ends(self):
        D = contract.Downloader
        wait_until(lambda: self.deferred() == {D.DEFERRED_KEY_METERED: True, D.DEFERRED_KEY_HELD: 0, D.DEFERRED_KEY_PREFETCH: 0},
                   what="the agent to read Metered at start")
        self.ask("/img/low.png", D.PRIORITY_VERY_LOW)
        self.ask("/img/normal.png", D.PRIORITY_NORMAL)
        wait_until(lambda: self.http.count("/img/normal") == 1 and self.active() == 0, what="the normal image")
        self.assertEqual(self.http.count("/img/low"), 0, "with a slot free all along, the very-low image waited")
        self.assertEqual(self.deferred(), {D.DEFERRED_KEY_METERED: True, D.DEFERRED_KEY_HELD: 1, D.DEFERRED_KEY_PREFETCH: 0})
        self.tell("metered 4")  # guessed no
        wait_until(lambda: self.http.count("/img/low") == 1, what="the held image once the connection is not metered")
        self.assertEqual(self.deferred(), {})
        self.tell("metered 3")  # guessed yes: a phone's hotspot
        wait_until(lambda: self.deferred() == {D.DEFERRED_KEY_METERED: True, D.DEFERRED_KEY_HELD: 0, D.DEFERRED_KEY_PREFETCH: 0},
                   what="metered again")

    def test_metered_holds_prefetch_until_it_ends(self):
        D = contract.Downloader
        wait_until(lambda: self.deferred().get(D.DEFERRED_KEY_METERED), what="the agent to read Metered at start")
        p = self.observe("prefetch_client.py")
        p.proc.stdin.write("prefetch %s %s\n" % (self.http.url("/fresh/pre1.png"), self.http.url("/fresh/pre2.png")))
        p.proc.stdin.flush()
        wait_until(lambda: self.events(p, "prefetching"), what="the prefetch receipt")
        c = self.client(self.http.url("/img/normal.png"))
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.assertEqual(self.http.count("/fresh/pre"), 0, "with every slot free, the prefetch waited")
        self.assertEqual(self.deferred(), {D.DEFERRED_KEY_METERED: True, D.DEFERRED_KEY_HELD: 0, D.DEFERRED_KEY_PREFETCH: 2})
        self.tell("metered 2")  # no
        [done] = wait_until(lambda: self.events(p, "prefetch-finished"), what="the prefetch once the connection is not metered")
        self.assertEqual((done["stored"], done["failed"]), (2, 0))
        self.assertEqual(self.http.count("/fresh/pre"), 2)

    def test_power_saver_holds_it_a_higher_receipt_lifts_it_and_the_settings_opt_out(self):
        D = contract.Downloader
        self.tell("metered 2")
        self.tell("profile power-saver")
        wait_until(lambda: self.deferred() == {D.DEFERRED_KEY_POWER_SAVER: True, D.DEFERRED_KEY_HELD: 0, D.DEFERRED_KEY_PREFETCH: 0},
                   what="power-saver")
        self.ask("/img/lifted.png", D.PRIORITY_VERY_LOW)
        self.ask("/img/opt-out.png", D.PRIORITY_VERY_LOW)
        self.assertEqual(self.deferred()[D.DEFERRED_KEY_HELD], 2)
        other = connect(self.bus)
        self.addCleanup(other.close)
        opts = dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_PRIORITY: D.PRIORITY_NORMAL}, signature="sv")
        self.downloader(other).DownloadImage(self.http.url("/img/lifted.png"), opts)
        wait_until(lambda: self.http.count("/img/lifted") == 1, what="the image another app wants at normal")
        self.assertEqual(self.http.count("/img/opt-out"), 0)
        config = os.path.join(self.bus.config_home, "netactivity", "netactivityd.conf")
        os.makedirs(os.path.dirname(config), exist_ok=True)
        with open(config, "w") as f:
            f.write("defer-in-power-saver = false\n")
        self.agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.http.count("/img/opt-out") == 1, what="the opt-out to release it")
        self.assertEqual(self.deferred(), {})

    def test_sleep_stops_transfers_lets_the_inhibitor_go_at_once_and_waking_starts_them_again(self):
        self.ask("/gate/sleepy.png", contract.Downloader.PRIORITY_NORMAL)
        wait_until(lambda: self.http.count("/gate/sleepy") == 1, what="the transfer at the server")
        wait_until(lambda: self.said("inhibit sleep delay"), what="a delay inhibitor while it runs")
        self.tell("sleep")
        released = wait_until(lambda: self.said("released "), what="the inhibitor let go")
        # Measured in the fake logind, from its signal to its read of the hang-up: its own scheduling
        # and the bus's are in it, so the bound tells "at once" from "when the transfer ends" (it is
        # held at the server) or logind's delay (5 s), not milliseconds.
        self.assertLess(int(released[0].split()[1]), 1000, "the inhibitor closed at once on PrepareForSleep(true)")
        wait_until(lambda: self.active() == 0, what="the transfer stopped")
        props = self.conn.get_object(NAME, PATH, introspect=False).GetAll(DOWNLOADER, dbus_interface=PROPS)
        self.assertEqual(int(props[contract.Downloader.QueuedDownloads]), 1, "it waits in the queue, not failed")
        self.ask("/img/asleep.png", contract.Downloader.PRIORITY_VERY_HIGH)
        props = self.conn.get_object(NAME, PATH, introspect=False).GetAll(DOWNLOADER, dbus_interface=PROPS)
        self.assertEqual((int(props[contract.Downloader.ActiveDownloads]), int(props[contract.Downloader.QueuedDownloads])), (0, 2),
                         "nothing starts while the system sleeps, even at very-high")
        self.tell("wake")
        wait_until(lambda: self.http.count("/gate/sleepy") == 2, what="the stopped transfer to start again")
        self.http.gate("/gate/sleepy.png").set()
        wait_until(lambda: self.http.count("/img/asleep") == 1 and self.active() == 0, what="both images")
        wait_until(lambda: len(self.said("inhibit sleep delay")) == 2 and len(self.said("released ")) == 2,
                   what="the inhibitor taken again while they ran, and let go after")

    def sleep_mid_body(self, path, received, asleep=lambda: None):
        """Asks for path from a client of its own, sends the system to sleep once the agent holds `received` bytes
        of it (the server holds the second half), calls asleep, and wakes the system; returns the client."""
        c = self.client(self.http.url(path))
        [asked] = wait_until(lambda: self.events(c, "requested"), what="the receipt")
        task = self.conn.get_object(NAME, asked["task"], introspect=False)
        wait_until(lambda: int(task.Get(contract.Task.INTERFACE, contract.Task.CountOfBytesReceived, dbus_interface=PROPS))
                   >= received, what="%d bytes at the agent" % received)
        self.tell("sleep")
        wait_until(lambda: self.active() == 0, what="the transfer stopped")
        asleep()
        self.tell("wake")
        return c

    def test_waking_continues_a_large_body_with_a_range_request_and_the_bytes_match(self):
        path = "/ranged/big.png"
        c = self.sleep_mid_body(path, 4 << 20)
        self.assertTrue(self.finished(c, 1, timeout=30)[0]["ok"])
        [(_, wanted, validator)] = self.http.ranges
        self.assertEqual(validator, '"r1"', "If-Range: the ETag of the first answer")
        start = int(wanted[len("bytes="):-1])
        body = self.http.bodies[path]
        self.assertEqual(len(body), (16 << 20) + len(png()) + 12)
        self.assertTrue(4 << 20 <= start <= len(body) // 2, "it went on from the %d bytes it had, not from zero" % start)
        self.assertEqual(self.open_image(self.http.url(path))[0], body, "the bytes before and after the sleep are the body")
        self.assertEqual(self.http.count(path), 2, "one whole request, one for the rest")

    def test_a_redirected_body_continues_at_its_new_place(self):
        path = "/ranged/moved.png"
        c = self.sleep_mid_body("/redirect-to" + path, 4 << 20)
        self.assertTrue(self.finished(c, 1, timeout=30)[0]["ok"])
        [(asked, _, validator)] = self.http.ranges
        self.assertEqual((asked, validator), (path, '"r1"'), "the rest is asked of where the redirect leads")
        self.assertEqual(self.open_image(self.http.url("/redirect-to" + path))[0], self.http.bodies[path])
        self.assertEqual(self.http.count(path), 2, "one whole request, one for the rest")

    def test_a_body_changed_during_the_sleep_comes_whole_and_a_weak_etag_asks_for_no_range(self):
        changed = "/ranged/changed-small.png"
        c = self.sleep_mid_body(changed, 256 << 10)
        self.assertTrue(self.finished(c, 1, timeout=30)[0]["ok"])
        [(asked, _, validator)] = self.http.ranges
        self.assertEqual((asked, validator), (changed, '"r1"'))
        self.assertEqual(self.open_image(self.http.url(changed))[0], self.http.bodies[changed],
                         "If-Range did not hold: the new body whole, never its tail after the old head")
        weak = "/ranged/weak-small.png"
        # Its second request is a whole one: the gate is open by then.
        c = self.sleep_mid_body(weak, 256 << 10, asleep=self.http.gate(weak).set)
        self.assertTrue(self.finished(c, 1, timeout=30)[0]["ok"])
        self.assertEqual(len(self.http.ranges), 1, "a weak ETag may not be sent in If-Range: the whole body again")
        self.assertEqual(self.http.count(weak), 2)
        self.assertEqual(self.open_image(self.http.url(weak))[0], self.http.bodies[weak])

    def test_a_206_that_is_not_the_rest_fails_and_the_next_request_starts_over(self):
        lying = "/ranged/lying-small.png"
        c = self.sleep_mid_body(lying, 256 << 10, asleep=self.http.gate(lying).set)
        [done] = self.finished(c, 1, timeout=30)
        self.assertEqual((done["ok"], done["error_name"]), (False, contract.Error.HTTP))
        self.assertIn("range other than the rest asked for: bytes from 0 when", done["error_message"])
        self.assertTrue(self.finished(self.client(self.http.url(lying)), 1)[0]["ok"], "asked again: a whole request")
        self.assertEqual(len(self.http.ranges), 1)
        self.assertEqual(self.open_image(self.http.url(lying))[0], self.http.bodies[lying])

    def test_offline_fails_transfers_at_once_and_serves_what_the_disk_holds(self):
        D = contract.Downloader
        self.tell("metered 2")
        kept = self.client(self.http.url("/etag/kept.png"))
        self.finished(kept, 1)
        self.disk_entries(1)
        cut = self.client(self.http.url("/gate/cut.png"))
        wait_until(lambda: self.http.count("/gate/cut") == 1, what="a transfer under way")
        started = time.monotonic()
        self.tell("state 20")
        done = self.finished(cut, 1)
        self.assertLess(time.monotonic() - started, 5, "at once, not at the 30 s stall timeout")
        self.assertEqual(done[0]["error_name"], contract.Error.Offline, done)
        never = self.client(self.http.url("/img/never.png"))
        self.assertEqual(self.finished(never, 1)[0]["error_name"], contract.Error.Offline)
        self.assertEqual(self.http.count("/img/never"), 0, "no request to a network that is not there")
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), contract.ImageCache.INTERFACE)
        cache.RemoveAllImages()
        fd, size, info = self.downloader().FetchImage(self.http.url("/etag/kept.png"), dbus.Dictionary({}, signature="sv"))
        os.close(fd.take())
        self.assertEqual(str(info[D.FETCH_IMAGE_INFO_SOURCE]), D.FETCH_IMAGE_SOURCE_DISK, "the disk's copy, offline")
        self.assertEqual(self.http.count("/etag/kept"), 1, "a stale copy, not revalidated: there is no network")
        self.tell("state 70")
        back = self.client(self.http.url("/img/never.png"))
        self.assertTrue(self.finished(back, 1)[0]["ok"], "connected again, downloads work")

    def test_a_service_that_leaves_holds_nothing(self):
        D = contract.Downloader
        wait_until(lambda: self.deferred().get(D.DEFERRED_KEY_METERED), what="metered at start")
        self.ask("/img/left.png", D.PRIORITY_VERY_LOW)
        self.stop_services()
        wait_until(lambda: self.http.count("/img/left") == 1, what="the held image once NetworkManager is gone")
        self.assertEqual(self.deferred(), {})


class CancelTests(DownloadTestCase):
    def test_cancel_is_per_receipt_owner_only_and_stops_the_transfer(self):
        url = self.http.url("/gate/c.png")
        mine = self.downloader().DownloadImage(url, dbus.Dictionary({}, signature="sv"))[0]
        other_conn = connect(self.bus)
        self.addCleanup(other_conn.close)
        theirs = self.downloader(other_conn).DownloadImage(url, dbus.Dictionary({}, signature="sv"))[0]
        msg = self.expect_error(contract.DBusError.AccessDenied, lambda: self.downloader(other_conn).CancelDownload(mine))
        self.assertIn(other_conn.get_unique_name(), msg)
        self.assertTrue(self.downloader().CancelDownload(mine))
        self.assertFalse(self.downloader().CancelDownload(mine))
        self.assertEqual(self.active(), 1, "theirs goes on")
        self.assertTrue(self.downloader(other_conn).CancelDownload(theirs))
        wait_until(lambda: self.active() == 0, what="the transfer to stop")
        self.assertFalse(self.downloader().CancelDownload("no-such-receipt"))

    def test_a_panel_cancels_a_download_for_everyone_waiting_for_it(self):
        url = self.http.url("/gate/panel.png")
        a, b = self.client(url), self.client(url)
        task = wait_until(lambda: self.events(a, "requested"), what="the first request")[0]["task"]
        wait_until(lambda: self.events(b, "requested") and self.active() == 1, what="one transfer for both")
        self.assertEqual(self.events(b, "requested")[0]["task"], task)
        obj = self.conn.get_object(NAME, task, introspect=False)
        get = lambda name: obj.Get(contract.Task.INTERFACE, name, dbus_interface=PROPS)
        self.assertEqual((get(contract.Task.Cancellable), get(contract.Task.Suspendable)), (True, False))
        r = busctl(self.bus, "call", NAME, task, contract.Task.INTERFACE, "RequestSuspend", "b", "true")
        self.assertIn("not begun suspendable", r.stderr)
        r = busctl(self.bus, "call", NAME, task, contract.Task.INTERFACE, "RequestCancel")
        self.assertEqual(r.returncode, 0, r.stderr)
        for c in (a, b):
            done = self.finished(c, 1)[0]
            self.assertEqual((done["ok"], done["error_name"]), (False, contract.ERROR_PREFIX + "Cancelled"))
        wait_until(lambda: self.active() == 0, what="the transfer to stop")
        wait_until(lambda: get("State") == contract.Task.STATE_COMPLETED, what="the task to complete")
        self.assertEqual(get("Error"), contract.ERROR_PREFIX + "Cancelled")

    def test_a_client_leaving_cancels_its_receipts(self):
        c = self.client(self.http.url("/gate/left.png"))
        wait_until(lambda: self.http.count("/gate/left") == 1, what="the transfer")
        c.close()
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="the download to stop with its client")

    def test_indicator_is_visible_during_a_slow_download(self):
        indicator = self.observe()
        c = self.client(self.http.url("/slow.png"))
        wait_until(lambda: [v for v, _ in indicator.visible() if v], what="Visible true")
        # The client's own line may be read after the observer's: waited for, not taken at once.
        task = wait_until(lambda: self.events(c, "requested"), what="the client's receipt")[0]["task"]
        obj = self.conn.get_object(NAME, task, introspect=False)
        T = contract.Task
        wait_until(lambda: int(obj.Get(T.INTERFACE, T.CountOfBytesReceived, dbus_interface=PROPS)) > 0,
                   what="byte progress on the task")
        self.assertEqual(obj.Get(T.INTERFACE, T.State, dbus_interface=PROPS), T.STATE_RUNNING)
        self.finished(c, 1)
        wait_until(lambda: [v for v, _ in indicator.visible() if not v], what="Visible false")


class ErrorTests(DownloadTestCase):
    def test_clear_errors(self):
        self.conn.get_object(NAME, PATH, introspect=False).Set(CACHE, "PreferredMemoryUsageAfterPurge",
                                                                dbus.UInt64(1 << 20, variant_level=1), dbus_interface=PROPS)
        self.conn.get_object(NAME, PATH, introspect=False).Set(CACHE, "MemoryCapacity",
                                                                dbus.UInt64(2 << 20, variant_level=1), dbus_interface=PROPS)
        cases = {"/missing.png": "HTTP", "/text": "NotAnImage", "/loop": "HTTP", "/big.png": "TooLarge"}
        c = self.client(*[self.http.url(p) for p in cases], self.http.url("/redirect"))
        done = {e["url"]: e for e in self.finished(c, 5)}
        for path, name in cases.items():
            e = done[self.http.url(path)]
            self.assertEqual((e["ok"], e["error_name"]), (False, ERR + name), e)
            self.assertTrue(e["error_message"])
        self.assertTrue(done[self.http.url("/redirect")]["ok"], "a redirect is followed")
        for url in ("ftp://example.com/a.png", "file:///etc/passwd", "http://", "http://exa mple.com/", "not a url"):
            self.expect_error(ERR + "InvalidURL", lambda: self.downloader().DownloadImage(url, dbus.Dictionary({}, signature="sv")))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.downloader().DownloadImage(
            self.http.url("/img/x.png"), dbus.Dictionary({"reload": dbus.String("yes")}, signature="sv")))
        self.assertTrue(self.agent.alive())


class FetchCLITests(DownloadTestCase):
    def test_fetch_writes_the_image_and_reports_errors(self):
        import os
        import pty
        import subprocess
        import tempfile
        from harness import BIN, cli
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "a.png")
            r = cli(self.bus, "fetch", self.http.url("/img/a.png"), "-o", out)
            self.assertEqual((r.returncode, r.stderr), (0, ""), "no progress bar when stderr is not a terminal")
            with open(out, "rb") as f:
                self.assertEqual(f.read(), png())
        r = subprocess.run([os.path.join(BIN, "netactivity"), "fetch", self.http.url("/img/a.png")], env=self.bus.env(),
                           capture_output=True, timeout=20)
        self.assertEqual(r.stdout, png(), "cached now, written to stdout")
        self.assertEqual(self.http.count("/img/a.png"), 1)
        r = cli(self.bus, "fetch", self.http.url("/missing.png"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("HTTP 404", r.stderr)
        r = cli(self.bus, "fetch", "ftp://example.com/x.png")
        self.assertEqual(r.returncode, 1)
        self.assertIn("InvalidURL", r.stderr)
        # On a terminal, a progress bar.
        master, slave = pty.openpty()
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "fetch", self.http.url("/slow.png"), "-o", os.devnull],
                             env=self.bus.env(), stderr=slave, stdout=subprocess.DEVNULL)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        self.assertEqual(p.wait(20), 0)
        self.assertIn(b"%", seen)
        self.assertIn(b"100%", seen)
        self.assertIn(b"[####", seen)


class ExampleTests(DownloadTestCase):
    def test_the_example_tracks_requests_and_fills_slots(self):
        import os
        import subprocess
        # An app package of its own (Examples/netactivity-example), built by `make example`.
        here = os.path.dirname(os.path.abspath(__file__))
        example = os.environ.get("NETACTIVITY_EXAMPLE") or os.path.join(
            here, "..", "..", ".build", "debug", "netactivity-example")
        if not os.environ.get("NETACTIVITY_EXAMPLE") and not os.path.exists(example):
            self.skipTest("the example app is not built (make example)")
        urls = [self.http.url("/img/one.png"), self.http.url("/img/two.png"), self.http.url("/nothing.png")]
        observer = self.observe("task_observer.py")  # every task the example makes, as it happens
        r = subprocess.run([example] + urls, env=self.bus.env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("GET %s: 200, %d bytes" % (urls[0], len(png())), out)
        self.assertIn("GET %s: 404" % urls[2], out)
        self.assertIn("slot 0: %s from the downloader" % urls[0], out)
        self.assertIn("slot 2: %s failed" % urls[2], out)
        # The agent's count as the library's status() gives it: an answer within 200 ms, else the
        # status the library mirrors (it never waits), which a loaded agent may leave a change
        # behind. What the example released is checked where it happened, below: every task it
        # made completed.
        self.assertRegex(out, r"done; the agent holds \d+ activity")
        self.assertIn("progress bar: 100 %", out, "the main-actor window's progress binding")
        # What a panel saw: one task per tracked GET, the 404 completed with its status.
        def seen():
            events = observer.snapshot()
            added = {e["props"].get("Description"): e["path"] for e in events if e["signal"] == "InterfacesAdded"}
            errors = {e["path"]: e["changed"]["Error"] for e in events
                      if e["signal"] == "PropertiesChanged" and "Error" in e["changed"]}
            return added, errors
        wait_until(lambda: len(seen()[0]) >= 3 and seen()[1], what="the example's tasks")
        added, errors = seen()
        for url in urls:
            self.assertIn("GET " + url, added)
        wait_until(lambda: seen()[1].get(added["GET " + urls[2]]), what="the 404's completion")
        self.assertEqual(seen()[1].get(added["GET " + urls[2]]), "HTTP 404 Not Found")

        def completed():
            return {e["path"] for e in observer.snapshot()
                    if e["signal"] == "PropertiesChanged" and e["changed"].get(contract.Task.State) == contract.Task.STATE_COMPLETED}
        mine = {path for description, path in seen()[0].items() if not description.startswith("Download ")}
        self.assertIn("unpack the images", seen()[0])
        wait_until(lambda: mine <= completed(), what="every task the example made completed")
        # Run again: the slots answer from the shared cache and download nothing.
        before = self.http.count("/img/one.png")
        r = subprocess.run([example] + urls[:2], env=self.bus.env(), capture_output=True, text=True, timeout=60)
        self.assertIn("slot 0: %s from the cache" % urls[0], r.stdout)
        self.assertEqual(self.http.count("/img/one.png"), before + 1, "only the tracked GET went out")


class GLibMainActorTests(DownloadTestCase):
    def test_main_actor_work_runs_inside_a_glib_main_loop(self):
        import os
        import subprocess
        # The example package's glib-main-actor: its main thread runs g_main_loop_run, not Swift's
        # async main; NetActivity.runMainActorOnGLibMainContext() makes main-actor work run there.
        example = os.environ.get("NETACTIVITY_EXAMPLE")
        probe = os.path.join(os.path.dirname(example), "glib-main-actor") if example else os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", ".build", "debug", "glib-main-actor")
        if not example and not os.path.exists(probe):
            self.skipTest("the example package is not built (make example)")
        r = subprocess.run([probe], env=self.bus.env(), capture_output=True, text=True, timeout=30)
        if r.returncode == 77:
            self.skipTest(r.stdout.strip())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("main actor on GLib: 100 jobs, in order: true, off the main thread: 0, outside the loop: 0, "
                      "binding on the loop: true", r.stdout)
        self.assertIn("the GLib loop returned", r.stdout)


class DiskTierTests(DownloadTestCase):
    def cache_dir(self):
        import os
        return os.path.join(self.bus.cache_home, "netactivity")

    def restart(self):
        from harness import Agent
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)

    def fetch(self, path):
        c = self.client(self.http.url(path))
        return self.finished(c, 1)[0]

    def test_a_restart_serves_from_disk_with_a_304_and_no_full_download(self):
        import os
        import stat
        self.assertTrue(self.fetch("/etag/a.png")["ok"])
        self.assertTrue(self.fetch("/fresh/b.png")["ok"])
        self.assertTrue(self.fetch("/nostore/c.png")["ok"])
        files = self.disk_entries(2)  # no-store is not kept
        self.assertEqual(stat.S_IMODE(os.stat(self.cache_dir()).st_mode), 0o700)
        for f in files:
            self.assertRegex(f, "^[0-9a-f]{64}$")
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.cache_dir(), f)).st_mode), 0o600)
        usage = int(self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, contract.Downloader.DiskUsage, dbus_interface=PROPS))
        self.assertEqual(usage, sum(os.path.getsize(os.path.join(self.cache_dir(), f)) for f in files))
        self.restart()
        self.assertTrue(self.fetch("/etag/a.png")["ok"])
        self.assertTrue(self.fetch("/fresh/b.png")["ok"])
        self.assertTrue(self.fetch("/nostore/c.png")["ok"])
        self.assertEqual(self.http.revalidated, ["/etag/a.png"], "the stale entry was revalidated")
        self.assertEqual(self.http.full.count("/etag/a.png"), 1, "and not downloaded again")
        self.assertEqual(self.http.full.count("/fresh/b.png"), 1, "a fresh entry needs no request at all")
        self.assertEqual(self.http.full.count("/nostore/c.png"), 2)
        found, data = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE).LookupImageForRequest(
            self.http.url("/etag/a.png"), "", byte_arrays=True)
        self.assertEqual((bool(found), bytes(data)), (True, png()))

    def test_a_damaged_entry_is_dropped_never_served(self):
        import os
        self.assertTrue(self.fetch("/fresh/d.png")["ok"])
        [name] = self.disk_entries(1)
        path = os.path.join(self.cache_dir(), name)
        with open(path, "r+b") as f:
            f.seek(60)
            byte = f.read(1)
            f.seek(60)
            f.write(bytes([byte[0] ^ 0xFF]))
        self.restart()
        self.assertTrue(self.fetch("/fresh/d.png")["ok"])
        self.assertEqual(self.http.full.count("/fresh/d.png"), 2, "downloaded again instead of served damaged")
        self.assertEqual(self.disk_entries(1), [name], "and written again")
        with open(path, "rb") as f:
            self.assertNotEqual(f.read()[60], byte[0] ^ 0xFF, "and the entry was rewritten")

    def test_disk_capacity_is_enforced_at_write_time(self):
        import os
        self.assertTrue(self.fetch("/fresh/first.png")["ok"])
        size = os.path.getsize(os.path.join(self.cache_dir(), self.disk_entries(1)[0]))
        self.set_dprop(contract.Downloader.DiskCapacity, dbus.UInt64(2 * size + 10, variant_level=1))
        for i in range(4):
            self.assertTrue(self.fetch("/fresh/n%d.png" % i)["ok"])
        last = hashlib.sha256(self.http.url("/fresh/n3.png").encode()).hexdigest()
        wait_until(lambda: os.path.exists(os.path.join(self.cache_dir(), last)), what="the last entry written")
        self.assertEqual(len(self.disk_entries(2)), 2)
        usage = int(self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, contract.Downloader.DiskUsage, dbus_interface=PROPS))
        self.assertLessEqual(usage, 2 * size + 10)
