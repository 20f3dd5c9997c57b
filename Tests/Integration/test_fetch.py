# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""FetchImage: one call per image, its reply carrying the image's sealed memfd; tasks published only
for transfers that last; every completion after the reply of the call that started it."""
import hashlib
import os
import subprocess
import threading
import time

import dbus

import contract

from harness import NAME, PATH, PROPS, Agent, connect, prop, task_states, wait_until
from test_downloads import CACHE, DOWNLOADER, ERR, DownloadTestCase

INVALID_ARGS = contract.DBusError.InvalidArgs
D = contract.Downloader


def expected_info(source, status=None, content_type="image/png"):
    """FetchImage's info as the contract names its keys: source, content type, the HTTP status where a transfer ran."""
    out = {D.FETCH_IMAGE_INFO_SOURCE: source, D.FETCH_IMAGE_INFO_CONTENT_TYPE: content_type}
    if status is not None:
        out[D.FETCH_IMAGE_INFO_HTTP_STATUS] = status
    return out


class BusMonitor:
    """dbus-monitor --profile on the private bus: every message the bus routes, one tuple each
    (type, sender, destination, path, interface, member), between markers our connection sends."""

    def __init__(self, bus):
        self.proc = subprocess.Popen(["dbus-monitor", "--address", bus.address, "--profile"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines = []
        self.marks = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            fields = line.rstrip("\n").split("\t")
            if fields[0] in ("mc", "mr", "sig", "err"):
                with self.lock:
                    self.lines.append(fields)

    def mark(self, conn):
        """A GetId call from `conn`, once the monitor has seen it: the index just after it. Sent
        again until one is seen (a monitor just started may not be listening yet); every marker
        seen up to it is used."""
        me = conn.get_unique_name()

        def seen():
            with self.lock:
                for i in range(len(self.lines) - 1, -1, -1):
                    f = self.lines[i]
                    if f[0] == "mc" and f[3] == me and f[-1] == "GetId" and i not in self.marks:
                        self.marks.update(j for j in range(i + 1) if self.lines[j][0] == "mc"
                                          and self.lines[j][3] == me and self.lines[j][-1] == "GetId")
                        return i + 1
            return None
        deadline = time.monotonic() + 10
        while True:
            conn.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetId(dbus_interface="org.freedesktop.DBus")
            try:
                return wait_until(seen, timeout=0.5, what="the monitor to see the marker")
            except AssertionError:
                if time.monotonic() > deadline:
                    raise

    def between(self, start, end):
        with self.lock:
            return self.lines[start:end - 1]

    def close(self):
        self.proc.kill()
        self.proc.wait()


class FetchTestCase(DownloadTestCase):
    def fetch(self, url, conn=None, **options):
        """FetchImage's (bytes, size, info) in the test's own process."""
        opts = dbus.Dictionary({k.replace("_", "-"): v for k, v in options.items()}, signature="sv")
        fd, size, info = self.downloader(conn).FetchImage(url, opts, timeout=60)
        fd = fd.take()
        try:
            return os.pread(fd, int(size) + 1, 0), int(size), {str(k): v for k, v in info.items()}, \
                os.readlink("/proc/self/fd/%d" % fd)
        finally:
            os.close(fd)

    def fetcher(self, *specs, announce=False):
        return self.observe("fetch_client.py", *(("--announce",) if announce else ()), *specs)

    def answers(self, c, n, timeout=20):
        return wait_until(lambda: len([e for e in c.snapshot() if e["event"] in ("fetched", "failed")]) >= n and
                          [e for e in c.snapshot() if e["event"] in ("fetched", "failed")], timeout=timeout,
                          what="%d FetchImage answers" % n)


class FetchAnswerTests(FetchTestCase):
    def test_network_then_memory_then_disk_each_with_the_same_bytes(self):
        url = self.http.url("/fresh/big-one.png")
        data, size, info, target = self.fetch(url)
        self.assertEqual(data, self.http.bodies["/fresh/big-one.png"])
        self.assertEqual(size, len(data))
        self.assertEqual(info, expected_info(D.FETCH_IMAGE_SOURCE_NETWORK, 200))
        self.assertIn("memfd:netactivity-image", target)
        data2, _, info2, target2 = self.fetch(url)
        self.assertEqual((data2, info2), (data, expected_info(D.FETCH_IMAGE_SOURCE_MEMORY)))
        self.assertEqual(self.http.count("/fresh/"), 1, "the second answer came from memory")
        self.disk_entries(1)
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)
        self.conn.close()
        self.conn = connect(self.bus)
        data3, _, info3, _ = self.fetch(url)
        self.assertEqual((data3, info3), (data, expected_info(D.FETCH_IMAGE_SOURCE_DISK)))
        self.assertEqual(self.http.count("/fresh/"), 1, "the third from the disk")

    def test_a_small_image_is_a_memfd_too_and_read_only(self):
        import fcntl
        url = self.http.url("/img/small.png")
        fd, size, _ = self.downloader().FetchImage(url, dbus.Dictionary({}, signature="sv"))
        fd = fd.take()
        try:
            self.assertEqual(os.pread(fd, int(size) + 1, 0), self.http.bodies["/img/small.png"])
            with self.assertRaises(OSError):
                os.pwrite(fd, b"x", 0)
            F_GET_SEALS = 1034
            self.assertTrue(fcntl.fcntl(fd, F_GET_SEALS) & 0x8, "F_SEAL_WRITE: nobody can change it")
        finally:
            os.close(fd)

    def test_errors_are_the_method_s_own(self):
        for path, name in {"/missing.png": "HTTP", "/text": "NotAnImage", "/loop": "HTTP"}.items():
            self.expect_error(ERR + name, lambda: self.fetch(self.http.url(path)))
        for url in ("ftp://example.com/a.png", "http://", "not a url"):
            self.expect_error(ERR + "InvalidURL", lambda: self.fetch(url))
        msg = self.expect_error(INVALID_ARGS, lambda: self.fetch(self.http.url("/img/a.png"), reload=dbus.String("yes")))
        self.assertIn("reload", msg)
        msg = self.expect_error(INVALID_ARGS, lambda: self.fetch(self.http.url("/img/a.png"), colour=dbus.String("red")))
        self.assertIn("announce", msg, "the known options are named")
        self.expect_error(INVALID_ARGS, lambda: self.fetch(self.http.url("/img/a.png"), receipt=dbus.String("")))
        self.expect_error(INVALID_ARGS, lambda: self.fetch(self.http.url("/img/a.png"), receipt=dbus.String("r" * 256)))
        self.assertTrue(self.agent.alive())

    def test_fetch_and_download_share_one_transfer(self):
        url = self.http.url("/gate/shared.png")
        d = self.client(url)
        f = self.fetcher(url)
        wait_until(lambda: self.events(d, "requested"), what="the DownloadImage receipt")
        wait_until(lambda: self.http.count("/gate/shared") == 1, what="the transfer")
        self.http.gate("/gate/shared.png").set()
        self.assertTrue(self.finished(d, 1)[0]["ok"])
        answer = self.answers(f, 1)[0]
        self.assertEqual(answer["event"], "fetched", answer)
        self.assertEqual(answer["sha256"], hashlib.sha256(self.http.bodies["/gate/shared.png"]).hexdigest())
        self.assertEqual(self.http.count("/gate/shared"), 1, "one HTTP request for both")


class FetchCancelTests(FetchTestCase):
    def test_cancel_by_the_caller_s_receipt_answers_the_call_cancelled(self):
        url = self.http.url("/gate/c.png")
        mine = self.fetcher(url + "#thumb-1")
        theirs = self.fetcher(url + "#thumb-1")  # the same name on another connection is another receipt
        wait_until(lambda: self.http.count("/gate/c") == 1, what="the transfer")
        self.assertFalse(self.downloader().CancelDownload("thumb-1"), "not this connection's receipt")
        mine.send("cancel thumb-1")
        answer = self.answers(mine, 1)[0]
        self.assertEqual((answer["event"], answer["error"], answer["receipt"]), ("failed", ERR + "Cancelled", "thumb-1"))
        wait_until(lambda: [e for e in mine.snapshot() if e["event"] == "cancel"], what="CancelDownload's reply")
        self.assertEqual([e["result"] for e in mine.snapshot() if e["event"] == "cancel"], [True])
        mine.send("cancel thumb-1")
        wait_until(lambda: len([e for e in mine.snapshot() if e["event"] == "cancel"]) == 2, what="the second cancel")
        self.assertEqual([e["result"] for e in mine.snapshot() if e["event"] == "cancel"], [True, False], "once")
        self.assertEqual(self.active(), 1, "theirs goes on")
        self.http.gate("/gate/c.png").set()
        self.assertEqual(self.answers(theirs, 1)[0]["event"], "fetched")

    def test_a_receipt_is_unique_among_the_caller_s_pending_calls(self):
        url = self.http.url("/gate/u.png")
        c = self.fetcher(url + "#same", url + "#same")
        answer = self.answers(c, 1)[0]
        self.assertEqual((answer["event"], answer["error"]), ("failed", INVALID_ARGS))
        self.assertIn("already pending", answer["message"])
        self.http.gate("/gate/u.png").set()
        self.assertEqual(self.answers(c, 2)[1]["event"], "fetched")
        c.send("fetch %s#same" % url)  # free again once answered
        self.assertEqual(self.answers(c, 3)[2]["event"], "fetched")

    def test_a_caller_that_leaves_cancels_its_pending_calls(self):
        c = self.fetcher(self.http.url("/gate/left.png"))
        wait_until(lambda: self.http.count("/gate/left") == 1, what="the transfer")
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1, "a running transfer is activity from its start")
        c.close()
        wait_until(lambda: self.active() == 0 and int(prop(self.conn, "ActivityCount")) == 0,
                   what="the transfer to stop with its only caller")

    def test_pending_calls_count_against_the_per_client_limit(self):
        url = self.http.url("/gate/many.png")
        c = self.fetcher(*[url] * 1025)
        refused = self.answers(c, 1)[0]
        self.assertEqual(refused["error"], ERR + "LimitsExceeded", refused)
        self.http.gate("/gate/many.png").set()
        answers = self.answers(c, 1025)
        self.assertEqual(len([a for a in answers if a["event"] == "fetched"]), 1024)
        self.assertEqual(self.http.count("/gate/many"), 1)


