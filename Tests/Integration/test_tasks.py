# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Tasks end to end: lifecycle, ownership, client death, ObjectManager, coalesced progress, limits."""
import os
import re
import signal
import subprocess
import sys
import time

import dbus

from harness import NAME, PATH, PROPS, busctl, connect, dbus_send, gdbus, iface, wait_until
from test_agent import HERE, AgentTestCase, assert_completion_delay
import contract

TASK = contract.Task.INTERFACE
OM = contract.OBJECT_MANAGER
VANISHED = contract.ERROR_PREFIX + "ClientVanished"


def U(n):
    return dbus.UInt64(n)


def options(**kw):
    return dbus.Dictionary({k.replace("_", "-"): v for k, v in kw.items()}, signature="sv")


class TaskTestCase(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completed-task-linger", "1")

    def begin(self, conn=None, description="task", **kw):
        conn = conn or self.conn
        path = iface(conn).BeginTask(description, options(**kw))
        return str(path), dbus.Interface(conn.get_object(NAME, path, introspect=False), TASK)

    def tprop(self, path, name):
        return self.conn.get_object(NAME, path, introspect=False).Get(TASK, name, dbus_interface=PROPS)



class TaskLifecycleTests(TaskTestCase):
    def test_lifecycle_counts_exactly_one_while_running(self):
        path, task = self.begin(description="GET /feed", expected_to_receive=dbus.UInt64(1000))
        self.assertRegex(path, "^" + re.escape(contract.TASK_PATH_PREFIX) + r"\d+$")
        self.assertEqual(self.count(), 1)
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_RUNNING)
        self.assertEqual(self.tprop(path, "Owner"), self.conn.get_unique_name())
        self.assertEqual(self.tprop(path, "Description"), "GET /feed")

        task.SetProgress(U(0), U(0), U(500), U(1000))
        # Another real client reads the progress.
        r = busctl(self.bus, "get-property", NAME, path, TASK, "CountOfBytesReceived", "FractionCompleted")
        self.assertEqual(r.stdout.split(), ["t", "500", "d", "0.5"])

        for call, state, count in ((task.Suspend, contract.Task.STATE_SUSPENDED, 0), (task.Suspend, contract.Task.STATE_SUSPENDED, 0),
                                   (task.Resume, contract.Task.STATE_RUNNING, 1), (task.Resume, contract.Task.STATE_RUNNING, 1)):
            call()
            self.assertEqual((self.tprop(path, "State"), self.count()), (state, count), call)
        task.Complete("")
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_COMPLETED)
        self.assertEqual(float(self.tprop(path, "FractionCompleted")), 1.0)
        # Redundant calls after completion are harmless and change nothing.
        task.Complete("org.example.Error.Late")
        task.Resume()
        task.SetProgress(U(0), U(0), U(900), U(1000))
        self.assertEqual(self.tprop(path, "Error"), "")
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_COMPLETED)
        self.assertEqual(int(self.tprop(path, "CountOfBytesReceived")), 500)
        self.assertEqual(self.count(), 0)

    def test_suspend_then_complete_never_double_decrements(self):
        agent = iface(self.conn)
        agent.IncrementActivityCount()
        _, task = self.begin()
        self.assertEqual(self.count(), 2)
        task.Suspend()
        task.Complete("org.example.Error.Cancelled")
        task.Complete("")
        self.assertEqual(self.count(), 1, "the explicit count must survive the task's end")
        agent.DecrementActivityCount()
        self.assertEqual(self.count(), 0)

    def test_starting_suspended_and_options(self):
        path, task = self.begin(suspended=True, expected_to_send=dbus.UInt64(10), expected_to_receive=dbus.UInt64(30))
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_SUSPENDED)
        self.assertEqual(self.count(), 0)
        self.assertEqual(int(self.tprop(path, "CountOfBytesExpectedToSend")), 10)
        task.SetProgress(U(10), U(10), U(10), U(30))
        self.assertEqual(float(self.tprop(path, "FractionCompleted")), 0.5)
        task.Resume()
        self.assertEqual(self.count(), 1)

    def test_task_of_a_one_shot_busctl_completes_with_client_vanished(self):
        r = busctl(self.bus, "call", NAME, PATH, contract.Activity.INTERFACE, "BeginTask", "sa{sv}", "from busctl", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        path = r.stdout.split()[1].strip('"')
        wait_until(lambda: self.tprop(path, "State") == contract.Task.STATE_COMPLETED, what="busctl's task to complete")
        self.assertEqual(self.tprop(path, "Error"), VANISHED)
        self.assertEqual(self.count(), 0)

    def test_gdbus_and_dbus_send_read_tasks(self):
        path, task = self.begin(description="shared")
        task.SetProgress(U(1), U(2), U(3), U(4))
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", PATH, "--method", OM + ".GetManagedObjects")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("objectpath '%s'" % path, r.stdout)
        self.assertIn("'Description': <'shared'>", r.stdout)
        r = dbus_send(self.bus, "--print-reply", "--dest=" + NAME, path, PROPS + ".Get", "string:" + TASK,
                      "string:CountOfBytesExpectedToReceive")
        self.assertIn("uint64 4", r.stdout)

    def test_completed_task_leaves_after_the_linger(self):
        path, task = self.begin()
        task.Complete("")
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_COMPLETED)
        wait_until(lambda: path not in self.managed(), timeout=3, what="the task to leave")
        self.expect_error(contract.DBusError.UnknownObject, lambda: self.tprop(path, "State"))

    def managed(self):
        return {str(p) for p in self.conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(dbus_interface=OM)}


