#!/usr/bin/python3
"""make bench: the loop under attack, measured from outside by a separate Peer.Ping prober.

attack.py ADDRESS PROBER   (PROBER: the path of Tests/Integration/prober.py; hog.py beside it)
Runs, against the agent on ADDRESS, each attack with a fresh prober, and prints one JSON line:
  lease_writer_max_ms     a holder writing into its lease for 2 s
  bomb_max_ms             a 64 KiB gzip body that would inflate to 64 MiB, downloaded
  abandoned_max_ms        5,100 queued receipts of three apps that all leave at once
  fair_wait_s             another app's small image, asked for after one app queued 12 slow transfers
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


class Prober:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, PROBER, ADDRESS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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

# 3. 5,100 queued receipts of three apps (processes), who all leave at once.
# Two connections of 850 each (1,024 receipts per connection at most).
HOG = os.path.join(os.path.dirname(PROBER), "hog.py")
hogs = [subprocess.Popen([sys.executable, HOG, ADDRESS, "downloads", "2", "850", HTTP + "/gate/app%d" % n],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for n in range(3)]
for h in hogs:
    assert json.loads(h.stdout.readline())["granted"] == 1700, "a hog could not queue its receipts"
p = Prober()
for h in hogs:
    h.kill()
for h in hogs:
    h.wait()
time.sleep(0.5)
results["abandoned_max_ms"] = p.stop()
release.set()

# 4. Fairness: one app (a process) queues 12 slow transfers; another asks for a small image.
greedy = subprocess.Popen([sys.executable, "-c", """
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
d = dbus.Interface(bus.get_object("org.example.NetActivity", "/org/example/NetActivity", introspect=False),
                   "org.example.NetActivity.Downloader")
for i in range(12):
    d.DownloadImage(sys.argv[2] + "/slow/%d-%f.png" % (i, float(sys.argv[3])), dbus.Dictionary({}, signature="sv"))
print("queued", flush=True)
sys.stdin.read()
""", ADDRESS, HTTP, str(time.time())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
greedy.stdout.readline()
time.sleep(0.3)
t = time.monotonic()
r, _, _ = downloader(bus).DownloadImage(HTTP + "/small-%f.png" % time.time(), dbus.Dictionary({}, signature="sv"))
ok = wait_finished(bus, [r], 60)
results["fair_wait_s"] = round(time.monotonic() - t, 2) if ok else None
greedy.kill()
greedy.wait()
print(json.dumps(results), flush=True)
