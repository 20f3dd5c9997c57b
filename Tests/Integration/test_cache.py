# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The shared image cache end to end: sharing between clients, the fd path, purges, limits, pressure."""
import errno
import mmap
import os
import struct
import subprocess
import tempfile
import time

import dbus

from harness import NAME, PATH, PROPS, Agent, PrivateBus, busctl, cli, connect, png, wait_until
from test_agent import AgentTestCase
import contract

CACHE = contract.ImageCache.INTERFACE
ERR = contract.ERROR_PREFIX


def jpeg(width=8, height=8):
    sof = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", height, width) + b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + sof + b"\xff\xd9"


def ay(data):
    return dbus.ByteArray(data)


class CacheTestCase(AgentTestCase):
    def cache(self, conn=None):
        return dbus.Interface((conn or self.conn).get_object(NAME, PATH, introspect=False), CACHE)

    def cprop(self, name):
        return self.conn.get_object(NAME, PATH, introspect=False).Get(CACHE, name, dbus_interface=PROPS)

    def set_cprop(self, name, value):
        self.conn.get_object(NAME, PATH, introspect=False).Set(CACHE, name, dbus.UInt64(value, variant_level=1),
                                                               dbus_interface=PROPS)

    def stats(self):
        return {str(k): int(v) for k, v in self.cprop("Statistics").items()}


    def lookup(self, key, conn=None):
        found, data = self.cache(conn).LookupImage(key, byte_arrays=True)
        return bytes(data) if found else None


