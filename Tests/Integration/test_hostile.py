# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Hostile clients (issue "No app can harm another"): each test plays one fault an app could
commit against the others through the agent, and asserts the fixed behaviour. Where the fault was
a freeze, a separate prober's Peer.Ping round trips must stay under 50 ms throughout."""
import fcntl
import gzip
import hashlib
import json
import os
import subprocess
import sys
import threading
import time

import dbus

import contract
from harness import BIN, CHILD_PRELUDE, IFACE, NAME, PATH, PROPS, Agent, PrivateBus, cli, connect, image_adder, png, timed, wait_until
from test_agent import AgentTestCase, Observer
from test_downloads import DownloadTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = contract.ImageCache.INTERFACE
DOWNLOADER = contract.Downloader.INTERFACE
TASK = contract.Task.INTERFACE
STALL_MS = 50


class Prober:
    """prober.py in a process of its own: Peer.Ping back to back until stopped."""

    def __init__(self, bus):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "prober.py"), bus.address],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        self.proc.stdin.close()
        report = json.loads(self.proc.stdout.read().strip().splitlines()[-1])
        self.proc.wait(10)
        return report


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


class HostileServer:
    """Routes for hostile downloads on top of the tests' ImageServer."""

    @staticmethod
    def install(http):
        base = http.serve
        http.encodings = []
        http.held = []

        def serve(h):
            path = h.path.split("?")[0]
            if path == "/bomb.png":
                with http.lock:
                    http.encodings.append(h.headers.get("Accept-Encoding"))
                http.send(h, 200, HostileServer.bomb(), extra=[("Content-Encoding", "gzip")])
            elif path.startswith("/flip/"):
                # The first request for the path answers 200 when its gate opens, later ones 500.
                with http.lock:
                    n = http.requests.count(h.path)
                http.gate(path + "#%d" % n).wait(20)
                if n == 1:
                    http.send(h, 200, png())
                else:
                    http.send(h, 500, b"overloaded", "text/plain")
            elif path == "/excess.png":
                # Content-Length covers one image; a whole forged response follows it on the wire.
                body = bytes(png())
                forged = bytes(png(width=99, height=99))
                h.send_response(200)
                h.send_header("Content-Type", "image/png")
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body + b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: "
                              + str(len(forged)).encode() + b"\r\n\r\n" + forged)
                h.wfile.flush()
            elif path.startswith("/held/"):
                # /held/SIZE/HOLD/NAME.png: SIZE bytes framed, HOLD of them sent, the rest when the gate opens.
                size, hold = (int(x) for x in path.split("/")[2:4])
                body = bytes(png()) + bytes(size - len(png()))
                h.send_response(200)
                h.send_header("Content-Type", "image/png")
                h.send_header("Content-Length", str(size))
                h.end_headers()
                for i in range(0, hold, 1 << 16):
                    h.wfile.write(body[i:min(hold, i + (1 << 16))])
                with http.lock:
                    http.held.append(path)
                http.gate(path).wait(30)
                h.wfile.write(body[hold:])
                h.wfile.flush()
            elif path.startswith("/sized/"):
                n = int(path.split("/")[2].split(".")[0])
                body = bytes(png())
                http.send(h, 200, body + bytes(n - len(body)))
            else:
                h.path = path
                base(h)

        http.serve = serve

    _bomb = None

    @classmethod
    def bomb(cls):
        """A gzip body of about 64 KiB that inflates to a 64 MiB "PNG"."""
        if cls._bomb is None:
            cls._bomb = gzip.compress(bytes(png()) + bytes(64 * 1024 * 1024), compresslevel=6)
        return cls._bomb


@timed
class LeaseWriterTests(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "0")

    def test_a_holder_writing_into_its_lease_never_wakes_the_agent(self):
        agent = dbus.Interface(self.conn.get_object(NAME, PATH), IFACE)
        fd = agent.BeginActivity("hostile").take()
        self.assertEqual(self.count(), 1)
        prober = Prober(self.bus)
        pid = self.agent.proc.pid
        before = cpu_ticks(pid)
        stop = time.monotonic() + 2.0
        written = 0

        def write():
            nonlocal written
            os.set_blocking(fd, False)
            while time.monotonic() < stop:
                try:
                    written += os.write(fd, b"x" * 64)
                except BlockingIOError:
                    time.sleep(0.001)

        t = threading.Thread(target=write)
        t.start()
        t.join()
        used = cpu_ticks(pid) - before
        report = prober.stop()
        self.assertGreater(written, 0)
        # Reading what a holder writes cost 96 % of a core; the lease is watched for hang-up only.
        self.assertLess(used, 20, "the agent used %d ticks in 2 s while a holder wrote %d bytes" % (used, written))
        self.assertLess(report["max_ms"], STALL_MS, report)
        self.assertEqual(self.count(), 1, "writing does not end the lease")
        os.close(fd)
        wait_until(lambda: self.count() == 0, what="the lease ended with its last fd")


