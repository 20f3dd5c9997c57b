# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The agent end to end on a private bus, driven by busctl, gdbus, dbus-send and python3-dbus."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
import xml.etree.ElementTree as ET

import dbus

import contract

from harness import (BIN, IFACE, NAME, PATH, PROPS, ROOT, Agent, PrivateBus, busctl, cli, connect, gdbus,
                     iface, prop, props, run, wait_for_name, wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))


def assert_arrived_after(test, measured, delay, what, slack=2.0):
    """`measured`: from an instant taken before the test's stimulus to the instant a reader heard
    the agent's answer to it. The agent cannot answer before its delay has run, and the reader can
    only hear it later, so the lower bound holds whatever the load. How late is the scheduling of
    the agent, the bus and the reader together, so the upper bound is generous (`slack`): it tells a
    timer from an answer that waited for something else; the delays' exact times are the unit tests'
    on a manual clock (ActivityServiceTests, TaskServiceTests)."""
    test.assertGreaterEqual(measured, delay - 0.005, "%s: not before its delay of %.3f s" % (what, delay))
    test.assertLess(measured, delay + slack, "%s: at its delay of %.3f s, not at some later event" % (what, delay))


def assert_completion_delay(test, measured, delay):
    assert_arrived_after(test, measured, delay, "the indicator off after its completion delay")