class SharingTests(CacheTestCase):
    def test_one_app_stores_another_reads_with_python_and_busctl(self):
        image = png()
        self.cache().AddImage("avatar:alice", ay(image))
        other = connect(self.bus)
        try:
            self.assertEqual(self.lookup("avatar:alice", other), image)
        finally:
            other.close()
        r = busctl(self.bus, "call", NAME, PATH, CACHE, "LookupImage", "s", "avatar:alice")
        self.assertEqual(r.returncode, 0, r.stderr)
        fields = r.stdout.split()
        self.assertEqual(fields[:3], ["bay", "true", str(len(image))])
        self.assertEqual(bytes(int(x) for x in fields[3:]), image)
        self.assertEqual(self.cache().LookupImage("nobody", byte_arrays=True), (False, b""))
        self.assertEqual((int(self.cprop("ImageCount")), int(self.cprop("MemoryUsage"))), (1, len(image)))

    def test_request_keys(self):
        url = "https://example.com/a.png"
        small, filtered = png(2, 2), png(5, 5)
        self.cache().AddImageForRequest(url, "", ay(small))
        self.cache().AddImageForRequest(url, "blur", ay(filtered))
        self.assertEqual(self.lookup(url), small, "(url, '') is the identifier url")
        self.assertEqual(bytes(self.cache().LookupImageForRequest(url, "blur", byte_arrays=True)[1]), filtered)
        self.assertFalse(self.cache().LookupImageForRequest(url, "sharpen")[0])
        # AFNetworking's ambiguity: "u"+"rl" and "ur"+"l" are different entries here.
        self.cache().AddImageForRequest("u", "rl", ay(small))
        self.assertFalse(self.cache().LookupImageForRequest("ur", "l")[0])
        self.assertFalse(self.cache().RemoveImageForRequest(url, "sharpen"))
        self.assertTrue(self.cache().RemoveImageForRequest(url, "blur"))
        self.assertFalse(self.cache().RemoveImageForRequest(url, "blur"))
        self.assertTrue(self.cache().RemoveImage(url))
        self.assertFalse(self.cache().RemoveImage(url))
        self.assertTrue(self.cache().RemoveAllImages())
        self.assertFalse(self.cache().RemoveAllImages())

    def test_every_format_is_accepted(self):
        samples = {
            "png": png(), "jpeg": jpeg(), "gif": b"GIF89a\x10\x00\x09\x00\x00\x00\x00;",
            "webp": b"RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00\x30\x01\x00\x9d\x01\x2a\x2c\x01\xc8\x00\x00\x00",
            "bmp": b"BM" + struct.pack("<IIIIiiHH", 58, 0, 54, 40, 2, -2, 1, 24) + b"\x00" * 28,
            "ico": b"\x00\x00\x01\x00\x01\x00\x30\x30\x00\x00\x01\x00\x20\x00" + struct.pack("<II", 40, 22),
            "svg": b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>',
        }
        for name, data in samples.items():
            self.cache().AddImage(name, ay(data))
            self.assertEqual(self.lookup(name), data, name)

    def test_open_image_is_a_sealed_read_only_fd(self):
        for size_hint in (0, 300 * 1024):  # an array-backed and a memfd-backed image
            image = png(extra=size_hint)
            key = "big" if size_hint else "small"
            self.cache().AddImage(key, ay(image))
            fd_obj, size = self.cache().OpenImage(key)
            fd = fd_obj.take()
            try:
                self.assertEqual(size, len(image))
                self.assertEqual(os.fstat(fd).st_size, len(image))
                self.assertEqual(os.pread(fd, len(image) + 10, 0), image)
                with mmap.mmap(fd, len(image), prot=mmap.PROT_READ) as m:
                    self.assertEqual(m[:8], image[:8])
                # The fd is read-only, and reopening it for writing does not help: the seals hold.
                self.assertEqual(os.get_blocking(fd), True)
                rw = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
                try:
                    for target in (fd, rw):
                        for attempt in (lambda: os.pwrite(target, b"x", 0), lambda: os.ftruncate(target, len(image) + 4096),
                                        lambda: os.ftruncate(target, 1), lambda: mmap.mmap(target, len(image))):
                            with self.assertRaises(OSError, msg=key):
                                attempt()
                    self.assertEqual(os.pread(rw, 8, 0), image[:8])
                finally:
                    os.close(rw)
                # Each OpenImage has its own offset: reading one to the end does not empty another.
                self.assertEqual(os.read(fd, len(image) + 1), image)
                again, _ = self.cache().OpenImage(key)
                again = again.take()
                self.assertEqual(os.read(again, len(image) + 1), image)
                os.close(again)
            finally:
                os.close(fd)
            self.assertEqual(self.lookup(key), image, "the cache's copy is untouched")
        self.expect_error(ERR + "NotFound", lambda: self.cache().OpenImage("missing"))

    def test_open_image_for_request_opens_what_the_request_key_holds(self):
        image = png(extra=200 * 1024)
        url = "https://example.com/photo.png"
        self.cache().AddImageForRequest(url, "2x", ay(image))
        fd_obj, size = self.cache().OpenImageForRequest(url, "2x")
        fd = fd_obj.take()
        try:
            self.assertEqual(size, len(image))
            self.assertEqual(os.pread(fd, len(image) + 10, 0), image)
        finally:
            os.close(fd)
        # Another additional identifier is another key; errors name the URL.
        err = self.expect_error(ERR + "NotFound", lambda: self.cache().OpenImageForRequest(url, ""))
        self.assertIn(url, err)
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.cache().OpenImageForRequest("", ""))


