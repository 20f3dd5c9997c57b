// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* libnetactivity: the netactivity agent for C, and through GObject introspection for Python,
 * JavaScript (GJS), Vala and Rust.
 *
 * Most of it is generated from the contract (dbus/ (its XML)) by gdbus-codegen: a proxy type per
 * interface (NetActivityAgent, NetActivityDownloader, NetActivityImageCache, NetActivityTask), its
 * calls, properties and signals, and an object manager client for the task objects. This header
 * adds what generated code cannot know: proxies made with the right timeouts, the agent's errors
 * as a GError domain (#NET_ACTIVITY_ERROR), images and pixels as #GBytes over the agent's sealed
 * memory, and a lease object that ends when it is released. */
#ifndef NET_ACTIVITY_H
#define NET_ACTIVITY_H

#include <gio/gio.h>

#include "netactivity-errors.h"
#include "netactivity-generated.h"

G_BEGIN_DECLS

/**
 * NET_ACTIVITY_BUS_NAME:
 *
 * The agent's well-known name on the session bus.
 */
#define NET_ACTIVITY_BUS_NAME "org.example.NetActivity"

/**
 * NET_ACTIVITY_OBJECT_PATH:
 *
 * The path of the agent's object (its activity, image cache and downloader interfaces).
 */
#define NET_ACTIVITY_OBJECT_PATH "/org/example/NetActivity"

NetActivityAgent *net_activity_agent_get_sync (GCancellable *cancellable, GError **error);
void net_activity_agent_get (GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
NetActivityAgent *net_activity_agent_get_finish (GAsyncResult *result, GError **error);

NetActivityDownloader *net_activity_downloader_get_sync (GCancellable *cancellable, GError **error);
void net_activity_downloader_get (GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data);
NetActivityDownloader *net_activity_downloader_get_finish (GAsyncResult *result, GError **error);

void net_activity_downloader_fetch_image_bytes (NetActivityDownloader *downloader, const gchar *url, GVariant *options,
                                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                                gpointer user_data);
GBytes *net_activity_downloader_fetch_image_bytes_finish (NetActivityDownloader *downloader, GAsyncResult *result,
                                                          GVariant **out_info, GError **error);
GBytes *net_activity_downloader_fetch_image_bytes_sync (NetActivityDownloader *downloader, const gchar *url,
                                                        GVariant *options, GVariant **out_info,
                                                        GCancellable *cancellable, GError **error);

void net_activity_downloader_fetch_pixels_bytes (NetActivityDownloader *downloader, const gchar *url, GVariant *options,
                                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                                 gpointer user_data);
GBytes *net_activity_downloader_fetch_pixels_bytes_finish (NetActivityDownloader *downloader, GAsyncResult *result,
                                                           GVariant **out_info, GError **error);
GBytes *net_activity_downloader_fetch_pixels_bytes_sync (NetActivityDownloader *downloader, const gchar *url,
                                                         GVariant *options, GVariant **out_info,
                                                         GCancellable *cancellable, GError **error);

#define NET_ACTIVITY_TYPE_LEASE (net_activity_lease_get_type ())
G_DECLARE_FINAL_TYPE (NetActivityLease, net_activity_lease, NET_ACTIVITY, LEASE, GObject)

NetActivityLease *net_activity_lease_begin_sync (NetActivityAgent *agent, const gchar *reason,
                                                 GCancellable *cancellable, GError **error);
void net_activity_lease_begin (NetActivityAgent *agent, const gchar *reason, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data);
NetActivityLease *net_activity_lease_begin_finish (GAsyncResult *result, GError **error);
void net_activity_lease_end (NetActivityLease *lease);
gboolean net_activity_lease_is_held (NetActivityLease *lease);

G_END_DECLS

#endif
