# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""The GTK 4 examples (Examples/gtk4: C, and Python with PyGObject) show an image the agent decoded,
in a real window on a real X server (Xvfb): a screenshot has the image's colours where the window
is, and the app maps the agent's pixels rather than holding a copy. `make test` builds the C one
(.build/examples/netactivity-pixels) and installs Xvfb and GTK 4's headers."""
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

import contract
from harness import ROOT, Agent, PrivateBus, wait_until
from test_decoder import magick, png
from test_pixels import PixelServer

C_EXAMPLE = os.path.join(ROOT, ".build", "examples", "netactivity-pixels")
PY_EXAMPLE = os.path.join(ROOT, "Examples", "gtk4", "netactivity-pixels.py")
# 64 x 32: red on the left half, blue on the right, opaque.
HALVES = png(64, 32, lambda x, y: (255, 0, 0, 255) if x < 32 else (0, 0, 255, 255))


def traffic_light():
    """An animated GIF of 64 x 32: red, green, blue, half a second each, for ever."""
    with tempfile.TemporaryDirectory() as d:
        names = []
        for i, colour in enumerate(((255, 0, 0), (0, 255, 0), (0, 0, 255))):
            names.append(os.path.join(d, "%d.png" % i))
            with open(names[-1], "wb") as f:
                f.write(png(64, 32, lambda x, y, c=colour: c + (255,)))
        return magick("-delay", "50", *names, "-loop", "0", suffix="gif")
SCREEN = (640, 480)


class Xvfb:
    """An X server of our own, in memory; its display number comes from -displayfd once it listens."""

    def __init__(self):
        r, w = os.pipe()
        self.proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "%dx%dx24" % SCREEN,
                                      "-nolisten", "tcp", "-noreset"], pass_fds=(w,), stderr=subprocess.DEVNULL)
        os.close(w)
        with os.fdopen(r) as f:
            number = f.readline().strip()
        assert number, "Xvfb did not start"
        self.display = ":" + number

    def screenshot(self):
        """The root window's pixels: (width, height, RGB bytes)."""
        raw = subprocess.run(["import", "-display", self.display, "-window", "root", "-depth", "8", "rgb:-"],
                             capture_output=True, check=True, timeout=30).stdout
        assert len(raw) == SCREEN[0] * SCREEN[1] * 3, len(raw)
        return raw

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def count(raw, rgb):
    pixel = bytes(rgb)
    return sum(1 for i in range(0, len(raw), 3) if raw[i:i + 3] == pixel)


@unittest.skipUnless(shutil.which("Xvfb") and shutil.which("import"), "Xvfb and ImageMagick are not installed")
class GtkExampleTests(unittest.TestCase):
    def setUp(self):
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.agent = Agent(self.bus)
        self.addCleanup(self.agent.stop)
        self.http = PixelServer({"/halves.png": HALVES, "/text": b"not an image", "/light.gif": traffic_light()})
        self.addCleanup(self.http.stop)
        self.x = Xvfb()
        self.addCleanup(self.x.stop)
        self.runtime = tempfile.mkdtemp(prefix="netactivity-gtk-")
        self.addCleanup(shutil.rmtree, self.runtime, True)

    def run_example(self, command, path, *args):
        """Starts the example; returns (process, its output lines as they come)."""
        env = self.bus.env(DISPLAY=self.x.display, GDK_BACKEND="x11", GSK_RENDERER="cairo", GTK_A11Y="none",
                           XDG_RUNTIME_DIR=self.runtime, NO_AT_BRIDGE="1")
        proc = subprocess.Popen([*command, self.http.url(path), *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait(10)))
        lines = []

        def read():
            for line in proc.stdout:
                lines.append(line.strip())
        threading.Thread(target=read, daemon=True).start()
        return proc, lines

    def shows_the_image(self, command):
        proc, lines = self.run_example(command, "/halves.png", "200")
        wait_until(lambda: lines or proc.poll() is not None, timeout=60, what="the example's first line")
        self.assertEqual(lines[0], "painted 64x32", lines)
        # The window shows the picture scaled to fit: wide bands of pure red and pure blue. The
        # frame was drawn; the X server may take a moment more to have it in the screenshot.
        counts = []

        def both():
            raw = self.x.screenshot()
            counts.append((count(raw, (255, 0, 0)), count(raw, (0, 0, 255))))
            return min(counts[-1]) > 5000
        wait_until(both, timeout=30, what="red and blue on the screen (%r)" % counts)
        red, blue = counts[-1]
        self.assertLess(abs(red - blue), max(red, blue) // 10, "the two halves as large: %r" % counts)
        # Mapped, not copied: the app maps the decoder's memfd of pixels.
        with open("/proc/%d/maps" % proc.pid) as f:
            self.assertIn("memfd:netactivity-pixels", f.read(), "the agent's pixels are mapped into the app")
        return proc, lines

    def an_error_comes_by_name(self, command):
        proc, lines = self.run_example(command, "/text")
        self.assertEqual(proc.wait(60), 1)
        wait_until(lambda: lines, what="the example's line")
        self.assertTrue(lines[0].startswith("failed %s: " % contract.Error.NotAnImage), lines)

    @unittest.skipUnless(os.path.exists(C_EXAMPLE), "the C example is not built (make test builds it)")
    def test_the_c_example_shows_the_agents_pixels_in_a_window(self):
        self.shows_the_image([C_EXAMPLE])
        self.an_error_comes_by_name([C_EXAMPLE])

    def plays_an_animation(self, command):
        proc, lines = self.run_example(command, "/light.gif", "200")
        wait_until(lambda: lines or proc.poll() is not None, timeout=60, what="the example's first line")
        self.assertEqual(lines[0], "painted 64x32", lines)
        wait_until(lambda: "frame 2" in lines, timeout=30, what="the animation stepping to its third frame")
        self.assertEqual(lines[1:3], ["frame 1", "frame 2"], lines)
        # Each frame reaches the screen in turn: red, then green, then blue, and round again.
        for colour in ((0, 255, 0), (0, 0, 255), (255, 0, 0)):
            wait_until(lambda c=colour: count(self.x.screenshot(), c) > 5000, timeout=30,
                       what="%r on the screen" % (colour,))
        with open("/proc/%d/maps" % proc.pid) as f:
            self.assertIn("memfd:netactivity-pixels", f.read(), "the frames are mapped, not copied")

    @unittest.skipUnless(os.path.exists(C_EXAMPLE), "the C example is not built (make test builds it)")
    def test_the_c_example_plays_an_animation_frame_after_frame(self):
        self.plays_an_animation([C_EXAMPLE])

    def test_the_python_example_plays_an_animation_frame_after_frame(self):
        self.plays_an_animation(["/usr/bin/python3", PY_EXAMPLE])

    def test_the_python_example_shows_the_agents_pixels_in_a_window(self):
        self.shows_the_image(["/usr/bin/python3", PY_EXAMPLE])
        self.an_error_comes_by_name(["/usr/bin/python3", PY_EXAMPLE])


if __name__ == "__main__":
    unittest.main()
