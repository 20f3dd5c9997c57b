// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* gallery: images the netactivity agent fetched and decoded, in a GTK 4 window, and a spinner that
 * shows while any app on the desktop uses the network, with libnetactivity-1: no D-Bus code here.
 *
 *   cc gallery.c $(pkg-config --cflags --libs netactivity-1 gtk4) -o gallery
 *   ./gallery URL...
 *
 * Each image is one FetchPixels (the agent decodes it once for every app, in its sandbox); its
 * pixels come mapped from the agent's memory as GBytes and go to gdk_memory_texture_new() as they
 * are. The spinner's "spinning" is bound to the agent's "visible".
 *
 * The agent may start after the app, or restart under it: a call then fails with
 * NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING, and the proxies say when the agent is back by their
 * "g-name-owner" property. The gallery asks again for every image each time the agent appears (the
 * pixels it shows stay mapped until new ones replace them). Prints "painted N" each time the N
 * images are on screen, "spinning true|false", "waiting for the agent", "agent appeared", and
 * "failed DOMAIN CODE MESSAGE" for an image that could not be had. */
#include <gtk/gtk.h>
#include <netactivity.h>
#include <stdio.h>

typedef struct {
    GtkWidget *window;
    GPtrArray *pictures;
    char **urls;
    NetActivityAgent *agent;
    NetActivityDownloader *downloader;
    guint generation, shown;
    gulong painting;
} Gallery;

typedef struct {
    Gallery *gallery;
    guint index, generation;
} Slot;

static void painted (GdkFrameClock *clock, Gallery *gallery)
{
    g_signal_handler_disconnect (clock, gallery->painting);
    gallery->painting = 0;
    g_print ("painted %u\n", gallery->shown);
}

static void got_pixels (GObject *source, GAsyncResult *result, gpointer data)
{
    g_autofree Slot *slot = data;
    Gallery *gallery = slot->gallery;
    g_autoptr (GError) error = NULL;
    g_autoptr (GVariant) info = NULL;
    g_autoptr (GBytes) pixels =
        net_activity_downloader_fetch_pixels_bytes_finish (NET_ACTIVITY_DOWNLOADER (source), result, &info, &error);
    if (!pixels) {
        if (g_error_matches (error, NET_ACTIVITY_ERROR, NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING))
            g_print ("waiting for the agent\n"); /* owner_changed() asks again */
        else
            g_print ("failed %s %d %s\n", g_quark_to_string (error->domain), error->code, error->message);
        return;
    }
    if (slot->generation != gallery->generation) return; /* an answer to an older round */
    guint32 width = 0, height = 0, stride = 0;
    g_variant_lookup (info, "width", "u", &width);
    g_variant_lookup (info, "height", "u", &height);
    g_variant_lookup (info, "stride", "u", &stride);
    g_autoptr (GdkTexture) texture =
        gdk_memory_texture_new (width, height, GDK_MEMORY_B8G8R8A8_PREMULTIPLIED, pixels, stride);
    gtk_picture_set_paintable (g_ptr_array_index (gallery->pictures, slot->index), GDK_PAINTABLE (texture));
    if (++gallery->shown == gallery->pictures->len && !gallery->painting)
        gallery->painting = g_signal_connect (gtk_widget_get_frame_clock (gallery->window), "after-paint",
                                              G_CALLBACK (painted), gallery);
}

static void fetch_all (Gallery *gallery)
{
    gallery->generation++;
    gallery->shown = 0;
    for (guint i = 0; i < gallery->pictures->len; i++) {
        Slot *slot = g_new (Slot, 1);
        *slot = (Slot) {gallery, i, gallery->generation};
        net_activity_downloader_fetch_pixels_bytes (gallery->downloader, gallery->urls[i],
                                                    g_variant_new_parsed ("{'max-width': <@u 200>, 'max-height': <@u 200>}"),
                                                    NULL, got_pixels, slot);
    }
}

/* "g-name-owner" is set when the agent appears (started late, or restarted), NULL while there is none. */
static void owner_changed (GDBusProxy *downloader, G_GNUC_UNUSED GParamSpec *pspec, Gallery *gallery)
{
    g_autofree char *owner = g_dbus_proxy_get_name_owner (downloader);
    if (owner) {
        g_print ("agent appeared\n");
        fetch_all (gallery);
    }
}

static void got_downloader (G_GNUC_UNUSED GObject *source, GAsyncResult *result, gpointer data)
{
    Gallery *gallery = data;
    g_autoptr (GError) error = NULL;
    gallery->downloader = net_activity_downloader_get_finish (result, &error);
    if (!gallery->downloader) {
        g_print ("failed %s %d %s\n", g_quark_to_string (error->domain), error->code, error->message);
        return;
    }
    g_signal_connect (gallery->downloader, "notify::g-name-owner", G_CALLBACK (owner_changed), gallery);
    fetch_all (gallery);
}

static void spinning (GtkSpinner *spinner)
{
    g_print ("spinning %s\n", gtk_spinner_get_spinning (spinner) ? "true" : "false");
}

static void got_agent (G_GNUC_UNUSED GObject *source, GAsyncResult *result, gpointer data)
{
    Gallery *gallery = data;
    g_autoptr (GError) error = NULL;
    gallery->agent = net_activity_agent_get_finish (result, &error);
    if (!gallery->agent) return;
    GtkWidget *spinner = g_object_get_data (G_OBJECT (gallery->window), "spinner");
    g_object_bind_property (gallery->agent, "visible", spinner, "spinning", G_BINDING_SYNC_CREATE);
    g_print ("agent\n");
}

static void activate (GtkApplication *app, Gallery *gallery)
{
    gallery->window = gtk_application_window_new (app);
    gtk_window_set_title (GTK_WINDOW (gallery->window), "netactivity gallery");
    gtk_window_set_default_size (GTK_WINDOW (gallery->window), 480, 240);
    GtkWidget *row = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 8);
    GtkWidget *spinner = gtk_spinner_new ();
    g_signal_connect (spinner, "notify::spinning", G_CALLBACK (spinning), NULL);
    g_object_set_data (G_OBJECT (gallery->window), "spinner", spinner);
    gtk_box_append (GTK_BOX (row), spinner);
    for (char **url = gallery->urls; *url; url++) {
        GtkWidget *picture = gtk_picture_new ();
        gtk_widget_set_hexpand (picture, TRUE);
        gtk_widget_set_vexpand (picture, TRUE);
        g_ptr_array_add (gallery->pictures, picture);
        gtk_box_append (GTK_BOX (row), picture);
    }
    gtk_window_set_child (GTK_WINDOW (gallery->window), row);
    gtk_window_present (GTK_WINDOW (gallery->window));
    net_activity_agent_get (NULL, got_agent, gallery);
    net_activity_downloader_get (NULL, got_downloader, gallery);
}

int main (int argc, char **argv)
{
    if (argc < 2) {
        g_printerr ("usage: gallery URL...\n");
        return 64;
    }
    setvbuf (stdout, NULL, _IOLBF, 0); /* a line at a time, to a pipe too */
    Gallery gallery = {.pictures = g_ptr_array_new (), .urls = argv + 1};
    g_autoptr (GtkApplication) app =
        gtk_application_new ("org.example.NetActivity.GalleryC", G_APPLICATION_NON_UNIQUE);
    g_signal_connect (app, "activate", G_CALLBACK (activate), &gallery);
    int status = g_application_run (G_APPLICATION (app), 1, argv);
    g_clear_object (&gallery.agent);
    g_clear_object (&gallery.downloader);
    g_ptr_array_unref (gallery.pictures);
    return status;
}
