# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The contract used from other languages, as their authors would: C bindings that gdbus-codegen
makes from the installed XML, compiled and run against the real agent, and the Python of
docs/bus-api.md run as it is printed there."""
import glob
import os
import re
import sys
import shutil
import subprocess
import tempfile
import unittest

import contract
from harness import wait_until
from test_agent import AgentTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def c_compiler():
    return shutil.which("cc") or shutil.which("clang")


def have_gio():
    return subprocess.run(["pkg-config", "--exists", "gio-unix-2.0"]).returncode == 0


@unittest.skipUnless(shutil.which("gdbus-codegen") and c_compiler() and have_gio(),
                     "gdbus-codegen, a C compiler and gio-unix-2.0 are needed (make test installs libglib2.0-dev)")
class GDBusCodegenTests(AgentTestCase):
    def build(self):
        out = tempfile.mkdtemp(prefix="netactivity-codegen-")
        self.addCleanup(shutil.rmtree, out, True)
        # The command docs/bus-api.md gives.
        xml = sorted(glob.glob(os.path.join(ROOT, "dbus", contract.BUS_NAME + "*.xml")))
        subprocess.run(["gdbus-codegen", "--interface-prefix", contract.BUS_NAME + ".", "--c-namespace", "NetActivity",
                        "--c-generate-object-manager", "--c-generate-autocleanup", "all",
                        "--annotate", contract.Activity.INTERFACE, "org.gtk.GDBus.C.Name", "Agent",
                        "--generate-c-code", os.path.join(out, "netactivity-generated"), *xml], check=True, timeout=60)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gio-unix-2.0"], check=True, capture_output=True,
                               text=True).stdout.split()
        binary = os.path.join(out, "lease")
        r = subprocess.run([c_compiler(), "-Wall", "-Werror", "-o", binary, "-I", out, os.path.join(HERE, "codegen", "lease.c"),
                            os.path.join(out, "netactivity-generated.c"), *flags], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return binary

    def test_c_bindings_from_the_xml_hold_a_lease_and_count(self):
        app = subprocess.Popen([self.build(), self.bus.address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(app.wait, 10)
        self.addCleanup(app.kill)

        def say(command):
            app.stdin.write(command + "\n")
            app.stdin.flush()
            self.assertEqual(app.stdout.readline().strip(), "ok", command)

        self.assertEqual(app.stdout.readline().strip(), "ready")
        # The lease arrived with its fd (the UnixFD annotation): it counts, and keeps counting.
        wait_until(lambda: self.count() == 1, what="the C app's lease counted")
        say("inc")
        self.assertEqual(self.count(), 2)
        say("dec")
        self.assertEqual(self.count(), 1)
        say("end")
        wait_until(lambda: self.count() == 0, what="the lease ended when the C app closed its fd")
        self.assertIsNone(app.poll(), "the app is still running: the lease ended by its close, not its exit")


class DocsPythonTests(AgentTestCase):
    def test_the_python_blocks_of_the_bus_api_page_run_against_the_agent(self):
        with open(os.path.join(ROOT, "docs", "bus-api.md")) as f:
            blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
        self.assertTrue(blocks, "docs/bus-api.md has a Python example")
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.bus.address)
        for code in blocks:
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            # While the lease was held, its app was listed; when the process left, all it held went.
            clients = re.search(r"^clients: (.*)$", r.stdout, re.M)
            self.assertIsNotNone(clients, r.stdout)
            self.assertIn("dbus.Struct", clients.group(1), "the lease's holder is listed among the clients")
        wait_until(lambda: self.count() == 0, what="the example's lease and task released")


if __name__ == "__main__":
    unittest.main()
