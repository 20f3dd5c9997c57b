// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* An app written in C against gdbus-codegen bindings made from the installed contract
 * (dbus/org.example.NetActivity.xml): holds a lease and counts, line by line as a test asks.
 * lease ADDRESS; commands on stdin: "inc", "dec", "end" (closes the lease), "quit". Prints "ok"
 * after each, "ready" once the lease is held, or "error: ..." and exits 1. */
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "netactivity-generated.h"

static int fail(GError *error) {
    printf("error: %s\n", error->message);
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv) {
    GError *error = NULL;
    if (argc != 2)
        return 2;
    GDBusConnection *bus = g_dbus_connection_new_for_address_sync(
        argv[1], G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
        NULL, NULL, &error);
    if (!bus)
        return fail(error);
    NetActivityAgent *agent = net_activity_agent_proxy_new_sync(
        bus, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES, "org.example.NetActivity", "/org/example/NetActivity", NULL, &error);
    if (!agent)
        return fail(error);
    /* With org.gtk.GDBus.C.UnixFD the call hands back the fd list: the lease stays ours. */
    GVariant *handle = NULL;
    GUnixFDList *fds = NULL;
    if (!net_activity_agent_call_begin_activity_sync(agent, "C bindings", NULL, &handle, &fds, NULL, &error))
        return fail(error);
    int lease = g_unix_fd_list_get(fds, g_variant_get_handle(handle), &error);
    if (lease < 0)
        return fail(error);
    g_variant_unref(handle);
    g_object_unref(fds);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        gboolean ok = TRUE;
        if (strncmp(line, "inc", 3) == 0)
            ok = net_activity_agent_call_increment_activity_count_sync(agent, NULL, &error);
        else if (strncmp(line, "dec", 3) == 0)
            ok = net_activity_agent_call_decrement_activity_count_sync(agent, NULL, &error);
        else if (strncmp(line, "end", 3) == 0)
            close(lease);
        else
            break;
        if (!ok)
            return fail(error);
        printf("ok\n");
        fflush(stdout);
    }
    g_object_unref(agent);
    g_object_unref(bus);
    return 0;
}