@timed
class HostileDownloadTests(DownloadTestCase):
    def setUp(self):
        super().setUp()
        HostileServer.install(self.http)

    def fetch(self, url, conn=None):
        c = self.client(url)
        return self.finished(c, 1, timeout=30)[0]

    def cache_dir(self):
        return os.path.join(self.bus.cache_home, "netactivity")

    def test_a_gzip_bomb_is_never_decoded(self):
        # What the first download loads once (libcurl, the proxy resolver) is not the bomb's.
        self.assertTrue(self.fetch(self.http.url("/img/warm.png"))["ok"])
        prober = Prober(self.bus)
        rss = lambda: int(open("/proc/%d/status" % self.agent.proc.pid).read().split("VmRSS:")[1].split()[0])
        before = rss()
        done = self.fetch(self.http.url("/bomb.png"))
        report = prober.stop()
        self.assertFalse(done["ok"])
        self.assertEqual(done["error_name"], contract.ERROR_PREFIX + "NotAnImage")
        self.assertEqual(self.http.encodings, ["identity"], "the agent asks for identity encoding only")
        self.assertLess(rss() - before, 16 * 1024, "64 MiB of zeros were never inflated in the agent")
        self.assertLess(report["max_ms"], STALL_MS, report)
        self.assertEqual(os.listdir(self.cache_dir()) if os.path.isdir(self.cache_dir()) else [], [])

    def test_what_the_downloader_accepts_lookup_delivers(self):
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        self.conn.get_object(NAME, PATH, introspect=False).Set(
            CACHE, "MemoryCapacity", dbus.UInt64(512 << 20, variant_level=1), dbus_interface=PROPS)
        too_big = self.fetch(self.http.url("/sized/%d.png" % ((64 << 20) + 1)))
        self.assertEqual(too_big["error_name"], contract.ERROR_PREFIX + "TooLarge", too_big)
        url = self.http.url("/sized/%d.png" % ((64 << 20) - 4096))
        self.assertTrue(self.fetch(url)["ok"])
        fd, size = cache.OpenImageForRequest(url, "", timeout=60)
        fd = fd.take()
        self.addCleanup(os.close, fd)
        self.assertEqual(size, (64 << 20) - 4096, "the largest download comes back through OpenImage")
        self.assertEqual(os.fstat(fd).st_size, size)
        # ... and never inline: LookupImage names the fd path.
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            cache.LookupImageForRequest(url, "", byte_arrays=True)
        self.assertEqual(cm.exception.get_dbus_name(), contract.ERROR_PREFIX + "TooLarge")
        self.assertIn("OpenImage", cm.exception.get_dbus_message())

    def test_a_fifo_in_place_of_a_cache_entry_or_its_temporary_never_blocks(self):
        url = self.http.url("/fresh/fifo.png")
        self.assertTrue(self.fetch(url)["ok"])
        [name] = self.disk_entries(1)
        entry = os.path.join(self.cache_dir(), name)
        os.unlink(entry)
        os.mkfifo(entry, 0o600)
        os.mkfifo(os.path.join(self.cache_dir(), "tmp-" + name), 0o600)
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        cache.RemoveAllImages()
        prober = Prober(self.bus)
        done = self.fetch(url)
        report = prober.stop()
        self.assertTrue(done["ok"], done)
        self.assertLess(report["max_ms"], STALL_MS, report)
        self.assertEqual(self.http.full.count("/fresh/fifo.png"), 2, "the FIFO was not served: downloaded again")
        import stat
        wait_until(lambda: os.path.lexists(entry) and stat.S_ISREG(os.lstat(entry).st_mode),
                   what="a regular entry in place of the FIFO")

    def test_published_urls_carry_no_userinfo_or_query(self):
        port = self.http.port
        secret_ok = "http://alice:hunter2@127.0.0.1:%d/img/a.png?access_token=SECRET1" % port
        secret_bad = "http://bob:pw@127.0.0.1:%d/missing.png?access_token=SECRET2#frag" % port
        seen = []
        for url in (secret_ok, secret_bad):
            c = self.client(url)
            [req] = wait_until(lambda: self.events(c, "requested"), what="a receipt")
            self.finished(c, 1)
            props = self.conn.get_object(NAME, req["task"], introspect=False).GetAll(TASK, dbus_interface=PROPS)
            seen.append((str(props["Description"]), str(props["Error"])))
        self.assertEqual(seen[0], ("Download http://127.0.0.1:%d/img/a.png" % port, ""))
        self.assertEqual(seen[1][0], "Download http://127.0.0.1:%d/missing.png" % port)
        self.assertIn("HTTP 404 for http://127.0.0.1:%d/missing.png" % port, seen[1][1])
        listing = cli(self.bus, "tasks", "--json").stdout + cli(self.bus, "tasks").stdout
        for secret in ("hunter2", "alice", "SECRET1", "SECRET2", "bob:pw", "frag"):
            self.assertNotIn(secret, listing)
            self.assertNotIn(secret, repr(seen))

    def test_another_apps_reload_never_fails_a_completed_plain_download(self):
        url = self.http.url("/flip/shared.png")
        a = self.client(url)
        wait_until(lambda: self.http.count("/flip/") == 1, what="app A's request at the server")
        conn = connect(self.bus)
        self.addCleanup(conn.close)
        downloader = dbus.Interface(conn.get_object(NAME, PATH, introspect=False), DOWNLOADER)
        listener = self.client("--listen")
        downloader.DownloadImage(url, dbus.Dictionary({"reload": True}, signature="sv"))
        wait_until(lambda: self.http.count("/flip/") == 2, what="app B's reload at the server")
        self.http.gate("/flip/shared.png#1").set()
        done = self.finished(a, 1)[0]
        self.assertTrue(done["ok"], "app A got its 200: %s" % done)
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        found, data = cache.LookupImageForRequest(url, "", byte_arrays=True)
        self.assertEqual((bool(found), bytes(data)), (True, bytes(png())))
        self.http.gate("/flip/shared.png#2").set()
        wait_until(lambda: int(self.conn.get_object(NAME, PATH, introspect=False).Get(
            DOWNLOADER, "ActiveDownloads", dbus_interface=PROPS)) == 0, what="the reload ended")
        self.assertEqual(len(self.events(a, "finished")), 1, "app A heard once, and only its success")
        self.assertTrue(cache.LookupImageForRequest(url, "", byte_arrays=True)[0], "the failed reload removed nothing")
        self.assertEqual(self.events(listener, "finished"), [], "bystanders hear nothing")

    def test_bytes_another_app_planted_under_a_url_are_never_served_as_that_url(self):
        url = self.http.url("/img/victim.png")
        planted = bytes(png(width=66, height=66))
        attacker = connect(self.bus)
        self.addCleanup(attacker.close)
        cache = dbus.Interface(attacker.get_object(NAME, PATH, introspect=False), CACHE)
        cache.AddImageForRequest(url, "", dbus.ByteArray(planted))
        mine = dbus.Interface(attacker.get_object(NAME, PATH, introspect=False), DOWNLOADER)
        self.assertEqual(mine.DownloadImage(url, dbus.Dictionary({}, signature="sv")), ("", "/", True),
                         "the app that added it may use its own entry")
        # The victim is another process (download_client.py): the planted entry is not its.
        c = self.client(url)
        [req] = wait_until(lambda: self.events(c, "requested"), what="a receipt")
        self.assertFalse(req["cached"], "another app's entry is no cache hit for the victim")
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.assertEqual(self.http.count("/img/victim.png"), 1, "the victim's download asked the server")
        # Every read path of another process gets the server's bytes: LookupImage, OpenImage, the CLI.
        code = CHILD_PRELUDE + """
import sys, os, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
cache = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                       contract.ImageCache.INTERFACE)
found, data = cache.LookupImageForRequest(sys.argv[2], "", byte_arrays=True)
fd, size = cache.OpenImageForRequest(sys.argv[2], "")
sys.stdout.write(bytes(data).hex() + " " + os.pread(fd.take(), size, 0).hex())
"""
        other = subprocess.run(["/usr/bin/python3", "-c", code, self.bus.address, url], capture_output=True, text=True,
                               timeout=30)
        looked, opened = other.stdout.split()
        self.assertEqual(bytes.fromhex(looked), bytes(png()), other.stderr)
        self.assertEqual(bytes.fromhex(opened), bytes(png()))
        out = os.path.join(self.bus.dir, "fetched.png")
        r = cli(self.bus, "fetch", url, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), bytes(png()), "netactivity fetch serves the server's bytes")
        # The attacker still sees its own entry: it lives in its own namespace.
        found, data = cache.LookupImageForRequest(url, "", byte_arrays=True)
        self.assertEqual(bytes(data), planted, "an app's own entry answers it first")
        c2 = self.client(url)
        [again] = wait_until(lambda: self.events(c2, "requested"), what="a second answer")
        self.assertTrue(again["cached"], "the downloader's own entry is a hit for everyone")

    def test_bytes_past_a_responses_framing_never_answer_the_next_request(self):
        self.assertTrue(self.fetch(self.http.url("/excess.png"))["ok"])
        time.sleep(0.2)  # let the forged bytes arrive on the kept-alive connection
        url = self.http.url("/img/next.png")
        self.assertTrue(self.fetch(url)["ok"])
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        found, data = cache.LookupImageForRequest(url, "", byte_arrays=True)
        self.assertEqual(bytes(data), bytes(png()), "the next URL got its own answer, not the forged one")
        self.assertEqual(self.http.count("/img/next.png"), 1, "and it was asked for")

    def test_one_apps_queue_of_slow_transfers_cannot_starve_another_app(self):
        # Flowing, not silent: silent ones would give their slots to the greedy app's own queue half
        # a second after it formed (the slow-transfer rule), before a late small app had queued.
        greedy = self.client(*[self.http.url("/flow/greedy%d.png" % i) for i in range(12)])
        wait_until(lambda: self.http.count("/flow/") == 4, what="four of the greedy app's transfers running")
        small = self.client(self.http.url("/img/small.png"))
        wait_until(lambda: len(self.events(small, "requested")) == 1, what="the small image queued")
        self.assertEqual(self.http.count("/img/small.png"), 0, "all four slots are taken")
        started = time.monotonic()
        self.http.gate("/flow/greedy0.png").set()
        done = self.finished(small, 1)[0]
        waited = time.monotonic() - started
        self.assertTrue(done["ok"])
        order = list(self.http.requests)
        self.assertEqual(order[4], "/img/small.png", "the app with nothing running went first: %s" % order)
        self.assertLess(waited, 5, "one slot's wait, not the greedy app's whole queue")
        for i in range(1, 12):
            self.http.gate("/flow/greedy%d.png" % i).set()
        self.finished(greedy, 12)

    def test_thousands_of_abandoned_receipts_leave_without_stalling_the_loop(self):
        # Three processes, each with two connections of 540 receipts (1,024 per connection at
        # most; 3,240 in all, within the budget of 3,276 before shares apply).
        hogs = [Hog(self.bus, "downloads", 2, 540, self.http.url("/gate/app%d" % n)) for n in range(3)]
        for h in hogs:
            self.assertEqual(h.report, {"granted": 1080, "refusal": None})
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        held = lambda name: int(obj.Get(DOWNLOADER, name, dbus_interface=PROPS))
        # Four run; a slow window passed during set-up lets stalled ones yield their slots to more.
        self.assertEqual(held("QueuedDownloads") + held("ActiveDownloads"), 3240)
        prober = Prober(self.bus)
        for h in hogs:
            h.proc.kill()
        for h in hogs:
            h.proc.wait()
        wait_until(lambda: int(obj.Get(DOWNLOADER, "QueuedDownloads", dbus_interface=PROPS)) == 0
                   and int(obj.Get(DOWNLOADER, "ActiveDownloads", dbus_interface=PROPS)) == 0,
                   timeout=20, what="every abandoned transfer gone")
        report = prober.stop()
        self.assertLess(report["max_ms"], STALL_MS, report)

    def test_one_apps_running_transfers_hold_at_most_its_share_of_body_bytes(self):
        # Bodies of at most 8 MiB (the cache's capacity): four of them in flight in all, one per app.
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(CACHE, "PreferredMemoryUsageAfterPurge", dbus.UInt64(6 << 20, variant_level=1), dbus_interface=PROPS)
        obj.Set(CACHE, "MemoryCapacity", dbus.UInt64(8 << 20, variant_level=1), dbus_interface=PROPS)
        self.set_dprop("MaximumActiveDownloads", dbus.UInt32(16, variant_level=1))
        hwm = lambda: int(open("/proc/%d/status" % self.agent.proc.pid).read().split("VmHWM:")[1].split()[0]) * 1024
        before = hwm()
        size, hold = (8 << 20) - 4096, (7 << 20)
        paths = ["/held/%d/%d/greedy%d.png" % (size, hold, i) for i in range(12)]
        greedy = self.client(*[self.http.url(p) for p in paths])
        wait_until(lambda: self.http.count("/held/") == 12, what="twelve transfers running at once")
        # Each server writes 7 MiB and holds; a transfer past the app's share pauses, so its server
        # blocks once the kernel's buffers are full. Give them time to send what they can.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and len(self.http.held) < 12:
            time.sleep(0.05)
        time.sleep(0.3)
        grown = hwm() - before
        self.assertLess(grown, 40 << 20, "12 x 7 MiB arrived, but the app's share is one 8 MiB body (+ its oldest)")
        other = self.client(self.http.url("/img/other.png"))
        self.assertTrue(self.finished(other, 1)[0]["ok"], "the other apps' part of the budget is free")
        for p in paths:
            self.http.gate(p).set()
        done = self.finished(greedy, 12, timeout=60)
        self.assertTrue(all(e["ok"] for e in done), [e for e in done if not e["ok"]][:1])
        cache = dbus.Interface(obj, CACHE)
        # The cache holds one such body: the last one finished (the order they finish in is the
        # loop's and the server threads', not the order asked in).
        fd, n = cache.OpenImageForRequest(done[-1]["url"], "", timeout=30)
        fd = fd.take()
        self.addCleanup(os.close, fd)
        self.assertEqual(os.pread(fd, n, 0), bytes(png()) + bytes(size - len(png())), "a paused transfer resumed intact")

    def test_a_multibyte_url_description_is_cut_by_bytes(self):
        url = self.http.url("/img/" + "é" * 2000 + ".png")
        c = self.client(url)
        [req] = wait_until(lambda: self.events(c, "requested"), what="a receipt")
        self.finished(c, 1)
        description = str(self.conn.get_object(NAME, req["task"], introspect=False).Get(TASK, "Description", dbus_interface=PROPS))
        self.assertLessEqual(len(description.encode()), 1024)
        self.assertGreater(len(description.encode()), 1000)


