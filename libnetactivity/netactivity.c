// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* libnetactivity's hand-written part: what the code gdbus-codegen makes from dbus/ (its XML) cannot know.
 * See netactivity.h. One file, as GLib libraries keep a class's methods: the proxies' timeouts, the
 * error domain, sealed memory and leases are each a section below, and the library is built from
 * it and the generated code alone. */
#include "netactivity.h"
#include "netactivity-calls.h"

#include <gio/gunixfdlist.h>
#include <unistd.h>

/* ---- errors ---------------------------------------------------------------------------------- */

static const GDBusErrorEntry error_entries[] = NET_ACTIVITY_ERROR_ENTRIES;

/**
 * net_activity_error_quark:
 *
 * The #NetActivityError domain. The agent's error names map to it (and back) as soon as the
 * library is loaded, so an error from any call of the generated proxies is in this domain, with
 * the agent's message as it is.
 *
 * Returns: the quark
 */
GQuark net_activity_error_quark (void)
{
    static gsize quark = 0;
    g_dbus_error_register_error_domain ("net-activity-error-quark", &quark, error_entries,
                                        G_N_ELEMENTS (error_entries));
    return (GQuark) quark;
}

/* Registered when the library is loaded (by a C program, or by a language through its typelib),
 * before any reply can come: GDBus makes errors of registered names in their domain. */
__attribute__ ((constructor)) static void register_errors (void) { (void) net_activity_error_quark (); }

/* ---- every call's error (netactivity-calls.h) -------------------------------------------------- */

#define AGENT_NOT_RUNNING_MESSAGE                                                                       \
    "The netactivity agent is not running on this session bus: start netactivityd (systemctl --user "  \
    "start netactivityd, or netactivityd & in a shell), or install netactivity, whose D-Bus service file " \
    "lets the bus start it on the first call"

/* An error as an app wants it (see netactivity-calls.h). */
static void plain (GError **error)
{
    if (!error || !*error) return;
    if (g_error_matches (*error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) ||
        g_error_matches (*error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER)) {
        g_clear_error (error);
        g_set_error_literal (error, NET_ACTIVITY_ERROR, NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING, AGENT_NOT_RUNNING_MESSAGE);
    } else if ((*error)->domain == NET_ACTIVITY_ERROR || (*error)->domain == G_DBUS_ERROR) {
        g_dbus_error_strip_remote_error (*error);
    }
}

GVariant *_net_activity_proxy_call_sync (GDBusProxy *proxy, const gchar *method_name, GVariant *parameters,
                                         GDBusCallFlags flags, gint timeout_msec, GCancellable *cancellable,
                                         GError **error)
{
    GVariant *reply =
        g_dbus_proxy_call_sync (proxy, method_name, parameters, flags, timeout_msec, cancellable, error);
    if (!reply) plain (error);
    return reply;
}

GVariant *_net_activity_proxy_call_finish (GDBusProxy *proxy, GAsyncResult *res, GError **error)
{
    GVariant *reply = g_dbus_proxy_call_finish (proxy, res, error);
    if (!reply) plain (error);
    return reply;
}

GVariant *_net_activity_proxy_call_with_unix_fd_list_sync (GDBusProxy *proxy, const gchar *method_name,
                                                           GVariant *parameters, GDBusCallFlags flags,
                                                           gint timeout_msec, GUnixFDList *fd_list,
                                                           GUnixFDList **out_fd_list, GCancellable *cancellable,
                                                           GError **error)
{
    GVariant *reply = g_dbus_proxy_call_with_unix_fd_list_sync (proxy, method_name, parameters, flags, timeout_msec,
                                                                fd_list, out_fd_list, cancellable, error);
    if (!reply) plain (error);
    return reply;
}

GVariant *_net_activity_proxy_call_with_unix_fd_list_finish (GDBusProxy *proxy, GUnixFDList **out_fd_list,
                                                             GAsyncResult *res, GError **error)
{
    GVariant *reply = g_dbus_proxy_call_with_unix_fd_list_finish (proxy, out_fd_list, res, error);
    if (!reply) plain (error);
    return reply;
}

