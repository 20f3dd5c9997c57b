// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/* The sd-bus reference service for `make bench`: the same two methods as service_libdbus.c, from
 * an sd-bus object vtable and sd_bus_process/sd_bus_wait, the fastest C D-Bus library on Debian. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

static int64_t count;

static int increment(sd_bus_message *call, void *unused, sd_bus_error *error)
{
    (void)unused, (void)error;
    count++;
    return sd_bus_reply_method_return(call, "");
}

static int decrement(sd_bus_message *call, void *unused, sd_bus_error *error)
{
    (void)unused, (void)error;
    if (count > 0)
        count--;
    return sd_bus_reply_method_return(call, "");
}

static const sd_bus_vtable vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("IncrementActivityCount", "", "", increment, 0),
    SD_BUS_METHOD("DecrementActivityCount", "", "", decrement, 0),
    SD_BUS_VTABLE_END,
};

int main(void)
{
    sd_bus *bus = NULL;
    int r = sd_bus_open_user(&bus);
    if (r >= 0)
        r = sd_bus_add_object_vtable(bus, NULL, "/org/example/NetActivity", "org.example.NetActivity", vtable, NULL);
    if (r >= 0)
        r = sd_bus_request_name(bus, "org.example.NetActivity", 0);
    while (r >= 0) {
        r = sd_bus_process(bus, NULL);
        if (r == 0)
            r = sd_bus_wait(bus, UINT64_MAX);
    }
    fprintf(stderr, "service_sdbus: %s\n", strerror(-r));
    sd_bus_unref(bus);
    return 1;
}
