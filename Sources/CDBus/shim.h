// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#ifndef NETACTIVITY_CDBUS_SHIM_H
#define NETACTIVITY_CDBUS_SHIM_H

#include <dbus/dbus.h>
#include <stdint.h>

/* libdbus defines its type codes as `((int) 's')`-style macros, which Swift does not import.
   Re-export them as constants. */
static const int CDBUS_TYPE_INVALID = DBUS_TYPE_INVALID;
static const int CDBUS_TYPE_BYTE = DBUS_TYPE_BYTE;
static const int CDBUS_TYPE_BOOLEAN = DBUS_TYPE_BOOLEAN;
static const int CDBUS_TYPE_INT16 = DBUS_TYPE_INT16;
static const int CDBUS_TYPE_UINT16 = DBUS_TYPE_UINT16;
static const int CDBUS_TYPE_INT32 = DBUS_TYPE_INT32;
static const int CDBUS_TYPE_UINT32 = DBUS_TYPE_UINT32;
static const int CDBUS_TYPE_INT64 = DBUS_TYPE_INT64;
static const int CDBUS_TYPE_UINT64 = DBUS_TYPE_UINT64;
static const int CDBUS_TYPE_DOUBLE = DBUS_TYPE_DOUBLE;
static const int CDBUS_TYPE_STRING = DBUS_TYPE_STRING;
static const int CDBUS_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH;
static const int CDBUS_TYPE_SIGNATURE = DBUS_TYPE_SIGNATURE;
static const int CDBUS_TYPE_UNIX_FD = DBUS_TYPE_UNIX_FD;
static const int CDBUS_TYPE_ARRAY = DBUS_TYPE_ARRAY;
static const int CDBUS_TYPE_VARIANT = DBUS_TYPE_VARIANT;
static const int CDBUS_TYPE_STRUCT = DBUS_TYPE_STRUCT;
static const int CDBUS_TYPE_DICT_ENTRY = DBUS_TYPE_DICT_ENTRY;

static const int CDBUS_MESSAGE_TYPE_INVALID = DBUS_MESSAGE_TYPE_INVALID;
static const int CDBUS_MESSAGE_TYPE_METHOD_CALL = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int CDBUS_MESSAGE_TYPE_METHOD_RETURN = DBUS_MESSAGE_TYPE_METHOD_RETURN;
static const int CDBUS_MESSAGE_TYPE_ERROR = DBUS_MESSAGE_TYPE_ERROR;
static const int CDBUS_MESSAGE_TYPE_SIGNAL = DBUS_MESSAGE_TYPE_SIGNAL;

static const unsigned int CDBUS_WATCH_READABLE = DBUS_WATCH_READABLE;
static const unsigned int CDBUS_WATCH_WRITABLE = DBUS_WATCH_WRITABLE;
static const unsigned int CDBUS_WATCH_ERROR = DBUS_WATCH_ERROR;
static const unsigned int CDBUS_WATCH_HANGUP = DBUS_WATCH_HANGUP;

static const unsigned int CDBUS_NAME_FLAG_ALLOW_REPLACEMENT = DBUS_NAME_FLAG_ALLOW_REPLACEMENT;
static const unsigned int CDBUS_NAME_FLAG_REPLACE_EXISTING = DBUS_NAME_FLAG_REPLACE_EXISTING;
static const unsigned int CDBUS_NAME_FLAG_DO_NOT_QUEUE = DBUS_NAME_FLAG_DO_NOT_QUEUE;
static const int CDBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER = DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER;
static const int CDBUS_REQUEST_NAME_REPLY_IN_QUEUE = DBUS_REQUEST_NAME_REPLY_IN_QUEUE;
static const int CDBUS_REQUEST_NAME_REPLY_EXISTS = DBUS_REQUEST_NAME_REPLY_EXISTS;
static const int CDBUS_REQUEST_NAME_REPLY_ALREADY_OWNER = DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER;

static const int CDBUS_TIMEOUT_USE_DEFAULT = DBUS_TIMEOUT_USE_DEFAULT;
static const int CDBUS_TIMEOUT_INFINITE = DBUS_TIMEOUT_INFINITE;

static const int CDBUS_MAXIMUM_ARRAY_LENGTH = DBUS_MAXIMUM_ARRAY_LENGTH;

/* A zeroed iterator: DBusMessageIter is opaque padding; Swift needs an initial value. */
static inline DBusMessageIter cdbus_iter_init(void) {
    DBusMessageIter it;
    __builtin_memset(&it, 0, sizeof it);
    return it;
}

/* An upper bound on the bytes the arguments at `it` take on the wire, and the longest array among
   them (through structs, variants and dict entries; an array inside an array is shorter than its
   parent). Enough to see, before sending, a message the bus would punish: an array over 64 MiB or
   a message of 128 MiB makes dbus-daemon drop the sender. A few iterator steps per message. */
static inline uint64_t cdbus_args_bound(DBusMessageIter *it, uint64_t *longest_array, int depth) {
    uint64_t total = 0;
    int type;
    while ((type = dbus_message_iter_get_arg_type(it)) != DBUS_TYPE_INVALID) {
        if (type == DBUS_TYPE_ARRAY) {
            /* The length is read from inside the array (libdbus asserts an array reader). */
            DBusMessageIter sub;
            dbus_message_iter_recurse(it, &sub);
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
            uint64_t n = (uint64_t)(uint32_t)dbus_message_iter_get_array_len(&sub);
#pragma clang diagnostic pop
            if (n > *longest_array) *longest_array = n;
            total += n + 8;
        } else if ((type == DBUS_TYPE_STRUCT || type == DBUS_TYPE_VARIANT || type == DBUS_TYPE_DICT_ENTRY) && depth < 64) {
            DBusMessageIter sub;
            dbus_message_iter_recurse(it, &sub);
            total += 8 + cdbus_args_bound(&sub, longest_array, depth + 1);
        } else if (type == DBUS_TYPE_STRING || type == DBUS_TYPE_OBJECT_PATH || type == DBUS_TYPE_SIGNATURE) {
            const char *s = NULL;
            dbus_message_iter_get_basic(it, &s);
            total += (s ? __builtin_strlen(s) : 0) + 8;
        } else {
            total += 8;
        }
        dbus_message_iter_next(it);
    }
    return total;
}

static inline uint64_t cdbus_message_bound(DBusMessage *m, uint64_t *longest_array) {
    DBusMessageIter it;
    *longest_array = 0;
    if (!dbus_message_iter_init(m, &it)) return 0;
    return cdbus_args_bound(&it, longest_array, 0);
}

static const uint64_t CDBUS_MAXIMUM_MESSAGE_LENGTH = DBUS_MAXIMUM_MESSAGE_LENGTH;

#endif
