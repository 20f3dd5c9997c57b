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
// "visible"; a call made while there is no agent fails with NetActivity.Error.AGENT_NOT_RUNNING,
// and the gallery asks again for every image each time the downloader's "g-name-owner" says the
// agent appeared (started late, or restarted). Prints "painted N" each time, "spinning
// true|false", "waiting for the agent", "agent appeared" and "failed DOMAIN CODE MESSAGE".
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
    let shown = 0, generation = 0, painting = false;
    const box = new GLib.Variant('a{sv}', {
        'max-width': new GLib.Variant('u', 200), 'max-height': new GLib.Variant('u', 200),
    });
    const show = (i, round) => (source, res) => {
        let pixels, info;
        try {
            [pixels, info] = source.fetch_pixels_bytes_finish(res);
        } catch (e) {
            if (e.matches(NetActivity.error_quark(), NetActivity.Error.AGENT_NOT_RUNNING))
                print('waiting for the agent');  // asked again when it appears
            else
                print(`failed ${GLib.quark_to_string(e.domain)} ${e.code} ${e.message}`);
            return;
        }
        if (round !== generation)
            return;  // an answer to an older round
        const u = key => info.lookup_value(key, null).get_uint32();
        pictures[i].set_paintable(Gdk.MemoryTexture.new(u('width'), u('height'),
            Gdk.MemoryFormat.B8G8R8A8_PREMULTIPLIED, pixels, u('stride')));
        if (++shown === urls.length && !painting) {
            painting = true;
            const clock = window.get_frame_clock();
            const id = clock.connect('after-paint', () => {
                clock.disconnect(id);
                painting = false;
                print(`painted ${shown}`);
            });
        }
    };
    NetActivity.downloader_get(null, (_, result) => {
        const downloader = NetActivity.downloader_get_finish(result);
        window._downloader = downloader;
        const fetchAll = () => {
            generation++;
            shown = 0;
            urls.forEach((url, i) => downloader.fetch_pixels_bytes(url, box, null, show(i, generation)));
        };
        // Set when the agent appears (started late, or restarted), null while there is none.
        downloader.connect('notify::g-name-owner', () => {
            if (downloader.g_name_owner) {
                print('agent appeared');
                fetchAll();
            }
        });
        fetchAll();
    });
});
app.run([imports.system.programInvocationName]);
