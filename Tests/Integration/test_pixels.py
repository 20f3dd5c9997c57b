# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""FetchPixels: an image decoded once, in the sandboxed decoder, its pixels in a sealed memfd that
every app maps; from a local HTTP server (never the internet)."""
import ctypes
import fcntl
import http.server
import os
import signal
import struct
import termios
import threading
import unittest
import zlib

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import contract
from harness import PROPS, cli, connect, decoded_charge, descendants_named, png as harness_png, wait_until
from test_agent import AgentTestCase
from test_decoder import png
from test_strangers import Stranger, can_fake_flatpak

D = contract.Downloader
# FetchPixels' options (OpenPixels takes the same names).
MAX_WIDTH, MAX_HEIGHT = D.FETCH_PIXELS_OPTION_MAX_WIDTH, D.FETCH_PIXELS_OPTION_MAX_HEIGHT
COLOR = D.FETCH_PIXELS_OPTION_COLOR
ANIMATION, MAX_FRAMES = D.FETCH_PIXELS_OPTION_ANIMATION, D.FETCH_PIXELS_OPTION_MAX_FRAMES
C = contract.ImageCache
ERR = contract.ERROR_PREFIX
ALL_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def giant_png():
    """A PNG whose header says 100000 x 100000 (its CRC right), and nothing behind it."""
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


class PixelServer:
    """Serves fixed bodies by path on 127.0.0.1, counting requests."""

    def __init__(self, bodies):
        self.bodies = bodies
        self.counts = {}
        self.gates = {}  # path: threading.Event the answer waits for
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with server.lock:
                    server.counts[self.path] = server.counts.get(self.path, 0) + 1
                body = server.bodies.get(self.path)
                gate = server.gates.get(self.path)
                if gate is not None:
                    gate.wait(60)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.httpd.server_address[1], path)

    def count(self, path):
        with self.lock:
            return self.counts.get(path, 0)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


RED_HALF = png(8, 4, lambda x, y: (255, 0, 0, 255) if x < 4 else (0, 0, 255, 128))


class PixelTests(AgentTestCase):
    def setUp(self):
        super().setUp()
        self.http = PixelServer({"/a.png": RED_HALF, "/wide.png": png(64, 16, lambda x, y: (0, 255, 0, 255)),
                                 "/giant.png": giant_png(), "/damaged.png": RED_HALF[:60], "/text": b"plain text here"})
        self.addCleanup(self.http.stop)

    def pixels(self, path, options=None, conn=None):
        """FetchPixels' (bytes, info, seals) in the test's own process; `options` by the contract's keys."""
        opts = dbus.Dictionary(options or {}, signature="sv")
        downloader = dbus.Interface((conn or self.conn).get_object(contract.BUS_NAME, contract.OBJECT_PATH), D.INTERFACE)
        fd, info = downloader.FetchPixels(self.http.url(path), opts, timeout=60)
        fd = fd.take()
        try:
            info = {str(k): v for k, v in info.items()}
            frames = max(1, len(info.get(D.FETCH_PIXELS_INFO_FRAME_DURATIONS, [])))
            size = int(info[D.FETCH_PIXELS_INFO_STRIDE]) * int(info[D.FETCH_PIXELS_INFO_HEIGHT]) * frames
            data = os.pread(fd, size + 1, 0)
            return data, info, fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        finally:
            os.close(fd)

    def decoders(self):
        """The agent's decoder processes (inside bubblewrap they are its grandchildren or further down)."""
        return descendants_named(self.agent.proc.pid, "netactivity-de")

    def test_pixels_are_premultiplied_bgra_in_a_sealed_file_and_decoded_once(self):
        data, info, seals = self.pixels("/a.png")
        self.assertEqual((info[D.FETCH_PIXELS_INFO_WIDTH], info[D.FETCH_PIXELS_INFO_HEIGHT],
                          info[D.FETCH_PIXELS_INFO_STRIDE]), (8, 4, 32))
        self.assertEqual(info[D.FETCH_PIXELS_INFO_FORMAT], D.FETCH_PIXELS_FORMAT_B8G8R8A8_PREMULTIPLIED)
        self.assertEqual((info[D.FETCH_PIXELS_INFO_SOURCE], info[D.FETCH_PIXELS_INFO_HTTP_STATUS]),
                         (D.FETCH_PIXELS_SOURCE_NETWORK, 200))
        self.assertEqual(info[D.FETCH_PIXELS_INFO_CONTENT_TYPE], "image/png")
        self.assertEqual(len(data), 128)
        self.assertEqual(seals & ALL_SEALS, ALL_SEALS)
        self.assertEqual(tuple(data[0:4]), (0, 0, 255, 255), "red, as B G R A")
        self.assertEqual(tuple(data[7 * 4:8 * 4]), (128, 0, 0, 128), "half-transparent blue, premultiplied")
        # Another app asks: the same pixels from memory, no request to the server, no decode.
        other = connect(self.bus)
        self.addCleanup(other.close)
        again, info, _ = self.pixels("/a.png", conn=other)
        self.assertEqual((again, info[D.FETCH_PIXELS_INFO_SOURCE]), (data, D.FETCH_PIXELS_SOURCE_MEMORY))
        self.assertEqual(self.http.count("/a.png"), 1)
        # `netactivity cache stats` shows the decoded tier: one decode, one hit, its charge.
        r = cli(self.bus, "cache", "stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        decoded = r.stdout.split("decoded pixels:\n", 1)[1]
        self.assertRegex(decoded, r"^  usage:                 \d+ KiB of 100 MiB \(purges down to 60 MiB\)\n")
        self.assertIn("\n  decodes:               1\n", decoded)
        self.assertIn("\n  hits:                  1\n", decoded)

    def test_a_box_is_its_own_entry_and_never_enlarges(self):
        _, info, _ = self.pixels("/wide.png", {MAX_WIDTH: dbus.UInt32(16), MAX_HEIGHT: dbus.UInt32(16)})
        self.assertEqual((info[D.FETCH_PIXELS_INFO_WIDTH], info[D.FETCH_PIXELS_INFO_HEIGHT]), (16, 4))
        self.assertEqual((info[D.FETCH_PIXELS_INFO_ORIGINAL_WIDTH], info[D.FETCH_PIXELS_INFO_ORIGINAL_HEIGHT]), (64, 16))
        self.assertEqual(info[D.FETCH_PIXELS_INFO_SOURCE], D.FETCH_PIXELS_SOURCE_NETWORK)
        _, info, _ = self.pixels("/wide.png")
        self.assertEqual((info[D.FETCH_PIXELS_INFO_WIDTH], info[D.FETCH_PIXELS_INFO_SOURCE]),
                         (64, D.FETCH_PIXELS_SOURCE_MEMORY), "the image was in memory; its whole pixels were not")
        _, info, _ = self.pixels("/wide.png", {MAX_WIDTH: dbus.UInt32(1000)})
        self.assertEqual(info[D.FETCH_PIXELS_INFO_WIDTH], 64)

    def test_errors_name_what_went_wrong_and_the_next_request_works(self):
        message = self.expect_error(ERR + "TooLarge", lambda: self.pixels("/giant.png"))
        self.assertIn("100000 x 100000", message)
        self.expect_error(ERR + "Decode", lambda: self.pixels("/damaged.png"))
        self.expect_error(ERR + "NotAnImage", lambda: self.pixels("/text"))
        self.expect_error(ERR + "HTTP", lambda: self.pixels("/missing.png"))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.pixels("/a.png", {MAX_WIDTH: "wide"}))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.pixels("/a.png", {"size": dbus.UInt32(3)}))
        self.assertEqual(len(self.pixels("/a.png")[0]), 128)

    def test_the_webs_formats_and_their_colours_through_fetchpixels(self):
        from colour import P3_PROFILE, p3_to_srgb
        from test_formats import encode, halves, with_chunk
        colour = (204, 102, 51)
        p3 = with_chunk(png(4, 4, lambda x, y: colour + (255,)), b"iCCP", b"P3\0\0" + zlib.compress(P3_PROFILE))
        self.http.bodies.update({"/a.avif": encode("avifenc", halves(), "avif", "--lossless"),
                                 "/a.jxl": encode("cjxl", halves(), "jxl", "-d", "0"), "/p3.png": p3})
        for path in ("/a.avif", "/a.jxl"):
            data, info, _ = self.pixels(path, {MAX_WIDTH: dbus.UInt32(32)})
            self.assertEqual((int(info[D.FETCH_PIXELS_INFO_WIDTH]), int(info[D.FETCH_PIXELS_INFO_HEIGHT]),
                              int(info[D.FETCH_PIXELS_INFO_ORIGINAL_WIDTH]), int(info[D.FETCH_PIXELS_INFO_FRAMES])),
                             (32, 16, 64, 1), path)
            self.assertEqual(tuple(data[8:11]), (40, 30, 200), path + ": the left half's BGR")
            self.assertEqual(str(info[D.FETCH_PIXELS_INFO_COLOR_PROFILE]), D.FETCH_PIXELS_COLOR_PROFILE_NONE, path)
        data, info, _ = self.pixels("/p3.png")
        self.assertEqual((str(info[D.FETCH_PIXELS_INFO_COLOR_PROFILE]), str(info[D.FETCH_PIXELS_INFO_COLOR_SPACE])),
                         (D.FETCH_PIXELS_COLOR_PROFILE_ICC, D.FETCH_PIXELS_COLOR_SPACE_SRGB))
        converted = tuple(data[2::-1][:3])
        self.assertTrue(all(abs(a - b) <= 1 for a, b in zip(converted, p3_to_srgb(colour))), converted)
        # The file's own values are another entry, decoded for it; the sRGB one stays beside it.
        data, info, _ = self.pixels("/p3.png", {COLOR: D.FETCH_PIXELS_COLOR_AS_IS})
        self.assertEqual(str(info[D.FETCH_PIXELS_INFO_COLOR_SPACE]), D.FETCH_PIXELS_COLOR_SPACE_AS_IS)
        self.assertEqual(tuple(data[2::-1][:3]), colour)
        self.assertEqual(tuple(self.pixels("/p3.png")[0][2::-1][:3]), converted)
        message = self.expect_error(contract.DBusError.InvalidArgs, lambda: self.pixels("/p3.png", {COLOR: "p3"}))
        self.assertIn("'%s' or '%s'" % (D.FETCH_PIXELS_COLOR_SRGB, D.FETCH_PIXELS_COLOR_AS_IS), message)

    def test_an_svg_is_drawn_at_the_box_by_a_decoder_of_its_own(self):
        from test_formats import SVG
        self.http.bodies["/a.svg"] = SVG
        data, info, _ = self.pixels("/a.svg", {MAX_WIDTH: dbus.UInt32(80), MAX_HEIGHT: dbus.UInt32(80)})
        self.assertEqual((int(info[D.FETCH_PIXELS_INFO_WIDTH]), int(info[D.FETCH_PIXELS_INFO_HEIGHT])), (80, 40))
        self.assertEqual(str(info[D.FETCH_PIXELS_INFO_CONTENT_TYPE]), "image/svg+xml")
        self.assertEqual(tuple(data[2::-1][:3]), (200, 30, 40), "drawn, scaled up to its box")
        commands = []
        for pid in self.decoders():
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                commands.append(f.read().split(b"\0"))
        self.assertTrue(any(b"--svg" in c for c in commands), "the SVG decoder is a process of its own: %r" % commands)
        # A raster image next goes to a raster decoder, not to the SVG one.
        self.assertEqual(len(self.pixels("/a.png")[0]), 128)

    def test_an_animation_comes_frame_after_frame_when_asked(self):
        from test_formats import animations
        self.http.bodies["/a.gif"] = animations()["GIF"]
        data, info, _ = self.pixels("/a.gif", {MAX_WIDTH: dbus.UInt32(10)})
        self.assertEqual((int(info[D.FETCH_PIXELS_INFO_FRAMES]), len(data)), (3, 10 * 4 * 5), "the first frame")
        self.assertNotIn(D.FETCH_PIXELS_INFO_FRAME_DURATIONS, info)
        data, info, _ = self.pixels("/a.gif", {MAX_WIDTH: dbus.UInt32(10), ANIMATION: True})
        self.assertEqual([int(d) for d in info[D.FETCH_PIXELS_INFO_FRAME_DURATIONS]], [100, 20, 30])
        self.assertEqual(int(info[D.FETCH_PIXELS_INFO_LOOP_COUNT]), 2)
        self.assertEqual(len(data), 3 * 10 * 4 * 5, "three whole frames in the memfd")
        self.assertEqual([tuple(data[k * 200 + 2::-1][:3]) for k in range(3)], [(255, 0, 0), (0, 255, 0), (0, 0, 255)])
        data, info, _ = self.pixels("/a.gif", {MAX_WIDTH: dbus.UInt32(10), ANIMATION: True, MAX_FRAMES: dbus.UInt32(2)})
        self.assertEqual((len(info[D.FETCH_PIXELS_INFO_FRAME_DURATIONS]), len(data)), (2, 2 * 200), "capped at two")
        for bad in (0, 1001):
            message = self.expect_error(contract.DBusError.InvalidArgs, lambda: self.pixels(
                "/a.gif", {ANIMATION: True, MAX_FRAMES: dbus.UInt32(bad)}))
            self.assertIn("%s must be 1 to 1000" % MAX_FRAMES, message)

    def test_the_decoded_tier_has_afnetworkings_two_numbers_as_properties(self):
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)

        def get(name):
            return int(obj.Get(C.INTERFACE, name, dbus_interface=PROPS))

        def put(name, value):
            obj.Set(C.INTERFACE, name, dbus.UInt64(value, variant_level=1), dbus_interface=PROPS)
        self.assertEqual((get(C.DecodedMemoryCapacity), get(C.DecodedPreferredMemoryUsageAfterPurge)),
                         (100 << 20, 60 << 20))
        self.assertEqual(get(C.DecodedMemoryUsage), 0)
        self.pixels("/a.png")
        self.assertEqual(get(C.DecodedMemoryUsage), decoded_charge(8 * 4 * 4),
                         "width x height x 4 bytes, at least a page and a descriptor's worth")
        self.expect_error(contract.DBusError.InvalidArgs, lambda: put(C.DecodedMemoryCapacity, (1 << 40) + 1))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: put(C.DecodedPreferredMemoryUsageAfterPurge, 200 << 20))
        put(C.DecodedPreferredMemoryUsageAfterPurge, 0)
        put(C.DecodedMemoryCapacity, 100)  # below what is held: purged at once
        self.assertEqual(get(C.DecodedMemoryUsage), 0)
        self.pixels("/wide.png")
        self.assertEqual(get(C.DecodedMemoryUsage), 0, "a 4 KiB image does not fit in 100 bytes: answered, not kept")

    def decoded_statistics(self):
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        return {str(k): int(v) for k, v in obj.Get(C.INTERFACE, C.DecodedStatistics, dbus_interface=PROPS).items()}

    def test_one_decode_answers_every_request_for_the_same_image_and_box(self):
        self.http.bodies["/slow.png"] = png(32, 32, lambda x, y: (x * 8, y * 8, 0, 255))
        gate = self.http.gates["/slow.png"] = threading.Event()
        self.addCleanup(gate.set)
        conn = dbus.bus.BusConnection(self.bus.address, mainloop=dbus.mainloop.glib.DBusGMainLoop())
        self.addCleanup(conn.close)
        downloader = dbus.Interface(conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                                    D.INTERFACE)
        answers = []

        def ok(fd, info):
            fd = fd.take()
            answers.append((os.fstat(fd).st_ino, int(info[D.FETCH_PIXELS_INFO_WIDTH])))
            os.close(fd)
        for _ in range(3):
            downloader.FetchPixels(self.http.url("/slow.png"), dbus.Dictionary({}, signature="sv"), reply_handler=ok,
                                   error_handler=answers.append, timeout=60)
        # A call on the same connection after them: its answer means the agent took all three.
        conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False).Get(
            C.INTERFACE, C.DecodedMemoryUsage, dbus_interface=PROPS)
        wait_until(lambda: self.http.count("/slow.png") == 1, what="the one download")
        gate.set()
        context = GLib.MainContext.default()
        wait_until(lambda: (context.iteration(False), len(answers) == 3)[1], what="three answers")
        self.assertEqual(len({a for a in answers}), 1, "one set of pixels for all three: %r" % answers)
        self.assertEqual(answers[0][1], 32)
        stats = self.decoded_statistics()
        self.assertEqual((stats[C.DECODED_STATISTICS_KEY_DECODES], stats[C.DECODED_STATISTICS_KEY_SHARED_DECODES],
                          stats[C.DECODED_STATISTICS_KEY_DECODE_FAILURES]), (1, 2, 0), stats)
        self.assertEqual(stats[C.DECODED_STATISTICS_KEY_INSERTIONS], 1)
        hits = stats[C.DECODED_STATISTICS_KEY_HITS]
        self.pixels("/slow.png")
        self.assertEqual(self.decoded_statistics()[C.DECODED_STATISTICS_KEY_HITS], hits + 1, "the next one is a hit in the tier")
        self.assertGreaterEqual(stats[C.DECODED_STATISTICS_KEY_DECODERS_STARTED], 1)
        self.assertEqual(set(stats), set(C.KEYS["DecodedStatisticsKey"]), "the keys the contract lists")

    @unittest.skipUnless(os.access("/usr/bin/bwrap", os.X_OK), "bubblewrap is not installed")
    def test_the_decoder_runs_inside_bubblewrap_with_usr_alone(self):
        self.pixels("/a.png")
        pid = wait_until(self.decoders, what="a decoder process")[0]
        self.assertNotEqual(os.getppid(), pid)
        with open("/proc/%d/stat" % pid) as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
        self.assertNotEqual(parent, self.agent.proc.pid, "bwrap stands between the agent and its decoder")
        # Its root: /usr, the merged-/usr links, the linker's cache, and the folders down to the
        # decoder itself (a build tree's, wherever it is: under /tmp for a fresh clone), each
        # holding nothing but the next one. No /home, /proc, /dev, /run, /var.
        inside = "/proc/%d/root" % pid
        exe = os.readlink("/proc/%d/exe" % pid)
        self.assertTrue(os.path.exists(inside + exe), "itself")
        parts = exe.strip("/").split("/")
        self.assertLessEqual(set(os.listdir(inside)), {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
                                                       parts[0]})
        self.assertEqual(os.listdir(inside + "/etc"), ["ld.so.cache"])
        if parts[0] != "usr":
            for depth in range(1, len(parts)):
                folder = inside + "/" + "/".join(parts[:depth])
                self.assertEqual(os.listdir(folder), [parts[depth]], "only the way to the decoder in " + folder)
        agent = os.path.realpath("/proc/%d/exe" % self.agent.proc.pid)
        self.assertFalse(os.path.exists(inside + agent), "not the agent beside it")
        with open("/proc/%d/environ" % pid, "rb") as f:
            names = {v.split(b"=")[0] for v in f.read().split(b"\0") if v}
        self.assertLessEqual(names, {b"PWD"}, "none of the session's environment (bwrap sets PWD=/)")
        for ns in ("net", "pid", "ipc"):
            self.assertNotEqual(os.readlink("/proc/%d/ns/%s" % (pid, ns)), os.readlink("/proc/self/ns/" + ns), ns)

    @staticmethod
    def request_waiting(pid):
        """Whether a request waits unread on decoder `pid`'s socket (its standard input, taken with
        pidfd_getfd and asked FIONREAD)."""
        pidfd = os.pidfd_open(pid)
        try:
            fd = ctypes.CDLL(None, use_errno=True).syscall(438, pidfd, 0, 0)  # pidfd_getfd
            if fd < 0:
                raise OSError(ctypes.get_errno(), "pidfd_getfd")
            try:
                return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] > 0
            finally:
                os.close(fd)
        finally:
            os.close(pidfd)

    def test_a_decoder_killed_mid_request_fails_that_request_alone(self):
        self.pixels("/a.png")
        first = wait_until(self.decoders, what="a decoder process")
        for pid in first:
            os.kill(pid, signal.SIGSTOP)  # it cannot answer before it is killed
        answers = []

        def ask():
            conn = connect(self.bus)
            try:
                self.pixels("/wide.png", conn=conn)
                answers.append("pixels")
            except dbus.exceptions.DBusException as e:
                answers.append(e.get_dbus_name())
            finally:
                conn.close()
        asker = threading.Thread(target=ask)
        asker.start()
        self.addCleanup(asker.join, 30)
        wait_until(lambda: any(self.request_waiting(pid) for pid in first), what="the request sent to the stopped decoder")
        for pid in first:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: answers, what="FetchPixels' answer")
        self.assertEqual(answers, [ERR + "Decode"])
        _, info, _ = self.pixels("/wide.png")
        self.assertEqual(info[D.FETCH_PIXELS_INFO_WIDTH], 64, "the next request has a fresh decoder")
        self.assertTrue(set(self.decoders()).isdisjoint(first))