class PurgeTests(CacheTestCase):
    def test_eleventh_image_purges_to_six_keeping_the_one_just_read(self):
        image = png()
        n = len(image)
        self.set_cprop("PreferredMemoryUsageAfterPurge", 6 * n)
        self.set_cprop("MemoryCapacity", 10 * n)
        for i in range(10):
            self.cache().AddImage("image-%d" % i, ay(image))
        self.assertIsNotNone(self.lookup("image-0"))
        self.cache().AddImage("image-10", ay(image))
        self.assertEqual(int(self.cprop("MemoryUsage")), 6 * n)
        kept = [i for i in range(11) if self.cache().LookupImage("image-%d" % i)[0]]
        self.assertEqual(kept, [0, 6, 7, 8, 9, 10])
        s = self.stats()
        self.assertEqual((s[contract.ImageCache.STATISTICS_KEY_INSERTIONS], s[contract.ImageCache.STATISTICS_KEY_EVICTIONS]), (11, 5))
        self.assertEqual(s[contract.ImageCache.STATISTICS_KEY_HITS], 1 + 6)
        self.assertEqual(s[contract.ImageCache.STATISTICS_KEY_MISSES], 5)

    def test_watermark_validation_and_shrink(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        msg = self.expect_error(contract.DBusError.InvalidArgs,
                                lambda: self.set_cprop("PreferredMemoryUsageAfterPurge", 104857601))
        self.assertIn("must not be above MemoryCapacity", msg)
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.set_cprop("MemoryCapacity", 1000))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.set_cprop("MemoryCapacity", 1 << 41))
        self.expect_error(contract.DBusError.InvalidArgs,
                          lambda: obj.Set(CACHE, "MemoryCapacity", dbus.UInt32(5, variant_level=1), dbus_interface=PROPS))
        self.expect_error(contract.DBusError.PropertyReadOnly,
                          lambda: obj.Set(CACHE, "MemoryUsage", dbus.UInt64(0, variant_level=1), dbus_interface=PROPS))
        self.assertEqual(int(self.cprop("MemoryCapacity")), 104857600)
        self.assertEqual(int(self.cprop("PreferredMemoryUsageAfterPurge")), 62914560)
        image = png()
        for i in range(10):
            self.cache().AddImage("i%d" % i, ay(image))
        self.set_cprop("PreferredMemoryUsageAfterPurge", 3 * len(image))
        self.set_cprop("MemoryCapacity", 5 * len(image))  # below the usage: purges at once
        self.assertEqual(int(self.cprop("ImageCount")), 3)
        self.assertEqual([i for i in range(10) if self.cache().LookupImage("i%d" % i)[0]], [7, 8, 9])


class InputTests(CacheTestCase):
    def test_not_an_image_too_large_and_bad_keys(self):
        msg = self.expect_error(ERR + "NotAnImage", lambda: self.cache().AddImage("text", ay(b"hello, world")))
        self.assertIn("'text'", msg)
        self.expect_error(ERR + "NotAnImage", lambda: self.cache().AddImage("cut", ay(png()[:20])))
        self.expect_error(ERR + "NotAnImage", lambda: self.cache().AddImage("empty", ay(b"")))
        self.expect_error(ERR + "NotAnImage", lambda: self.cache().AddImage("html", ay(b"<html><svg")))
        self.set_cprop("PreferredMemoryUsageAfterPurge", 1000)
        self.set_cprop("MemoryCapacity", 2000)
        msg = self.expect_error(ERR + "TooLarge", lambda: self.cache().AddImage("big", ay(png(extra=3000))))
        self.assertIn("2000", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: self.cache().AddImage("", ay(png())))
        self.assertIn("must not be empty", msg)
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.cache().AddImage("k" * 5000, ay(png())))
        self.expect_error(contract.DBusError.InvalidArgs, lambda: self.cache().LookupImageForRequest("", "x"))
        r = busctl(self.bus, "call", NAME, PATH, CACHE, "AddImage", "su", "x", "5")
        self.assertIn("expected signature 'say', got 'su'", r.stderr)
        self.assertEqual(int(self.cprop("ImageCount")), 0)

    def test_hostile_headers_leave_the_agent_up(self):
        magics = [b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a", b"RIFF\x00\x00\x00\x00WEBPVP8X", b"BM", b"\x00\x00\x01\x00",
                  b"\xff\xd8\xff\xc0\x00\x01", b"\xff\xd8\xff\xe0\xff\xff"]
        for i, magic in enumerate(magics):
            for n in range(0, 40, 3):
                try:
                    self.cache().AddImage("h%d-%d" % (i, n), ay(magic + bytes((j * 37 + n) & 0xFF for j in range(n))))
                except dbus.exceptions.DBusException as e:
                    self.assertEqual(e.get_dbus_name(), ERR + "NotAnImage")
        self.assertTrue(self.agent.alive())


