"""Strangers, round two (DESIGN "Trust and isolation"): each test plays an attack a hostile app
could make on the others through the agent, as that app would make it (raw sockets that never
read, forked processes, look-alike cgroups, a fake /.flatpak-info in a user+mount namespace), and
asserts the promise: the agent keeps answering everyone, shares have a floor, and a sandboxed app
never touches another app's work."""
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import dbus

from harness import BIN, IFACE, NAME, PATH, PROPS, Agent, connect, png, wait_until
from rawbus import RawClient, body_strings
from test_agent import AgentTestCase
from test_hostile import Prober

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = "org.example.NetActivity.ImageCache"
DOWNLOADER = "org.example.NetActivity.Downloader"
LIMITS = "org.example.NetActivity.Error.LimitsExceeded"
TOO_LARGE = "org.example.NetActivity.Error.TooLarge"
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

    def test_only_sealed_memfds_are_taken(self):
        image = bytes(png())
        unsealed = sealed_memfd(image, seals=False)
        read_end, write_end = os.pipe()
        for fd in (unsealed, read_end):
            msg = self.expect_error("org.freedesktop.DBus.Error.InvalidArgs",
                                    lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(fd)))
            self.assertIn("sealed", msg)
        for fd in (unsealed, read_end, write_end):
            os.close(fd)
        empty = sealed_memfd(b"")
        self.expect_error("org.freedesktop.DBus.Error.InvalidArgs",
                          lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(empty)))
        os.close(empty)
        text = sealed_memfd(b"not an image at all")
        self.expect_error("org.example.NetActivity.Error.NotAnImage",
                          lambda: self.cache().AddImageFromFd("x", dbus.types.UnixFd(text)))
        os.close(text)
        self.assertFalse(self.cache().LookupImage("x", byte_arrays=True)[0])


if __name__ == "__main__":
    unittest.main()