class OpenPixelsTests(AgentTestCase):
    """ImageCache.OpenPixels: an image added to the cache, decoded as FetchPixels decodes."""

    def cache(self):
        return dbus.Interface(self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH), contract.ImageCache.INTERFACE)

    def open_pixels(self, identifier, options=None):
        opts = dbus.Dictionary(options or {}, signature="sv")
        fd, info = self.cache().OpenPixels(identifier, opts)
        fd = fd.take()
        try:
            info = {str(k): v for k, v in info.items()}
            return os.pread(fd, int(info[C.OPEN_PIXELS_INFO_STRIDE]) * int(info[C.OPEN_PIXELS_INFO_HEIGHT]), 0), info
        finally:
            os.close(fd)

    def test_an_added_image_comes_back_decoded_and_errors_by_name(self):
        self.cache().AddImage("logo", dbus.ByteArray(RED_HALF))
        data, info = self.open_pixels("logo")
        self.assertEqual((info[C.OPEN_PIXELS_INFO_WIDTH], info[C.OPEN_PIXELS_INFO_HEIGHT], info[C.OPEN_PIXELS_INFO_FORMAT]),
                         (8, 4, C.OPEN_PIXELS_FORMAT_B8G8R8A8_PREMULTIPLIED))
        self.assertEqual(tuple(data[0:4]), (0, 0, 255, 255))
        self.assertEqual(info[C.OPEN_PIXELS_INFO_SOURCE], C.OPEN_PIXELS_SOURCE_MEMORY)
        small, info = self.open_pixels("logo", {C.OPEN_PIXELS_OPTION_MAX_WIDTH: dbus.UInt32(4)})
        self.assertEqual((info[C.OPEN_PIXELS_INFO_WIDTH], info[C.OPEN_PIXELS_INFO_HEIGHT], len(small)), (4, 2, 32))
        self.assertEqual(self.open_pixels("logo")[0], data, "the same decoded entry")
        self.expect_error(ERR + "NotFound", lambda: self.open_pixels("missing"))
        # What an app removes goes in every form: its decoded pixels too.
        obj = self.conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
        decoded = lambda: int(obj.Get(C.INTERFACE, C.DecodedMemoryUsage, dbus_interface=PROPS))
        self.assertEqual(decoded(), decoded_charge(128) + decoded_charge(32))
        self.assertTrue(self.cache().RemoveImage("logo"))
        self.assertEqual(decoded(), 0)
        self.expect_error(ERR + "NotFound", lambda: self.open_pixels("logo"))
        self.cache().AddImage("cut", dbus.ByteArray(RED_HALF[:60]))  # a whole header, no pixels
        self.expect_error(ERR + "Decode", lambda: self.open_pixels("cut"))
        self.cache().AddImage("other", dbus.ByteArray(harness_png(width=3, height=2)))
        _, info = self.open_pixels("other")
        self.assertEqual((info[C.OPEN_PIXELS_INFO_WIDTH], info[C.OPEN_PIXELS_INFO_HEIGHT]), (3, 2),
                         "the next one is decoded as usual")
        self.expect_error(contract.DBusError.InvalidArgs,
                          lambda: self.open_pixels("logo", {C.OPEN_PIXELS_OPTION_COLOR: dbus.UInt32(1)}))

    @unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
    def test_a_sandboxed_app_decodes_only_what_it_may_read(self):
        app = Stranger(self.bus, flatpak="org.example.Sandboxed")
        self.addCleanup(app.close)
        app("add", "mine", RED_HALF.hex())
        self.cache().AddImage("host-only", dbus.ByteArray(RED_HALF))
        width, height, _ = app("open-pixels", "mine")
        self.assertEqual((width, height), (8, 4))
        self.open_pixels("host-only")  # decoded, in the host's namespace
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("open-pixels", "host-only")
        self.assertEqual(cm.exception.get_dbus_name(), ERR + "NotFound", "another app's entry does not exist for it")
        self.expect_error(ERR + "NotFound", lambda: self.open_pixels("mine"))
