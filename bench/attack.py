#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""make bench: the loop under attack, measured from outside by a separate Peer.Ping prober.

attack.py ADDRESS PROBER   (PROBER: the path of Tests/Integration/prober.py; hog.py beside it)
Runs, against the agent on ADDRESS, each attack with a fresh prober, and prints one JSON line:
  lease_writer_max_ms     a holder writing into its lease for 2 s
  bomb_max_ms             a 64 KiB gzip body that would inflate to 64 MiB, downloaded
  abandoned_max_ms        3,240 queued receipts of three apps that all leave at once
  fair_wait_s             another app's small image, asked for after one app queued 12 slow transfers
  never_reader_max_ms     a client asks 150 times for a 1 MiB image and never reads its socket
  never_reader_held_mib   what the bus holds for it afterwards (it would be 150 MiB)
  huge_call_max_ms        a first call of 64 MiB (AddImage)
  sybils_max_ms           100 forked processes fill the cache and queue downloads against a Flatpak app
  sybils_kept             of the Flatpak's 40 images, how many it kept
  sybils_wait_s           the Flatpak's small download, asked for with 100 processes' 1,000 downloads queued
  managed_max_ms          three clients calling GetManagedObjects for 3 s with 3,276 task objects (the
                          tree lists at most 500 of them)
  stalled_wait_s          another app's small image, asked for while 100 transfers that stalled after
                          their first kilobyte hold every slot
  stalled_max_ms          the worst Ping meanwhile
Everything stays on 127.0.0.1; every loop is bounded in count and time."""
import gzip
import http.server
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

import dbus

NAME, PATH = "org.example.NetActivity", "/org/example/NetActivity"
DOWNLOADER = "org.example.NetActivity.Downloader"
ADDRESS, PROBER = sys.argv[1], sys.argv[2]


def png(extra=0):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 6, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\0" * 80))
    if extra:
        body += chunk(b"prVt", b"\xa5" * extra)
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


BOMB = gzip.compress(png() + bytes(64 * 1024 * 1024), compresslevel=6)
SLOW = png(40 * 1000)
release = threading.Event()
stall = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body, extra=()):
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        return body

    def do_GET(self):
        try:
            if self.path.startswith("/bomb"):
                self.wfile.write(self.reply(BOMB, [("Content-Encoding", "gzip")]))
            elif self.path.startswith("/gate/"):
                release.wait(60)
                self.wfile.write(self.reply(png()))
            elif self.path.startswith("/stall/"):  # a first piece, then nothing until released
                body = self.reply(SLOW)
                self.wfile.write(body[:1000])
                self.wfile.flush()
                stall.wait(60)
                self.wfile.write(body[1000:])
            elif self.path.startswith("/slow/"):
                body = self.reply(SLOW)
                for i in range(0, len(body), 1000):  # about 2 s per transfer
                    self.wfile.write(body[i:i + 1000])
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                self.wfile.write(self.reply(png()))
        except (BrokenPipeError, ConnectionResetError):
            pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
server.handle_error = lambda *a: None
threading.Thread(target=server.serve_forever, daemon=True).start()
HTTP = "http://127.0.0.1:%d" % server.server_address[1]


def can_run_realtime():
    try:
        return subprocess.run(["chrt", "-f", "10", "true"], stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


REALTIME = can_run_realtime()


class Prober:
    """prober.py; `realtime`: at real-time priority where the bench may use it, so that 100 busy
    attacker processes on the prober's CPU measure the agent, not the prober's own wait for a CPU."""

    def __init__(self, realtime=False):
        argv = [sys.executable, PROBER, ADDRESS]
        if realtime and REALTIME:
            argv = ["chrt", "-f", "10"] + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        self.proc.stdin.close()
        report = json.loads(self.proc.stdout.read().strip().splitlines()[-1])
        self.proc.wait(10)
        return round(report["max_ms"], 1)


def downloader(bus):
    return dbus.Interface(bus.get_object(NAME, PATH, introspect=False), DOWNLOADER)


def wait_finished(bus, receipts, timeout):
    """Waits for DownloadFinished of every receipt, pumping the connection by hand."""
    from gi.repository import GLib
    done = set()
    bus.add_signal_receiver(lambda r, *a: done.add(str(r)), signal_name="DownloadFinished", dbus_interface=DOWNLOADER)
    ctx = GLib.MainContext.default()
    end = time.monotonic() + timeout
    while not set(receipts) <= done and time.monotonic() < end:
        ctx.iteration(False) or time.sleep(0.005)
    return set(receipts) <= done


import dbus.mainloop.glib  # noqa: E402
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
results = {}

# 1. A holder writing into its lease.
bus = dbus.bus.BusConnection(ADDRESS)
fd = dbus.Interface(bus.get_object(NAME, PATH), "org.example.NetActivity").BeginActivity("writer").take()
os.set_blocking(fd, False)
p = Prober()
end = time.monotonic() + 2
while time.monotonic() < end:
    try:
        os.write(fd, b"x" * 64)
    except BlockingIOError:
        time.sleep(0.001)
results["lease_writer_max_ms"] = p.stop()
os.close(fd)

# 2. A decompression bomb.
p = Prober()
r, _, _ = downloader(bus).DownloadImage(HTTP + "/bomb.png", dbus.Dictionary({}, signature="sv"))
wait_finished(bus, [r], 30)
results["bomb_max_ms"] = p.stop()

# 3. 3,240 queued receipts of three apps (processes), who all leave at once.
# Two connections of 540 each (within the budget of 3,276 before shares apply).
HOG = os.path.join(os.path.dirname(PROBER), "hog.py")
hogs = [subprocess.Popen([sys.executable, HOG, ADDRESS, "downloads", "2", "540", HTTP + "/gate/app%d" % n],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for n in range(3)]
for h in hogs:
    assert json.loads(h.stdout.readline())["granted"] == 1080, "a hog could not queue its receipts"
p = Prober()
for h in hogs:
    h.kill()
for h in hogs:
    h.wait()
time.sleep(0.5)
results["abandoned_max_ms"] = p.stop()
release.set()

QUEUER = """
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
d = dbus.Interface(bus.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False),
                   "org.example.NetActivity.Downloader")
