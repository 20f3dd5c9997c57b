#!/usr/bin/gjs
// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// gallery.js: images the netactivity agent fetched and decoded, in a GTK 4 window, and a spinner
// that shows while any app on the desktop uses the network, with libnetactivity-1 through
// introspection (GJS): no D-Bus code here.
//
//   gjs gallery.js URL...
//
// As gallery.py: each image is one FetchPixels, its pixels mapped from the agent's memory and
// handed to Gdk.MemoryTexture as they are; the spinner's "spinning" is bound to the agent's
// "visible". Prints "painted N", "spinning true|false" and "failed DOMAIN CODE MESSAGE".
imports.gi.versions.Gdk = '4.0';
imports.gi.versions.Gtk = '4.0';
imports.gi.versions.NetActivity = '1.0';
const {Gdk, Gio, GLib, GObject, Gtk, NetActivity} = imports.gi;

const urls = ARGV;
if (urls.length === 0) {
    printerr('usage: gjs gallery.js URL...');
    imports.system.exit(64);
}

const app = new Gtk.Application({
    application_id: 'org.example.NetActivity.GalleryGJS',
    flags: Gio.ApplicationFlags.NON_UNIQUE,
});
app.connect('activate', () => {
    const window = new Gtk.ApplicationWindow({
        application: app, title: 'netactivity gallery', default_width: 480, default_height: 240,
    });
    const row = new Gtk.Box({spacing: 8});
    const spinner = new Gtk.Spinner();
    spinner.connect('notify::spinning', () => print(`spinning ${spinner.spinning}`));
    row.append(spinner);
    const pictures = urls.map(() => {
        const picture = new Gtk.Picture({hexpand: true, vexpand: true});
        row.append(picture);
        return picture;
    });
    window.set_child(row);
    window.present();

    NetActivity.agent_get(null, (_, result) => {
        const agent = NetActivity.agent_get_finish(result);
        agent.bind_property('visible', spinner, 'spinning', GObject.BindingFlags.SYNC_CREATE);
        window._agent = agent;  // kept as long as the window
        print('agent');
    });
    let shown = 0;
    NetActivity.downloader_get(null, (_, result) => {
        const downloader = NetActivity.downloader_get_finish(result);
        const box = new GLib.Variant('a{sv}', {
            'max-width': new GLib.Variant('u', 200), 'max-height': new GLib.Variant('u', 200),
        });
        urls.forEach((url, i) => downloader.fetch_pixels_bytes(url, box, null, (source, res) => {
            let pixels, info;
            try {
                [pixels, info] = source.fetch_pixels_bytes_finish(res);
            } catch (e) {
                Gio.DBusError.strip_remote_error(e);
                print(`failed ${GLib.quark_to_string(e.domain)} ${e.code} ${e.message}`);
                return;
            }
            const u = key => info.lookup_value(key, null).get_uint32();
            pictures[i].set_paintable(Gdk.MemoryTexture.new(u('width'), u('height'),
                Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED, pixels, u('stride')));
            if (++shown === urls.length) {
                const clock = window.get_frame_clock();
                const id = clock.connect('after-paint', () => {
                    clock.disconnect(id);
                    print(`painted ${shown}`);
                });
            }
        }));
    });
});
app.run([imports.system.programInvocationName]);