class TaskOwnershipTests(TaskTestCase):
    def test_another_client_gets_access_denied_naming_the_caller(self):
        path, _ = self.begin()
        other = connect(self.bus)
        try:
            stranger = dbus.Interface(other.get_object(NAME, path, introspect=False), TASK)
            for call in (stranger.Suspend, stranger.Resume, lambda: stranger.Complete(""),
                         lambda: stranger.SetProgress(U(1), U(1), U(1), U(1))):
                msg = self.expect_error(contract.DBusError.AccessDenied, call)
                self.assertIn(other.get_unique_name(), msg)
                self.assertIn(self.conn.get_unique_name(), msg)
        finally:
            other.close()
        r = busctl(self.bus, "call", NAME, path, TASK, "Complete", "s", "")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Access denied", r.stderr)
        self.assertEqual((self.tprop(path, "State"), self.count()), (contract.Task.STATE_RUNNING, 1))

    def test_owner_kill9_completes_its_tasks_with_client_vanished(self):
        self.conn.get_object(NAME, PATH).Set(contract.Activity.INTERFACE, "CompletionDelay", dbus.Double(0.17),
                                             dbus_interface=PROPS)
        panel = self.observe("task_observer.py")
        indicator = self.observe()
        holder = subprocess.Popen([sys.executable, os.path.join(HERE, "holder.py"), self.bus.address, "tasks"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            ready, running, suspended = holder.stdout.readline().split()
            self.assertEqual(ready, "ready")
            wait_until(lambda: indicator.visible() == [(True, indicator.visible()[0][1])] if indicator.visible() else False,
                       what="the indicator on")
            killed_at = time.monotonic()
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
        off = wait_until(lambda: [t for v, t in indicator.visible() if not v], what="the indicator off")[0]
        assert_completion_delay(self, off - killed_at, 0.17)
        for path in (running, suspended):
            self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_COMPLETED)
            self.assertEqual(self.tprop(path, "Error"), VANISHED)
            changes = [e["changed"] for e in panel.snapshot() if e["signal"] == "PropertiesChanged" and e["path"] == path]
            self.assertIn({"State": contract.Task.STATE_COMPLETED, "Error": VANISHED}, changes)
        self.assertEqual(self.count(), 0)


class ObjectManagerTests(TaskTestCase):
    def test_a_panel_lists_and_follows_tasks_without_polling(self):
        before, _ = self.begin(description="before the panel")
        panel = self.observe("task_observer.py")
        first = wait_until(lambda: panel.snapshot(), what="the panel's first listing")[0]
        self.assertEqual(first["paths"], [before])
        path, task = self.begin(description="after", expected_to_receive=dbus.UInt64(100))
        task.SetProgress(U(0), U(0), U(40), U(100))
        completing = time.monotonic()
        task.Complete("")
        gone = wait_until(lambda: [e for e in panel.snapshot() if e["signal"] == "InterfacesRemoved" and e["path"] == path],
                          timeout=3, what="InterfacesRemoved")[0]
        events = [e for e in panel.snapshot() if e.get("path") == path]
        added = events[0]
        self.assertEqual(added["signal"], "InterfacesAdded")
        self.assertEqual(added["props"]["Description"], "after")
        self.assertEqual(added["props"]["State"], contract.Task.STATE_RUNNING)
        self.assertEqual(added["props"]["CountOfBytesExpectedToReceive"], 100)
        self.assertEqual(added["props"]["Owner"], self.conn.get_unique_name())
        changes = [e["changed"] for e in events if e["signal"] == "PropertiesChanged"]
        self.assertEqual(changes[0], {"CountOfBytesReceived": 40, "FractionCompleted": 0.4})
        self.assertEqual(changes[-1], {"State": contract.Task.STATE_COMPLETED, "FractionCompleted": 1.0})
        self.assertEqual(gone["interfaces"], [TASK])
        # The agent completed the task after `completing` and removes it a linger (1 s) later; this
        # reader hears the removal then or later (a gap between two arrivals would measure the reader).
        self.assertGreaterEqual(gone["t"] - completing, 1.0 - 0.005, "a completed task stays for the linger")

    def test_progress_is_coalesced_and_the_final_values_always_arrive(self):
        """The pacing itself (the first change at once, then one signal per 100 ms at exact times) is
        TaskServiceTests' on a manual clock. Here, on a real bus, what a panel can count on however
        loaded the machine is: the values in order, the final one, and no more signals than one per
        100 ms of the whole exchange could carry. The gaps between arrivals are not asserted: they
        measure when this reader was scheduled, not when the agent sent."""
        panel = self.observe("task_observer.py")
        path, task = self.begin(expected_to_receive=dbus.UInt64(300))
        started = time.monotonic()
        for received in range(1, 301):
            task.SetProgress(U(0), U(0), U(received), U(300))
            time.sleep(0.002)
        task.Complete("")
        completion = wait_until(lambda: [e for e in panel.snapshot()
                                         if e.get("path") == path and contract.Task.State in e.get("changed", {})],
                                what="the completion signal")[0]
        # Every progress signal was sent after `started` (the first SetProgress) and no later than
        # the completion, which this reader heard at completion["t"]: a late reader only widens this.
        window = completion["t"] - started
        progress = [e["changed"] for e in panel.snapshot() if e.get("path") == path and e["signal"] == "PropertiesChanged"]
        received = [c["CountOfBytesReceived"] for c in progress if "CountOfBytesReceived" in c]
        self.assertEqual(received[-1], 300, "the final value arrives")
        self.assertEqual(received, sorted(received))
        self.assertEqual(len(received), len(set(received)), "no value twice")
        # One per 100 ms over the window, plus the final values, which ride on the completion.
        self.assertLessEqual(len(received), window / 0.1 + 2, "at most one progress signal per 100 ms: %r" % received)
        self.assertGreaterEqual(len(received), 2, "the first change at once, the last with the completion")


    def test_a_fraction_without_sizes_is_a_percentage_with_no_bytes(self):
        panel = self.observe("task_observer.py")
        path, task = self.begin(description="render")
        task.SetFraction(0.6)
        wait_until(lambda: [e for e in panel.snapshot() if e.get("path") == path
                            and e.get("changed", {}).get("FractionCompleted") == 0.6], what="FractionCompleted 0.6")
        self.assertEqual([int(self.tprop(path, p)) for p in ("CountOfBytesReceived", "CountOfBytesExpectedToReceive",
                                                            "CountOfBytesSent", "CountOfBytesExpectedToSend")], [0, 0, 0, 0])
        # gdbus (GLib's own client) reads it the same.
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", path, "--method",
                  "org.freedesktop.DBus.Properties.Get", TASK, "FractionCompleted")
        self.assertEqual(r.stdout.strip(), "(<0.59999999999999998>,)", r.stderr)
        for bad in (float("nan"), 1.5, -0.25, float("inf")):
            msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: task.SetFraction(bad))
            self.assertIn("a fraction is from 0 to 1", msg)
        other = connect(self.bus)
        try:
            foreign = dbus.Interface(other.get_object(NAME, path, introspect=False), TASK)
            self.expect_error(contract.DBusError.AccessDenied, lambda: foreign.SetFraction(0.9))
        finally:
            other.close()
        self.assertEqual(float(self.tprop(path, "FractionCompleted")), 0.6)
        # A known size takes over; the fraction speaks again only while no size is known.
        task.SetProgress(U(0), U(0), U(25), U(100))
        self.assertEqual(float(self.tprop(path, "FractionCompleted")), 0.25)
        task.Complete("")
        self.assertEqual(float(self.tprop(path, "FractionCompleted")), 1.0)