/* ---- proxies --------------------------------------------------------------------------------- */

/**
 * net_activity_agent_get_sync:
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * The agent's org.example.NetActivity interface on the session bus (D-Bus activation starts the
 * agent when it is installed and not running), its properties loaded and followed: connect to
 * `notify::visible` to follow the indicator, or bind it to a spinner.
 *
 * Returns: (transfer full): the proxy, or %NULL with @error set
 */
NetActivityAgent *net_activity_agent_get_sync (GCancellable *cancellable, GError **error)
{
    return net_activity_agent_proxy_new_for_bus_sync (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE,
                                                      NET_ACTIVITY_BUS_NAME, NET_ACTIVITY_OBJECT_PATH,
                                                      cancellable, error);
}

/**
 * net_activity_agent_get:
 * @cancellable: (nullable): a #GCancellable
 * @callback: called with the result
 * @user_data: data for @callback
 *
 * net_activity_agent_get_sync(), without blocking.
 */
void net_activity_agent_get (GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    net_activity_agent_proxy_new_for_bus (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, NET_ACTIVITY_BUS_NAME,
                                          NET_ACTIVITY_OBJECT_PATH, cancellable, callback, user_data);
}

/**
 * net_activity_agent_get_finish:
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes net_activity_agent_get(): call it in the callback.
 *
 * Returns: (transfer full): the proxy, or %NULL with @error set
 */
NetActivityAgent *net_activity_agent_get_finish (GAsyncResult *result, GError **error)
{
    return net_activity_agent_proxy_new_for_bus_finish (result, error);
}

/* FetchImage, FetchPixels and DownloadImage answer when the image is there: after the agent's
 * transfer limits (up to 120 s of transfer, and however long the request waits its turn, or a
 * metered connection, for a very-low one). GDBus's default of 25 s would end a call the agent
 * is still serving, so the downloader's proxy waits as long as the call takes; cancel it with
 * its GCancellable (the agent then drops the caller's share of the transfer). */
static NetActivityDownloader *patient (NetActivityDownloader *downloader)
{
    if (downloader) g_dbus_proxy_set_default_timeout (G_DBUS_PROXY (downloader), G_MAXINT);
    return downloader;
}

/**
 * net_activity_downloader_get_sync:
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * The agent's downloader on the session bus, with no call timeout of its own: a download's call
 * is answered when the download ends, which may be after the 25 s GDBus waits by default (see
 * the contract). Cancel a call with its #GCancellable.
 *
 * Returns: (transfer full): the proxy, or %NULL with @error set
 */
NetActivityDownloader *net_activity_downloader_get_sync (GCancellable *cancellable, GError **error)
{
    return patient (net_activity_downloader_proxy_new_for_bus_sync (
        G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, NET_ACTIVITY_BUS_NAME, NET_ACTIVITY_OBJECT_PATH, cancellable,
        error));
}

static void downloader_made (GObject *source, GAsyncResult *result, gpointer data)
{
    (void) source;
    GTask *task = data;
    GError *error = NULL;
    NetActivityDownloader *downloader = net_activity_downloader_proxy_new_for_bus_finish (result, &error);
    if (downloader)
        g_task_return_pointer (task, patient (downloader), g_object_unref);
    else
        g_task_return_error (task, error);
    g_object_unref (task);
}

/**
 * net_activity_downloader_get:
 * @cancellable: (nullable): a #GCancellable
 * @callback: called with the result
 * @user_data: data for @callback
 *
 * net_activity_downloader_get_sync(), without blocking.
 */
void net_activity_downloader_get (GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new (NULL, cancellable, callback, user_data);
    g_task_set_source_tag (task, net_activity_downloader_get);
    net_activity_downloader_proxy_new_for_bus (G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_NONE, NET_ACTIVITY_BUS_NAME,
                                               NET_ACTIVITY_OBJECT_PATH, cancellable, downloader_made, task);
}

