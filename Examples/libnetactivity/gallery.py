#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""gallery.py: images the netactivity agent fetched and decoded, in a GTK 4 window, and a spinner
that shows while any app on the desktop uses the network, with libnetactivity-1 through
introspection (PyGObject): no D-Bus code here.

    python3 gallery.py URL...

Each image is one FetchPixels (the agent decodes it once for every app, in its sandbox); its
pixels come mapped from the agent's memory as GLib.Bytes and go to Gdk.MemoryTexture as they are.
The spinner's "spinning" is bound to the agent's "visible". Prints "painted N" once the N images
are on screen, "spinning true|false" as the spinner follows the agent, and "failed DOMAIN CODE
MESSAGE" for an image that could not be had."""
import sys

import gi

gi.require_version("Gdk", "4.0")
gi.require_version("Gtk", "4.0")
gi.require_version("NetActivity", "1.0")
from gi.repository import Gdk, Gio, GLib, GObject, Gtk, NetActivity  # noqa: E402


class Gallery(Gtk.ApplicationWindow):
    def __init__(self, app, urls):
        super().__init__(application=app, title="netactivity gallery", default_width=480, default_height=240)
        row = Gtk.Box(spacing=8)
        self.spinner = Gtk.Spinner()
        self.spinner.connect("notify::spinning", lambda s, _: print("spinning", str(s.props.spinning).lower(), flush=True))
        row.append(self.spinner)
        self.pictures = []
        for _ in urls:
            picture = Gtk.Picture(hexpand=True, vexpand=True)
            self.pictures.append(picture)
            row.append(picture)
        self.set_child(row)
        self.urls, self.shown = urls, 0
        NetActivity.agent_get(None, self.got_agent)
        NetActivity.downloader_get(None, self.got_downloader)

    def got_agent(self, _, result):
        self.agent = NetActivity.agent_get_finish(result)
        self.agent.bind_property("visible", self.spinner, "spinning", GObject.BindingFlags.SYNC_CREATE)
        print("agent", flush=True)

    def got_downloader(self, _, result):
        downloader = NetActivity.downloader_get_finish(result)
        box = GLib.Variant("a{sv}", {"max-width": GLib.Variant("u", 200), "max-height": GLib.Variant("u", 200)})
        for picture, url in zip(self.pictures, self.urls):
            downloader.fetch_pixels_bytes(url, box, None, self.got_pixels, picture)

    def got_pixels(self, downloader, result, picture):
        try:
            pixels, info = downloader.fetch_pixels_bytes_finish(result)
        except GLib.Error as e:
            Gio.DBusError.strip_remote_error(e)
            print("failed", e.domain, e.code, e.message, flush=True)
            return
        texture = Gdk.MemoryTexture.new(info["width"], info["height"], Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED,
                                        pixels, info["stride"])
        picture.set_paintable(texture)
        self.shown += 1
        if self.shown == len(self.urls):
            clock = self.get_frame_clock()
            self.handler = clock.connect("after-paint", self.painted)

    def painted(self, clock):
        clock.disconnect(self.handler)
        print("painted", self.shown, flush=True)


def main():
    if len(sys.argv) < 2:
        print("usage: gallery.py URL...", file=sys.stderr)
        return 64
    app = Gtk.Application(application_id="org.example.NetActivity.GalleryPython", flags=Gio.ApplicationFlags.NON_UNIQUE)
    app.connect("activate", lambda app: Gallery(app, sys.argv[1:]).present())
    return app.run(sys.argv[:1])


if __name__ == "__main__":
    sys.exit(main())