class LazyAnnouncementTests(FetchTestCase):
    """A transfer publishes its task object only once it has run for ActivationDelay, or at once
    when asked: a short one costs panels nothing."""
    agent_args = ("--completion-delay", "0")  # the default activation delay (1 s)

    def setUp(self):
        super().setUp()
        self.monitor = BusMonitor(self.bus)
        self.addCleanup(self.monitor.close)

    def test_a_small_image_costs_the_bus_two_messages(self):
        # No transfer here could last 30 s: however loaded the machine, none may publish a task.
        self.conn.get_object(NAME, PATH, introspect=False).Set(
            contract.Activity.INTERFACE, "ActivationDelay", dbus.Double(30.0, variant_level=1), dbus_interface=PROPS)
        self.fetch(self.http.url("/img/warm-up.png"))  # the agent learns who we are (its calls to the bus)
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="the warm-up to end")
        start = self.monitor.mark(self.conn)
        t0 = time.monotonic()
        n = 20
        for i in range(n):
            self.fetch(self.http.url("/img/small%d.png" % i))
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="the activity to end")
        seen = self.monitor.between(start, self.monitor.mark(self.conn))
        # Every signal counted was sent between t0 and now (the closing mark came back after them).
        elapsed = time.monotonic() - t0
        me, agent = self.conn.get_unique_name(), self.conn.get_name_owner(NAME)
        calls = [f for f in seen if f[0] == "mc" and f[-1] == "FetchImage"]
        serials = {f[2] for f in calls}  # a return's last field is the serial of the call it answers
        replies = [f for f in seen if f[0] == "mr" and f[3] == agent and f[4] == me and f[-1] in serials]
        self.assertEqual((len(calls), len(replies)), (n, n))
        signals = [f for f in seen if f[0] == "sig" and f[3] == agent]
        members = {f[-1] for f in signals}
        self.assertLessEqual(members, {"PropertiesChanged"}, "no task object, no DownloadFinished")
        # The activity count's changes, coalesced to one per 50 ms (and each GetAll above reads it).
        self.assertLessEqual(len(signals), 2 + 2 * int(elapsed / 0.05 + 1), signals)
        # Nothing else to or from the agent but our property reads (wait_until above) and their returns.
        reads = {f[2] for f in seen if f[0] == "mc" and f[3] == me and f[-1] in ("Get", "GetAll", "Introspect")}
        others = [f for f in seen if f not in calls and f not in replies and f not in signals and agent in f[3:5] and
                  f[2] not in reads and f[-1] not in reads]
        self.assertEqual(others, [], "nothing else")
        self.assertEqual(task_states(self.conn), {})

    def test_a_long_transfer_is_published_after_the_activation_delay(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(contract.Activity.INTERFACE, "ActivationDelay", dbus.Double(2.0, variant_level=1), dbus_interface=PROPS)
        t0 = time.monotonic()
        c = self.fetcher(self.http.url("/gate/long.png"))
        wait_until(lambda: self.http.count("/gate/long") == 1, what="the transfer")
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1, "activity from the start")
        task = wait_until(lambda: task_states(self.conn), timeout=10, what="the task object")
        self.assertGreaterEqual(time.monotonic() - t0, 1.9, "not before the activation delay")
        self.assertEqual(list(task.values()), [(contract.Task.STATE_RUNNING, "")])
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1, "the task took the transfer's activity over")
        self.http.gate("/gate/long.png").set()
        self.assertEqual(self.answers(c, 1)[0]["event"], "fetched")
        wait_until(lambda: list(task_states(self.conn).values()) == [(contract.Task.STATE_COMPLETED, "")], what="the task to complete")
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="the activity to end")

    def test_announce_publishes_at_once(self):
        obj = self.conn.get_object(NAME, PATH, introspect=False)
        obj.Set(contract.Activity.INTERFACE, "ActivationDelay", dbus.Double(60.0, variant_level=1), dbus_interface=PROPS)
        c = self.fetcher(self.http.url("/gate/shown.png"), announce=True)
        task = wait_until(lambda: task_states(self.conn), what="the task object")
        self.assertEqual(list(task.values()), [(contract.Task.STATE_RUNNING, "")])
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1)
        self.http.gate("/gate/shown.png").set()
        self.assertEqual(self.answers(c, 1)[0]["event"], "fetched")
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="the activity to end")