for i in range(int(sys.argv[4])):
    d.DownloadImage(sys.argv[2] + "/%d-%f.png" % (i, float(sys.argv[3])), dbus.Dictionary({}, signature="sv"))
print("queued", flush=True)
sys.stdin.read()
"""


def wait_behind(route, count, settle, name):
    """One app (a process) asks for `count` images under `route`; after `settle` seconds another
    (this process) asks for a small one. The seconds it waited for it (None: not in 60 s)."""
    queuer = subprocess.Popen([sys.executable, "-c", QUEUER, ADDRESS, HTTP + route, str(time.time()), str(count)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    queuer.stdout.readline()
    time.sleep(settle)
    t = time.monotonic()
    r, _, _ = downloader(bus).DownloadImage(HTTP + "/small-%s-%f.png" % (name, time.time()), dbus.Dictionary({}, signature="sv"))
    ok = wait_finished(bus, [r], 60)
    waited = round(time.monotonic() - t, 2) if ok else None
    queuer.kill()
    queuer.wait()
    return waited


# 4. Fairness: one app (a process) queues 12 slow transfers; another asks for a small image.
results["fair_wait_s"] = wait_behind("/slow", 12, 0.3, "fair")

HERE = os.path.dirname(os.path.abspath(PROBER))
sys.path.insert(0, HERE)
CACHE = "org.example.NetActivity.ImageCache"
PROPS = "org.freedesktop.DBus.Properties"
cache = dbus.Interface(bus.get_object(NAME, PATH, introspect=False), CACHE)


def held_for(name):
    stats = bus.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Debug.Stats",
                              "GetConnectionStats", "s", (name,))
    return int(stats["OutgoingBytes"])


# 5. A client that asks for large replies and never reads its socket.
from rawbus import RawClient, body_strings  # noqa: E402
cache.AddImage("bench-1mib", dbus.ByteArray(png(1024 * 1024 - 2048)))
names_before = set(str(n) for n in bus.list_names() if str(n).startswith(":"))
p = Prober()
raw = RawClient(ADDRESS)
for _ in range(150):
    raw.send(NAME, PATH, CACHE, "LookupImage", "s", body_strings("bench-1mib"))
time.sleep(3)
results["never_reader_max_ms"] = p.stop()
mine = [n for n in bus.list_names() if str(n).startswith(":") and str(n) not in names_before]
held = [held_for(str(n)) for n in mine]
results["never_reader_held_mib"] = round(max(held or [0]) / (1 << 20), 1)
raw.close()
cache.RemoveImage("bench-1mib")

# 6. A first call of 64 MiB.
p = Prober()
subprocess.run([sys.executable, "-c", """
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
c = dbus.Interface(bus.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False),
                   "org.example.NetActivity.ImageCache")
try:
    c.AddImage("huge", dbus.ByteArray(b"\\x89PNG" + bytes((64 << 20) - 4100)), timeout=60)
except dbus.exceptions.DBusException:
    pass
