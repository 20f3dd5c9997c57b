# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""PrefetchImages: images fetched ahead of need, after everything else, into room nobody who uses
the cache needs."""
import hashlib
import os

import dbus

import contract

from harness import NAME, PATH, PROPS, connect, wait_until
from test_downloads import DOWNLOADER, DownloadTestCase

D = contract.Downloader


class PrefetchTestCase(DownloadTestCase):
    def prefetcher(self):
        return self.observe("prefetch_client.py")

    def tell(self, client, verb, *args):
        """Sends a command; returns the client's answer to it (the next event of its kind)."""
        kind = {"prefetch": ("prefetching", "refused"), "cancel": ("cancelled",), "fetch": ("fetched",)}[verb]
        before = len([e for e in client.snapshot() if e["event"] in kind])
        client.proc.stdin.write(" ".join((verb,) + args) + "\n")
        client.proc.stdin.flush()
        return wait_until(lambda: ([e for e in client.snapshot() if e["event"] in kind][before:] or [None])[0],
                          what="the answer to " + verb)

    def finished_prefetches(self, client, n, timeout=30):
        return wait_until(lambda: len(self.events(client, "prefetch-finished")) >= n and self.events(client, "prefetch-finished"),
                          timeout=timeout, what="%d PrefetchFinished" % n)

    def fetch(self, path):
        """FetchImage on the test's own connection: the answer's source."""
        fd, size, info = self.downloader().FetchImage(self.http.url(path), dbus.Dictionary({}, signature="sv"))
        os.close(fd.take())
        return str(info[D.FETCH_IMAGE_INFO_SOURCE])

    def entry(self, path):
        """Whether the disk tier has a file for the URL at `path`."""
        name = hashlib.sha256(self.http.url(path).encode()).hexdigest()
        return os.path.exists(os.path.join(self.bus.cache_home, "netactivity", name))