/**
 * net_activity_downloader_get_finish:
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes net_activity_downloader_get(): call it in the callback.
 *
 * Returns: (transfer full): the proxy, or %NULL with @error set
 */
NetActivityDownloader *net_activity_downloader_get_finish (GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
    return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- images and pixels as bytes ---------------------------------------------------------------- */

/* The first `size` bytes of the sealed memfd `handle` names in `fds`, mapped read-only: every app
 * that maps it shares the agent's pages. */
static GBytes *mapped (GVariant *handle, GUnixFDList *fds, gsize size, GError **error)
{
    int fd = g_unix_fd_list_get (fds, g_variant_get_handle (handle), error);
    if (fd < 0) return NULL;
    GMappedFile *file = g_mapped_file_new_from_fd (fd, FALSE, error);
    close (fd); /* the mapping keeps the pages */
    if (!file) return NULL;
    GBytes *bytes = g_mapped_file_get_bytes (file);
    g_mapped_file_unref (file);
    if (g_bytes_get_size (bytes) < size) {
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "The agent's file holds %zu bytes, not %zu",
                     g_bytes_get_size (bytes), size);
        g_bytes_unref (bytes);
        return NULL;
    }
    if (g_bytes_get_size (bytes) > size) {
        GBytes *part = g_bytes_new_from_bytes (bytes, 0, size);
        g_bytes_unref (bytes);
        return part;
    }
    return bytes;
}

/* A reply's bytes (see mapped()) and its info, given to `out_info` when the bytes came. */
static GBytes *taken (GVariant *handle, GUnixFDList *fds, gsize size, GVariant *info, GVariant **out_info,
                      GError **error)
{
    GBytes *bytes = mapped (handle, fds, size, error);
    g_variant_unref (handle);
    g_object_unref (fds);
    if (bytes && out_info)
        *out_info = info;
    else
        g_variant_unref (info);
    return bytes;
}

/* A FetchPixels reply's pixels: stride x height bytes. */
/* The pixels of every frame: one, or an animation's (as many as its "frame-durations"), each
 * stride x height bytes, one after another. */
static GBytes *pixels_taken (GVariant *handle, GUnixFDList *fds, GVariant *info, GVariant **out_info, GError **error)
{
    guint32 stride = 0, height = 0;
    gsize frames = 1, size = 0;
    g_variant_lookup (info, "stride", "u", &stride);
    g_variant_lookup (info, "height", "u", &height);
    GVariant *durations = g_variant_lookup_value (info, "frame-durations", G_VARIANT_TYPE ("au"));
    if (durations) {
        frames = MAX (1, g_variant_n_children (durations));
        g_variant_unref (durations);
    }
    if (!g_size_checked_mul (&size, (gsize) stride * height, frames)) size = G_MAXSIZE;
    return taken (handle, fds, size, info, out_info, error);
}

static GVariant *or_empty (GVariant *options)
{
    return options ? options : g_variant_new ("a{sv}", NULL);
}

/* ---- cancelling a fetch --------------------------------------------------------------------------
 * A GCancellable ends a GDBus call at the caller's end only: the agent would go on serving it (a
 * transfer, a decode) until it answers. So a fetch made with a cancellable carries a receipt (the
 * caller's own, or one of the library's), and cancelling sends CancelDownload(receipt): the agent
 * then drops the caller's share, and the transfer when no one else waits for it. */

typedef struct {
    NetActivityDownloader *downloader;
    gchar *receipt;
} Share;

static void share_free (gpointer data)
{
    Share *share = data;
    g_object_unref (share->downloader);
    g_free (share->receipt);
    g_free (share);
}

static gpointer send_cancel (gpointer data)
{
    Share *share = data;
    net_activity_downloader_call_cancel_download (share->downloader, share->receipt, NULL, NULL, NULL);
    share_free (share);
    return NULL;
}

