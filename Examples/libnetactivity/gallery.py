#!/usr/bin/python3
# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""gallery.py: images the netactivity agent fetched and decoded, in a GTK 4 window, and a spinner
that shows while any app on the desktop uses the network, with libnetactivity-1 through
introspection (PyGObject): no D-Bus code here.

    python3 gallery.py URL...

Each image is one FetchPixels (the agent decodes it once for every app, in its sandbox); its
pixels come mapped from the agent's memory as GLib.Bytes and go to Gdk.MemoryTexture as they are.
The spinner's "spinning" is bound to the agent's "visible".

The agent may start after the app, or restart under it: a call then fails with
NetActivity.Error.AGENT_NOT_RUNNING, and the proxies say when the agent is back by their
"g-name-owner" property. The gallery asks again for every image each time the agent appears (the
pixels it shows stay mapped until new ones replace them), and the spinner's binding follows the
new agent by itself. Prints "painted N" each time the N images are on screen, "spinning
true|false" as the spinner follows the agent, "waiting for the agent" and "agent appeared", and
"failed DOMAIN CODE MESSAGE" for an image that could not be had."""
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
        self.urls, self.shown, self.handler = urls, 0, None
        NetActivity.agent_get(None, self.got_agent)
        NetActivity.downloader_get(None, self.got_downloader)

    def got_agent(self, _, result):
        self.agent = NetActivity.agent_get_finish(result)
        self.agent.bind_property("visible", self.spinner, "spinning", GObject.BindingFlags.SYNC_CREATE)
        print("agent", flush=True)

    def got_downloader(self, _, result):
        self.downloader = NetActivity.downloader_get_finish(result)
        # Set when the agent appears (started late, or restarted), None while there is none.
        self.downloader.connect("notify::g-name-owner", self.owner_changed)
        self.generation = 0
        self.fetch_all()

    def owner_changed(self, downloader, _):
        if downloader.props.g_name_owner:
            print("agent appeared", flush=True)
            self.fetch_all()

    def fetch_all(self):
        self.generation += 1
        self.shown = 0
        box = GLib.Variant("a{sv}", {"max-width": GLib.Variant("u", 200), "max-height": GLib.Variant("u", 200)})
        for picture, url in zip(self.pictures, self.urls):
            self.downloader.fetch_pixels_bytes(url, box, None, self.got_pixels, (picture, self.generation))

    def got_pixels(self, downloader, result, data):
        picture, generation = data
        try:
            pixels, info = downloader.fetch_pixels_bytes_finish(result)
        except GLib.Error as e:
            if e.matches(NetActivity.error_quark(), NetActivity.Error.AGENT_NOT_RUNNING):
                print("waiting for the agent", flush=True)  # owner_changed asks again
            else:
                print("failed", e.domain, e.code, e.message, flush=True)
            return
        if generation != self.generation:
            return  # an answer to an older round
        texture = Gdk.MemoryTexture.new(info["width"], info["height"], Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED,
                                        pixels, info["stride"])
        picture.set_paintable(texture)
        self.shown += 1
        if self.shown == len(self.urls) and self.handler is None:
            self.handler = self.get_frame_clock().connect("after-paint", self.painted)

    def painted(self, clock):
        clock.disconnect(self.handler)
        self.handler = None
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
