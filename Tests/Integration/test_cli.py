"""The netactivity CLI, run as a user would, against the real agent on a private bus."""
import json
import os
import subprocess
import time
import unittest

import dbus

from harness import BIN, NAME, PATH, Agent, PrivateBus, cli, connect, iface, prop, wait_until


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
        self.assertEqual((s["running"], s["visible"], s["state"], s["activity_count"]), (True, False, "not-active", 0))

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
                if line.get("state") == "completed":
                    break
            self.assertEqual(line["error"], "killed by signal 15")
        finally:
            observer.kill()
            observer.wait()

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
        return path, dbus.Interface(self.conn.get_object(NAME, path, introspect=False), "org.example.NetActivity.Task")

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
        self.assertEqual(lines[1].split()[:5], [path.split("/")[-1], "running", "25%", "512", "B/2.0"])
        self.assertIn("(python3)", lines[1])
        self.assertTrue(lines[1].endswith("GET /feed.json"))
        self.assertEqual(lines[2].split()[1:3], ["suspended", "-"])
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
            self.assertEqual((events[2]["state"], events[2]["fraction_completed"]), ("completed", 1.0))
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
