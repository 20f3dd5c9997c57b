# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Administered desktops: an administrator's settings for every user
($XDG_CONFIG_DIRS/netactivity/netactivityd.conf), the user's file over them, and the keys the
system file locks, which neither the user's file, the command line nor any app on the bus (busctl,
gdbus, python3-dbus) can change. The harness points XDG_CONFIG_DIRS at the test's own folder: the
host's /etc/xdg is never read."""
import os
import signal
import unittest

import dbus

import contract
from harness import PROPS, Agent, PrivateBus, busctl, connect, gdbus, wait_until

NAME, PATH = contract.BUS_NAME, contract.OBJECT_PATH
ACTIVITY, DOWNLOADER = contract.Activity.INTERFACE, contract.Downloader.INTERFACE
DENIED = contract.DBusError.AccessDenied
A, D = contract.Activity, contract.Downloader


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class AdministeredSettingsTests(unittest.TestCase):
    SYSTEM = ("# the school's defaults\n"
              "activation-delay = 0.5\n"
              "completion-delay = 0.3\n"
              "maximum-active-downloads = 2\n"
              "disk-capacity = 10M\n"
              "\n[locks]\ncompletion-delay\nmaximum-active-downloads\n")
    USER = ("activation-delay = 0.25\n"
            "completion-delay = 1.0\n"
            "maximum-active-downloads = 8\n"
            "[locks]\nactivation-delay\n")

    def setUp(self):
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.system = os.path.join(self.bus.system_config, "netactivity", "netactivityd.conf")
        write(self.system, self.SYSTEM)
        write(os.path.join(self.bus.config_home, "netactivity", "netactivityd.conf"), self.USER)
        self.agent = Agent(self.bus, "--completion-delay", "2")
        self.addCleanup(self.agent.stop)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)
        self.obj = self.conn.get_object(NAME, PATH, introspect=False)

    def get(self, interface, name):
        return self.obj.Get(interface, name, dbus_interface=PROPS)

    def test_the_system_file_sets_every_users_defaults_and_locks_keys_against_file_command_line_and_bus(self):
        self.assertEqual(float(self.get(ACTIVITY, A.ActivationDelay)), 0.25, "the user's file wins where unlocked")
        self.assertEqual(float(self.get(ACTIVITY, A.CompletionDelay)), 0.3, "locked: not the user's 1.0, nor --completion-delay 2")
        self.assertEqual(int(self.get(DOWNLOADER, D.MaximumActiveDownloads)), 2)
        self.assertEqual(int(self.get(DOWNLOADER, D.DiskCapacity)), 10 << 20)
        log = self.agent.logtext()
        self.assertIn("completion-delay is locked by %s" % self.system, log)
        self.assertIn("--completion-delay is locked by %s" % self.system, log)
        self.assertIn("only a system file may lock keys", log)
        # No app may change a locked property: not busctl, not gdbus, not python3-dbus (all host apps).
        r = busctl(self.bus, "set-property", NAME, PATH, ACTIVITY, A.CompletionDelay, "d", "0.1")
        self.assertEqual((r.returncode, r.stderr.strip().rsplit(": ", 1)[-1]), (1, "Access denied"))
        r = gdbus(self.bus, "call", "--dest", NAME, "--object-path", PATH, "--method",
                  "org.freedesktop.DBus.Properties.Set", ACTIVITY, A.CompletionDelay, "<0.1>")
        self.assertIn("AccessDenied: CompletionDelay is locked by the administrator (completion-delay in %s)"
                      % self.system, r.stderr)
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            self.obj.Set(DOWNLOADER, D.MaximumActiveDownloads, dbus.UInt32(16, variant_level=1), dbus_interface=PROPS)
        self.assertEqual(cm.exception.get_dbus_name(), DENIED)
        self.assertIn("maximum-active-downloads in %s" % self.system, cm.exception.get_dbus_message())
        self.assertEqual(int(self.get(DOWNLOADER, D.MaximumActiveDownloads)), 2)
        # An unlocked one a host app still changes.
        self.obj.Set(ACTIVITY, A.ActivationDelay, dbus.Double(0.75, variant_level=1), dbus_interface=PROPS)
        self.assertEqual(float(self.get(ACTIVITY, A.ActivationDelay)), 0.75)

    def test_a_reload_rereads_both_files(self):
        write(self.system, "activation-delay = 0.6\ncompletion-delay = 0.4\nmaximum-active-downloads = 3\n"
                           "[locks]\nactivation-delay\n")
        self.agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "Reloaded the settings" in self.agent.logtext(), what="the reload")
        self.assertEqual(float(self.get(ACTIVITY, A.CompletionDelay)), 2.0, "no longer locked: the command line's")
        self.assertEqual(int(self.get(DOWNLOADER, D.MaximumActiveDownloads)), 8, "the user's file")
        self.assertEqual(float(self.get(ACTIVITY, A.ActivationDelay)), 0.6, "now locked: the system's value")
        self.obj.Set(DOWNLOADER, D.MaximumActiveDownloads, dbus.UInt32(16, variant_level=1), dbus_interface=PROPS)
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            self.obj.Set(ACTIVITY, A.ActivationDelay, dbus.Double(0.1, variant_level=1), dbus_interface=PROPS)
        self.assertEqual(cm.exception.get_dbus_name(), DENIED)

    def test_an_unusable_user_file_leaves_the_system_files_values_and_locks(self):
        user = os.path.join(self.bus.config_home, "netactivity", "netactivityd.conf")
        for unusable in ("too large", "a folder"):
            with self.subTest(unusable):
                self.agent.stop()
                os.unlink(user) if os.path.isfile(user) else os.rmdir(user)
                if unusable == "a folder":
                    os.mkdir(user)
                else:
                    write(user, "# " + "x" * (64 << 10) + "\n")
                self.agent = agent = Agent(self.bus, "--completion-delay", "2")
                self.addCleanup(agent.stop)
                self.obj = self.conn.get_object(NAME, PATH, introspect=False)
                self.assertEqual(float(self.get(ACTIVITY, A.ActivationDelay)), 0.5, "the system's value")
                self.assertEqual(float(self.get(ACTIVITY, A.CompletionDelay)), 0.3, "locked: not --completion-delay 2")
                self.assertEqual(int(self.get(DOWNLOADER, D.MaximumActiveDownloads)), 2)
                self.assertIn("at start: the system's settings and locks", agent.logtext())
                with self.assertRaises(dbus.exceptions.DBusException) as cm:
                    self.obj.Set(ACTIVITY, A.CompletionDelay, dbus.Double(0.1, variant_level=1), dbus_interface=PROPS)
                self.assertEqual(cm.exception.get_dbus_name(), DENIED)
        # A reload with the file still unusable keeps the settings in force.
        self.agent.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: self.agent.logtext().count("at start: the system's settings and locks") >= 2, what="the reload")
        self.assertEqual(float(self.get(ACTIVITY, A.CompletionDelay)), 0.3)


