// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// netactivity-pixels: one image in a GTK 4 window, decoded by the netactivity agent.
//
// The app decodes nothing and copies nothing: Downloader.FetchPixels answers with a sealed memfd of
// premultiplied B8G8R8A8 pixels (decoded once for every app, in the agent's sandboxed decoder);
// the app maps it read-only (g_mapped_file_new_from_fd, g_mapped_file_get_bytes) and hands those
// bytes to gdk_memory_texture_new as they are. Every app showing the image maps the same pages.
//
// An animated GIF, PNG (APNG), WebP or AVIF comes whole when asked ("animation"): every frame, one after another
// in the same memfd, with each one's duration. NetActivityAnimation below is a GdkPaintable that
// steps through them: one texture per frame over a slice of the mapping (still no copy), the next
// one shown when the frame's time is up, as often as the animation's "loop-count" says.
//
//   cc netactivity-pixels.c $(pkg-config --cflags --libs gtk4) -o netactivity-pixels
//   ./netactivity-pixels https://example.com/photo.jpg [MAX-SIZE]
//
// The call is asynchronous (the window never waits on the bus). It prints "painted WxH" once the
// image is on screen (then "frame K" as an animation steps), or "failed NAME: MESSAGE" (an
// org.example.NetActivity.Error) and exits 1.
#include <gio/gunixfdlist.h>
#include <gtk/gtk.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NETACTIVITY_NAME "org.example.NetActivity"
#define NETACTIVITY_PATH "/org/example/NetActivity"
#define NETACTIVITY_DOWNLOADER "org.example.NetActivity.Downloader"
#define PIXEL_FORMAT "B8G8R8A8_PREMULTIPLIED" // GDK_MEMORY_B8G8R8A8_PREMULTIPLIED

static const char *url;
static guint32 max_size;
static int status;

// ---- an animation as a GdkPaintable --------------------------------------------------------------

#define NET_ACTIVITY_TYPE_ANIMATION (net_activity_animation_get_type())
G_DECLARE_FINAL_TYPE(NetActivityAnimation, net_activity_animation, NET_ACTIVITY, ANIMATION, GObject)

struct _NetActivityAnimation {
    GObject parent;
    GPtrArray *frames;     // GdkTexture, one per frame
    guint32 *durations;    // ms
    guint32 loops, played; // loops: 0 for ever
    guint current, timer;
};

static void animation_snapshot(GdkPaintable *paintable, GdkSnapshot *snapshot, double width, double height) {
    NetActivityAnimation *self = NET_ACTIVITY_ANIMATION(paintable);
    gdk_paintable_snapshot(g_ptr_array_index(self->frames, self->current), snapshot, width, height);
}
static int animation_width(GdkPaintable *paintable) {
    return gdk_texture_get_width(g_ptr_array_index(NET_ACTIVITY_ANIMATION(paintable)->frames, 0));
}
static int animation_height(GdkPaintable *paintable) {
    return gdk_texture_get_height(g_ptr_array_index(NET_ACTIVITY_ANIMATION(paintable)->frames, 0));
}
static GdkPaintable *animation_current_image(GdkPaintable *paintable) {
    NetActivityAnimation *self = NET_ACTIVITY_ANIMATION(paintable);
    return g_object_ref(GDK_PAINTABLE(g_ptr_array_index(self->frames, self->current)));
}
static void net_activity_animation_paintable_init(GdkPaintableInterface *iface) {
    iface->snapshot = animation_snapshot;
    iface->get_intrinsic_width = animation_width;
    iface->get_intrinsic_height = animation_height;
    iface->get_current_image = animation_current_image;
}
G_DEFINE_TYPE_WITH_CODE(NetActivityAnimation, net_activity_animation, G_TYPE_OBJECT,
                        G_IMPLEMENT_INTERFACE(GDK_TYPE_PAINTABLE, net_activity_animation_paintable_init))

