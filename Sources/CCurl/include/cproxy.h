// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
#ifndef NETACTIVITY_CPROXY_SHIM_H
#define NETACTIVITY_CPROXY_SHIM_H

/* The desktop's proxy resolver: GIO's GProxyResolver, the one GLib's apps ask (glib-networking
   reads GNOME's settings in-process, asks the session's PAC runner in automatic mode, and goes
   through libproxy elsewhere: the environment, KDE's settings). GIO is loaded at the first call
   (dlopen), so an agent that never downloads never maps it. Every call blocks (a PAC lookup asks
   another process): call them from a worker thread, never the event loop's. */

/* Loads GIO (`library`, or "libgio-2.0.so.0" when NULL) once. NULL on success (and on every later
   call), else why not: a message that stays valid. */
const char *cproxy_load(const char *library);

/* The proxies for `url`, best first, as URIs ("http://host:port", "socks5://host:port",
   "direct://"), in a NULL-terminated list to give to cproxy_free; NULL when the lookup failed,
   with *error set to why (free it with cproxy_free_string). Settings changed since the last call
   are taken in first. */
char **cproxy_lookup(const char *url, char **error);
void cproxy_free(char **list);
void cproxy_free_string(char *string);

/* The resolver's type name (GProxyResolverGnome, GLibproxyResolver, GDummyProxyResolver…), once loaded. */
const char *cproxy_resolver_name(void);

#endif
