// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* The libdbus reference service for `make bench`: org.example.NetActivity's two counting methods
 * (IncrementActivityCount, DecrementActivityCount) at /org/example/NetActivity, answered the way a
 * careful C service on libdbus answers them: one connection, read-write-dispatch, a reply built
 * and sent per call. Anything else gets UnknownMethod. The agent is measured against it. */
#include <dbus/dbus.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const interface = "org.example.NetActivity";
static int64_t count;

static DBusHandlerResult on_message(DBusConnection *bus, DBusMessage *call, void *unused)
{
    (void)unused;
    if (dbus_message_get_type(call) != DBUS_MESSAGE_TYPE_METHOD_CALL)
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *member = dbus_message_get_member(call);
    DBusMessage *reply;
    if (dbus_message_has_interface(call, interface) && strcmp(member, "IncrementActivityCount") == 0) {
        count++;
        reply = dbus_message_new_method_return(call);
    } else if (dbus_message_has_interface(call, interface) && strcmp(member, "DecrementActivityCount") == 0) {
        if (count > 0)
            count--;
        reply = dbus_message_new_method_return(call);
    } else {
        reply = dbus_message_new_error(call, DBUS_ERROR_UNKNOWN_METHOD, "No such method");
    }
    if (reply == NULL)
        return DBUS_HANDLER_RESULT_NEED_MEMORY;
    if (!dbus_message_get_no_reply(call))
        dbus_connection_send(bus, reply, NULL);
    dbus_message_unref(reply);
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(void)
{
    DBusError error = DBUS_ERROR_INIT;
    DBusConnection *bus = dbus_bus_get_private(DBUS_BUS_SESSION, &error);
    if (bus == NULL) {
        fprintf(stderr, "service_libdbus: %s\n", error.message);
        return 1;
    }
    static const DBusObjectPathVTable vtable = {.message_function = on_message};
    if (!dbus_connection_register_object_path(bus, "/org/example/NetActivity", &vtable, NULL)) {
        fprintf(stderr, "service_libdbus: out of memory\n");
        return 1;
    }
    if (dbus_bus_request_name(bus, "org.example.NetActivity", DBUS_NAME_FLAG_DO_NOT_QUEUE, &error)
        != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) {
        fprintf(stderr, "service_libdbus: the name is taken%s%s\n", error.message ? ": " : "",
                error.message ? error.message : "");
        return 1;
    }
    while (dbus_connection_read_write_dispatch(bus, -1)) {
    }
    return 0;
}