class TaskInputTests(TaskTestCase):
    def test_bad_input_is_invalid_args_naming_the_value(self):
        agent = iface(self.conn)
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: agent.BeginTask("x" * 2000, options()))
        self.assertIn("2000 bytes", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs,
                                lambda: agent.BeginTask("t", options(expected_size=dbus.UInt64(1))))
        self.assertIn("'expected-size'", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs,
                                lambda: agent.BeginTask("t", options(suspended=dbus.String("yes"))))
        self.assertIn("'suspended' must have type 'b', got 's'", msg)
        path, task = self.begin(expected_to_receive=dbus.UInt64(100))
        task.SetProgress(U(0), U(0), U(50), U(100))
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: task.SetProgress(U(0), U(0), U(10), U(100)))
        self.assertIn("went back from 50 to 10", msg)
        msg = self.expect_error(contract.DBusError.InvalidArgs, lambda: task.SetProgress(U(0), U(0), U(101), U(100)))
        self.assertIn("101 exceeds CountOfBytesExpectedToReceive 100", msg)
        self.expect_error(contract.DBusError.InvalidArgs, lambda: task.Complete("e" * 5000))
        r = busctl(self.bus, "call", NAME, path, TASK, "SetProgress", "uuuu", "1", "2", "3", "4")
        self.assertIn("expected signature 'tttt', got 'uuuu'", r.stderr)
        self.assertEqual(int(self.tprop(path, "CountOfBytesReceived")), 50)
        self.expect_error(contract.DBusError.UnknownObject,
                          lambda: self.tprop(contract.TASK_PATH_PREFIX + "999999", "State"))
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_RUNNING)
        self.assertEqual(self.count(), 1)

    def test_live_task_cap_per_client(self):
        agent = iface(self.conn)
        paths = [agent.BeginTask("t", options(suspended=True)) for _ in range(1024)]
        msg = self.expect_error(contract.ERROR_PREFIX + "LimitsExceeded", lambda: agent.BeginTask("t", options()))
        self.assertIn("1024", msg)
        other = connect(self.bus)
        try:
            self.begin(other)
        finally:
            other.close()
        # A completed task no longer counts against the cap.
        dbus.Interface(self.conn.get_object(NAME, paths[0], introspect=False), TASK).Complete("")
        self.begin()


