# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The waybar recipe as a user meets it: `make install PREFIX=~/.local`, then the one line
docs/install.md gives for that install pasted into waybar's config, on a real waybar in a headless
sway (wlroots' headless backend, pixman: no GPU, no seat). The bar runs the installed CLI, hides
the module while the network is idle and shows it while the indicator is visible, in pixels
(grim). sway refuses to run as root: when the tests are root, sway and waybar run as `nobody`.
NETACTIVITY_SCREENSHOTS=DIR keeps the pictures (docs/pictures comes from there: make pictures)."""
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import unittest

import dbus

import contract
from harness import BIN, ROOT, Agent, PrivateBus, descendants_named, wait_until
from test_gnome_shell import BUS_CONFIG

TOOLS = all(shutil.which(t) for t in ("sway", "waybar", "grim", "setpriv", "convert"))
BAR = 30  # the bar's height, in pixels, at the top of an 640x120 output


def docs_include_line():
    """The include line docs/install.md gives for `make install PREFIX=~/.local`."""
    with open(os.path.join(ROOT, "docs", "install.md")) as f:
        (row,) = [l for l in f if l.strip().startswith("| `make install PREFIX=~/.local`") and "waybar" in l]
    return re.search(r"`(\"include\": \[[^`]*\],)`", row).group(1)


@unittest.skipUnless(TOOLS, "sway, waybar, grim and imagemagick are not installed (make test installs them)")
class WaybarRecipeTests(unittest.TestCase):
    def setUp(self):
        self.user = pwd.getpwnam("nobody") if os.getuid() == 0 else pwd.getpwuid(os.getuid())
        self.dir = tempfile.mkdtemp(prefix="netactivity-waybar-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        os.chmod(self.dir, 0o755)
        self.home = os.path.join(self.dir, "home")
        # The install, as the user would make it (the binaries the tests built).
        r = subprocess.run(["make", "-s", "--no-print-directory", "install", "PREFIX=%s/.local" % self.home,
                            "INSTALL_BIN=" + os.path.abspath(os.path.join(ROOT, BIN)), "HOME=" + self.home],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        config = os.path.join(self.home, ".config", "waybar")
        os.makedirs(config, exist_ok=True)
        with open(os.path.join(config, "config"), "w") as f:
            f.write('{\n    %s\n    "layer": "top", "position": "top", "height": %d,\n'
                    '    "modules-left": ["clock"], "modules-right": ["custom/netactivity"]\n}\n'
                    % (docs_include_line(), BAR))
        for d, _, files in os.walk(self.dir):
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), os.stat(os.path.join(d, name)).st_mode | 0o444)
        # A bus the user may connect to, and the agent on it (as us).
        bus_dir = os.path.join(self.dir, "bus")
        os.makedirs(bus_dir, mode=0o755)
        config_file = os.path.join(bus_dir, "bus.conf")
        with open(config_file, "w") as f:
            f.write(BUS_CONFIG % {"socket": os.path.join(bus_dir, "bus"), "user": self.user.pw_name})
        self.bus = PrivateBus(config_file=config_file)
        self.addCleanup(self.bus.stop)
        self.agent = Agent(self.bus, "--activation-delay", "0", "--completion-delay", "0")
        self.addCleanup(self.agent.stop)
        self.runtime = os.path.join(self.dir, "runtime")
        os.makedirs(self.runtime, mode=0o700)
        os.chown(self.runtime, self.user.pw_uid, self.user.pw_gid)

    def as_user(self, argv, log, **env):
        if os.getuid() == 0:
            argv = ["setpriv", "--reuid=%d" % self.user.pw_uid, "--regid=%d" % self.user.pw_gid, "--clear-groups",
                    *argv]
        base = {"PATH": "/usr/bin:/bin", "HOME": self.home, "XDG_RUNTIME_DIR": self.runtime, "LANG": "C.UTF-8",
                "DBUS_SESSION_BUS_ADDRESS": self.bus.address, "XDG_CONFIG_HOME": os.path.join(self.home, ".config")}
        out = open(os.path.join(self.dir, log), "w")
        self.addCleanup(out.close)
        proc = subprocess.Popen(argv, env={**base, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait(10)))
        return proc

    def shot(self, name):
        path = os.path.join(self.dir, name + ".png")
        subprocess.run(["setpriv", "--reuid=%d" % self.user.pw_uid, "--regid=%d" % self.user.pw_gid, "--clear-groups",
                        "grim", "-g", "0,0 640x%d" % BAR, "-"] if os.getuid() == 0 else ["grim", "-g", "0,0 640x%d" % BAR, "-"],
                       env={"WAYLAND_DISPLAY": "wayland-1", "XDG_RUNTIME_DIR": self.runtime, "PATH": "/usr/bin:/bin"},
                       stdout=open(path, "wb"), check=True, timeout=30)
        keep = os.environ.get("NETACTIVITY_SCREENSHOTS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            shutil.copy(path, os.path.join(keep, "waybar-" + name + ".png"))
        return path

    def right_half(self, path):
        """The bar's right half (where the module is) as grey levels."""
        return subprocess.run(["convert", path, "-crop", "320x%d+320+0" % BAR, "-colorspace", "Gray", "-depth", "8",
                               "gray:-"], capture_output=True, check=True, timeout=30).stdout

    def test_the_documented_include_line_shows_the_indicator_on_a_real_waybar(self):
        with open(os.path.join(self.dir, "sway.conf"), "w") as f:
            f.write("output HEADLESS-1 resolution 640x120 background #202020 solid_color\n")
        self.as_user(["sway", "-c", os.path.join(self.dir, "sway.conf")], "sway.log", WLR_BACKENDS="headless",
                     WLR_LIBINPUT_NO_DEVICES="1", WLR_RENDERER="pixman")
        wait_until(lambda: os.path.exists(os.path.join(self.runtime, "wayland-1")), 20, what="sway's socket")
        bar = self.as_user(["waybar"], "waybar.log", WAYLAND_DISPLAY="wayland-1")
        # The bar runs the installed CLI, as the installed recipe names it (the include worked).
        watch = wait_until(lambda: descendants_named(bar.pid, "netactivity"), 20,
                           what="waybar to start the recipe's command (%s)" % self.log("waybar.log"))
        with open("/proc/%d/cmdline" % watch[0]) as f:
            argv = f.read().split("\0")
        self.assertEqual(argv[:4], [os.path.join(self.home, ".local", "bin", "netactivity"), "watch", "--format",
                                    "waybar"])
        wait_until(lambda: "Bar configured" in self.log("waybar.log"), 20, what="the bar")
        idle = self.right_half(self.shot("idle"))
        # An idle network: the module shows nothing (the bar's background and its border alone).
        self.assertLessEqual(len(set(idle)), 2)
        agent = dbus.Interface(dbus.bus.BusConnection(self.bus.address).get_object(
            contract.BUS_NAME, contract.OBJECT_PATH), contract.Activity.INTERFACE)
        agent.IncrementActivityCount()
        wait_until(lambda: len(set(self.right_half(self.shot("active")))) > 4, 20,
                   what="the module's text on the bar while the indicator shows")
        agent.DecrementActivityCount()
        wait_until(lambda: self.right_half(self.shot("idle-again")) == idle, 20, what="the module to hide again")

    def log(self, name):
        with open(os.path.join(self.dir, name), errors="replace") as f:
            return f.read()


if __name__ == "__main__":
    unittest.main()