/* Runs in the thread that cancels, at most once. It must not call GDBus itself: GDBus may be
 * disconnecting its own handler from the same cancellable in another thread, holding the
 * connection's lock while it waits for this handler to return. So a thread of its own sends the
 * CancelDownload, once the lock is free (a cancel is rare; the thread ends at once). */
static void share_cancelled (GCancellable *cancellable, gpointer data)
{
    (void) cancellable;
    Share *share = data, *copy = g_new (Share, 1);
    *copy = (Share) {g_object_ref (share->downloader), g_strdup (share->receipt)};
    GThread *thread = g_thread_try_new ("netactivity-cancel", send_cancel, copy, NULL);
    if (thread)
        g_thread_unref (thread);
    else
        share_free (copy); /* no thread: the agent answers the call in its own time */
}

/* `options` (floating or not, or NULL) as a reference of the caller's, with a receipt when a
 * cancellable may end the call (`receipt`: its name, or NULL). */
static GVariant *with_receipt (GVariant *options, GCancellable *cancellable, gchar **receipt)
{
    static gint counter;
    options = g_variant_ref_sink (or_empty (options));
    *receipt = NULL;
    if (!cancellable || g_variant_lookup (options, "receipt", "s", receipt)) return options;
    *receipt = g_strdup_printf ("libnetactivity-%d", g_atomic_int_add (&counter, 1));
    GVariantDict dict;
    g_variant_dict_init (&dict, options);
    g_variant_dict_insert (&dict, "receipt", "s", *receipt);
    g_variant_unref (options);
    return g_variant_ref_sink (g_variant_dict_end (&dict));
}

/* The receipt's CancelDownload when `cancellable` is cancelled; 0 when there is nothing to send. */
static gulong watch (NetActivityDownloader *downloader, GCancellable *cancellable, gchar *receipt)
{
    if (!receipt) return 0;
    Share *share = g_new (Share, 1);
    *share = (Share) {g_object_ref (downloader), receipt};
    return g_cancellable_connect (cancellable, G_CALLBACK (share_cancelled), share, share_free);
}

typedef struct {
    GAsyncReadyCallback callback;
    gpointer user_data;
    GCancellable *cancellable;
    gulong handler;
} Pending;

/* The call's answer, to the app's callback, once the cancellable no longer needs watching. */
static void answered (GObject *source, GAsyncResult *result, gpointer data)
{
    Pending *pending = data;
    if (pending->handler) g_cancellable_disconnect (pending->cancellable, pending->handler);
    g_clear_object (&pending->cancellable);
    if (pending->callback) pending->callback (source, result, pending->user_data);
    g_free (pending);
}

typedef void (*FetchCall) (NetActivityDownloader *, const gchar *, GVariant *, GUnixFDList *, GCancellable *,
                           GAsyncReadyCallback, gpointer);

static void fetch (FetchCall call, NetActivityDownloader *downloader, const gchar *url, GVariant *options,
                   GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    gchar *receipt;
    options = with_receipt (options, cancellable, &receipt);
    Pending *pending = g_new0 (Pending, 1);
    *pending = (Pending) {callback, user_data, cancellable ? g_object_ref (cancellable) : NULL, 0};
    call (downloader, url, options, NULL, cancellable, answered, pending);
    g_variant_unref (options);
    /* After the call is sent: a CancelDownload always comes after its FetchImage on the connection. */
    pending->handler = watch (downloader, cancellable, receipt);
}

/**
 * net_activity_downloader_fetch_image_bytes:
 * @downloader: the downloader (net_activity_downloader_get())
 * @url: an http or https URL
 * @options: (nullable): FetchImage's options (`a{sv}`: priority, receipt, max-age...), or %NULL
 * @cancellable: (nullable): a #GCancellable
 * @callback: called with the result
 * @user_data: data for @callback
 *
 * Fetches an image through the shared downloader and cache (FetchImage): from the agent's memory,
 * its disk, or the network, one transfer for every app that asks at once.
 */