class Observer:
    """observer.py in a process of its own: what a panel sees, with arrival times."""

    def __init__(self, bus, script="observer.py", *args, prefix=()):
        """`prefix`: an argv that runs the script inside something (a sandbox)."""
        self.proc = subprocess.Popen([*prefix, sys.executable, os.path.join(HERE, script), bus.address, *args],
                                     stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("%s did not start: %r" % (script, line))
        self.events = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def visible(self):
        return [(e["value"], e["t"]) for e in self.snapshot() if e["signal"] == "Visible"]

    def changed(self, name):
        return [(e["changed"][name], e["t"]) for e in self.snapshot()
                if e["signal"] == "PropertiesChanged" and name in e["changed"]]

    def requests(self, count):
        """The first `count` task requests task_owner.py heard, as (signal, args), once they are all
        read: an obeying owner prints each before it acts, so the agent can show the act before
        this process has read the line."""
        def heard():
            got = [(e["signal"], e["args"]) for e in self.snapshot() if "signal" in e]
            return got if len(got) >= count else None
        return wait_until(heard, what="%d requests heard" % count)

    def send(self, line):
        """A command line on the process's standard input (the scripts that take commands)."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()


class AgentTestCase(unittest.TestCase):
    agent_args = ()
    # The agent's settings file (netactivityd.conf(5)), written before it starts; None: no file.
    settings = None
    # Added to the agent's environment.
    agent_env = None

    def setUp(self):
        self.bus = PrivateBus()
        if self.settings is not None:
            folder = os.path.join(self.bus.config_home, "netactivity")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, "netactivityd.conf"), "w") as f:
                f.write(self.settings)
        self.agent = Agent(self.bus, *self.agent_args, env=self.agent_env)
        self.conn = connect(self.bus)
        self.observers = []

    def tearDown(self):
        for o in self.observers:
            o.close()
        self.conn.close()
        alive = self.agent.alive()
        self.agent.stop()
        self.bus.stop()
        self.assertTrue(alive, "the agent died during the test:\n" + self.agent.logtext()[-2000:])

    def expect_error(self, name, fn):
        """Calls fn, expects the D-Bus error `name`, returns its message."""
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            fn()
        self.assertEqual(cm.exception.get_dbus_name(), name, cm.exception.get_dbus_message())
        return cm.exception.get_dbus_message()

    def observe(self, script="observer.py", *args, prefix=()):
        o = Observer(self.bus, script, *args, prefix=prefix)
        self.observers.append(o)
        return o

    def count(self):
        return int(prop(self.conn, "ActivityCount"))

    def marker(self, obs):
        """Waits until everything the agent emitted before now has reached `obs`: a new
        ActivationDelay, whose change signal goes out at once, is heard after all of it."""
        value = round((float(prop(self.conn, "ActivationDelay")) + 0.25) % 60, 3)
        self.conn.get_object(NAME, PATH).Set(IFACE, "ActivationDelay", dbus.Double(value), dbus_interface=PROPS)
        wait_until(lambda: any(abs(v - value) < 1e-9 for v, _ in obs.changed("ActivationDelay")), what="the marker")


class ContractTests(AgentTestCase):
    def test_introspection_matches_the_xml_contract(self):
        # The XML's tables for scripts/gen-contract.py (errors, values, keys): the agent does not serve them.
        GENERATOR_NOTES = NAME + "."

        def interfaces(xml):
            out = {}
            for i in ET.fromstring(xml).findall("interface"):
                members = []
                for m in i:
                    if m.tag == "annotation" and m.get("name").startswith(GENERATOR_NOTES):
                        continue
                    args = tuple((a.get("name"), a.get("type"), a.get("direction")) for a in m.findall("arg"))
                    notes = tuple(sorted((a.get("name"), a.get("value")) for a in m.findall("annotation")
                                         if not a.get("name").startswith(GENERATOR_NOTES)))
                    members.append((m.tag, m.get("name"), m.get("type"), m.get("access"), args, notes))
                out[i.get("name")] = sorted(members)
            return out

        contract = {}
        for fn in sorted(os.listdir(os.path.join(ROOT, "dbus"))):
            if fn.endswith(".xml"):
                with open(os.path.join(ROOT, "dbus", fn)) as f:
                    contract.update(interfaces(f.read()))
        # The agent object, and a task object for the Task interface.
        task = iface(self.conn).BeginTask("contract", dbus.Dictionary({}, signature="sv"))
        live = {}
        for path in (PATH, task):
            live.update(interfaces(self.conn.get_object(NAME, path).Introspect(
                dbus_interface="org.freedesktop.DBus.Introspectable")))
        for name, members in contract.items():
            self.assertIn(name, live)
            self.assertEqual(members, live[name], "interface %s differs from dbus/*.xml" % name)
        for std in ("org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer",
                    "org.freedesktop.DBus.ObjectManager"):
            self.assertIn(std, live)
        ours = {n for n in live if n.startswith("org.example.")}
        self.assertEqual(ours, set(contract), "the agent serves interfaces the contract does not document")

    def test_the_swift_python_and_c_names_are_generated_from_the_current_xml(self):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            py, swift, c = (os.path.join(tmp, n) for n in ("contract.py", "Names.swift", "netactivity-errors.h"))
            c_committed = os.path.join(ROOT, "libnetactivity", "netactivity-errors.h")
            shutil.copy(c_committed, c)  # its numbers are kept: the fresh one is made over it
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen-contract.py"), "--python", py, "--swift", swift,
                            "--c-errors", c], check=True, timeout=60)
            for fresh, committed in ((py, os.path.join(HERE, "contract.py")),
                                     (swift, os.path.join(ROOT, "Sources", "NetActivityContract", "Names.swift")),
                                     (c, c_committed)):
                with open(fresh) as f, open(committed) as g:
                    self.assertEqual(g.read(), f.read(), "%s is out of date: run make contract" % os.path.relpath(committed, ROOT))

    def test_parent_paths_introspect_to_child_nodes(self):
        xml = self.conn.get_object(NAME, "/").Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")
        self.assertEqual([n.get("name") for n in ET.fromstring(xml).findall("node")], ["MenuBar", "StatusNotifierItem", "org"])

    def test_peer_ping_and_version(self):
        r = busctl(self.bus, "call", NAME, PATH, "org.freedesktop.DBus.Peer", "Ping")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(int(prop(self.conn, "Version")), 1)


class ActivityTests(AgentTestCase):
    def test_busctl_increment_is_released_when_busctl_exits(self):
        r = busctl(self.bus, "call", NAME, PATH, IFACE, "IncrementActivityCount")
        self.assertEqual(r.returncode, 0, r.stderr)
        # busctl left the bus, so its count went with it.
        wait_until(lambda: self.count() == 0, what="busctl's count to be released")

    def test_counts_are_per_client_and_clamped(self):
        a, b = connect(self.bus), connect(self.bus)
        try:
            iface(a).IncrementActivityCount()
            iface(a).IncrementActivityCount()
            iface(b).DecrementActivityCount()  # b has nothing: no effect on a
            iface(b).DecrementActivityCount()
            self.assertEqual(self.count(), 2)
            clients = wait_until(lambda: [c for c in prop(self.conn, "Clients") if c[2] > 0 and c[1]],
                                 what="process names")
            self.assertEqual([(str(c[0]), int(c[2])) for c in clients], [(a.get_unique_name(), 2)])
            self.assertEqual(str(clients[0][1]), "python3")
            iface(a).DecrementActivityCount()
            iface(a).DecrementActivityCount()
            iface(a).DecrementActivityCount()  # below zero: clamped, not an error
            self.assertEqual(self.count(), 0)
            iface(a).IncrementActivityCount()
            self.assertEqual(self.count(), 1)
        finally:
            a.close()
            b.close()
        wait_until(lambda: self.count() == 0, what="release on disconnect")

    def test_gdbus_and_dbus_send_calls(self):
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", PATH, "--method", IFACE + ".IncrementActivityCount")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "()")
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", PATH, "--method", PROPS + ".Get", IFACE, "Version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "(<uint32 1>,)")
        r = run(["dbus-send", "--print-reply", "--dest=" + NAME, PATH, PROPS + ".Get", "string:" + IFACE,
                 "string:CompletionDelay"], self.bus)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("double 0.17", r.stdout)

    def test_lease_lasts_until_every_copy_of_the_fd_is_closed(self):
        lease = iface(self.conn).BeginActivity("test")
        fd = lease.take()
        copy = os.dup(fd)
        marker = iface(self.conn).BeginActivity("marker").take()
        self.assertEqual(self.count(), 2)
        os.close(fd)
        # A lease closed after it: once the agent has seen that one end, it has seen the first close.
        os.close(marker)
        wait_until(lambda: self.count() == 1, what="the marker lease's release")
        self.assertEqual(self.count(), 1, "one copy is still open")
        os.write(copy, b"ignored")  # writing is harmless
        os.close(copy)
        wait_until(lambda: self.count() == 0, what="lease release")

    def test_lease_ends_with_its_holders_bus_connection(self):
        other = connect(self.bus)
        fd = iface(other).BeginActivity("x").take()
        self.assertEqual(self.count(), 1)
        other.close()
        wait_until(lambda: self.count() == 0, what="lease release on disconnect")
        os.close(fd)

    def test_kill9_of_a_client_with_counts_and_a_lease_turns_the_indicator_off(self):
        obj = self.conn.get_object(NAME, PATH)
        obj.Set(IFACE, "ActivationDelay", dbus.Double(0.1), dbus_interface=PROPS)
        obs = self.observe()
        holder = subprocess.Popen([sys.executable, os.path.join(HERE, "holder.py"), self.bus.address],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assertEqual(holder.stdout.readline().strip(), "ready")
        self.assertEqual(self.count(), 3)
        wait_until(lambda: obs.visible() == [(True, obs.visible()[0][1])] if obs.visible() else False,
                   what="Visible true")
        killed_at = time.monotonic()
        holder.kill()
        holder.wait()
        wait_until(lambda: len(obs.visible()) == 2, what="Visible false")
        off_at = obs.visible()[1][1]
        self.assertEqual([v for v, _ in obs.visible()], [True, False])
        assert_completion_delay(self, off_at - killed_at, 0.17)
        self.assertEqual(self.count(), 0)
        self.assertEqual(list(prop(self.conn, "Clients")), [])


class TimelineTests(AgentTestCase):
    def test_visible_follows_the_default_delays(self):
        obs = self.observe()
        agent = iface(self.conn)
        self.assertEqual(float(prop(self.conn, "ActivationDelay")), 1.0)
        t_inc = time.monotonic()
        agent.IncrementActivityCount()
        self.assertEqual(str(prop(self.conn, "State")), contract.Activity.STATE_DELAYING_START)
        wait_until(lambda: obs.visible(), timeout=3, what="Visible true")
        t_on = obs.visible()[0][1]
        self.assertTrue(bool(prop(self.conn, "Visible")))
        time.sleep(0.2)
        t_dec = time.monotonic()
        agent.DecrementActivityCount()
        wait_until(lambda: len(obs.visible()) == 2, timeout=3, what="Visible false")
        t_off = obs.visible()[1][1]
        self.assertEqual([v for v, _ in obs.visible()], [True, False])
        assert_arrived_after(self, t_on - t_inc, 1.0, "Visible after the activation delay")
        assert_completion_delay(self, t_off - t_dec, 0.17)
        # The last State change comes in a PropertiesChanged of its own, which the observer may
        # read after the Visible signal: waited for, not taken at once.
        wait_until(lambda: [s for s, _ in obs.changed(contract.Activity.State)][-1:] == [contract.Activity.STATE_NOT_ACTIVE],
                   what="State not-active")
        states = [s for s, _ in obs.changed(contract.Activity.State)]
        self.assertEqual(states, [contract.Activity.STATE_DELAYING_START, contract.Activity.STATE_ACTIVE, contract.Activity.STATE_DELAYING_END, contract.Activity.STATE_NOT_ACTIVE])

    def test_short_activity_never_shows(self):
        obs = self.observe()
        agent = iface(self.conn)
        agent.IncrementActivityCount()
        time.sleep(0.05)
        agent.DecrementActivityCount()
        # The activation delay's end: the state leaves delaying-start, after which nothing shows.
        wait_until(lambda: [s for s, _ in obs.changed("State")][-1:] == [contract.Activity.STATE_NOT_ACTIVE],
                   timeout=3, what="the activation delay's end")
        self.assertEqual([s for s, _ in obs.changed("State")],
                         [contract.Activity.STATE_DELAYING_START, contract.Activity.STATE_NOT_ACTIVE])
        self.assertEqual(obs.visible(), [])

    def test_no_flicker_within_the_completion_delay(self):
        obj = self.conn.get_object(NAME, PATH)
        obj.Set(IFACE, "ActivationDelay", dbus.Double(0.0), dbus_interface=PROPS)
        obj.Set(IFACE, "CompletionDelay", dbus.Double(0.2), dbus_interface=PROPS)
        obs = self.observe()
        agent = iface(self.conn)
        agent.IncrementActivityCount()
        time.sleep(0.1)
        agent.DecrementActivityCount()
        time.sleep(0.1)
        agent.IncrementActivityCount()
        time.sleep(0.1)
        agent.DecrementActivityCount()
        wait_until(lambda: len(obs.visible()) >= 2, what="Visible false")
        self.marker(obs)
        self.assertEqual([v for v, _ in obs.visible()], [True, False])

    def test_disabled_shows_nothing_and_disabling_hides_at_once(self):
        obj = self.conn.get_object(NAME, PATH)
        obj.Set(IFACE, "ActivationDelay", dbus.Double(0.0), dbus_interface=PROPS)
        obs = self.observe()
        iface(self.conn).IncrementActivityCount()
        wait_until(lambda: obs.visible(), what="Visible true")
        obj.Set(IFACE, "Enabled", dbus.Boolean(False), dbus_interface=PROPS)
        wait_until(lambda: len(obs.visible()) == 2, what="Visible false")
        self.assertEqual(str(prop(self.conn, "State")), contract.Activity.STATE_NOT_ACTIVE)
        iface(self.conn).IncrementActivityCount()
        self.marker(obs)
        self.assertEqual([v for v, _ in obs.visible()], [True, False])

    def test_change_signals_once_per_real_change(self):
        obj = self.conn.get_object(NAME, PATH)
        obs = self.observe()
        for _ in range(3):
            obj.Set(IFACE, "Enabled", dbus.Boolean(False), dbus_interface=PROPS)
        obj.Set(IFACE, "CompletionDelay", dbus.Double(0.5), dbus_interface=PROPS)
        obj.Set(IFACE, "CompletionDelay", dbus.Double(0.5), dbus_interface=PROPS)
        self.marker(obs)
        self.assertEqual([v for v, _ in obs.changed("Enabled")], [False])
        self.assertEqual([v for v, _ in obs.changed("CompletionDelay")], [0.5])

    def test_activity_count_changes_are_coalesced_to_one_per_50ms(self):
        obs = self.observe()
        agent = iface(self.conn)
        start = time.monotonic()
        for _ in range(300):
            agent.IncrementActivityCount()
        wait_until(lambda: obs.changed("ActivityCount") and obs.changed("ActivityCount")[-1][0] == 300,
                   what="the final count")
        counts = obs.changed("ActivityCount")
        # The agent sent every change between `start` and the instant this reader heard the last one
        # (a late reader only widens the window), at most one per 50 ms: that many fit in it, plus
        # the first (and one for a timer's rounding). The gaps between arrivals measure the reader,
        # not the agent: the exact pacing is ChangeCoalescerTests' and ActivityServiceTests' on a
        # manual clock.
        window = counts[-1][1] - start
        self.assertLessEqual(len(counts), window / 0.05 + 2, counts)
        self.assertEqual([v for v, _ in counts], sorted(v for v, _ in counts), "in order")
        # One more change: the next value heard is 301, so 300 was the last before it, heard once.
        agent.IncrementActivityCount()
        wait_until(lambda: obs.changed("ActivityCount")[-1][0] == 301, what="the next count")
        after = [v for v, _ in obs.changed("ActivityCount")]
        self.assertEqual(after[len(counts):], [301], "nothing after the last change but the next one")


class CoherentSignalTests(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "0")

    def test_a_state_change_carries_the_count_it_happened_at(self):
        import dbus.mainloop.glib
        from gi.repository import GLib
        A = contract.Activity
        obs = self.observe()
        # Pairs of calls sent back to back: the agent takes each pair within one 50 ms coalescing
        # interval, so the second count change is held back, and the state change it causes (back
        # to not-active: no delays here) must carry it.
        conn = dbus.bus.BusConnection(self.bus.address, mainloop=dbus.mainloop.glib.DBusGMainLoop())
        self.addCleanup(conn.close)
        agent = dbus.Interface(conn.get_object(NAME, PATH, introspect=False), IFACE)
        replies = []
        for _ in range(5):
            for call in (agent.IncrementActivityCount, agent.DecrementActivityCount):
                call(reply_handler=lambda: replies.append(True), error_handler=replies.append)
        context = GLib.MainContext.default()
        wait_until(lambda: (context.iteration(False), len(replies) == 10)[1], what="the replies")
        self.assertEqual(replies, [True] * 10)
        self.marker(obs)
        count, states = None, []
        for e in obs.snapshot():
            if e["signal"] != "PropertiesChanged":
                continue
            count = e["changed"].get(A.ActivityCount, count)
            if A.State in e["changed"]:
                states.append((e["changed"][A.State], count))
        self.assertTrue(states, "the state changed")
        for state, seen in states:
            held = state in (A.STATE_DELAYING_START, A.STATE_ACTIVE)  # not-active, delaying-end: none held
            self.assertEqual((seen or 0) >= 1, held, "State %s heard with ActivityCount %s: %r"
                             % (state, seen, states))


class ErrorTests(AgentTestCase):
    def test_wrong_signature_unknown_member_interface_object(self):
        r = busctl(self.bus, "call", NAME, PATH, IFACE, "IncrementActivityCount", "s", "x")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("expected signature ''", r.stderr)
        r = busctl(self.bus, "call", NAME, PATH, IFACE, "BeginActivity", "u", "7")
        self.assertIn("expected signature 's', got 'u'", r.stderr)
        obj = self.conn.get_object(NAME, PATH)
        self.expect_error(contract.DBusError.UnknownMethod, lambda: obj.Frobnicate(dbus_interface=IFACE))
        self.expect_error(contract.DBusError.UnknownInterface, lambda: obj.Ping(dbus_interface="org.example.Nope"))
        nope = PATH + "/Nope"
        msg = self.expect_error(contract.DBusError.UnknownObject,
                                lambda: self.conn.get_object(NAME, nope, introspect=False).Ping(dbus_interface=IFACE))
        self.assertIn(nope, msg)
        self.expect_error(contract.DBusError.UnknownProperty, lambda: obj.Get(IFACE, "Nope", dbus_interface=PROPS))
        # python-dbus checks signatures it knows, so this goes as a raw call with one argument short.
        msg = self.expect_error(contract.DBusError.InvalidArgs,
                                lambda: self.conn.call_blocking(NAME, PATH, PROPS, "Get", "s", (IFACE,)))
        self.assertIn("expected signature 'ss', got 's'", msg)

    def test_bad_property_values(self):
        obj = self.conn.get_object(NAME, PATH)
        for value in (-0.5, 60.5, float("nan"), float("inf"), 1e300):
            msg = self.expect_error(contract.DBusError.InvalidArgs,
                                    lambda: obj.Set(IFACE, "ActivationDelay", dbus.Double(value), dbus_interface=PROPS))
            self.assertIn("between 0 and 60", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs,
                                lambda: obj.Set(IFACE, "CompletionDelay", dbus.String("soon"), dbus_interface=PROPS))
        self.assertIn("type 'd'", msg)
        self.expect_error(contract.DBusError.InvalidArgs,
                          lambda: obj.Set(IFACE, "Enabled", dbus.UInt32(1), dbus_interface=PROPS))
        self.expect_error(contract.DBusError.PropertyReadOnly,
                          lambda: obj.Set(IFACE, "Visible", dbus.Boolean(True), dbus_interface=PROPS))
        self.expect_error(contract.DBusError.PropertyReadOnly,
                          lambda: obj.Set(IFACE, "ActivityCount", dbus.UInt32(5), dbus_interface=PROPS))
        # gdbus with a non-numeric delay
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", PATH, "--method", PROPS + ".Set",
                  IFACE, "ActivationDelay", "<'abc'>")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("InvalidArgs", r.stderr)
        self.assertEqual(float(prop(self.conn, "ActivationDelay")), 1.0)
        self.assertEqual(float(prop(self.conn, "CompletionDelay")), 0.17)

    def test_long_reason(self):
        agent = iface(self.conn)
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: agent.BeginActivity("x" * 5000))
        self.assertIn("1024", msg)
        self.assertEqual(self.count(), 0)

    def test_lease_limit_per_client(self):
        agent = iface(self.conn)
        fds = [agent.BeginActivity("l").take() for _ in range(256)]
        msg = self.expect_error(contract.ERROR_PREFIX + "LimitsExceeded", lambda: agent.BeginActivity("one more"))
        self.assertIn("256", msg)
        other = connect(self.bus)
        try:
            fd = iface(other).BeginActivity("another client is not limited").take()
            os.close(fd)
        finally:
            other.close()
        for fd in fds:
            os.close(fd)
        wait_until(lambda: self.count() == 0, what="all leases released")

    def test_garbage_from_a_raw_client_leaves_the_agent_up(self):
        for args in (["s", "x" * 100000], ["a{sv}", "1", "k", "s", "v"], ["v", "ay", "3", "1", "2", "3"]):
            busctl(self.bus, "call", NAME, PATH, IFACE, "DecrementActivityCount", *args)
        busctl(self.bus, "call", NAME, "/", IFACE, "IncrementActivityCount")
        busctl(self.bus, "call", NAME, PATH, PROPS, "GetAll", "s", "")
        r = busctl(self.bus, "call", NAME, PATH, "org.freedesktop.DBus.Peer", "Ping")
        self.assertEqual(r.returncode, 0)


def code_kib(pid):
    """KiB of code (read-and-execute mappings of files) the process maps now."""
    total, code = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                code = len(fields) >= 6 and fields[1] == "r-xp" and fields[5].startswith("/")
            elif code and fields[0] == "Rss:":
                total += int(fields[1])
    return total


class IdleMemoryTests(AgentTestCase):
    """With nothing to do for a while (here 1 s), the agent lets go of the code it ran, after
    start-up and after each spell of work, and serves the next call as before."""
    agent_env = {"NETACTIVITY_QUIET_SECONDS": "1"}

    def switches(self):
        with open("/proc/%d/status" % self.agent.proc.pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches:"))

    def asleep(self):
        """The agent's loop (its main thread) is blocked waiting for events."""
        with open("/proc/%d/wchan" % self.agent.proc.pid) as f:
            return f.read().strip() == "do_epoll_wait"

    def test_an_agent_with_nothing_to_do_maps_little_code_and_serves_the_next_call_as_before(self):
        pid = self.agent.proc.pid
        started = code_kib(pid)
        # Less than half the code mapped, and the loop back in epoll_wait: half the code can be
        # gone while the release still runs (on a loaded machine, long enough to count a switch).
        quiet = wait_until(lambda: (lambda k: k if k < started / 2 and self.asleep() else None)(code_kib(pid)),
                           timeout=20, what=lambda: "the code let go after start-up: %d KiB of %d" % (code_kib(pid), started))
        # It sleeps then: no wake-up without work.
        before = self.switches()
        time.sleep(1.5)
        self.assertEqual(self.switches(), before, "an idle agent does not wake up; its log:\n" + self.agent.logtext()[-1500:])
        # A spell of work: every answer as before.
        A = contract.Activity
        agent = dbus.Interface(self.conn.get_object(NAME, PATH), A.INTERFACE)
        agent.get_dbus_method(A.IncrementActivityCount)()
        self.assertEqual(prop(self.conn, contract.Activity.ActivityCount), 1)
        task = agent.get_dbus_method(A.BeginTask)("idle test", dbus.Dictionary({}, signature="sv"))
        self.conn.get_object(NAME, task).get_dbus_method(contract.Task.Complete, contract.Task.INTERFACE)("")
        agent.get_dbus_method(A.DecrementActivityCount)()
        self.assertEqual(prop(self.conn, contract.Activity.ActivityCount), 0)
        worked = code_kib(pid)
        self.assertGreater(worked, quiet, "the code that ran mapped back in")
        wait_until(lambda: code_kib(pid) < worked, timeout=20,
                   what=lambda: "the code let go after the work: %d KiB, %d after it" % (code_kib(pid), worked))
        self.assertEqual(prop(self.conn, contract.Activity.State), contract.Activity.STATE_NOT_ACTIVE)


class LifecycleTests(unittest.TestCase):
    def setUp(self):
        self.bus = PrivateBus()

    def tearDown(self):
        self.bus.stop()

    def test_sigterm_and_sigint_exit_0(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            agent = Agent(self.bus)
            self.assertEqual(agent.stop(sig), 0)

    def test_name_taken_needs_replace(self):
        first = Agent(self.bus)
        second = Agent(self.bus, wait=False)
        self.assertEqual(second.proc.wait(10), 1)
        self.assertIn("--replace", second.logtext())
        third = Agent(self.bus, "--replace", wait=False)
        self.assertEqual(first.proc.wait(10), 0, "the replaced agent exits cleanly")
        conn = connect(self.bus)
        wait_until(lambda: conn.get_name_owner(NAME) and third.alive(), what="the new owner")
        self.assertEqual(int(prop(conn, "Version")), 1)
        conn.close()
        self.assertEqual(third.stop(), 0)

    def test_loss_of_the_bus_exits_0(self):
        agent = Agent(self.bus)
        self.bus.stop()
        self.assertEqual(agent.proc.wait(10), 0)
        self.bus = PrivateBus()  # for tearDown

    def test_bad_flags(self):
        for args, says in ((["--activation-delay", "61"], "0...60"), (["--completion-delay", "abc"], "'abc'"),
                           (["--log-level", "loud"], "loud"), (["--bogus"], "Unknown option '--bogus'"),
                           (["--activation-delay"], "Missing value"), (["--replace=yes"], "takes no value"),
                           (["stray"], "Unexpected argument 'stray'"), (["--address="], "--address")):
            r = run([os.path.join(BIN, "netactivityd"), *args], self.bus)
            self.assertEqual(r.returncode, 64, (args, r.stderr))
            self.assertIn(says, r.stderr, args)
            self.assertIn("netactivityd --help", r.stderr)

    def test_help(self):
        r = run([os.path.join(BIN, "netactivityd"), "--help"], self.bus)
        self.assertEqual(r.returncode, 0)
        for flag in ("--address", "--replace", "--config", "--activation-delay", "--completion-delay",
                     "--completed-task-linger", "--system-bus-address", "--tray/--no-tray", "--notify/--no-notify",
                     "--notify-after", "--log-level", "--no-private-bus"):
            self.assertIn(flag, r.stdout)

    def test_flags_set_the_delays(self):
        agent = Agent(self.bus, "--activation-delay=0.25", "--completion-delay", "0", "--no-tray")
        conn = connect(self.bus)
        self.assertEqual(float(prop(conn, "ActivationDelay")), 0.25)
        self.assertEqual(float(prop(conn, "CompletionDelay")), 0.0)
        conn.close()
        agent.stop()

    def test_private_bus_when_there_is_no_session_bus(self):
        env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")}
        proc = subprocess.Popen([os.path.join(BIN, "netactivityd")], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline().strip()
            self.assertTrue(line.startswith("DBUS_SESSION_BUS_ADDRESS=unix:"), line)
            address = line.split("=", 1)[1]
            conn = dbus.bus.BusConnection(address)
            wait_until(lambda: conn.name_has_owner(NAME), what="agent on the private bus")
            self.assertEqual(int(conn.get_object(NAME, PATH).Get(IFACE, "Version", dbus_interface=PROPS)), 1)
            conn.close()
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(10), 0)
        # The private daemon went with it.
        self.assertRaises(dbus.exceptions.DBusException, dbus.bus.BusConnection, address)


if __name__ == "__main__":
    unittest.main()