class TwoAgentsOneCacheTests(DownloadTestCase):
    def test_a_second_agent_on_the_same_cache_dir_keeps_to_memory(self):
        self.assertTrue(self.finished(self.client(self.http.url("/fresh/one.png")), 1)[0]["ok"])
        self.disk_entries(1)
        other_bus = PrivateBus()
        self.addCleanup(other_bus.stop)
        other_bus.cache_home = self.bus.cache_home  # a second session of the same user
        other = Agent(other_bus, "--activation-delay", "0", "--completion-delay", "0")
        self.addCleanup(other.stop)
        conn = connect(other_bus)
        self.addCleanup(conn.close)
        obj = conn.get_object(NAME, PATH, introspect=False)
        # The first read starts the check (on the agent's disk worker); a later one reports it.
        error = wait_until(lambda: str(obj.Get(DOWNLOADER, "DiskError", dbus_interface=PROPS)) or None,
                           what="DiskError of the second agent")
        self.assertIn("another netactivityd uses", error)
        self.assertIn("memory only", error)
        before = sorted(os.listdir(os.path.join(self.bus.cache_home, "netactivity")))
        c = Observer(other_bus, "download_client.py", self.http.url("/fresh/two.png"))
        self.observers.append(c)
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.bus.cache_home, "netactivity"))), before,
                         "the second agent wrote nothing and deleted nothing")
        self.assertEqual(int(obj.Get(DOWNLOADER, "DiskUsage", dbus_interface=PROPS)), 0)


