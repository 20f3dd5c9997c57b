# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The netactivity CLI, run as a user would, against the real agent on a private bus."""
import json
import os
import subprocess
import time
import unittest

import dbus

import contract

from harness import BIN, NAME, PATH, Agent, PrivateBus, cli, connect, iface, prop, wait_until


def _stat_fields(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _parent_of(pid):
    fields = _stat_fields(pid)
    return int(fields[1]) if len(fields) > 1 else None


def _pending_signals(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return " ".join(line.split()[0] + line.split()[1] for line in f if line.startswith(("SigPnd", "ShdPnd")))
    except OSError:
        return None


def _state_of(pid):
    fields = _stat_fields(pid)
    return fields[0] if fields else None


class CLITests(unittest.TestCase):
    def setUp(self):
        self.bus = PrivateBus()
        self.agent = None

    def tearDown(self):
        if self.agent:
            self.agent.stop()
        self.bus.stop()

    def start_agent(self, *args):
        self.agent = Agent(self.bus, *args)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)

    def test_no_agent_is_exit_69_with_a_clear_message(self):
        for args in (["status"], ["status", "--json"], ["inc", "--seconds", "0"], ["dec"]):
            r = cli(self.bus, *args)
            self.assertEqual(r.returncode, 69, args)
            self.assertIn("not running", r.stderr)
            self.assertEqual(r.stdout, "")

    def test_status_text_and_json(self):
        self.start_agent("--activation-delay", "0.5")
        r = cli(self.bus, "status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("state:       not-active", r.stdout)
        self.assertIn("activation 0.5 s", r.stdout)
        r = cli(self.bus, "status", "--json")
        s = json.loads(r.stdout)
        self.assertEqual((s["running"], s["visible"], s["state"], s["activity_count"]), (True, False, contract.Activity.STATE_NOT_ACTIVE, 0))

    def test_run_holds_a_lease_and_returns_the_status(self):
        self.start_agent("--activation-delay", "0")
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--", "sh", "-c", "sleep 1; exit 7"],
                             env=self.bus.env())
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 1, what="the lease")
        wait_until(lambda: bool(prop(self.conn, "Visible")), what="visible")
        self.assertEqual(p.wait(10), 7)
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 0, what="release")
        r = cli(self.bus, "run", "--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + 15)
        r = cli(self.bus, "run", "--", "no-such-command-here")
        self.assertEqual(r.returncode, 127)
        self.assertIn("command not found", r.stderr)
        r = cli(self.bus, "run")
        self.assertNotEqual(r.returncode, 0)

    def test_run_passes_sigterm_on_and_completes_its_task(self):
        # The library's thread takes none of the app's signals: `run` waits for them itself.
        self.start_agent()
        observer = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--tasks", "--format", "json"],
                                    env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        try:
            p = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "long job", "--", "sleep", "30"],
                                 env=self.bus.env())
            added = json.loads(observer.stdout.readline())
            self.assertEqual((added["event"], added["description"]), ("added", "long job"))
            p.terminate()
            self.assertEqual(p.wait(10), 128 + 15)
            while True:
                line = json.loads(observer.stdout.readline())
                if line.get("state") == contract.Task.STATE_COMPLETED:
                    break
            self.assertEqual(line["error"], "killed by signal 15")
        finally:
            observer.kill()
            observer.wait()

    def test_a_panel_pauses_resumes_and_cancels_a_run_task(self):
        self.start_agent()
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "backup", "--cancellable", "--suspendable",
                              "--", "sh", "-c", "sleep 60; true"], env=self.bus.env())
        self.addCleanup(lambda: p.poll() is None and (p.terminate(), p.wait(10)))
        om = self.conn.get_object(NAME, PATH, introspect=False)

        def task():
            for path, ifaces in om.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER).items():
                t = ifaces.get(contract.Task.INTERFACE)
                if t and t["Description"] == "backup" and t[contract.Task.Cancellable] and t[contract.Task.Suspendable]:
                    return str(path), str(t["State"])
            return None
        path, _ = wait_until(task, what="the task with its offers")
        number = path.rsplit("/", 1)[1]
        sleeper = wait_until(lambda: [int(c) for c in os.listdir("/proc") if c.isdigit() and _parent_of(int(c)) in
                                      [int(x) for x in os.listdir("/proc") if x.isdigit() and _parent_of(int(x)) == p.pid]],
                             what="the command's sleep")[0]
        r = cli(self.bus, "tasks", "pause", number)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: task()[1] == contract.Task.STATE_SUSPENDED, what="the task suspended")
        wait_until(lambda: _state_of(sleeper) == "T", what="the command's child stopped")
        r = cli(self.bus, "tasks", "resume", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: task()[1] == contract.Task.STATE_RUNNING, what="the task running again")
        wait_until(lambda: _state_of(sleeper) != "T", what="the command's child going on")
        # Paused again, then cancelled while paused: the command and its child end, none is left stopped.
        r = cli(self.bus, "tasks", "pause", number)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_until(lambda: task()[1] == contract.Task.STATE_SUSPENDED, what="the task suspended again")
        wait_until(lambda: _state_of(sleeper) == "T", what="the command's child stopped again")
        r = cli(self.bus, "tasks", "cancel", number)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(p.wait(10), 128 + 15)
        wait_until(lambda: _state_of(sleeper) in (None, "Z"),
                   what=lambda: "the command's child gone (its state: %s, signals pending: %s)" % (
                       _state_of(sleeper), _pending_signals(sleeper)))
        self.assertEqual(
            str(self.conn.get_object(NAME, path, introspect=False).Get(contract.Task.INTERFACE, "Error",
                                                                       dbus_interface="org.freedesktop.DBus.Properties")),
            contract.ERROR_PREFIX + "Cancelled")
        # What cannot be asked: a task that offers nothing, no such task, not a task at all.
        plain = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "plain", "--", "sleep", "30"],
                                 env=self.bus.env())
        # SIGTERM, which run passes to its command: nothing is left running after the test.
        self.addCleanup(lambda: plain.poll() is None and (plain.terminate(), plain.wait(10)))
        plain_path = wait_until(lambda: [str(k) for k, v in om.GetManagedObjects(dbus_interface=contract.OBJECT_MANAGER).items()
                                         if v.get(contract.Task.INTERFACE, {}).get("Description") == "plain"], what="plain")[0]
        r = cli(self.bus, "tasks", "cancel", plain_path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not begun cancellable", r.stderr)
        r = cli(self.bus, "tasks", "pause", "999999")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("No such object path", r.stderr)
        r = cli(self.bus, "tasks", "resume", contract.OBJECT_PATH)
        self.assertEqual(r.returncode, 64, r.stderr)
        r = cli(self.bus, "run", "--cancellable", "--", "true")
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIsNone(plain.poll(), "the plain task's command runs on")

    def test_watch_follows_the_bus_coming_back(self):
        self.start_agent()
        watch = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", "waybar"],
                                 env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(json.loads(watch.stdout.readline())["class"], "idle")
            self.conn.close()
            self.agent.stop()
            self.assertEqual(json.loads(watch.stdout.readline())["class"], "stopped")
            self.bus.restart()
            self.agent = Agent(self.bus)
            self.assertEqual(json.loads(watch.stdout.readline())["class"], "idle", "reattached to the new bus")
            self.assertIsNone(watch.poll())
        finally:
            watch.kill()
            watch.wait()

    def test_run_help_is_help_not_a_command(self):
        self.start_agent()
        for args in (["run", "--help"], ["run", "-h"]):
            r = cli(self.bus, *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("USAGE: netactivity run", r.stdout)
            self.assertIn("--progress-from", r.stdout)
        r = cli(self.bus, "run", "sh", "-c", "echo $0 --help", "x")
        self.assertEqual((r.returncode, r.stdout), (0, "x --help\n"), "a command's own options stay the command's")
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 0)

    def test_run_without_agent_still_runs_the_command(self):
        r = cli(self.bus, "run", "--", "sh", "-c", "echo hi; exit 3")
        self.assertEqual((r.returncode, r.stdout), (3, "hi\n"))
        self.assertIn("warning", r.stderr)

    def test_inc_holds_until_dec(self):
        self.start_agent()
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "inc"], env=self.bus.env())
        wait_until(lambda: int(prop(self.conn, "ActivityCount")) == 1, what="inc")
        r = cli(self.bus, "dec")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(int(prop(self.conn, "ActivityCount")), 0)
        self.assertEqual(p.wait(5), 0)
        r = cli(self.bus, "dec")
        self.assertEqual(r.returncode, 0)
        self.assertIn("nothing to decrement", r.stderr)

    def test_watch_waybar_names_why_an_app_is_busy(self):
        """The library hears that Reasons changed (named as invalidated) and reads it."""
        self.start_agent("--activation-delay", "0", "--completion-delay", "0")
        watch = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", "waybar"],
                                 env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(json.loads(watch.stdout.readline())["class"], "idle")
            lease = iface(self.conn).BeginActivity("Uploading logs").take()
            try:
                while True:
                    line = json.loads(watch.stdout.readline())
                    if "Uploading logs" in line["tooltip"]:
                        break
                self.assertRegex(line["tooltip"], r"python3 \(1\) — Uploading logs")
            finally:
                os.close(lease)
        finally:
            watch.kill()
            watch.wait()

    def test_watch_waybar_and_polybar_follow_changes_and_restarts(self):
        self.start_agent("--activation-delay", "0", "--completion-delay", "0")
        procs = {fmt: subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", fmt],
                                       env=self.bus.env(), stdout=subprocess.PIPE, text=True)
                 for fmt in ("waybar", "polybar", "json")}
        try:
            first = json.loads(procs["waybar"].stdout.readline())
            self.assertEqual(first["class"], "idle")
            self.assertEqual(procs["polybar"].stdout.readline(), "\n")
            json.loads(procs["json"].stdout.readline())
            p = subprocess.Popen([os.path.join(BIN, "netactivity"), "inc"], env=self.bus.env())
            line = json.loads(procs["waybar"].stdout.readline())
            self.assertEqual((line["class"], line["alt"]), ("active", "active"))
            self.assertTrue(line["text"])
            self.assertIn("Network activity", line["tooltip"])
            self.assertTrue(procs["polybar"].stdout.readline().strip())
            p.terminate()
            p.wait(5)
            while True:
                line = json.loads(procs["waybar"].stdout.readline())
                if line["class"] == "idle":
                    break
            self.agent.stop()
            self.assertEqual(json.loads(procs["waybar"].stdout.readline())["class"], "stopped")
            self.agent = Agent(self.bus)
            self.assertEqual(json.loads(procs["waybar"].stdout.readline())["class"], "idle")
            for proc in procs.values():
                self.assertIsNone(proc.poll(), "watch keeps running across agent restarts")
        finally:
            for proc in procs.values():
                proc.kill()
                proc.wait()


    @staticmethod
    def json_schema():
        """docs/install.md's tables for `watch --format json`: {table: {key: type}} for the status line,
        its clients and the task lines."""
        import re
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "install.md")) as f:
            doc = f.read()
        section = doc.split("### `netactivity watch --format json`", 1)[1].split("\n## ", 1)[0]
        tables = []
        for block in re.split(r"\n\n(?=\| key \|)", section)[1:]:
            rows = {}
            for line in block.splitlines()[2:]:
                if not line.startswith("|"):
                    break
                keys, kind = line.split("|")[1].strip(), line.split("|")[2].strip()
                for key in re.findall(r"`([a-z_]+)`", keys):
                    rows[key] = kind
            tables.append(rows)
        return dict(zip(("status", "client", "task"), tables))

    def check(self, obj, table):
        kinds = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
                 "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                 "boolean": lambda v: isinstance(v, bool), "string": lambda v: isinstance(v, str),
                 "array of client": lambda v: isinstance(v, list), "array of string": lambda v: isinstance(v, list)
                 and all(isinstance(x, str) for x in v)}
        for key, kind in table.items():
            self.assertIn(key, obj, "%s: the documented key %r is missing" % (obj, key))
            ok = kinds[kind.replace(" or null", "")]
            self.assertTrue(ok(obj[key]) or (obj[key] is None and kind.endswith("or null")), "%s: %s is not %s" % (obj, key, kind))
        self.assertEqual(set(obj) - set(table), set(), "keys the docs do not list")

    def test_watch_json_has_the_documented_schema_running_and_stopped(self):
        schema = self.json_schema()
        self.assertEqual(set(schema), {"status", "client", "task"})
        self.start_agent("--activation-delay", "0", "--completion-delay", "0")
        watch = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", "json"], env=self.bus.env(),
                                 stdout=subprocess.PIPE, text=True)
        try:
            idle = json.loads(watch.stdout.readline())
            self.check(idle, schema["status"])
            self.assertEqual((idle["schema"], idle["running"], idle["state"]), (1, True, contract.Activity.STATE_NOT_ACTIVE))
            iface(self.conn).IncrementActivityCount()
            busy = json.loads(watch.stdout.readline())
            while busy["state"] != contract.Activity.STATE_ACTIVE:  # delaying-start for a moment first
                self.check(busy, schema["status"])
                self.assertEqual(busy["activity_count"], 1, busy)
                busy = json.loads(watch.stdout.readline())
            self.check(busy, schema["status"])
            self.assertEqual(busy["activity_count"], 1, "state and count agree")
            self.check(busy["clients"][0], schema["client"])
            self.agent.stop()
            line = json.loads(watch.stdout.readline())
            while line["running"]:  # the count going back to 0 as the agent left, if it was heard
                line = json.loads(watch.stdout.readline())
            self.check(line, schema["status"])
            self.assertEqual((line["state"], line["visible"], line["enabled"], line["clients"]), ("stopped", False, None, []))
        finally:
            watch.kill()
            watch.wait()
        self.start_agent()
        tasks = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--tasks", "--format", "json"],
                                 env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        try:
            path = iface(self.conn).BeginTask("schema", dbus.Dictionary({}, signature="sv"))
            added = json.loads(tasks.stdout.readline())
            self.check(added, schema["task"])
            self.assertEqual((added["event"], added["path"]), ("added", path))
        finally:
            tasks.kill()
            tasks.wait()

    def test_watch_shows_no_zero_count_during_the_completion_delay(self):
        self.start_agent("--activation-delay", "0", "--completion-delay", "1")
        procs = {fmt: subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--format", fmt],
                                       env=self.bus.env(), stdout=subprocess.PIPE, text=True)
                 for fmt in ("waybar", "polybar")}
        try:
            self.assertEqual(json.loads(procs["waybar"].stdout.readline())["class"], "idle")
            self.assertEqual(procs["polybar"].stdout.readline(), "\n")
            iface(self.conn).IncrementActivityCount()
            self.assertEqual(json.loads(procs["waybar"].stdout.readline())["text"], "⇅ 1")
            self.assertEqual(procs["polybar"].stdout.readline(), "⇅ 1\n")
            iface(self.conn).DecrementActivityCount()
            ending = json.loads(procs["waybar"].stdout.readline())
            self.assertEqual((ending["text"], ending["class"], ending["tooltip"]), ("⇅", "active", "Network activity just ended"))
            self.assertEqual(procs["polybar"].stdout.readline(), "⇅\n")
            self.assertEqual(json.loads(procs["waybar"].stdout.readline())["class"], "idle", "hidden after the delay")
            self.assertEqual(procs["polybar"].stdout.readline(), "\n")
        finally:
            for proc in procs.values():
                proc.kill()
                proc.wait()

    def begin_task(self, description, **opts):
        path = iface(self.conn).BeginTask(description, dbus.Dictionary(opts, signature="sv"))
        return path, dbus.Interface(self.conn.get_object(NAME, path, introspect=False), contract.Task.INTERFACE)

    def test_tasks_lists_progress_and_owner(self):
        self.start_agent()
        r = cli(self.bus, "tasks")
        self.assertEqual((r.returncode, r.stdout), (0, "no tasks\n"))
        path, task = self.begin_task("GET /feed.json", **{"expected-to-receive": dbus.UInt64(2048)})
        task.SetProgress(dbus.UInt64(0), dbus.UInt64(0), dbus.UInt64(512), dbus.UInt64(2048))
        self.begin_task("paused upload", suspended=True)
        r = cli(self.bus, "tasks")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["TASK", "STATE", "DONE", "RECEIVED", "SENT", "OWNER", "DESCRIPTION"])
        self.assertEqual(lines[1].split()[:5], [path.split("/")[-1], contract.Task.STATE_RUNNING, "25%", "512", "B/2.0"])
        self.assertIn("(python3)", lines[1])
        self.assertTrue(lines[1].endswith("GET /feed.json"))
        self.assertEqual(lines[2].split()[1:3], [contract.Task.STATE_SUSPENDED, "-"])
        listed = json.loads(cli(self.bus, "tasks", "--json").stdout)
        self.assertEqual([t["description"] for t in listed], ["GET /feed.json", "paused upload"])
        self.assertEqual(listed[0]["received"], 512)
        self.assertEqual(listed[0]["owner"], self.conn.get_unique_name())

    def test_watch_tasks_follows_tasks_and_restarts(self):
        self.start_agent("--completed-task-linger", "0.5")
        first, _ = self.begin_task("first")
        watch = subprocess.Popen([os.path.join(BIN, "netactivity"), "watch", "--tasks", "--format", "json"],
                                 env=self.bus.env(), stdout=subprocess.PIPE, text=True)
        try:
            # The task there before the watch is its first line: from here on it is subscribed.
            self.assertEqual(json.loads(watch.stdout.readline())["path"], first)
            path, task = self.begin_task("download", **{"expected-to-receive": dbus.UInt64(100)})
            task.SetProgress(dbus.UInt64(0), dbus.UInt64(0), dbus.UInt64(40), dbus.UInt64(100))
            task.Complete("")
            events = [json.loads(watch.stdout.readline()) for _ in range(4)]
            self.assertEqual([e["event"] for e in events], ["added", "changed", "changed", "removed"])
            self.assertEqual(events[0]["path"], path)
            self.assertEqual(events[1]["received"], 40)
            self.assertEqual((events[2]["state"], events[2]["fraction_completed"]), (contract.Task.STATE_COMPLETED, 1.0))
            # A task alive when the agent stops is removed, and the new agent's tasks are added.
            path, _ = self.begin_task("survivor")
            self.assertEqual(json.loads(watch.stdout.readline())["event"], "added")
            self.agent.stop()
            removed = [json.loads(watch.stdout.readline()) for _ in range(2)]
            self.assertEqual(sorted(e["path"] for e in removed), sorted([first, path]))
            self.assertEqual({e["event"] for e in removed}, {"removed"})
            self.agent = Agent(self.bus)
            self.conn = connect(self.bus)
            self.addCleanup(self.conn.close)
            self.begin_task("after restart")
            line = json.loads(watch.stdout.readline())
            self.assertEqual((line["event"], line["description"]), ("added", "after restart"))
            self.assertIsNone(watch.poll())
        finally:
            watch.kill()
            watch.wait()