class SynchronousFailureTests(FetchTestCase):
    """Failures found inside the call that started the download (no libcurl; a disk tier that knows
    the key is absent, or a reload that skips it) are told after the call's reply."""

    def setUp(self):
        super().setUp()
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args, env={"NETACTIVITY_LIBCURL": "/nonexistent/libcurl.so.4"})

    def test_download_image_names_its_receipt_in_download_finished(self):
        for options in ({}, {"reload": True}):
            c = self.client(self.http.url("/img/a.png"), self.http.url("/img/b.png"))
            done = self.finished(c, 2)
            requested = {e["url"]: e["receipt"] for e in self.events(c, "requested")}
            self.assertEqual(len(requested), 2)
            for e in done:
                self.assertFalse(e["ok"])
                self.assertIn("libcurl", e["error_message"])
                self.assertEqual(e["receipt"], requested[e["url"]], "the receipt its reply gave, never ''")
                self.assertNotEqual(e["receipt"], "")
            c.close()

    def test_fetch_image_answers_with_the_error(self):
        for options in ({}, {"reload": dbus.Boolean(True)}):
            msg = self.expect_error(contract.DBusError.Failed, lambda: self.fetch(self.http.url("/img/a.png"), **options))
            self.assertIn("libcurl", msg)
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 0)
        self.assertEqual(self.http.count("/img/"), 0)


