// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// netactivity-pixels: one image in a GTK 4 window, decoded by the netactivity agent.
//
// The app decodes nothing and copies nothing: Downloader.FetchPixels answers with a sealed memfd of
// premultiplied B8G8R8A8 pixels (decoded once for every app, in the agent's sandboxed decoder);
// the app maps it read-only (g_mapped_file_new_from_fd, g_mapped_file_get_bytes) and hands those
// bytes to gdk_memory_texture_new as they are. Every app showing the image maps the same pages.
//
//   cc netactivity-pixels.c $(pkg-config --cflags --libs gtk4) -o netactivity-pixels
//   ./netactivity-pixels https://example.com/photo.jpg [MAX-SIZE]
//
// The call is asynchronous (the window never waits on the bus). It prints "painted WxH" once the
// image is on screen, or "failed NAME: MESSAGE" (an org.example.NetActivity.Error) and exits 1.
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

static void failed(GtkWidget *window, const char *name, const char *message) {
    g_print("failed %s: %s\n", name, message);
    status = 1;
    gtk_window_destroy(GTK_WINDOW(window));
}

// The first frame drawn after the texture was set has it on screen.
static void painted(GdkFrameClock *clock, GdkTexture *texture) {
    g_print("painted %dx%d\n", gdk_texture_get_width(texture), gdk_texture_get_height(texture));
    g_signal_handlers_disconnect_by_func(clock, painted, texture);
    g_object_unref(texture);
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
    guint32 width = 0, height = 0, stride = 0;
    const char *format = "";
    g_variant_get(reply, "(h@a{sv})", &handle, &info);
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
    if (!mapped || strcmp(format, PIXEL_FORMAT) != 0 ||
        g_mapped_file_get_length(mapped) < (gsize)stride * height) {
        failed(window, "pixels", error ? error->message : "not the format or the size the reply says");
    } else {
        // No copy: the texture holds the mapping's bytes, the mapping holds the agent's memfd pages.
        GBytes *bytes = g_mapped_file_get_bytes(mapped);
        GdkTexture *texture = gdk_memory_texture_new((int)width, (int)height, GDK_MEMORY_B8G8R8A8_PREMULTIPLIED,
                                                     bytes, stride);
        g_bytes_unref(bytes);
        gtk_picture_set_paintable(GTK_PICTURE(picture), GDK_PAINTABLE(texture));
        g_signal_connect(gtk_widget_get_frame_clock(picture), "after-paint", G_CALLBACK(painted), texture);
    }
    if (mapped) g_mapped_file_unref(mapped);
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