void net_activity_downloader_fetch_image_bytes (NetActivityDownloader *downloader, const gchar *url, GVariant *options,
                                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                                gpointer user_data)
{
    fetch (net_activity_downloader_call_fetch_image, downloader, url, options, cancellable, callback, user_data);
}

/**
 * net_activity_downloader_fetch_image_bytes_finish:
 * @downloader: the downloader
 * @result: the #GAsyncResult given to the callback
 * @out_info: (out) (optional) (transfer full): FetchImage's info (`a{sv}`: source, content-type,
 *   http-status)
 * @error: return location for a #GError (#NET_ACTIVITY_ERROR for the agent's own errors)
 *
 * Finishes net_activity_downloader_fetch_image_bytes(): call it in the callback.
 *
 * Returns: (transfer full): the image's encoded bytes, mapped read-only from the agent's sealed
 *   memory (no copy), or %NULL with @error set
 */
GBytes *net_activity_downloader_fetch_image_bytes_finish (NetActivityDownloader *downloader, GAsyncResult *result,
                                                          GVariant **out_info, GError **error)
{
    GVariant *handle = NULL, *info = NULL;
    GUnixFDList *fds = NULL;
    guint64 size = 0;
    if (!net_activity_downloader_call_fetch_image_finish (downloader, &handle, &size, &info, &fds, result, error))
        return NULL;
    return taken (handle, fds, size, info, out_info, error);
}

/**
 * net_activity_downloader_fetch_image_bytes_sync:
 * @downloader: the downloader
 * @url: an http or https URL
 * @options: (nullable): FetchImage's options, or %NULL
 * @out_info: (out) (optional) (transfer full): FetchImage's info
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * net_activity_downloader_fetch_image_bytes(), blocking until the image is there (not in a UI
 * thread: a download may take minutes).
 *
 * Returns: (transfer full): the image's bytes, or %NULL with @error set
 */
GBytes *net_activity_downloader_fetch_image_bytes_sync (NetActivityDownloader *downloader, const gchar *url,
                                                        GVariant *options, GVariant **out_info,
                                                        GCancellable *cancellable, GError **error)
{
    GVariant *handle = NULL, *info = NULL;
    GUnixFDList *fds = NULL;
    guint64 size = 0;
    gchar *receipt;
    options = with_receipt (options, cancellable, &receipt);
    gulong handler = watch (downloader, cancellable, receipt);
    gboolean ok = net_activity_downloader_call_fetch_image_sync (downloader, url, options, NULL, &handle, &size, &info,
                                                                 &fds, cancellable, error);
    g_variant_unref (options);
    if (handler) g_cancellable_disconnect (cancellable, handler);
    return ok ? taken (handle, fds, size, info, out_info, error) : NULL;
}

/**
 * net_activity_downloader_fetch_pixels_bytes:
 * @downloader: the downloader
 * @url: an http or https URL
 * @options: (nullable): FetchPixels' options (FetchImage's, and `max-width`, `max-height`: a box
 *   to fit in; `color`: "srgb" or "as-is"; `animation`, `max-frames`: every frame), or %NULL
 * @cancellable: (nullable): a #GCancellable
 * @callback: called with the result
 * @user_data: data for @callback
 *
 * Fetches an image and has the agent decode it (FetchPixels): once for every app that asks with
 * the same box, in its sandboxed decoder. The pixels are premultiplied B8G8R8A8, what
 * gdk_memory_texture_new() takes as %GDK_MEMORY_B8G8R8A8_PREMULTIPLIED.
 */
void net_activity_downloader_fetch_pixels_bytes (NetActivityDownloader *downloader, const gchar *url, GVariant *options,
                                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                                 gpointer user_data)
{
    fetch (net_activity_downloader_call_fetch_pixels, downloader, url, options, cancellable, callback, user_data);
}