class CacheKeyAndMaxAgeTests(FetchTestCase):
    """cache-key: one entry for an image whose URL keeps changing; max-age: how old a cached copy may be for one request."""

    def restart(self):
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)
        self.conn.close()
        self.conn = connect(self.bus)

    def test_a_cache_key_answers_for_every_signed_url_of_the_image_in_memory_and_on_disk(self):
        key = {D.FETCH_IMAGE_OPTION_CACHE_KEY: dbus.String("avatar/42")}
        data, _, info, _ = self.fetch(self.http.url("/fresh/avatar.png?sig=1&expires=100"), **key)
        self.assertEqual(info, expected_info(D.FETCH_IMAGE_SOURCE_NETWORK, 200))
        data2, _, info2, _ = self.fetch(self.http.url("/fresh/avatar.png?sig=2&expires=200"), **key)
        self.assertEqual((data2, info2), (data, expected_info(D.FETCH_IMAGE_SOURCE_MEMORY)))
        receipt, _, cached = self.downloader().DownloadImage(
            self.http.url("/fresh/avatar.png?sig=3"), dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_CACHE_KEY: "avatar/42"}, signature="sv"))
        self.assertEqual((receipt, cached), ("", True), "DownloadImage with the cache-key: a hit")
        self.assertEqual(self.http.count("/fresh/avatar"), 1, "one transfer for three URLs")
        _, _, info3, _ = self.fetch(self.http.url("/fresh/avatar.png?sig=2&expires=200"))
        self.assertEqual(info3[D.FETCH_IMAGE_INFO_SOURCE], D.FETCH_IMAGE_SOURCE_NETWORK, "without the key, the URL is its own entry")
        self.disk_entries(2)
        self.restart()
        data4, _, info4, _ = self.fetch(self.http.url("/fresh/avatar.png?sig=9"), **key)
        self.assertEqual((data4, info4), (data, expected_info(D.FETCH_IMAGE_SOURCE_DISK)), "the disk tier keeps it under the key")
        self.assertEqual(self.http.count("/fresh/avatar"), 2)

    def test_bad_cache_keys_and_max_ages_are_invalid_args(self):
        url = self.http.url("/img/a.png")
        for key in ("", "k" * 4097):
            msg = self.expect_error(INVALID_ARGS, lambda: self.fetch(url, **{D.FETCH_IMAGE_OPTION_CACHE_KEY: dbus.String(key)}))
            self.assertIn("%s must be 1 to 4096 bytes" % D.FETCH_IMAGE_OPTION_CACHE_KEY, msg)
        for age in (-1.0, float("nan"), float("inf"), 366 * 86400.0):
            msg = self.expect_error(INVALID_ARGS, lambda: self.fetch(url, **{D.FETCH_IMAGE_OPTION_MAX_AGE: dbus.Double(age)}))
            self.assertIn("%s must be 0 to 31536000 seconds" % D.FETCH_IMAGE_OPTION_MAX_AGE, msg)
        self.expect_error(INVALID_ARGS, lambda: self.downloader().DownloadImage(
            url, dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_MAX_AGE: dbus.UInt32(5)}, signature="sv")))
        self.assertEqual(self.http.count("/img/"), 0)

    def test_max_age_holds_memory_and_disk_copies_to_it_both_ways(self):
        fresh = self.http.url("/fresh/aged.png")  # the server: fresh for an hour
        self.fetch(fresh)
        _, _, info, _ = self.fetch(fresh, **{D.FETCH_IMAGE_OPTION_MAX_AGE: dbus.Double(3600)})
        self.assertEqual(info[D.FETCH_IMAGE_INFO_SOURCE], D.FETCH_IMAGE_SOURCE_MEMORY, "young enough")
        data, _, info, _ = self.fetch(fresh, **{D.FETCH_IMAGE_OPTION_MAX_AGE: dbus.Double(0)})
        self.assertEqual(info, expected_info(D.FETCH_IMAGE_SOURCE_NETWORK, 200), "0: the server is asked, though it said an hour")
        self.assertEqual(self.http.full.count("/fresh/aged.png"), 2)
        self.assertEqual(data, self.http.bodies["/fresh/aged.png"], "the new bytes replaced the old ones")
        receipt, _, cached = self.downloader().DownloadImage(
            fresh, dbus.Dictionary({D.DOWNLOAD_IMAGE_OPTION_MAX_AGE: dbus.Double(0)}, signature="sv"))
        self.assertFalse(cached, "DownloadImage holds its hit to max-age too")
        wait_until(lambda: self.http.full.count("/fresh/aged.png") == 3 and self.active() == 0, what="its transfer")
        revalidated = self.http.url("/etag/aged.png")  # the server: stale at once, revalidate with its ETag
        self.fetch(revalidated)
        self.disk_entries(2)
        self.restart()
        _, _, info, _ = self.fetch(revalidated, **{D.FETCH_IMAGE_OPTION_MAX_AGE: dbus.Double(3600)})
        self.assertEqual(info, expected_info(D.FETCH_IMAGE_SOURCE_DISK), "younger than max-age: the disk copy, unasked")
        self.assertEqual(self.http.revalidated, [])
        self.restart()
        _, _, info, _ = self.fetch(revalidated)
        self.assertEqual(info, expected_info(D.FETCH_IMAGE_SOURCE_NETWORK, 304), "without it, the server's word: revalidated")
        self.assertEqual(self.http.revalidated, ["/etag/aged.png"])