class TaskRequestTests(TaskTestCase):
    """Cancel and pause from a panel: RequestCancel and RequestSuspend reach the owner alone, as
    CancelRequested and SuspendRequested; the task changes only when its owner acts."""

    def owner(self, obey=True, **offers):
        import json
        o = self.observe("task_owner.py", json.dumps(offers), *(["--obey"] if obey else []))
        first = wait_until(lambda: o.snapshot(), what="the owner's task")[0]
        return o, first["path"]

    def test_a_panel_asks_and_the_owner_alone_decides(self):
        owner, path = self.owner(cancellable=True, suspendable=True)
        self.assertEqual((self.tprop(path, contract.Task.Cancellable), self.tprop(path, contract.Task.Suspendable)), (True, True))
        # A panel (busctl) asks to pause: the owner hears it and suspends the task.
        r = busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "b", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: self.tprop(path, "State") == contract.Task.STATE_SUSPENDED, what="the owner to suspend")
        self.assertEqual(owner.requests(1), [(contract.Task.SuspendRequested, [True])])
        # Asking for the state it is in, and the same request within a second, reach nobody.
        self.assertEqual(busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "b", "true").returncode, 0)
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", path, "--method", TASK + ".RequestSuspend", "false")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: self.tprop(path, "State") == contract.Task.STATE_RUNNING, what="the owner to resume")
        self.assertEqual(busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "b", "false").returncode, 0)
        # dbus-python as a panel: two clicks on Cancel, one request.
        panel = dbus.Interface(connect(self.bus).get_object(NAME, path, introspect=False), TASK)
        panel.RequestCancel()
        panel.RequestCancel()
        wait_until(lambda: self.tprop(path, "State") == contract.Task.STATE_COMPLETED, what="the owner to cancel")
        self.assertEqual(self.tprop(path, "Error"), contract.ERROR_PREFIX + "Cancelled")
        self.assertEqual(owner.requests(3), [(contract.Task.SuspendRequested, [True]),
                                             (contract.Task.SuspendRequested, [False]),
                                             (contract.Task.CancelRequested, [])])
        # A completed task takes requests as no-ops; no other connection overheard any.
        panel.RequestCancel()
        self.assertEqual([e for e in owner.snapshot() if "overheard" in e], [])

    def test_a_request_changes_nothing_by_itself(self):
        owner, path = self.owner(obey=False, cancellable=True, suspendable=True)
        busctl(self.bus, "call", NAME, path, TASK, "RequestCancel", check=True)
        owner.requests(1)
        busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "b", "true", check=True)
        owner.requests(2)
        self.assertEqual(self.tprop(path, "State"), contract.Task.STATE_RUNNING)
        self.assertEqual(self.tprop(path, "Error"), "")
        # The same request again within a second is not passed on: the next one heard is another
        # (a resume, once the owner paused the task on its own).
        busctl(self.bus, "call", NAME, path, TASK, "RequestCancel", check=True)
        owner.send("suspend")
        wait_until(lambda: self.tprop(path, "State") == contract.Task.STATE_SUSPENDED, what="the owner to suspend")
        busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "b", "false", check=True)
        self.assertEqual(owner.requests(3)[2], (contract.Task.SuspendRequested, [False]))

    def test_what_the_task_does_not_offer_is_not_supported(self):
        path, task = self.begin(cancellable=False)
        self.assertEqual((self.tprop(path, contract.Task.Cancellable), self.tprop(path, contract.Task.Suspendable)), (False, False))
        msg = self.expect_error(contract.ERROR_PREFIX + "NotSupported", task.RequestCancel)
        self.assertIn("cancellable", msg)
        self.expect_error(contract.ERROR_PREFIX + "NotSupported", lambda: task.RequestSuspend(True))
        path, task = self.begin(suspendable=True)
        self.expect_error(contract.ERROR_PREFIX + "NotSupported", task.RequestCancel)
        task.RequestSuspend(False)  # running already: a no-op
        r = busctl(self.bus, "call", NAME, path, TASK, "RequestSuspend", "s", "yes")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("expected signature 'b'", r.stderr)
        self.assertEqual(self.expect_error(contract.DBusError.InvalidArgs,
                                           lambda: iface(self.conn).BeginTask("x", options(cancellable="yes"))).count("cancellable"), 1)