/**
 * net_activity_downloader_fetch_pixels_bytes_finish:
 * @downloader: the downloader
 * @result: the #GAsyncResult given to the callback
 * @out_info: (out) (optional) (transfer full): FetchPixels' info (`a{sv}`: width, height,
 *   stride, format, original-width, original-height, frames, frame-durations, loop-count,
 *   color-space, color-profile, source, content-type, http-status)
 * @error: return location for a #GError
 *
 * Finishes net_activity_downloader_fetch_pixels_bytes(): call it in the callback. The info's
 * `width`, `height` and `stride` are `u` (guint32), what gdk_memory_texture_new() wants. Asked
 * with `animation` (an options key), an animated image comes whole: `frame-durations` (`au`, ms)
 * lists its frames, each stride x height bytes, one after another (g_bytes_new_from_bytes() makes
 * each frame's slice without a copy).
 *
 * Returns: (transfer full): stride x height bytes of pixels for each frame, mapped read-only from
 *   the agent's sealed memory (every app showing the image shares them), or %NULL with @error set
 */
GBytes *net_activity_downloader_fetch_pixels_bytes_finish (NetActivityDownloader *downloader, GAsyncResult *result,
                                                           GVariant **out_info, GError **error)
{
    GVariant *handle = NULL, *info = NULL;
    GUnixFDList *fds = NULL;
    if (!net_activity_downloader_call_fetch_pixels_finish (downloader, &handle, &info, &fds, result, error))
        return NULL;
    return pixels_taken (handle, fds, info, out_info, error);
}

/**
 * net_activity_downloader_fetch_pixels_bytes_sync:
 * @downloader: the downloader
 * @url: an http or https URL
 * @options: (nullable): FetchPixels' options, or %NULL
 * @out_info: (out) (optional) (transfer full): FetchPixels' info
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * net_activity_downloader_fetch_pixels_bytes(), blocking until the pixels are there (not in a UI
 * thread: a download may take minutes).
 *
 * Returns: (transfer full): the pixels, or %NULL with @error set
 */
GBytes *net_activity_downloader_fetch_pixels_bytes_sync (NetActivityDownloader *downloader, const gchar *url,
                                                         GVariant *options, GVariant **out_info,
                                                         GCancellable *cancellable, GError **error)
{
    GVariant *handle = NULL, *info = NULL;
    GUnixFDList *fds = NULL;
    gchar *receipt;
    options = with_receipt (options, cancellable, &receipt);
    gulong handler = watch (downloader, cancellable, receipt);
    gboolean ok = net_activity_downloader_call_fetch_pixels_sync (downloader, url, options, NULL, &handle, &info,
                                                                  &fds, cancellable, error);
    g_variant_unref (options);
    if (handler) g_cancellable_disconnect (cancellable, handler);
    return ok ? pixels_taken (handle, fds, info, out_info, error) : NULL;
}

/* ---- leases ---------------------------------------------------------------------------------- */

/**
 * NetActivityLease:
 *
 * Activity held for as long as the object is: BeginActivity's lease, whose file descriptor only
 * this object holds (the call's #GUnixFDList is let go at once, so no copy keeps it alive). It
 * ends with net_activity_lease_end() or when the last reference goes; and if the process dies,
 * the agent sees the descriptor close.
 */
struct _NetActivityLease {
    GObject parent;
    int fd;
};

G_DEFINE_TYPE (NetActivityLease, net_activity_lease, G_TYPE_OBJECT)

static void net_activity_lease_finalize (GObject *object)
{
    net_activity_lease_end (NET_ACTIVITY_LEASE (object));
    G_OBJECT_CLASS (net_activity_lease_parent_class)->finalize (object);
}

static void net_activity_lease_class_init (NetActivityLeaseClass *class)
{
    G_OBJECT_CLASS (class)->finalize = net_activity_lease_finalize;
}

static void net_activity_lease_init (NetActivityLease *lease) { lease->fd = -1; }