class CLIEscapingTests(AgentTestCase):
    def test_the_cli_escapes_what_other_apps_wrote(self):
        code = CHILD_PRELUDE + r"""
import sys, dbus
open("/proc/self/comm", "w").write("ev\x1b[31mil")
bus = dbus.bus.BusConnection(sys.argv[1])
obj = bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
obj.IncrementActivityCount(dbus_interface=contract.Activity.INTERFACE)
obj.BeginTask("evil\x1b]0;pwned\x07\n7 running 100% FORGED", dbus.Dictionary({}, signature="sv"),
              dbus_interface=contract.Activity.INTERFACE)
print("ready", flush=True)
sys.stdin.read()
"""
        p = subprocess.Popen(["/usr/bin/python3", "-c", code, self.bus.address], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.stdin.close)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        wait_until(lambda: "ev" in cli(self.bus, "status").stdout, what="the process name known")
        for args in (("tasks",), ("tasks", "--json"), ("status",), ("status", "--json")):
            out = cli(self.bus, *args).stdout
            self.assertNotIn("\x1b", out, args)
            self.assertNotIn("\x07", out, args)
        table = cli(self.bus, "tasks").stdout.splitlines()
        self.assertEqual(len(table), 2, "a header and one task: no forged line\n" + "\n".join(table))
        self.assertIn("evil\\x1b]0;pwned\\x07\\n7 running 100% FORGED", table[1])
        self.assertIn("ev\\x1b[31mil", cli(self.bus, "status").stdout)