static void animation_dispose(GObject *object) {
    NetActivityAnimation *self = NET_ACTIVITY_ANIMATION(object);
    g_clear_handle_id(&self->timer, g_source_remove);
    g_clear_pointer(&self->frames, g_ptr_array_unref);
    g_clear_pointer(&self->durations, g_free);
    G_OBJECT_CLASS(net_activity_animation_parent_class)->dispose(object);
}
static void net_activity_animation_class_init(NetActivityAnimationClass *klass) {
    G_OBJECT_CLASS(klass)->dispose = animation_dispose;
}
static void net_activity_animation_init(NetActivityAnimation *self) { (void)self; }

// The current frame's time is up: the next one, until the animation has played `loops` times.
static gboolean animation_step(gpointer data) {
    NetActivityAnimation *self = data;
    self->timer = 0;
    guint next = (self->current + 1) % self->frames->len;
    if (next == 0 && self->loops && ++self->played >= self->loops) return G_SOURCE_REMOVE;  // it rests on its last
    self->current = next;
    g_print("frame %u\n", next);
    gdk_paintable_invalidate_contents(GDK_PAINTABLE(self));
    self->timer = g_timeout_add(self->durations[next], animation_step, self);
    return G_SOURCE_REMOVE;
}

// An animation of `count` frames of width x height, `stride` bytes a row, one after another in
// `pixels`; each frame's texture holds a slice of those bytes (no copy).
static GdkPaintable *animation_new(GBytes *pixels, int width, int height, gsize stride, GVariant *durations,
                                   guint32 loops) {
    NetActivityAnimation *self = g_object_new(NET_ACTIVITY_TYPE_ANIMATION, NULL);
    gsize count = g_variant_n_children(durations), frame = stride * (gsize)height;
    self->frames = g_ptr_array_new_with_free_func(g_object_unref);
    self->durations = g_new(guint32, count);
    self->loops = loops;
    for (gsize k = 0; k < count; k++) {
        g_variant_get_child(durations, k, "u", &self->durations[k]);
        GBytes *slice = g_bytes_new_from_bytes(pixels, k * frame, frame);
        g_ptr_array_add(self->frames,
                        gdk_memory_texture_new(width, height, GDK_MEMORY_B8G8R8A8_PREMULTIPLIED, slice, stride));
        g_bytes_unref(slice);
    }
    self->timer = g_timeout_add(self->durations[0], animation_step, self);
    return GDK_PAINTABLE(self);
}

// ---- the window ----------------------------------------------------------------------------------

static void failed(GtkWidget *window, const char *name, const char *message) {
    g_print("failed %s: %s\n", name, message);
    status = 1;
    gtk_window_destroy(GTK_WINDOW(window));
}

// The first frame drawn after the paintable was set has it on screen.
static void painted(GdkFrameClock *clock, GdkPaintable *paintable) {
    g_print("painted %dx%d\n", gdk_paintable_get_intrinsic_width(paintable),
            gdk_paintable_get_intrinsic_height(paintable));
    g_signal_handlers_disconnect_by_func(clock, painted, paintable);
    g_object_unref(paintable);
}