class SystemDirectoriesTests(unittest.TestCase):
    def test_the_first_of_xdg_config_dirs_wins_and_a_lock_in_any_holds(self):
        bus = PrivateBus()
        self.addCleanup(bus.stop)
        first, second = (os.path.join(bus.dir, d) for d in ("site", "vendor"))
        write(os.path.join(first, "netactivity", "netactivityd.conf"), "activation-delay = 0.4\n")
        write(os.path.join(second, "netactivity", "netactivityd.conf"),
              "activation-delay = 0.9\ndownload-prioritization = lifo\n[locks]\nactivation-delay\nno-such-key\n")
        bus.system_config = first + ":" + second
        agent = Agent(bus)
        self.addCleanup(agent.stop)
        conn = connect(bus)
        self.addCleanup(conn.close)
        obj = conn.get_object(NAME, PATH, introspect=False)
        self.assertEqual(float(obj.Get(ACTIVITY, A.ActivationDelay, dbus_interface=PROPS)), 0.4)
        self.assertEqual(str(obj.Get(DOWNLOADER, D.DownloadPrioritization, dbus_interface=PROPS)), "lifo")
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            obj.Set(ACTIVITY, A.ActivationDelay, dbus.Double(0.1, variant_level=1), dbus_interface=PROPS)
        self.assertEqual(cm.exception.get_dbus_name(), DENIED, cm.exception.get_dbus_message())
        self.assertIn("[locks] lists unknown key 'no-such-key'", agent.logtext())


if __name__ == "__main__":
    unittest.main()
