// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* Private: not installed. The generated proxies (netactivity-generated.c) call these in place of
 * g_dbus_proxy_call_sync(), g_dbus_proxy_call_finish() and their _with_unix_fd_list forms (the
 * Makefile renames the calls as it generates the code), so that every call's error comes out as an
 * app wants it, in every language:
 *
 * - an error the agent sent (%NET_ACTIVITY_ERROR) or a standard one GDBus maps (%G_DBUS_ERROR) has
 *   its message without GDBus's "GDBus.Error:org.example…: " prefix: the domain and code say what
 *   the name said, and g_dbus_error_strip_remote_error() works on no copy a binding makes;
 * - no agent on the bus (ServiceUnknown, NameHasNoOwner) is %NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING,
 *   with a message that says how to start one. */
#ifndef NET_ACTIVITY_CALLS_H
#define NET_ACTIVITY_CALLS_H

#include <gio/gio.h>

G_GNUC_INTERNAL GVariant *_net_activity_proxy_call_sync (GDBusProxy *proxy, const gchar *method_name,
                                                         GVariant *parameters, GDBusCallFlags flags, gint timeout_msec,
                                                         GCancellable *cancellable, GError **error);
G_GNUC_INTERNAL GVariant *_net_activity_proxy_call_finish (GDBusProxy *proxy, GAsyncResult *res, GError **error);
G_GNUC_INTERNAL GVariant *_net_activity_proxy_call_with_unix_fd_list_sync (
    GDBusProxy *proxy, const gchar *method_name, GVariant *parameters, GDBusCallFlags flags, gint timeout_msec,
    GUnixFDList *fd_list, GUnixFDList **out_fd_list, GCancellable *cancellable, GError **error);
G_GNUC_INTERNAL GVariant *_net_activity_proxy_call_with_unix_fd_list_finish (GDBusProxy *proxy,
                                                                            GUnixFDList **out_fd_list,
                                                                            GAsyncResult *res, GError **error);

#endif
