// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
// fetch-image: an image through the netactivity agent's shared downloader, with libnetactivity-1.
//
//   cc fetch-image.c $(pkg-config --cflags --libs netactivity-1) -o fetch-image
//   ./fetch-image https://example.com/photo.jpg [MAX-SIZE]
//
// Prints "image BYTES TYPE SOURCE" (the encoded image, mapped from the agent's memory) and, with a
// MAX-SIZE, "pixels WxH STRIDE" (the agent decoded it into that box); or "error DOMAIN CODE MESSAGE"
// and exits 1. Asynchronous, as an app with a UI would be: nothing here waits on the bus.
#include <netactivity.h>
#include <stdlib.h>

static const char *url;
static guint32 max_size;
static GMainLoop *loop;
static int status;

static void fail(GError *error) {
    // The agent's own errors are in NET_ACTIVITY_ERROR: compare codes, not strings.
    g_print("error %s %d %s\n", g_quark_to_string(error->domain), error->code, error->message);
    if (g_error_matches(error, NET_ACTIVITY_ERROR, NET_ACTIVITY_ERROR_HTTP)) g_print("(an HTTP error status)\n");
    g_error_free(error);
    status = 1;
    g_main_loop_quit(loop);
}

static void got_pixels(GObject *source, GAsyncResult *result, gpointer data) {
    (void)data;
    GError *error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GBytes) pixels =
        net_activity_downloader_fetch_pixels_bytes_finish(NET_ACTIVITY_DOWNLOADER(source), result, &info, &error);
    if (!pixels) return fail(error);
    guint32 width = 0, height = 0, stride = 0;
    g_variant_lookup(info, "width", "u", &width);
    g_variant_lookup(info, "height", "u", &height);
    g_variant_lookup(info, "stride", "u", &stride);
    g_print("pixels %ux%u %u\n", width, height, stride);
    g_main_loop_quit(loop);
}

static void got_image(GObject *source, GAsyncResult *result, gpointer data) {
    (void)data;
    NetActivityDownloader *downloader = NET_ACTIVITY_DOWNLOADER(source);
    GError *error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GBytes) image = net_activity_downloader_fetch_image_bytes_finish(downloader, result, &info, &error);
    if (!image) return fail(error);
    const char *type = "", *from = "";
    g_variant_lookup(info, "content-type", "&s", &type);
    g_variant_lookup(info, "source", "&s", &from);
    g_print("image %zu %s %s\n", g_bytes_get_size(image), type, from);
    if (!max_size) return g_main_loop_quit(loop);
    GVariantDict box;
    g_variant_dict_init(&box, NULL);
    g_variant_dict_insert(&box, "max-width", "u", max_size);
    g_variant_dict_insert(&box, "max-height", "u", max_size);
    net_activity_downloader_fetch_pixels_bytes(downloader, url, g_variant_dict_end(&box), NULL, got_pixels, NULL);
}

static void got_downloader(GObject *source, GAsyncResult *result, gpointer data) {
    (void)source, (void)data;
    GError *error = NULL;
    // A proxy with no call timeout of its own: a download may take longer than GDBus's 25 s.
    NetActivityDownloader *downloader = net_activity_downloader_get_finish(result, &error);
    if (!downloader) return fail(error);
    net_activity_downloader_fetch_image_bytes(downloader, url, NULL, NULL, got_image, NULL);
    g_object_unref(downloader);  // the call holds it until it is answered
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        g_printerr("usage: fetch-image URL [MAX-SIZE]\n");
        return 64;
    }
    url = argv[1];
    max_size = argc > 2 ? (guint32)strtoul(argv[2], NULL, 10) : 0;
    loop = g_main_loop_new(NULL, FALSE);
    net_activity_downloader_get(NULL, got_downloader, NULL);
    g_main_loop_run(loop);
    g_main_loop_unref(loop);
    return status;
}
