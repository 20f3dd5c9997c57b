# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Where users look: the tray item (StatusNotifierItem), dock progress (LauncherEntry), notifications."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import dbus
import dbus.lowlevel

import contract

from harness import BIN, NAME, PATH, PROPS, Agent, PrivateBus, connect, iface, prop, wait_until
from test_agent import AgentTestCase, Observer

SNI = "org.kde.StatusNotifierItem"


def events(observer, kind):
    return [e for e in observer.snapshot() if e["event"] == kind]


class TrayTests(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "0")

    def agent_name(self):
        return self.conn.get_name_owner(NAME)

    def test_item_registers_when_a_watcher_appears_and_follows_visible(self):
        watcher = self.observe("fake_desktop.py", "watcher")
        reg = wait_until(lambda: events(watcher, "register"), what="the item to register")[0]
        self.assertRegex(reg["service"], r"^org\.kde\.StatusNotifierItem-\d+-1$")
        self.assertEqual(reg["sender"], self.agent_name())
        item = self.conn.get_object(reg["service"], "/StatusNotifierItem", introspect=False)
        props = item.GetAll(SNI, dbus_interface=PROPS)
        self.assertEqual((props["Status"], props["Id"], props["IconName"], props["Category"]),
                         ("Passive", "netactivity", "network-transmit-receive-symbolic", "SystemServices"),
                         "an agent outside an install prefix: the theme's symbolic icon")
        iface(self.conn).IncrementActivityCount()
        wait_until(lambda: [e for e in events(watcher, "NewStatus") if e["status"] == "Active"], what="NewStatus Active")
        self.assertEqual(item.Get(SNI, "Status", dbus_interface=PROPS), "Active")
        tooltip = wait_until(lambda: "python3" in item.Get(SNI, "ToolTip", dbus_interface=PROPS)[3] and
                             item.Get(SNI, "ToolTip", dbus_interface=PROPS), what="the tooltip to name the client")
        self.assertEqual(tooltip[2], "Network activity")
        item.Activate(0, 0, dbus_interface=SNI)  # a click is harmless
        iface(self.conn).DecrementActivityCount()
        wait_until(lambda: [e for e in events(watcher, "NewStatus") if e["status"] == "Passive"], what="NewStatus Passive")
        self.assertEqual(item.Get(SNI, "Status", dbus_interface=PROPS), "Passive")

    def test_the_item_s_dbusmenu_lists_clients_and_tasks_and_pauses_the_indicator(self):
        watcher = self.observe("fake_desktop.py", "watcher")
        reg = wait_until(lambda: events(watcher, "register"), what="the item to register")[0]
        item = self.conn.get_object(reg["service"], "/StatusNotifierItem", introspect=False)
        # What Ubuntu's AppIndicator extension requires of an item: a Menu, and here a click opens it.
        menu_path = item.Get(SNI, "Menu", dbus_interface=PROPS)
        self.assertEqual((str(menu_path), bool(item.Get(SNI, "ItemIsMenu", dbus_interface=PROPS))), ("/MenuBar", True))
        menu = dbus.Interface(self.conn.get_object(reg["service"], menu_path, introspect=False), "com.canonical.dbusmenu")
        self.assertEqual(int(self.conn.get_object(reg["service"], menu_path, introspect=False).Get(
            "com.canonical.dbusmenu", "Version", dbus_interface=PROPS)), 3)

        def labels():
            revision, (root, props, children) = menu.GetLayout(0, -1, dbus.Array([], signature="s"))
            self.assertEqual((int(root), str(props["children-display"])), (0, "submenu"))
            return [(int(c[0]), str(c[1].get("label", "")), str(c[1].get("type", "standard"))) for c in children]

        self.assertEqual(labels()[0][1], "No app is using the network")
        iface(self.conn).IncrementActivityCount()
        lease = iface(self.conn).BeginActivity("Syncing\tmail\u202e").take()
        self.addCleanup(os.close, lease)
        path = str(iface(self.conn).BeginTask("backup_photos", dbus.Dictionary({}, signature="sv")))
        self.conn.get_object(NAME, path, introspect=False).SetFraction(0.4, dbus_interface=contract.Task.INTERFACE)
        rows = wait_until(lambda: (lambda l: l if any("backup__photos — 40 %" == t for _, t, _ in l) else None)(labels()),
                          what="the task in the menu")
        texts = [t for _, t, _ in rows]
        self.assertEqual(texts[0], "Using the network")
        # The lease's reason rides with its app, as one clean line.
        self.assertIn("python3 (3) — Syncing mail", texts)
        self.assertIn("Tasks", texts)
        # The check item pauses the indicator (Enabled), and says so.
        toggle = [i for i, t, _ in rows if t == "Show network activity"][0]
        self.assertEqual(int(menu.GetProperty(toggle, "toggle-state")), 1)
        menu.Event(toggle, "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(0))
        self.assertFalse(bool(prop(self.conn, "Enabled")))
        self.assertEqual(int(menu.GetProperty(toggle, "toggle-state")), 0)
        self.assertEqual(labels()[0][1], "Network activity indicator paused")
        # Paused, the indicator is hidden, but the item stays where the user can resume it.
        self.assertEqual((bool(prop(self.conn, "Visible")), str(item.Get(SNI, "Status", dbus_interface=PROPS))), (False, "Active"))
        # Hosts that read the menu hear of changes (at most every 250 ms), from the item's own
        # connection: rows that came are a LayoutUpdated, new text or state of a row that stayed an
        # ItemsPropertiesUpdated (the AppIndicator extension reads labels of new rows only).
        update = wait_until(lambda: events(watcher, "LayoutUpdated"), what="LayoutUpdated")[-1]
        self.assertEqual((update["parent"], update["sender"]), (0, self.agent_name()))
        self.assertGreater(update["revision"], 1)
        props = wait_until(lambda: [e for e in events(watcher, "ItemsPropertiesUpdated")
                                    if e["updated"].get(str(int(toggle)), {}).get("toggle-state") == 0], what="the toggle's new state")[-1]
        self.assertEqual((props["updated"]["1"]["label"], props["sender"]), ("Network activity indicator paused", self.agent_name()))
        # Bad input is an error, never a crash.
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            menu.GetProperty(toggle, "no-such-property")
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.InvalidArgs)
        with self.assertRaises(dbus.exceptions.DBusException):
            menu.GetLayout(12345, -1, dbus.Array([], signature="s"))
        self.assertEqual([int(i) for i in menu.EventGroup(dbus.Array([(dbus.Int32(999), "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(0))], signature="(isvu)"))], [999])
        menu.Event(toggle, "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(0))
        self.assertTrue(bool(prop(self.conn, "Enabled")))

    def test_a_task_s_row_opens_cancel_and_pause_and_a_click_reaches_its_owner(self):
        import json
        watcher = self.observe("fake_desktop.py", "watcher")
        reg = wait_until(lambda: events(watcher, "register"), what="the item to register")[0]
        menu = dbus.Interface(self.conn.get_object(reg["service"], "/MenuBar", introspect=False), "com.canonical.dbusmenu")
        owner = self.observe("task_owner.py", json.dumps({contract.Activity.BEGIN_TASK_OPTION_CANCELLABLE: True, contract.Activity.BEGIN_TASK_OPTION_SUSPENDABLE: True}), "--obey")
        path = wait_until(lambda: owner.snapshot(), what="the owner's task")[0]["path"]

        def task_row():
            _, (_, _, children) = menu.GetLayout(0, -1, dbus.Array([], signature="s"))
            rows = [c for c in children if str(c[1].get("label", "")).startswith("owned task")]
            if not rows:
                return None
            return (int(rows[0][0]), str(rows[0][1].get("children-display", "")),
                    {str(k[1]["label"]): int(k[0]) for k in rows[0][2]})

        row = wait_until(task_row, what="the task's row")
        self.assertEqual((row[1], sorted(row[2])), ("submenu", ["Cancel", "Pause"]))
        # A click on Cancel from a sandboxed app does nothing (the owner's first request heard is the
        # host's Pause below); the tray host's (a host process) reaches the owner.
        from test_strangers import can_fake_flatpak
        if can_fake_flatpak():
            root = tempfile.mkdtemp(prefix="netactivity-sandbox-")
            self.addCleanup(shutil.rmtree, root, True)
            # Its clicks on Cancel and on the check item that pauses the indicator.
            clicks = " && ".join("busctl --address='%s' call %s /MenuBar com.canonical.dbusmenu Event isvu %d clicked i 0 0"
                                 % (self.bus.address, reg["service"], i) for i in (row[2]["Cancel"], 2))
            sandboxed = subprocess.run(
                ["unshare", "-rm", "sh", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox.sh"), root,
                 "org.example.Clicker", "sh", "-c", clicks], capture_output=True, text=True, env=self.bus.env())
            self.assertEqual(sandboxed.returncode, 0, sandboxed.stderr)
            self.assertTrue(bool(prop(self.conn, "Enabled")), "a sandboxed app does not pause the indicator")
        menu.Event(row[2]["Pause"], "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(0))
        wait_until(lambda: self.conn.get_object(NAME, path, introspect=False).Get(
            contract.Task.INTERFACE, "State", dbus_interface=PROPS) == contract.Task.STATE_SUSPENDED, what="the owner to pause")
        row = wait_until(lambda: (lambda r: r if r and "Resume" in r[2] else None)(task_row()), what="Resume")
        menu.Event(row[2]["Cancel"], "clicked", dbus.Int32(0, variant_level=1), dbus.UInt32(0))
        wait_until(lambda: self.conn.get_object(NAME, path, introspect=False).Get(
            contract.Task.INTERFACE, "State", dbus_interface=PROPS) == contract.Task.STATE_COMPLETED, what="the owner to cancel")
        self.assertEqual(owner.requests(2), [(contract.Task.SuspendRequested, [True]), (contract.Task.CancelRequested, [])])

    def test_a_host_that_read_the_menu_between_two_announcements_gets_every_row_s_new_text(self):
        watcher = self.observe("fake_desktop.py", "watcher")
        reg = wait_until(lambda: events(watcher, "register"), what="the item to register")[0]
        menu = dbus.Interface(self.conn.get_object(reg["service"], "/MenuBar", introspect=False), "com.canonical.dbusmenu")
        no_names = dbus.Array([], signature="s")
        menu.GetLayout(0, -1, no_names)
        # A row appears and the host reads it at once, as the AppIndicator extension reads rows new
        # to it; its text then changes before (or after) the agent's next announcement.
        iface(self.conn).IncrementActivityCount()
        path = str(iface(self.conn).BeginTask("render", dbus.Dictionary({}, signature="sv")))
        _, (_, _, children) = menu.GetLayout(0, -1, no_names)
        row = [int(c[0]) for c in children if str(c[1].get("label", "")) == "render"][0]
        self.conn.get_object(NAME, path, introspect=False).SetFraction(0.4, dbus_interface=contract.Task.INTERFACE)
        wait_until(lambda: [e for e in events(watcher, "ItemsPropertiesUpdated")
                            if e["updated"].get(str(row), {}).get("label") == "render — 40 %"], what="the row's new text")

    def test_reregisters_when_the_watcher_restarts_and_when_present_at_start(self):
        first = self.observe("fake_desktop.py", "watcher")
        wait_until(lambda: events(first, "register"), what="the first registration")
        first.close()
        second = self.observe("fake_desktop.py", "watcher")
        wait_until(lambda: events(second, "register"), what="registration with the restarted watcher")
        # An agent that starts while a watcher is already there registers at once.
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args)
        wait_until(lambda: len(events(second, "register")) == 2, what="registration by the new agent")

    def test_no_notifications_unless_asked(self):
        notifications = self.observe("fake_desktop.py", "notifications")
        iface(self.conn).IncrementActivityCount()
        time.sleep(0.5)
        self.assertEqual(events(notifications, "Notify"), [])


class NoTrayTests(AgentTestCase):
    agent_args = ("--no-tray",)

    def test_no_tray_registers_nothing(self):
        watcher = self.observe("fake_desktop.py", "watcher")
        time.sleep(0.5)
        self.assertEqual(events(watcher, "register"), [])
        names = [str(n) for n in self.conn.list_names()]
        self.assertFalse([n for n in names if n.startswith("org.kde.StatusNotifierItem-")])


class JobTrackerTests(AgentTestCase):
    """KDE Plasma's job tracker, played by job_view_server.py with kjobwidgets' interfaces."""
    agent_args = ("--activation-delay", "0.5", "--completion-delay", "0")

    def calls(self, server, kind=None, view=None):
        return [e for e in server.snapshot() if "call" in e and (kind is None or e["call"] == kind)
                and (view is None or e["view"] == view)]

    def test_a_task_with_a_desktop_id_becomes_a_plasma_job_with_cancel_and_pause(self):
        import json
        server = self.observe("job_view_server.py")
        dock = self.observe("fake_desktop.py", "launcher")
        app = "org.example.Backup.desktop"
        # A task that ends before the activation delay never shows; one without a desktop-id neither.
        quick = iface(self.conn).BeginTask("quick", dbus.Dictionary({"desktop-id": "org.example.Quick.desktop"}, signature="sv"))
        self.conn.get_object(NAME, quick, introspect=False).Complete("", dbus_interface=contract.Task.INTERFACE)
        iface(self.conn).BeginTask("no desktop id", dbus.Dictionary({}, signature="sv"))
        owner = self.observe("task_owner.py", json.dumps({contract.Activity.BEGIN_TASK_OPTION_DESKTOP_ID: app, contract.Activity.BEGIN_TASK_OPTION_CANCELLABLE: True,
                                                          contract.Activity.BEGIN_TASK_OPTION_SUSPENDABLE: True,
                                                          "expected-to-receive": 1000}), "--obey")
        path = wait_until(lambda: owner.snapshot(), what="the owner's task")[0]["path"]
        wait_until(lambda: [e for e in events(dock, "Update") if e["app"] == "application://" + app and e["props"]["count-visible"]],
                   what="the agent's dock progress before Plasma shows the job")
        request = wait_until(lambda: self.calls(server, "requestView"), timeout=5, what="requestView")
        self.assertEqual(len(request), 1, "only the task still live past the activation delay: %r" % request)
        view = request[0]["view"]
        entry, capabilities, hints = request[0]["args"]
        self.assertEqual((entry, capabilities), ("org.example.Backup", 3))
        self.assertEqual((hints["title"], hints["immediate"], hints["suspended"], hints["totalBytes"]),
                         ("owned task", True, False, 1000))
        # Plasma tracks it: the agent hides its own dock progress for it, once.
        wait_until(lambda: [e for e in events(dock, "Update") if e["app"] == "application://" + app
                            and not e["props"]["count-visible"]], what="the agent's dock progress hidden")
        owner.send("progress 250 1000")
        update = wait_until(lambda: [c for c in self.calls(server, "update", view) if "percent" in c["args"][0]],
                            what="the progress")[-1]["args"][0]
        self.assertEqual((update["percent"], update["processedBytes"]), (25, 250))
        # Another client's signal of the same name and path is not Plasma's: ignored (the agent has
        # handled it once the liar's next call, on the same connection, is answered).
        liar = connect(self.bus)
        self.addCleanup(liar.close)
        fake = dbus.lowlevel.SignalMessage(view, "org.kde.JobViewV3", "cancelRequested")
        fake.set_destination(self.conn.get_name_owner(NAME))  # unicast: no match rule stands in its way
        liar.send_message(fake)
        liar.get_object(NAME, PATH, introspect=False).Ping(dbus_interface="org.freedesktop.DBus.Peer")
        # Plasma's Pause reaches the owner, which pauses: the view hears it.
        server.send("suspendRequested " + view)
        wait_until(lambda: [c for c in self.calls(server, "update", view) if c["args"][0].get("suspended") is True],
                   what="the job suspended")
        server.send("resumeRequested " + view)
        wait_until(lambda: [c for c in self.calls(server, "update", view) if c["args"][0].get("suspended") is False],
                   what="the job running again")
        server.send("cancelRequested " + view)
        done = wait_until(lambda: self.calls(server, "terminate", view), what="the job's end")[0]
        self.assertEqual(done["args"][:2], [1, ""], "a cancelled job (KJob::KilledJobError)")
        self.assertEqual(owner.requests(3), [(contract.Task.SuspendRequested, [True]), (contract.Task.SuspendRequested, [False]),
                                 (contract.Task.CancelRequested, [])])
        self.assertEqual(len(self.calls(server, "requestView")), 1)

    def test_plasmas_cancel_ends_a_netactivity_run_command(self):
        server = self.observe("job_view_server.py")
        run = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "backup", "--desktop-id",
                                "org.example.Backup.desktop", "--cancellable", "--", "sleep", "60"], env=self.bus.env())
        self.addCleanup(lambda: run.poll() is None and (run.terminate(), run.wait(10)))
        request = wait_until(lambda: self.calls(server, "requestView"), timeout=5, what="the job")[0]
        self.assertEqual(request["args"][:2], ["org.example.Backup", 1])
        server.send("cancelRequested " + request["view"])
        self.assertEqual(run.wait(10), 128 + 15, "the command ended by Plasma's Cancel")
        done = wait_until(lambda: self.calls(server, "terminate", request["view"]), what="the job's end")[0]
        self.assertEqual(done["args"][0], 1)

    def test_an_owner_that_leaves_ends_its_job_with_an_error_and_a_new_server_gets_live_tasks(self):
        import json
        app = "org.example.Sync.desktop"
        owner = self.observe("task_owner.py", json.dumps({contract.Activity.BEGIN_TASK_OPTION_DESKTOP_ID: app}))
        path = wait_until(lambda: owner.snapshot(), what="the owner's task")[0]["path"]
        time.sleep(0.6)  # past the activation delay, with no job tracker on the bus yet
        server = self.observe("job_view_server.py")
        request = wait_until(lambda: self.calls(server, "requestView"), what="the live task's view")[0]
        self.assertEqual(request["args"][:2], ["org.example.Sync", 0], "no Cancel or Pause offered")
        owner.close()
        done = wait_until(lambda: self.calls(server, "terminate", request["view"]), what="the job's end")[0]
        self.assertEqual(done["args"][0], 100)
        self.assertIn("quit", done["args"][1])

class DockTests(AgentTestCase):
    def begin(self, **opts):
        path = iface(self.conn).BeginTask("download", dbus.Dictionary(opts, signature="sv"))
        return dbus.Interface(self.conn.get_object(NAME, path, introspect=False), contract.Task.INTERFACE)

    def test_task_progress_reaches_docks_through_launcher_entry(self):
        dock = self.observe("fake_desktop.py", "launcher")
        app = "org.example.App.desktop"
        first = self.begin(**{"desktop-id": app, "expected-to-receive": dbus.UInt64(100)})
        update = wait_until(lambda: events(dock, "Update"), what="the first Update")[0]
        self.assertEqual(update["app"], "application://" + app)
        self.assertEqual(update["props"], {"progress": 0.0, "progress-visible": True, "count": 1, "count-visible": True})
        first.SetProgress(dbus.UInt64(0), dbus.UInt64(0), dbus.UInt64(50), dbus.UInt64(100))
        wait_until(lambda: [e for e in events(dock, "Update") if e["props"]["progress"] == 0.5], what="progress 0.5")
        second = self.begin(**{"desktop-id": app, "expected-to-receive": dbus.UInt64(300)})
        wait_until(lambda: [e for e in events(dock, "Update") if e["props"]["count"] == 2 and e["props"]["progress"] == 0.125],
                   what="two tasks, combined progress")
        first.Complete("")
        second.Complete("")
        last = wait_until(lambda: [e for e in events(dock, "Update") if e["props"]["count"] == 0], what="the last Update")[0]
        self.assertEqual((last["props"]["progress-visible"], last["props"]["count-visible"]), (False, False))
        self.begin()  # no desktop-id: docks hear nothing
        time.sleep(0.2)
        self.assertEqual([e for e in events(dock, "Update") if e["t"] > last["t"]], [])

    def test_a_shell_script_publishes_a_task_with_progress_for_docks(self):
        dock = self.observe("fake_desktop.py", "launcher")
        gate_dir = tempfile.mkdtemp(prefix="netactivity-gate-")
        self.addCleanup(shutil.rmtree, gate_dir, True)
        gate = os.path.join(gate_dir, "gate")
        os.mkfifo(gate)
        # pv -n prints percentages on stderr, one per line; other lines pass through.
        script = "echo to-stdout; echo 25 >&2; echo kept >&2; echo 40.5%% >&2; read x < %s; echo 100 >&2; exit 3" % gate
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "backup photos",
                              "--desktop-id", "org.example.Backup.desktop", "--progress-from", "stderr",
                              "--", "sh", "-c", script],
                             env=self.bus.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        task = contract.Task.INTERFACE

        def tasks():
            objects = self.conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(
                dbus_interface="org.freedesktop.DBus.ObjectManager")
            return [i[task] for i in objects.values() if task in i]

        t = wait_until(lambda: [t for t in tasks() if float(t["FractionCompleted"]) == 0.405] or None,
                       what="the task at 40.5 %")[0]
        # A percentage is a fraction with no sizes: no made-up bytes for panels to print.
        self.assertEqual((str(t["Description"]), str(t["State"])), ("backup photos", contract.Task.STATE_RUNNING))
        self.assertEqual([int(t[k]) for k in ("CountOfBytesReceived", "CountOfBytesExpectedToReceive",
                                              "CountOfBytesSent", "CountOfBytesExpectedToSend")], [0, 0, 0, 0])
        wait_until(lambda: [e for e in events(dock, "Update") if e["app"] == "application://org.example.Backup.desktop"
                            and e["props"]["progress"] == 0.405 and e["props"]["count"] == 1], what="the dock at 40.5 %")
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 1, "the task is the activity, not a lease too")
        with open(gate, "w") as f:
            f.write("go\n")
        out, err = p.communicate(timeout=10)
        self.assertEqual((p.returncode, out, err), (3, "to-stdout\n", "kept\n"),
                         "the command's status; progress lines consumed, the others passed through")
        t = wait_until(lambda: [t for t in tasks() if str(t["State"]) == contract.Task.STATE_COMPLETED] or None, what=contract.Task.STATE_COMPLETED)[0]
        self.assertEqual((str(t["Error"]), float(t["FractionCompleted"]), int(t["CountOfBytesReceived"])),
                         ("exit status 3", 1.0, 0), "100 % reached before the failure; still no bytes")
        wait_until(lambda: [e for e in events(dock, "Update") if e["props"]["count"] == 0], what="the dock cleared")

    def test_bad_desktop_id(self):
        for bad in ("app", "../x.desktop", "a b.desktop", "x" * 300 + ".desktop"):
            with self.assertRaises(dbus.exceptions.DBusException) as cm:
                self.begin(**{"desktop-id": bad})
            self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.InvalidArgs)
            self.assertIn("desktop-id", cm.exception.get_dbus_message())


class TranslatedTrayTests(AgentTestCase):
    """The agent's menu in the language of its session (gettext, LANGUAGE=de)."""
    agent_args = ("--activation-delay", "0", "--completion-delay", "0")

    def setUp(self):
        super().setUp()
        self.agent.stop()
        self.agent = Agent(self.bus, *self.agent_args, env={"LANGUAGE": "de", "LANG": "C.UTF-8", "LC_ALL": ""})

    def test_the_menu_is_in_german(self):
        watcher = self.observe("fake_desktop.py", "watcher")
        reg = wait_until(lambda: events(watcher, "register"), what="the item to register")[0]
        menu = dbus.Interface(self.conn.get_object(reg["service"], "/MenuBar", introspect=False), "com.canonical.dbusmenu")
        _, (_, _, children) = menu.GetLayout(0, -1, dbus.Array([], signature="s"))
        labels = [str(c[1].get("label", "")) for c in children]
        self.assertEqual((labels[0], labels[-1]), ("Keine App nutzt das Netzwerk", "Netzwerkaktivität anzeigen"))
        item = self.conn.get_object(reg["service"], "/StatusNotifierItem", introspect=False)
        self.assertEqual(item.Get(SNI, "Title", dbus_interface=PROPS), "Netzwerkaktivität")


class NotificationTests(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "0", "--notify", "--notify-after", "0.3")

    def test_long_activity_posts_one_notification_updated_in_place_and_closed_at_the_end(self):
        server = self.observe("fake_desktop.py", "notifications")
        started = time.monotonic()
        iface(self.conn).IncrementActivityCount()
        note = wait_until(lambda: events(server, "Notify"), what="the notification")[0]
        self.assertGreaterEqual(note["t"] - started, 0.3 - 0.01)
        self.assertEqual((note["replaces"], note["hints"]["category"], note["summary"]), (0, "network", "Network activity"))
        self.assertIn("python3", note["body"])
        other = connect(self.bus)
        try:
            iface(other).IncrementActivityCount()
            wait_until(lambda: [e for e in events(server, "Notify") if e["body"].count("python3 (1)") == 2],
                       what="an update naming both clients")
            for update in events(server, "Notify")[1:]:
                self.assertEqual(update["replaces"], note["id"], "replaced, not stacked")
        finally:
            other.close()
        iface(self.conn).DecrementActivityCount()
        closed = wait_until(lambda: events(server, "Close"), what="CloseNotification")[0]
        self.assertEqual(closed["id"], note["id"])

    def test_updates_are_quiet_and_a_dismissed_notification_stays_closed_for_the_episode(self):
        server = self.observe("fake_desktop.py", "notifications")
        panel = self.observe()
        iface(self.conn).IncrementActivityCount()
        note = wait_until(lambda: events(server, "Notify"), what="the notification")[0]
        self.assertNotIn("urgency", note["hints"], "the first post may pop a banner")
        other, third = connect(self.bus), connect(self.bus)
        try:
            iface(other).IncrementActivityCount()
            update = wait_until(lambda: events(server, "Notify")[1:], what="an update")[0]
            self.assertEqual((update["replaces"], update["hints"].get("urgency"), update["hints"].get("suppress-sound")),
                             (note["id"], 0, True), "an update: in place, low urgency (no new banner), no sound")
            # The user dismisses it: a client change that would update it posts nothing.
            server.send("dismiss %d" % note["id"])
            wait_until(lambda: events(server, "dismissed"), what="the dismissal")
            posted = len(events(server, "Notify"))
            iface(third).IncrementActivityCount()
            # The agent sends a notification update before the Clients signal that goes with it: once
            # the panel has the signal, the bus has the update queued for the server ahead of any
            # later call, and the server prints what it got before it answers that call.
            wait_until(lambda: [c for c, _ in panel.changed("Clients") if len(c) == 3], what="a third client")
            self.conn.get_object("org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                 introspect=False).GetServerInformation(dbus_interface="org.freedesktop.Notifications")
            wait_until(lambda: events(server, "info"), what="the server's marker")
            self.assertEqual(len(events(server, "Notify")), posted, "not re-posted in the same episode")
            self.assertEqual(events(server, "Close"), [], "nothing to close: the user closed it")
        finally:
            other.close()
            third.close()
        iface(self.conn).DecrementActivityCount()
        wait_until(lambda: not prop(self.conn, "Visible"), what="the episode's end")
        # A new episode may post again.
        iface(self.conn).IncrementActivityCount()
        again = wait_until(lambda: events(server, "Notify")[posted:], what="the next episode's notification")[0]
        self.assertEqual(again["replaces"], 0, "a new notification, not an update of the dismissed one")
        iface(self.conn).DecrementActivityCount()


class NotificationCompletionDelayTests(AgentTestCase):
    agent_args = ("--activation-delay", "0", "--completion-delay", "1", "--notify", "--notify-after", "0.2")

    def test_the_end_of_activity_is_not_re_posted_during_the_completion_delay(self):
        server = self.observe("fake_desktop.py", "notifications")
        iface(self.conn).IncrementActivityCount()
        note = wait_until(lambda: events(server, "Notify"), what="the notification")[0]
        ended = time.monotonic()
        iface(self.conn).DecrementActivityCount()
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0 and not prop(self.conn, "Clients"), what="no clients")
        closed = wait_until(lambda: events(server, "Close"), timeout=5, what="CloseNotification after the delay")[0]
        self.assertEqual(closed["id"], note["id"])
        self.assertEqual([e["body"] for e in events(server, "Notify")], [note["body"]],
                         "no re-post saying there is no activity")
        # From before the last decrement to the server's arrival: never less than the delay however
        # late the server reads (between two arrivals, it would measure the server's scheduling).
        self.assertGreaterEqual(closed["t"] - ended, 1.0 - 0.005, "closed when Visible ended, after the completion delay")


class DownloadFailureNotificationTests(AgentTestCase):
    agent_args = ("--notify", "--notify-after", "30")

    def test_a_failed_download_posts_a_transfer_error_notification(self):
        server = self.observe("fake_desktop.py", "notifications")
        downloader = dbus.Interface(self.conn.get_object(NAME, PATH, introspect=False), contract.Downloader.INTERFACE)
        downloader.DownloadImage("http://127.0.0.1:9/missing.png", dbus.Dictionary({}, signature="sv"))
        note = wait_until(lambda: events(server, "Notify"), what="the failure notification")[0]
        self.assertEqual((note["summary"], note["hints"]["category"]), ("Download failed", "transfer.error"))
        self.assertIn("127.0.0.1:9/missing.png", note["body"])
        downloader.DownloadImage("http://127.0.0.1:9/other.png", dbus.Dictionary({}, signature="sv"))
        second = wait_until(lambda: events(server, "Notify")[1:], what="the second failure")[0]
        self.assertEqual(second["replaces"], note["id"], "replaced, not stacked")


class SettingsFileTests(unittest.TestCase):
    """$XDG_CONFIG_HOME/netactivity/netactivityd.conf, read at start and on SIGHUP."""

    def setUp(self):
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.path = os.path.join(self.bus.config_home, "netactivity", "netactivityd.conf")
        os.makedirs(os.path.dirname(self.path))

    def write(self, text):
        with open(self.path + ".new", "w") as f:
            f.write(text)
        os.rename(self.path + ".new", self.path)

    def test_the_file_sets_what_the_command_line_leaves_and_sighup_reloads_it(self):
        self.write("# mine\nactivation-delay = 0\ncompletion-delay = 0.25  # a comment\ntray = no\n"
                   "notify = yes\nnotify-after = 0.2\nbogus = 1\ncompletion-delay = 99\n")
        agent = Agent(self.bus, "--activation-delay", "0.75")
        self.addCleanup(agent.stop)
        conn = connect(self.bus)
        self.addCleanup(conn.close)
        self.assertEqual(float(prop(conn, "ActivationDelay")), 0.75, "the command line wins")
        self.assertEqual(float(prop(conn, "CompletionDelay")), 0.25, "the file's value (its bad line skipped)")
        log = agent.logtext()
        self.assertIn("unknown key 'bogus'", log)
        self.assertIn("completion-delay must be 0...60 seconds, got '99'", log)
        names = lambda: [str(n) for n in conn.list_names() if str(n).startswith("org.kde.StatusNotifierItem-")]
        self.assertEqual(names(), [], "tray = no")
        server = Observer(self.bus, "fake_desktop.py", "notifications")
        self.addCleanup(server.close)
        iface(conn).IncrementActivityCount()
        wait_until(lambda: events(server, "Notify"), what="notify = yes posts after 0.2 s")
        iface(conn).DecrementActivityCount()
        wait_until(lambda: events(server, "Close"), what="closed")

        self.write("completion-delay = 0.5\ntray = yes\nnotify = no\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: float(prop(conn, "CompletionDelay")) == 0.5, what="the reload")
        self.assertTrue(agent.alive(), "SIGHUP reloads, it does not stop the agent")
        self.assertEqual(float(prop(conn, "ActivationDelay")), 0.75, "the command line still wins")
        wait_until(names, what="tray = yes puts the item on the bus")
        notified = len(events(server, "Notify"))
        iface(conn).IncrementActivityCount()
        wait_until(lambda: prop(conn, "Visible"), what="visible")
        time.sleep(0.4)  # notify-after 0.2 s has passed twice over: notify = no posts nothing
        self.assertEqual(len(events(server, "Notify")), notified)
        iface(conn).DecrementActivityCount()

        self.write("tray = off\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: not names(), what="tray = off takes the item off the bus")
        self.assertEqual(float(prop(conn, "CompletionDelay")), 0.17, "a key the file no longer sets is back to its default")

    def test_a_tray_turned_off_while_its_registration_is_unanswered_takes_the_late_answer_in_its_stride(self):
        self.write("tray = yes\n")
        watcher = Observer(self.bus, "fake_desktop.py", "watcher", "--hold")
        self.addCleanup(watcher.close)
        agent = Agent(self.bus)
        self.addCleanup(agent.stop)
        conn = connect(self.bus)
        self.addCleanup(conn.close)
        wait_until(lambda: events(watcher, "register"), what="the item to register")
        names = lambda: [str(n) for n in conn.list_names() if str(n).startswith("org.kde.StatusNotifierItem-")]
        self.write("tray = no\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: not names(), what="tray = no takes the item off the bus")
        watcher.send("answer")
        # Answered once the agent has read it (the watcher pings it after its answer).
        self.assertEqual(wait_until(lambda: events(watcher, "answered"), what="the answer")[0]["count"], 1)
        self.assertTrue(agent.alive(), "the late answer reached no freed item")
        self.assertNotIn("refused our item", agent.logtext())

    def test_the_caches_numbers_come_from_the_file_in_bytes_or_binary_units(self):
        self.write("image-memory-capacity = 50M\nimage-preferred-memory-usage-after-purge = 30MiB\n"
                   "decoded-memory-capacity = 2G\ndecoded-preferred-memory-usage-after-purge = 1.5G\n"
                   "decoded-memory-capacity = 2T\n")
        agent = Agent(self.bus)
        self.addCleanup(agent.stop)
        conn = connect(self.bus)
        self.addCleanup(conn.close)
        C = contract.ImageCache

        def numbers():
            obj = conn.get_object(contract.BUS_NAME, contract.OBJECT_PATH)
            return tuple(int(obj.Get(C.INTERFACE, name, dbus_interface=PROPS)) for name in (
                C.MemoryCapacity, C.PreferredMemoryUsageAfterPurge, C.DecodedMemoryCapacity,
                C.DecodedPreferredMemoryUsageAfterPurge))
        self.assertEqual(numbers(), (50 << 20, 30 << 20, 2 << 30, 60 << 20))
        log = agent.logtext()
        self.assertIn("decoded-preferred-memory-usage-after-purge must be a number of bytes", log)
        self.assertIn("got '2T'", log, "over the caches' bound of 1 TiB")

        # A key the file no longer gives has its default; a default preferred usage above a lower
        # capacity comes down to it.
        self.write("decoded-memory-capacity = 10M\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: numbers()[2] == 10 << 20, what="the reload")
        self.assertEqual(numbers(), (100 << 20, 60 << 20, 10 << 20, 10 << 20))
        self.write("decoded-memory-capacity = 1M\ndecoded-preferred-memory-usage-after-purge = 2M\n")
        agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "Decoded tier limits not changed" in agent.logtext(), what="the refusal logged")
        self.assertEqual(numbers()[2:], (10 << 20, 10 << 20))