class LowMemoryTests(CacheTestCase):
    """A second private bus stands in for the system bus, with a fake LowMemoryMonitor on it."""

    def setUp(self):
        self.system = PrivateBus()
        self.agent_args = ("--system-bus-address", self.system.address)
        super().setUp()

    def tearDown(self):
        super().tearDown()
        self.system.stop()

    def warn(self, level):
        monitor = connect(self.system)
        try:
            monitor.request_name("org.freedesktop.LowMemoryMonitor")
            msg = dbus.lowlevel.SignalMessage("/org/freedesktop/LowMemoryMonitor", "org.freedesktop.LowMemoryMonitor",
                                              "LowMemoryWarning")
            msg.append(dbus.Byte(level))
            monitor.send_message(msg)
            monitor.flush()
        finally:
            monitor.close()

    def test_moderate_trims_to_preferred_and_critical_empties(self):
        image = png()
        self.set_cprop("PreferredMemoryUsageAfterPurge", 4 * len(image))
        for i in range(8):
            self.cache().AddImage("i%d" % i, ay(image))
        self.warn(50)
        wait_until(lambda: int(self.cprop("ImageCount")) == 4, what="a moderate trim")
        self.warn(255)
        wait_until(lambda: int(self.cprop("ImageCount")) == 0, what="a critical purge")
        s = self.stats()
        self.assertEqual((s[contract.ImageCache.STATISTICS_KEY_PRESSURE_MODERATE], s[contract.ImageCache.STATISTICS_KEY_PRESSURE_CRITICAL], s[contract.ImageCache.STATISTICS_KEY_PRESSURE_EVICTIONS]), (1, 1, 8))
        self.assertEqual(s[contract.ImageCache.STATISTICS_KEY_PRESSURE_BYTES_FREED], 8 * len(image))
        self.warn(0)  # "no pressure" does nothing
        self.cache().AddImage("after", ay(image))
        # A moderate warning after it (one image is under the preferred usage: nothing to trim):
        # once it is counted, the agent has taken the "no pressure" before it.
        self.warn(50)
        wait_until(lambda: self.stats()[contract.ImageCache.STATISTICS_KEY_PRESSURE_MODERATE] == 2, what="the marker warning")
        s = self.stats()
        self.assertEqual((s[contract.ImageCache.STATISTICS_KEY_PRESSURE_CRITICAL], s[contract.ImageCache.STATISTICS_KEY_PRESSURE_EVICTIONS]), (1, 8))
        self.assertEqual(int(self.cprop("ImageCount")), 1)


class CacheCLITests(CacheTestCase):
    def test_add_get_rm_clear_stats(self):
        image = png(extra=100 * 1024)
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "in.png"), os.path.join(d, "out.png")
            with open(src, "wb") as f:
                f.write(image)
            r = cli(self.bus, "cache", "add", "logo", src)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.lookup("logo"), image)
            r = cli(self.bus, "cache", "get", "logo", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), image)
            r = subprocess.run([os.path.join(os.environ["NETACTIVITY_BIN"], "netactivity"), "cache", "get", "logo"],
                               env=self.bus.env(), capture_output=True, timeout=20)
            self.assertEqual(r.stdout, image)
            with open(os.path.join(d, "note.txt"), "w") as f:
                f.write("not an image")
            r = cli(self.bus, "cache", "add", "note", os.path.join(d, "note.txt"))
            self.assertEqual(r.returncode, 1)
            self.assertIn("not a PNG", r.stderr)
            r = cli(self.bus, "cache", "add", "x", os.path.join(d, "missing.png"))
            self.assertEqual(r.returncode, 66)
        r = cli(self.bus, "cache", "stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("images:      1", r.stdout)
        self.assertIn("hits:", r.stdout)
        r = cli(self.bus, "cache", "get", "nothing")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no image 'nothing'", r.stderr)
        self.assertEqual(cli(self.bus, "cache", "rm", "logo").returncode, 0)
        self.assertEqual(cli(self.bus, "cache", "rm", "logo").returncode, 1)
        self.cache().AddImage("a", ay(png()))
        self.assertEqual(cli(self.bus, "cache", "clear").returncode, 0)
        self.assertEqual(int(self.cprop("ImageCount")), 0)