if __name__ == "__main__":
    unittest.main()


class RunAcrossAgentRestartTests(unittest.TestCase):
    """netactivity run is long-lived: its task outlives a kill -9 of the agent, which D-Bus
    activation brings back because run still holds something."""

    def setUp(self):
        import shutil
        import tempfile
        from test_install import ActivationBus
        self.home = tempfile.mkdtemp(prefix="netactivity-run-")
        self.addCleanup(shutil.rmtree, self.home, True)
        services = os.path.join(self.home, "services")
        os.mkdir(services)
        with open(os.path.join(services, NAME + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=%s --no-private-bus --no-tray --activation-delay 0 "
                    "--completion-delay 0 --log-level warning\n" % (NAME, os.path.join(BIN, "netactivityd")))
        env = dict(os.environ)
        env = {k: v for k, v in env.items() if not k.startswith("DBUS_")}
        # The activated agents keep their cache and read their settings here.
        env.update(XDG_CACHE_HOME=os.path.join(self.home, "cache"), XDG_CONFIG_HOME=os.path.join(self.home, "config"))
        self.bus = ActivationBus(services, env=env)
        self.addCleanup(self.bus.stop)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)

    def agent_pid(self):
        try:
            return int(self.conn.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus").GetConnectionUnixProcessID(
                NAME, dbus_interface="org.freedesktop.DBus"))
        except dbus.exceptions.DBusException:
            return None

    def tasks(self):
        try:
            objects = self.conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(
                dbus_interface="org.freedesktop.DBus.ObjectManager")
        except dbus.exceptions.DBusException:
            return []
        task = contract.Task.INTERFACE
        return [dict(i[task], path=str(p)) for p, i in objects.items() if task in i]

    def test_run_keeps_its_task_across_kill_9_of_the_agent(self):
        # The command goes on past each step once the test creates its file.
        step = os.path.join(self.home, "step")
        script = "echo 40; until [ -e {0}1 ]; do sleep 0.02; done; echo 90; until [ -e {0}2 ]; do sleep 0.02; done".format(step)
        p = subprocess.Popen([os.path.join(BIN, "netactivity"), "run", "--task", "long job", "--progress-from", "stdout",
                              "--", "sh", "-c", script],
                             env=self.bus.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = wait_until(lambda: [t for t in self.tasks() if t["Description"] == "long job"
                                        and float(t["FractionCompleted"]) == 0.4] or None, what="the task at 40 %")[0]
            owner = str(first["Owner"])
            old = self.agent_pid()
            os.kill(old, 9)
            # Nobody calls the agent: run's library sees it leave while holding the task, and asks
            # the bus to start it again.
            # BeginTask, then its progress: the task is back whole once its fraction is too.
            again = wait_until(lambda: self.agent_pid() not in (None, old) and [
                t for t in self.tasks() if t["Description"] == "long job" and str(t["State"]) == contract.Task.STATE_RUNNING
                and float(t["FractionCompleted"]) == 0.4] or None,
                timeout=10, what="the task at a new agent, with its progress")[0]
            self.assertEqual(str(again["Owner"]), owner, "the same run, re-asserting its task")
            open(step + "1", "w").close()
            wait_until(lambda: [t for t in self.tasks() if float(t["FractionCompleted"]) == 0.9] or None,
                       what="progress at the new agent")
            self.assertIsNone(p.poll(), "still running")
            open(step + "2", "w").close()
            out, err = p.communicate(timeout=10)
            self.assertEqual(p.returncode, 0, err)
            self.assertNotIn("UnknownObject", err)
            done = wait_until(lambda: [t for t in self.tasks() if str(t["State"]) == contract.Task.STATE_COMPLETED] or None,
                              what="the task completed at the new agent")[0]
            self.assertEqual((str(done["Error"]), float(done["FractionCompleted"])), ("", 1.0))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


class ManualTests(unittest.TestCase):
    """--version and the manual pages (man/*.1): one version everywhere, and every option that
    --help lists is in the page, so the pages cannot fall behind the binaries unnoticed."""
    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    COMMANDS = {
        "netactivity": [[], ["status"], ["watch"], ["tasks"], ["inc"], ["dec"], ["run"], ["cache", "add"],
                        ["cache", "get"], ["cache", "rm"], ["cache", "clear"], ["cache", "stats"], ["fetch"]],
        "netactivityd": [[]],
    }

    def run_bin(self, *args):
        return subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True, text=True, timeout=30)

    def changelog_version(self):
        with open(os.path.join(self.ROOT, "packaging", "changelog")) as f:
            return f.readline().split("(")[1].split(")")[0]

    def test_version_is_the_changelog_s_in_both_binaries_and_both_pages(self):
        version = self.changelog_version()
        for binary in self.COMMANDS:
            r = self.run_bin(binary, "--version")
            self.assertEqual((r.returncode, r.stdout), (0, version + "\n"), binary)
            with open(os.path.join(self.ROOT, "man", binary + ".1")) as f:
                title = next(line for line in f if line.startswith(".TH "))
                self.assertIn('"netactivity %s"' % version, title, "the page's .TH names the version")

    def test_every_option_in_help_is_in_the_manual_page_and_the_pages_render_cleanly(self):
        import re
        for binary, subcommands in self.COMMANDS.items():
            path = os.path.join(self.ROOT, "man", binary + ".1")
            with open(path) as f:
                page = f.read().replace("\\-", "-")
            for sub in subcommands:
                r = self.run_bin(binary, *(["help"] + sub if sub else ["--help"]))
                self.assertEqual(r.returncode, 0, (binary, sub, r.stderr))
                for option in set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", r.stdout)):
                    self.assertIn(option, page, "%s %s: %s is not in %s" % (binary, " ".join(sub), option, path))
                for word in sub:
                    self.assertIn(word, page)
            # groff's own checks (-ww: every warning) find nothing to say.
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True, timeout=30)
            self.assertEqual((r.returncode, r.stderr), (0, ""), path)

    def test_the_settings_page_names_every_key_the_agent_reads_and_renders_cleanly(self):
        import re
        with open(os.path.join(self.ROOT, "Sources", "netactivityd", "Settings.swift")) as f:
            source = f.read()
        keys = re.findall(r'"([a-z-]+)"', re.search(r"static let keys = \[(.*?)\]", source, re.S).group(1))
        self.assertGreaterEqual(len(keys), 9, keys)
        path = os.path.join(self.ROOT, "man", "netactivityd.conf.5")
        with open(path) as f:
            page = f.read()
        self.assertIn('"netactivity %s"' % self.changelog_version(), next(l for l in page.splitlines() if l.startswith(".TH ")))
        for key in keys:
            self.assertIn(".BI " + key.replace("-", "\\-") + " ", page, key + " is not described in " + path)
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, ""), path)