""", ADDRESS], timeout=120)
results["huge_call_max_ms"] = p.stop()

# 7. 100 forked processes against one Flatpak app (faked: a user+mount namespace with a
# /.flatpak-info, as the tests make one), on a cache of 2 MiB.
obj = bus.get_object(NAME, PATH, introspect=False)
obj.Set(CACHE, "PreferredMemoryUsageAfterPurge", dbus.UInt64(1 << 20, variant_level=1), dbus_interface=PROPS)
obj.Set(CACHE, "MemoryCapacity", dbus.UInt64(2 << 20, variant_level=1), dbus_interface=PROPS)
root = __import__("tempfile").mkdtemp(prefix="netactivity-bench-sandbox-")
app = subprocess.Popen(["unshare", "-rm", "sh", os.path.join(HERE, "sandbox.sh"), root, "org.example.Polite", sys.executable,
                        os.path.join(HERE, "stranger.py"), ADDRESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def ask(*command):
    app.stdin.write(json.dumps(command) + "\n")
    app.stdin.flush()
    line = app.stdout.readline()
    return json.loads(line) if line else {}  # no user namespaces here: the row says "?"


if "ok" in ask("ping"):
    polite = [png(20_000 + i) for i in range(40)]
    for i, image in enumerate(polite):
        ask("add", "polite%d" % i, image.hex())
    p = Prober(realtime=True)
    sybil = png(30_000).hex()
    code = """
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
o = bus.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False)
c = dbus.Interface(o, "org.example.NetActivity.ImageCache")
d = dbus.Interface(o, "org.example.NetActivity.Downloader")
for i in range(6):
    try:
        c.AddImage("sybil-%s-%d" % (sys.argv[3], i), dbus.ByteArray(bytes.fromhex(sys.argv[2])))
    except dbus.exceptions.DBusException:
        pass
for i in range(10):
    try:
        d.DownloadImage(sys.argv[4] + "/gate/sybil-%s-%d.png" % (sys.argv[3], i), dbus.Dictionary({}, signature="sv"))
    except dbus.exceptions.DBusException:
        pass
print("done", flush=True)
sys.stdin.read()
"""
    release.clear()
    sybils = [subprocess.Popen([sys.executable, "-c", code, ADDRESS, sybil, str(n), HTTP], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for n in range(100)]
    for s_ in sybils:
        s_.stdout.readline()
    results["sybils_kept"] = sum(1 for i in range(40) if ask("lookup", "polite%d" % i).get("ok"))
    # Its small download, while 100 processes' 1,000 downloads wait for a gate.
    results["sybils_wait_s"] = None
    end = time.monotonic() + 30
    url = HTTP + "/polite-wait-%f.png" % time.time()
    t = time.monotonic()
    asked = ask("download", url)
    while "ok" in asked and time.monotonic() < end:
        if "ok" in ask("open-url", url):
            results["sybils_wait_s"] = round(time.monotonic() - t, 2)
            break
        time.sleep(0.02)
    results["sybils_max_ms"] = p.stop()
    if "error" in asked:
        results["sybils_refused"] = asked["error"][0]
    release.set()
    for s_ in sybils:
        s_.kill()
        s_.wait()
app.stdin.close()
app.wait(10)
os.rmdir(root)
obj.Set(CACHE, "MemoryCapacity", dbus.UInt64(104857600, variant_level=1), dbus_interface=PROPS)
obj.Set(CACHE, "PreferredMemoryUsageAfterPurge", dbus.UInt64(62914560, variant_level=1), dbus_interface=PROPS)

# 8. GetManagedObjects at the budget: 3,276 task objects, three callers in a loop for 3 s.
tasks = subprocess.Popen([sys.executable, HOG, ADDRESS, "tasks", "4", "1024", "1000"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
tasks.stdout.readline()
p = Prober()
callers = [subprocess.Popen([sys.executable, "-c", """
import sys, time, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
o = bus.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False)
end = time.monotonic() + 3
while time.monotonic() < end:
    o.GetManagedObjects(dbus_interface="org.freedesktop.DBus.ObjectManager", timeout=60)
""", ADDRESS]) for _ in range(3)]
for c in callers:
    c.wait(120)
results["managed_max_ms"] = p.stop()
tasks.stdin.close()
tasks.wait(10)

# 9. A small image behind 100 stalled transfers: one app (a process) asks for 100 images whose
# servers send a kilobyte and stop; another app asks for a small one (after 1 s: the first four
# have sent their kilobyte and stalled).
p = Prober()
results["stalled_wait_s"] = wait_behind("/stall", 100, 1, "stalled")
results["stalled_max_ms"] = p.stop()
stall.set()
print(json.dumps(results), flush=True)