class PrefetchTests(PrefetchTestCase):
    def test_prefetched_images_are_kept_and_then_served_without_the_network(self):
        p = self.prefetcher()
        paths = ["/fresh/p%02d.png" % i for i in range(20)]
        receipt = self.tell(p, "prefetch", *[self.http.url(x) for x in paths + paths[:5]])["receipt"]
        [done] = self.finished_prefetches(p, 1)
        self.assertEqual((done["receipt"], done["stored"], done["failed"]), (receipt, 20, 0), "duplicates count once")
        self.assertEqual(len(self.disk_entries(20)), 20)
        self.assertEqual([self.fetch(x) for x in paths], [D.FETCH_IMAGE_SOURCE_MEMORY] * 20, "kept in free memory room too")
        self.assertEqual(sorted(self.http.full), sorted(paths), "each fetched once, by the prefetch")

    def test_a_request_takes_the_slot_prefetch_leaves_free_and_goes_first(self):
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(2, variant_level=1))
        p = self.prefetcher()
        urls = [self.http.url("/fresh/gate%d.png" % i) for i in range(3)] + [self.http.url("/fresh/q%d.png" % i) for i in range(3)]
        self.tell(p, "prefetch", *urls)
        wait_until(lambda: self.http.count("/fresh/gate") == 1, what="the first prefetched URL")
        c = self.client(self.http.url("/flow/now.png"))
        wait_until(lambda: self.http.count("/flow/now") == 1, what="the request, at once, in the slot prefetch left free")
        self.assertEqual((self.http.count("/fresh/gate"), self.active()), (1, 2), "prefetch took one of the two slots")
        self.http.gate("/flow/now.png").set()
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.http.gate("/fresh/gate").set()
        [done] = self.finished_prefetches(p, 1)
        self.assertEqual((done["stored"], done["failed"]), (6, 0))

    def test_cancel_and_errors(self):
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(2, variant_level=1))  # one slot for prefetch
        p = self.prefetcher()
        good = self.http.url("/fresh/gate-c.png")
        refused = self.tell(p, "prefetch", good, "ftp://example.com/x.png")
        self.assertEqual(refused["error"], contract.Error.InvalidURL)
        self.assertIn("URL 2 of 2", refused["message"])
        with self.assertRaises(dbus.exceptions.DBusException) as e:
            self.downloader().PrefetchImages([good], dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_PRIORITY: D.PRIORITY_HIGH}, signature="sv"))
        self.assertEqual(e.exception.get_dbus_name(), contract.DBusError.InvalidArgs)
        with self.assertRaises(dbus.exceptions.DBusException) as e:
            self.downloader().PrefetchImages([self.http.url("/fresh/l%d.png" % i) for i in range(4097)],
                                             dbus.Dictionary({}, signature="sv"))
        self.assertEqual(e.exception.get_dbus_name(), contract.Error.LimitsExceeded)
        receipt = self.tell(p, "prefetch", good, self.http.url("/fresh/c1.png"), self.http.url("/fresh/c2.png"))["receipt"]
        wait_until(lambda: self.http.count("/fresh/gate-c") == 1, what="the first URL under way")
        with self.assertRaises(dbus.exceptions.DBusException) as e:
            self.downloader().CancelPrefetch(receipt, dbus.Array([], signature="s"))
        self.assertEqual(e.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertEqual(self.downloader().CancelPrefetch("p999", dbus.Array([], signature="s")), 0)
        self.assertEqual(self.tell(p, "cancel", receipt, self.http.url("/fresh/c2.png"))["count"], 1)
        self.assertEqual(self.tell(p, "cancel", receipt)["count"], 2, "the one under way and the one waiting")
        wait_until(lambda: self.active() == 0, what="the transfer under way to stop")
        # A marker: an empty prefetch finishes at once; the cancelled one never sent PrefetchFinished.
        empty = self.tell(p, "prefetch")["receipt"]
        [done] = self.finished_prefetches(p, 1)
        self.assertEqual((done["receipt"], done["stored"], done["failed"]), (empty, 0, 0))
        self.http.gate("/fresh/gate").set()
        self.assertEqual(self.http.count("/fresh/c"), 0)

    def test_a_client_that_leaves_takes_its_prefetch_with_it(self):
        self.set_dprop(contract.Downloader.MaximumActiveDownloads, dbus.UInt32(2, variant_level=1))  # one slot for prefetch
        p = self.prefetcher()
        self.tell(p, "prefetch", *[self.http.url("/fresh/gate-v.png")] + [self.http.url("/fresh/v%d.png" % i) for i in range(50)])
        wait_until(lambda: self.http.count("/fresh/gate-v") == 1, what="the first URL under way")
        p.proc.kill()
        p.proc.wait()
        wait_until(lambda: self.active() == 0, what="its transfer to stop when it left")
        self.http.gate("/fresh/gate").set()
        c = self.client(self.http.url("/img/after.png"))
        self.assertTrue(self.finished(c, 1)[0]["ok"])
        self.assertEqual(self.http.count("/fresh/v"), 0, "nothing of the departed client's prefetch ran")
        # Its URLs no longer count: another client of the same app may prefetch the whole allowance.
        q = self.prefetcher()
        self.assertEqual(self.tell(q, "prefetch", *[self.http.url("/fresh/w%d.png" % i) for i in range(4096)])["event"],
                         "prefetching")


class PrefetchEvictionTests(PrefetchTestCase):
    def test_a_prefetch_of_500_never_evicts_an_image_used_after_it_started(self):
        # One client (one app) uses the cache and prefetches: no fairness between apps protects
        # its images, only the prefetch's own rule does.
        p = self.prefetcher()
        url = self.http.url
        self.assertEqual(self.tell(p, "fetch", url("/fresh/first.png"))["sources"], [D.FETCH_IMAGE_SOURCE_NETWORK])
        folder = os.path.join(self.bus.cache_home, "netactivity")
        size = os.path.getsize(os.path.join(folder, self.disk_entries(1)[0]))
        self.set_dprop(D.DiskCapacity, dbus.UInt64(100 * size, variant_level=1))
        old = ["/fresh/o%03d.png" % i for i in range(60)]
        self.tell(p, "fetch", *map(url, old))
        self.disk_entries(61)
        # The first three are held at the server: nothing prefetched is written before the uses below.
        prefetched = ["/fresh/gate%d.png" % i for i in range(3)] + ["/fresh/p%03d.png" % i for i in range(497)]
        self.tell(p, "prefetch", *map(url, prefetched))
        wait_until(lambda: self.http.count("/fresh/gate") == 3, what="the prefetch to start")
        used = old[::3]  # 20 old images used from memory after the prefetch started
        self.assertEqual(set(self.tell(p, "fetch", *map(url, used))["sources"]), {D.FETCH_IMAGE_SOURCE_MEMORY})
        new = ["/fresh/n%03d.png" % i for i in range(10)]  # and 10 new ones downloaded meanwhile
        self.assertEqual(set(self.tell(p, "fetch", *map(url, new))["sources"]), {D.FETCH_IMAGE_SOURCE_NETWORK})
        self.http.gate("/fresh/gate").set()
        [done] = self.finished_prefetches(p, 1, timeout=60)
        self.assertEqual((done["stored"], done["failed"]), (500, 0))
        entries = self.disk_entries(0, at_most=100)
        missing = [x for x in used + new if not self.entry(x)]
        self.assertEqual(missing, [], "images used after the prefetch started were evicted")
        unused_left = [x for x in old if x not in used and self.entry(x)]
        self.assertEqual(unused_left, [], "the prefetch made room from images unused since it started")
        kept = [x for x in prefetched if self.entry(x)]
        self.assertGreater(len(kept), 0)
        usage = int(self.conn.get_object(NAME, PATH, introspect=False).Get(DOWNLOADER, D.DiskUsage, dbus_interface=PROPS))
        self.assertLessEqual(usage, 100 * size)
        self.assertLessEqual(len(entries), 100)