class TranslationTests(unittest.TestCase):
    """gettext: the template is current, every catalog translates all of it, and a visible string
    of the CLI, the agent and the GNOME extension follows the language asked for."""
    ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

    @staticmethod
    def msgids(path):
        import re
        with open(path) as f:
            text = f.read()
        return {"".join(re.findall(r'"(.*)"', m)) for m in re.findall(r'^msgid ((?:".*"\n)+)', text, re.M)} - {""}

    def test_the_template_is_current_and_every_catalog_translates_all_of_it(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            fresh = os.path.join(tmp, "netactivity.pot")
            r = subprocess.run([os.path.join(self.ROOT, "scripts", "make-pot.sh"), fresh], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            expected = self.msgids(fresh)
        template = os.path.join(self.ROOT, "po", "netactivity.pot")
        self.assertEqual(self.msgids(template), expected, "po/netactivity.pot is out of date: run make pot")
        catalogs = [f for f in os.listdir(os.path.join(self.ROOT, "po")) if f.endswith(".po")]
        self.assertGreaterEqual(len(catalogs), 2)
        for po in catalogs:
            path = os.path.join(self.ROOT, "po", po)
            self.assertEqual(self.msgids(path), expected, po)
            r = subprocess.run(["msgfmt", "--check", "--statistics", "-o", "/dev/null", path], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stderr.strip(), r"^\d+ translated messages\.$", "%s: nothing fuzzy or untranslated" % po)

    def test_the_cli_speaks_the_language_asked_for(self):
        bus = PrivateBus()
        try:
            for language, expected in (("de", "Warnung: der netactivity-Agent läuft nicht"),
                                       ("fr", "avertissement : l’agent netactivity ne tourne pas"),
                                       ("", "warning: the netactivity agent is not running")):
                r = subprocess.run([os.path.join(BIN, "netactivity"), "run", "--", "true"], capture_output=True, text=True,
                                   timeout=30, env=bus.env(LANGUAGE=language, LANG="C.UTF-8", LC_ALL=""))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(expected, r.stderr, language)
            # --help (our texts; ArgumentParser's own headings stay English) and an error message.
            for language, help_text, error in (
                    ("de", "Einen Befehl ausführen und dabei eine Aktivitäts-Lease halten",
                     "der netactivity-Agent läuft auf diesem Bus nicht"),
                    ("fr", "Lancer une commande en tenant un bail d’activité",
                     "l’agent netactivity ne tourne pas sur ce bus"),
                    ("", "Run a command while holding an activity lease", "the netactivity agent is not running on this bus")):
                env = bus.env(LANGUAGE=language, LANG="C.UTF-8", LC_ALL="")
                r = subprocess.run([os.path.join(BIN, "netactivity"), "run", "--help"], capture_output=True, text=True,
                                   timeout=30, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(help_text, r.stdout, language)
                r = subprocess.run([os.path.join(BIN, "netactivity"), "status"], capture_output=True, text=True,
                                   timeout=30, env=env)
                self.assertEqual(r.returncode, 69, r.stderr)
                self.assertIn(error, r.stderr, language)
        finally:
            bus.stop()