class RemoveImagesTests(FetchTestCase):
    def remove(self, prefix):
        return int(self.downloader().RemoveImages(prefix))

    def source(self, url, **options):
        return self.fetch(url, **options)[2][D.FETCH_IMAGE_INFO_SOURCE]

    def test_a_prefix_takes_its_images_from_memory_and_disk_and_cache_keys_by_their_key(self):
        for path in ("/fresh/a/1.png", "/fresh/a/2.png", "/fresh/b/1.png"):
            self.fetch(self.http.url(path))
        key = {D.FETCH_IMAGE_OPTION_CACHE_KEY: dbus.String("a/x")}
        self.fetch(self.http.url("/fresh/keyed.png?sig=1"), **key)
        self.disk_entries(4)
        self.assertEqual(self.remove(self.http.url("/fresh/a/")), 2)
        self.disk_entries(2)
        self.assertEqual(self.source(self.http.url("/fresh/b/1.png")), D.FETCH_IMAGE_SOURCE_MEMORY)
        self.assertEqual(self.source(self.http.url("/fresh/keyed.png?sig=2"), **key), D.FETCH_IMAGE_SOURCE_MEMORY,
                         "a cache-key is matched by its key, not its URL")
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)
        self.conn.close()
        self.conn = connect(self.bus)
        self.assertEqual(self.source(self.http.url("/fresh/a/2.png")), D.FETCH_IMAGE_SOURCE_NETWORK, "gone from the disk too")
        self.assertEqual(self.source(self.http.url("/fresh/b/1.png")), D.FETCH_IMAGE_SOURCE_DISK)
        self.assertEqual(self.remove("a/"), 1, "only on disk now: the cache-key's entry")
        self.assertEqual(self.source(self.http.url("/fresh/keyed.png?sig=3"), **key), D.FETCH_IMAGE_SOURCE_NETWORK)
        msg = self.expect_error(INVALID_ARGS, lambda: self.remove("x" * 4097))
        self.assertIn("at most 4096 bytes", msg)
        self.assertEqual(self.remove("https://nothing.example/"), 0)
