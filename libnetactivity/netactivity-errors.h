// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* The agent's own errors as a GError domain, generated from the contract (dbus/ XML) by
 * scripts/gen-contract.py (make contract). Do not edit: a test fails when this differs from what
 * the XML makes. A name keeps its number; a new one takes the next. */
#ifndef NET_ACTIVITY_ERRORS_H
#define NET_ACTIVITY_ERRORS_H

#include <gio/gio.h>

G_BEGIN_DECLS

/**
 * NetActivityError:
 * @NET_ACTIVITY_ERROR_LIMITS_EXCEEDED: `org.example.NetActivity.Error.LimitsExceeded`
 * @NET_ACTIVITY_ERROR_TOO_LARGE: `org.example.NetActivity.Error.TooLarge`
 * @NET_ACTIVITY_ERROR_INVALID_URL: `org.example.NetActivity.Error.InvalidURL`
 * @NET_ACTIVITY_ERROR_HTTP: `org.example.NetActivity.Error.HTTP`
 * @NET_ACTIVITY_ERROR_TIMEOUT: `org.example.NetActivity.Error.Timeout`
 * @NET_ACTIVITY_ERROR_NOT_AN_IMAGE: `org.example.NetActivity.Error.NotAnImage`
 * @NET_ACTIVITY_ERROR_NETWORK: `org.example.NetActivity.Error.Network`
 * @NET_ACTIVITY_ERROR_CANCELLED: `org.example.NetActivity.Error.Cancelled`
 * @NET_ACTIVITY_ERROR_OFFLINE: `org.example.NetActivity.Error.Offline`
 * @NET_ACTIVITY_ERROR_NOT_FOUND: `org.example.NetActivity.Error.NotFound`
 * @NET_ACTIVITY_ERROR_DECODE: `org.example.NetActivity.Error.Decode`
 * @NET_ACTIVITY_ERROR_CLIENT_VANISHED: `org.example.NetActivity.Error.ClientVanished`
 * @NET_ACTIVITY_ERROR_NOT_SUPPORTED: `org.example.NetActivity.Error.NotSupported`
 * @NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING: no agent on the session bus: the bus answered
 *   `org.freedesktop.DBus.Error.ServiceUnknown` or `NameHasNoOwner`. The library's own code, never
 *   sent by the agent, numbered apart so that the agent's codes can grow. Wait for the agent (a
 *   proxy's `notify::g-name-owner`) and call again.
 *
 * The agent's own errors (`org.example.NetActivity.Error.*`), in the %NET_ACTIVITY_ERROR domain. The standard
 * D-Bus errors it answers with (`org.freedesktop.DBus.Error.InvalidArgs`, `AccessDenied`...) come
 * in the %G_DBUS_ERROR domain, as GDBus maps them. Either way the message is the agent's own,
 * without GDBus's `GDBus.Error:NAME: ` prefix.
 */
typedef enum {
    NET_ACTIVITY_ERROR_LIMITS_EXCEEDED = 0,
    NET_ACTIVITY_ERROR_TOO_LARGE = 1,
    NET_ACTIVITY_ERROR_INVALID_URL = 2,
    NET_ACTIVITY_ERROR_HTTP = 3,
    NET_ACTIVITY_ERROR_TIMEOUT = 4,
    NET_ACTIVITY_ERROR_NOT_AN_IMAGE = 5,
    NET_ACTIVITY_ERROR_NETWORK = 6,
    NET_ACTIVITY_ERROR_CANCELLED = 7,
    NET_ACTIVITY_ERROR_OFFLINE = 8,
    NET_ACTIVITY_ERROR_NOT_FOUND = 9,
    NET_ACTIVITY_ERROR_DECODE = 10,
    NET_ACTIVITY_ERROR_CLIENT_VANISHED = 11,
    NET_ACTIVITY_ERROR_NOT_SUPPORTED = 12,
    NET_ACTIVITY_ERROR_AGENT_NOT_RUNNING = 1000,
} NetActivityError;

/**
 * NET_ACTIVITY_ERROR:
 *
 * The error domain of #NetActivityError.
 */
#define NET_ACTIVITY_ERROR (net_activity_error_quark ())
GQuark net_activity_error_quark (void);

/* Each number's D-Bus name, for g_dbus_error_register_error_domain(). */
#define NET_ACTIVITY_ERROR_ENTRIES { \
    { NET_ACTIVITY_ERROR_LIMITS_EXCEEDED, "org.example.NetActivity.Error.LimitsExceeded" }, \
    { NET_ACTIVITY_ERROR_TOO_LARGE, "org.example.NetActivity.Error.TooLarge" }, \
    { NET_ACTIVITY_ERROR_INVALID_URL, "org.example.NetActivity.Error.InvalidURL" }, \
    { NET_ACTIVITY_ERROR_HTTP, "org.example.NetActivity.Error.HTTP" }, \
    { NET_ACTIVITY_ERROR_TIMEOUT, "org.example.NetActivity.Error.Timeout" }, \
    { NET_ACTIVITY_ERROR_NOT_AN_IMAGE, "org.example.NetActivity.Error.NotAnImage" }, \
    { NET_ACTIVITY_ERROR_NETWORK, "org.example.NetActivity.Error.Network" }, \
    { NET_ACTIVITY_ERROR_CANCELLED, "org.example.NetActivity.Error.Cancelled" }, \
    { NET_ACTIVITY_ERROR_OFFLINE, "org.example.NetActivity.Error.Offline" }, \
    { NET_ACTIVITY_ERROR_NOT_FOUND, "org.example.NetActivity.Error.NotFound" }, \
    { NET_ACTIVITY_ERROR_DECODE, "org.example.NetActivity.Error.Decode" }, \
    { NET_ACTIVITY_ERROR_CLIENT_VANISHED, "org.example.NetActivity.Error.ClientVanished" }, \
    { NET_ACTIVITY_ERROR_NOT_SUPPORTED, "org.example.NetActivity.Error.NotSupported" }, \
}

G_END_DECLS

#endif
