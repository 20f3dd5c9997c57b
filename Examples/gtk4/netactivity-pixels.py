#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""netactivity-pixels.py: one image in a GTK 4 window, decoded by the netactivity agent (PyGObject).

The app decodes nothing and copies nothing: Downloader.FetchPixels answers with a sealed memfd of
premultiplied B8G8R8A8 pixels (decoded once for every app, in the agent's sandboxed decoder); the app
maps it read-only (GLib.MappedFile) and hands those bytes to Gdk.MemoryTexture as they are.

An animated GIF, PNG (APNG), WebP or AVIF comes whole ("animation"): every frame one after another in the same
memfd, with each one's duration. Animation below is a Gdk.Paintable that steps through them: a
texture per frame over a slice of the mapping (GLib.Bytes.new_from_bytes: no copy).

    python3 netactivity-pixels.py https://example.com/photo.jpg [MAX-SIZE]

Prints "painted WxH" once the image is on screen (then "frame K" as an animation steps), or
"failed NAME: MESSAGE" and exits 1."""
import os
import sys

import gi

gi.require_version("Gdk", "4.0")
gi.require_version("Gtk", "4.0")
from gi.repository import Gdk, Gio, GLib, GObject, Gtk  # noqa: E402

NAME, PATH = "org.example.NetActivity", "/org/example/NetActivity"
DOWNLOADER = "org.example.NetActivity.Downloader"
PIXEL_FORMAT = "B8G8R8A8_PREMULTIPLIED"  # Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED


class Animation(GObject.Object, Gdk.Paintable):
    """Frames of one size, each shown for its duration (ms), `loops` times (0: for ever)."""

    def __init__(self, frames, durations, loops):
        super().__init__()
        self.frames, self.durations, self.loops = frames, durations, loops
        self.current = self.played = 0
        GLib.timeout_add(durations[0], self.step)

    def step(self):
        following = (self.current + 1) % len(self.frames)
        if following == 0 and self.loops:
            self.played += 1
            if self.played >= self.loops:
                return GLib.SOURCE_REMOVE  # it rests on its last frame
        self.current = following
        print("frame %d" % following, flush=True)
        self.invalidate_contents()
        GLib.timeout_add(self.durations[following], self.step)
        return GLib.SOURCE_REMOVE

    def do_snapshot(self, snapshot, width, height):
        self.frames[self.current].snapshot(snapshot, width, height)

    def do_get_intrinsic_width(self):
        return self.frames[0].get_width()

    def do_get_intrinsic_height(self):
        return self.frames[0].get_height()

    def do_get_current_image(self):
        return self.frames[self.current]


class PixelsWindow(Gtk.ApplicationWindow):
    def __init__(self, app, bus, url, max_size):
        super().__init__(application=app, title=url, default_width=320, default_height=240)
        self.picture = Gtk.Picture()
        self.set_child(self.picture)
        self.status = 0
        options = {"animation": GLib.Variant("b", True)}  # an animation comes whole
        if max_size:
            options.update({"max-width": GLib.Variant("u", max_size), "max-height": GLib.Variant("u", max_size)})
        # Asynchronous: the window never waits on the bus. No timeout of our own (the agent's
        # transfer limits end every download, and the call with them).
        bus.call_with_unix_fd_list(NAME, PATH, DOWNLOADER, "FetchPixels", GLib.Variant("(sa{sv})", (url, options)),
                                   GLib.VariantType("(ha{sv})"), Gio.DBusCallFlags.NONE, GLib.MAXINT32, None, None,
                                   self.got_pixels)

    def got_pixels(self, bus, result):
        try:
            reply, fds = bus.call_with_unix_fd_list_finish(result)
        except GLib.Error as e:
            name = Gio.DBusError.get_remote_error(e) or "error"
            Gio.DBusError.strip_remote_error(e)
            return self.fail(name, e.message)
        handle, info = reply.unpack()
        fd = fds.get(handle)
        try:
            mapped = GLib.MappedFile.new_from_fd(fd, False)
        finally:
            os.close(fd)  # the mapping keeps the pages
        durations = info.get("frame-durations") or [0]  # an animation's frames, one after another
        frame = info["stride"] * info["height"]
        if info.get("format") != PIXEL_FORMAT or mapped.get_length() < frame * len(durations):
            return self.fail("pixels", "not the format or the size the reply says")
        # No copy: each texture holds a slice of the mapping's bytes, the mapping the agent's pages.
        pixels = mapped.get_bytes()
        textures = [Gdk.MemoryTexture.new(info["width"], info["height"], Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED,
                                          GLib.Bytes.new_from_bytes(pixels, k * frame, frame), info["stride"])
                    for k in range(len(durations))]
        paintable = textures[0] if len(textures) == 1 else Animation(textures, durations, info.get("loop-count", 0))
        self.picture.set_paintable(paintable)
        clock = self.picture.get_frame_clock()
        self.painted_handler = clock.connect("after-paint", self.painted, paintable)

    def painted(self, clock, paintable):
        # The first frame drawn after the paintable was set has it on screen.
        clock.disconnect(self.painted_handler)
        print("painted %dx%d" % (paintable.get_intrinsic_width(), paintable.get_intrinsic_height()), flush=True)

    def fail(self, name, message):
        print("failed %s: %s" % (name, message), flush=True)
        self.status = 1
        self.destroy()


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: netactivity-pixels.py URL [MAX-SIZE]", file=sys.stderr)
        return 64
    url, max_size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    try:
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    except GLib.Error as e:
        print("failed session-bus: %s" % e.message, flush=True)
        return 1
    app = Gtk.Application(application_id="org.example.NetActivity.PixelsPython",
                          flags=Gio.ApplicationFlags.NON_UNIQUE)
    windows = []

    def activate(app):
        windows.append(PixelsWindow(app, bus, url, max_size))
        windows[0].present()
    app.connect("activate", activate)
    rc = app.run(sys.argv[:1])
    return rc or (windows[0].status if windows else 1)


if __name__ == "__main__":
    sys.exit(main())