class Hog:
    """hog.py: one hostile app (a process) with many connections, holding what it was granted."""

    def __init__(self, bus, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "hog.py"), bus.address, *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.report = json.loads(self.proc.stdout.readline())

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(10)


class BudgetTests(AgentTestCase):
    """Apps, not connections, are the unit of fairness: one process with many connections gets its
    app's share of each budget; the budgets over all apps keep the agent up."""

    def hog(self, *args):
        h = Hog(self.bus, *args)
        self.addCleanup(h.stop)
        return h.report

    def low_file_limit(self):
        import resource
        self.agent.stop()
        self.agent = Agent(self.bus, preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160)))

    def test_one_app_with_many_connections_gets_its_share_of_leases(self):
        self.low_file_limit()
        # 160 descriptors: 80 leases at most, shares past 32. 12 connections x 10 (a sixteenth of 160 each).
        greedy = self.hog("leases", 12, 10)
        self.assertEqual(greedy["granted"], 32, "alone, the budget; then its share of it")
        self.assertEqual(greedy["refusal"][0], contract.ERROR_PREFIX + "LimitsExceeded")
        self.assertIn("over all its connections", greedy["refusal"][1])
        # Another process is served its floor although the budget is taken.
        other = dbus.Interface(self.conn.get_object(NAME, PATH), IFACE)
        fds = [other.BeginActivity("polite").take() for _ in range(10)]
        for f in fds:
            os.close(f)

    def test_many_apps_cannot_take_the_agents_descriptors(self):
        self.low_file_limit()
        reports = [self.hog("leases", 3, 10) for _ in range(5)]
        granted = [r["granted"] for r in reports]
        # 30; then 2 to the budget of 32 and 14 more (a share of 32/2); then 32/3, 32/4, 32/5.
        self.assertEqual(granted, [30, 16, 10, 8, 6])
        self.assertLessEqual(sum(granted), 80, "at most half of the 160 descriptors")
        self.assertIn("over all its connections", reports[-1]["refusal"][1])
        # The agent still has descriptors for its own work: images in memfds and fds it sends.
        cache = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), CACHE)
        cache.AddImage("big", dbus.ByteArray(png(extra=70 * 1024)))
        f, size = cache.OpenImage("big")
        f = f.take()
        self.assertEqual(os.fstat(f).st_size, size)
        os.close(f)
        self.assertTrue(self.agent.alive())

    def test_one_app_gets_its_share_of_tasks_and_get_managed_objects_stays_answerable(self):
        greedy = self.hog("tasks", 5, 1024, 1000)
        self.assertEqual(greedy["granted"], 3276, "alone, the budget of 3,276; then its share of it")
        self.assertIn("over all its connections", greedy["refusal"][1])
        # Newcomers past the budget: each gets its share at its arrival (3276/2, /3, /4, /5), the
        # limit of 8,192 leaving room for them.
        others = [self.hog("tasks", 2, 1024, 1000) for _ in range(4)]
        granted = [r["granted"] for r in others]
        self.assertEqual(granted, [1638, 1092, 819, 655], "every newcomer gets its floor")
        self.assertIn("over all its connections", others[-1]["refusal"][1])
        managed = self.conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(
            dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=60)
        # The tree lists 200 tasks shared fairly (then up to 500 while apps under their share list
        # theirs): the first app's 200, and each newcomer its share at its arrival.
        by_owner = {}
        for props in managed.values():
            owner = str(props[contract.Task.INTERFACE][contract.Task.Owner])
            by_owner[owner] = by_owner.get(owner, 0) + 1
        self.assertEqual(sorted(by_owner.values(), reverse=True), [200, 100, 66, 50, 40], by_owner)
        self.assertTrue(self.agent.alive(), "the reply fitted the bus's limits: the agent is still on the bus")