/* The lease BeginActivity answered with, its descriptor taken out of the list. */
static NetActivityLease *lease_from (GVariant *handle, GUnixFDList *fds, GError **error)
{
    gint n = 0;
    gint *all = g_unix_fd_list_steal_fds (fds, &n);
    gint index = g_variant_get_handle (handle);
    NetActivityLease *lease = NULL;
    for (gint i = 0; i < n; i++) {
        if (i == index && !lease) {
            lease = g_object_new (NET_ACTIVITY_TYPE_LEASE, NULL);
            lease->fd = all[i];
        } else {
            close (all[i]);
        }
    }
    g_free (all);
    if (!lease) g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "The agent's reply held no lease");
    return lease;
}

/**
 * net_activity_lease_begin_sync:
 * @agent: the agent (net_activity_agent_get())
 * @reason: what the app does, as panels show it ("syncing mail")
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for a #GError
 *
 * Begins activity that lasts as long as the returned lease (BeginActivity).
 *
 * Returns: (transfer full): the lease, or %NULL with @error set
 */
NetActivityLease *net_activity_lease_begin_sync (NetActivityAgent *agent, const gchar *reason,
                                                 GCancellable *cancellable, GError **error)
{
    GVariant *handle = NULL;
    GUnixFDList *fds = NULL;
    if (!net_activity_agent_call_begin_activity_sync (agent, reason, NULL, &handle, &fds, cancellable, error))
        return NULL;
    NetActivityLease *lease = lease_from (handle, fds, error);
    g_variant_unref (handle);
    g_object_unref (fds);
    return lease;
}

static void lease_begun (GObject *source, GAsyncResult *result, gpointer data)
{
    GTask *task = data;
    GVariant *handle = NULL;
    GUnixFDList *fds = NULL;
    GError *error = NULL;
    NetActivityLease *lease = NULL;
    if (net_activity_agent_call_begin_activity_finish (NET_ACTIVITY_AGENT (source), &handle, &fds, result, &error)) {
        lease = lease_from (handle, fds, &error);
        g_variant_unref (handle);
        g_object_unref (fds);
    }
    if (lease)
        g_task_return_pointer (task, lease, g_object_unref);
    else
        g_task_return_error (task, error);
    g_object_unref (task);
}

/**
 * net_activity_lease_begin:
 * @agent: the agent
 * @reason: what the app does
 * @cancellable: (nullable): a #GCancellable
 * @callback: called with the result
 * @user_data: data for @callback
 *
 * net_activity_lease_begin_sync(), without blocking.
 */
void net_activity_lease_begin (NetActivityAgent *agent, const gchar *reason, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new (agent, cancellable, callback, user_data);
    g_task_set_source_tag (task, net_activity_lease_begin);
    net_activity_agent_call_begin_activity (agent, reason, NULL, cancellable, lease_begun, task);
}

/**
 * net_activity_lease_begin_finish:
 * @result: the #GAsyncResult given to the callback
 * @error: return location for a #GError
 *
 * Finishes net_activity_lease_begin(): call it in the callback.
 *
 * Returns: (transfer full): the lease, or %NULL with @error set
 */
NetActivityLease *net_activity_lease_begin_finish (GAsyncResult *result, GError **error)
{
    g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
    return g_task_propagate_pointer (G_TASK (result), error);
}

/**
 * net_activity_lease_end:
 * @lease: a lease
 *
 * Ends the activity now (closes the lease's descriptor); nothing when it has ended already.
 */
void net_activity_lease_end (NetActivityLease *lease)
{
    g_return_if_fail (NET_ACTIVITY_IS_LEASE (lease));
    if (lease->fd >= 0) close (lease->fd);
    lease->fd = -1;
}

/**
 * net_activity_lease_is_held:
 * @lease: a lease
 *
 * Whether the lease still holds activity: %FALSE once net_activity_lease_end() ended it.
 *
 * Returns: whether the lease still holds its activity
 */
gboolean net_activity_lease_is_held (NetActivityLease *lease)
{
    g_return_val_if_fail (NET_ACTIVITY_IS_LEASE (lease), FALSE);
    return lease->fd >= 0;
}