static void got_pixels(GObject *source, GAsyncResult *result, gpointer data) {
    GtkWidget *picture = data;
    GtkWidget *window = GTK_WIDGET(gtk_widget_get_root(picture));
    GUnixFDList *fds = NULL;
    GError *error = NULL;
    GVariant *reply = g_dbus_connection_call_with_unix_fd_list_finish(G_DBUS_CONNECTION(source), &fds, result, &error);
    if (!reply) {
        char *name = g_dbus_error_get_remote_error(error);
        g_dbus_error_strip_remote_error(error);
        failed(window, name ? name : "error", error->message);
        g_free(name);
        g_error_free(error);
        return;
    }
    gint32 handle;
    GVariant *info;
    guint32 width = 0, height = 0, stride = 0, loops = 0;
    const char *format = "";
    g_variant_get(reply, "(h@a{sv})", &handle, &info);
    // An animation's frames: as many as its durations, one after another.
    GVariant *durations = g_variant_lookup_value(info, "frame-durations", G_VARIANT_TYPE("au"));
    gsize frames = durations ? g_variant_n_children(durations) : 1;
    g_variant_lookup(info, "loop-count", "u", &loops);
    g_variant_lookup(info, "width", "u", &width);
    g_variant_lookup(info, "height", "u", &height);
    g_variant_lookup(info, "stride", "u", &stride);
    g_variant_lookup(info, "format", "&s", &format);
    GMappedFile *mapped = NULL;
    int fd = g_unix_fd_list_get(fds, handle, &error);
    if (fd >= 0) {
        mapped = g_mapped_file_new_from_fd(fd, FALSE, &error);
        close(fd); // the mapping keeps the pages
    }
    if (!mapped || strcmp(format, PIXEL_FORMAT) != 0 || frames == 0 ||
        g_mapped_file_get_length(mapped) / frames < (gsize)stride * height) {
        failed(window, "pixels", error ? error->message : "not the format or the size the reply says");
    } else {
        // No copy: the texture holds the mapping's bytes, the mapping holds the agent's memfd pages.
        GBytes *bytes = g_mapped_file_get_bytes(mapped);
        GdkPaintable *paintable =
            frames > 1 ? animation_new(bytes, (int)width, (int)height, stride, durations, loops)
                       : GDK_PAINTABLE(gdk_memory_texture_new((int)width, (int)height,
                                                              GDK_MEMORY_B8G8R8A8_PREMULTIPLIED, bytes, stride));
        g_bytes_unref(bytes);
        gtk_picture_set_paintable(GTK_PICTURE(picture), paintable);
        g_signal_connect(gtk_widget_get_frame_clock(picture), "after-paint", G_CALLBACK(painted), paintable);
    }
    if (mapped) g_mapped_file_unref(mapped);
    if (durations) g_variant_unref(durations);
    g_clear_error(&error);
    g_variant_unref(info);
    g_variant_unref(reply);
    g_object_unref(fds);
}

static void activate(GtkApplication *app, gpointer data) {
    GDBusConnection *bus = data;
    GtkWidget *window = gtk_application_window_new(app);
    GtkWidget *picture = gtk_picture_new();
    gtk_window_set_title(GTK_WINDOW(window), url);
    gtk_window_set_default_size(GTK_WINDOW(window), 320, 240);
    gtk_window_set_child(GTK_WINDOW(window), picture);
    gtk_window_present(GTK_WINDOW(window));

    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    if (max_size) {
        g_variant_builder_add(&options, "{sv}", "max-width", g_variant_new_uint32(max_size));
        g_variant_builder_add(&options, "{sv}", "max-height", g_variant_new_uint32(max_size));
    }
    // An animation comes whole (a still image as it is).
    g_variant_builder_add(&options, "{sv}", "animation", g_variant_new_boolean(TRUE));
    // No timeout of our own: the agent's transfer limits end every download, and the call with them.
    g_dbus_connection_call_with_unix_fd_list(
        bus, NETACTIVITY_NAME, NETACTIVITY_PATH,
        NETACTIVITY_DOWNLOADER, "FetchPixels", g_variant_new("(sa{sv})", url, &options), G_VARIANT_TYPE("(ha{sv})"),
        G_DBUS_CALL_FLAGS_NONE, G_MAXINT, NULL, NULL, got_pixels, picture);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        g_printerr("usage: netactivity-pixels URL [MAX-SIZE]\n");
        return 64;
    }
    url = argv[1];
    max_size = argc > 2 ? (guint32)strtoul(argv[2], NULL, 10) : 0;
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!bus) {
        g_print("failed session-bus: %s\n", error->message);
        return 1;
    }
    GtkApplication *app = gtk_application_new("org.example.NetActivity.PixelsC", G_APPLICATION_NON_UNIQUE);
    g_signal_connect(app, "activate", G_CALLBACK(activate), bus);
    int rc = g_application_run(G_APPLICATION(app), 1, argv);
    g_object_unref(app);
    g_object_unref(bus);
    return rc ? rc : status;
}