class GateTests(AgentTestCase):
    def test_calls_of_a_client_that_left_at_once_are_served_and_what_they_granted_goes(self):
        """A new peer's calls wait until its app is known; one that leaves first has them served
        just before its departure is handled, so nothing it was granted stays. (Whether it was
        known by then is a race: one that was not has the least rights, see test_strangers.)"""
        for _ in range(6):
            subprocess.run(["dbus-send", "--bus=" + self.bus.address, "--type=method_call", "--dest=" + NAME, PATH,
                            IFACE + ".IncrementActivityCount"], check=True, timeout=10)
        wait_until(lambda: self.count() == 0, what="the counts of the departed clients released")


class FairEvictionTests(AgentTestCase):
    def test_one_apps_large_images_do_not_evict_another_apps_images(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(CACHE, "PreferredMemoryUsageAfterPurge", dbus.UInt64(6 << 20, variant_level=1), dbus_interface=PROPS)
        obj.Set(CACHE, "MemoryCapacity", dbus.UInt64(10 << 20, variant_level=1), dbus_interface=PROPS)
        small = bytes(png(extra=20 * 1024))
        victim = subprocess.run(image_adder(self.bus, small, ["victim%d" % i for i in range(40)]), timeout=30)
        self.assertEqual(victim.returncode, 0)
        cache = dbus.Interface(obj, CACHE)
        big = bytes(png(extra=6 << 20))
        for name in ("greedy1", "greedy2"):  # 12.8 MiB > 10: a purge
            fd = os.memfd_create("big", os.MFD_ALLOW_SEALING)
            os.write(fd, big)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            cache.AddImageFromFd(name, dbus.types.UnixFd(fd))
            os.close(fd)
        kept = [bool(cache.LookupImage("victim%d" % i, byte_arrays=True)[0]) for i in range(40)]
        self.assertEqual(kept, [True] * 40, "the other app's images all stayed")
        self.assertFalse(cache.LookupImage("greedy1", byte_arrays=True)[0], "the greedy app lost its own older image")
        by_app = {str(k): int(v) for k, v in obj.Get(CACHE, "MemoryUsageByApp", dbus_interface=PROPS).items()}
        self.assertEqual(sorted(by_app.values()), sorted([40 * len(small), len(big)]), by_app)
        self.assertIn("unscoped/pid:%d" % os.getpid(), by_app,
                      "a process without a systemd app unit is its own leaf of the unscoped pool")


class DiskFairnessTests(DownloadTestCase):
    def test_one_apps_downloads_do_not_push_another_apps_entries_off_the_disk(self):
        cache_dir = os.path.join(self.bus.cache_home, "netactivity")
        victim_urls = [self.http.url("/fresh/victim%d.png" % i) for i in range(3)]
        v = self.client(*victim_urls)
        self.assertTrue(all(e["ok"] for e in self.finished(v, 3)))
        size = os.path.getsize(os.path.join(cache_dir, self.disk_entries(3)[0]))
        self.set_dprop("DiskCapacity", dbus.UInt64(10 * size, variant_level=1))
        greedy = self.client(*[self.http.url("/fresh/greedy%d.png" % i) for i in range(20)])
        self.assertTrue(all(e["ok"] for e in self.finished(greedy, 20)))
        last = hashlib.sha256(self.http.url("/fresh/greedy19.png").encode()).hexdigest()
        wait_until(lambda: os.path.exists(os.path.join(cache_dir, last)), what="the greedy app's last entry written")
        names = set(self.disk_entries(None, at_most=10))
        for url in victim_urls:
            self.assertIn(hashlib.sha256(url.encode()).hexdigest(), names, "the other app's entries stayed on disk")
        usage = int(self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, "DiskUsage", dbus_interface=PROPS))
        self.assertLessEqual(usage, 10 * size + 32, "DiskCapacity holds")
        self.assertGreaterEqual(len(names), 8, "the greedy app used what is left, its own older entries going first")
