# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Downloads behind a proxy, chosen as the desktop chooses it for its apps: by the agent's
environment (http_proxy, https_proxy, no_proxy), by GNOME's settings (a private dconf on the test's
bus), by a PAC file (GNOME's automatic mode: the session's PAC runner). The proxy is a real one on
loopback (forward_proxy.py); the images' host name is known to the proxy alone, so a download that
succeeds went through it. Also: a proxy that refuses, one that asks for credentials (which are
never shown), one that stalls, and a sandboxed app's reach through a proxy."""
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import dbus
import dbus.lowlevel

import contract
from forward_proxy import ForwardProxy
from harness import BROKER, PROPS, Agent, PrivateBus, cli, connect, png, timed, wait_until
from test_agent import AgentTestCase
from test_downloads import ImageServer
from test_hostile import STALL_MS, Prober
from test_strangers import StrangerTestCase, can_fake_flatpak
from test_untrusted import image_server

NAME, PATH = contract.BUS_NAME, contract.OBJECT_PATH
D = contract.Downloader
# Resolves nowhere but in the proxy: an RFC 6761 .invalid name, which the agent never asks a resolver
# about (and which is only ever sent to the tests' proxy), so the tests send nothing off this machine.
HOST = "images.netactivity.invalid"


def have_desktop_proxy_modules():
    """GIO's GNOME proxy module, dconf, and GNOME's proxy schema."""
    probe = subprocess.run(["gsettings", "list-keys", "org.gnome.system.proxy"], capture_output=True)
    modules = subprocess.run(["pkg-config", "--variable=giomoduledir", "gio-2.0"], capture_output=True, text=True)
    folder = modules.stdout.strip()
    return (probe.returncode == 0 and os.path.exists(os.path.join(folder, "libgiognomeproxy.so"))
            and os.path.exists(os.path.join(folder, "libdconfsettings.so")))


class ProxyTestCase(unittest.TestCase):
    def downloader(self, conn):
        return dbus.Interface(conn.get_object(NAME, PATH, introspect=False), D.INTERFACE)

    def fetch(self, bus, url, conn=None):
        """FetchImage through a real client (the CLI): (exit status, stderr)."""
        out = tempfile.NamedTemporaryFile(delete=False)
        self.addCleanup(os.unlink, out.name)
        r = cli(bus, "fetch", "--reload", "-o", out.name, url, timeout=60)
        return r.returncode, r.stderr

    def proxy_property(self, conn):
        return str(conn.get_object(NAME, PATH, introspect=False).Get(D.INTERFACE, D.Proxy, dbus_interface=PROPS))


class EnvironmentProxyTests(ProxyTestCase):
    """The agent's environment names the proxy, as it does for curl and wget."""

    def start(self, proxy_url, **extra):
        self.http = ImageServer()
        self.bus = PrivateBus()
        self.addCleanup(self.bus.stop)
        self.agent = Agent(self.bus, env={"http_proxy": proxy_url, **extra})
        self.addCleanup(self.agent.stop)
        self.conn = connect(self.bus)
        self.addCleanup(self.conn.close)

    def test_http_proxy_carries_downloads_and_no_proxy_sends_a_host_direct(self):
        proxy = ForwardProxy({HOST: 0})
        self.addCleanup(proxy.stop)
        self.start(proxy.url, no_proxy="127.0.0.1,.example.org")
        proxy.hosts[HOST] = self.http.port
        self.assertEqual(self.proxy_property(self.conn), "", "no request yet")
        status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
        self.assertEqual(status, 0, err)
        self.assertEqual(proxy.seen(), ["GET http://%s/img/a.png" % HOST])
        self.assertEqual(self.http.requests, ["/img/a.png"])
        self.assertEqual(self.proxy_property(self.conn), proxy.url)
        shown = cli(self.bus, "status").stdout
        self.assertIn("proxy:       %s" % proxy.url, shown)
        # no_proxy: straight to the server, and the proxy never hears of it.
        status, err = self.fetch(self.bus, self.http.url("/img/direct.png"))
        self.assertEqual(status, 0, err)
        self.assertEqual(len(proxy.seen()), 1)
        self.assertEqual(self.proxy_property(self.conn), "direct")

    def test_a_proxy_setting_libcurl_would_refuse_fails_without_its_credentials(self):
        secret = "pa55w0rd"
        for setting, why in (("http://school:pa55 w0rd@127.0.0.1:3128", "percent-encoded"),
                             ("http://school:pa55/w0rd@127.0.0.1:3128", "percent-encoded"),
                             ("http://school:%s@127.0.0.1:312888" % secret, "port"),
                             ("gopher://school:%s@127.0.0.1:70" % secret, "scheme")):
            with self.subTest(setting):
                self.start(setting, no_proxy="")
                status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
                self.assertNotEqual(status, 0)
                self.assertIn("cannot be used", err)
                self.assertIn(why, err)
                tasks = cli(self.bus, "tasks", "--json").stdout
                for text, where in ((err, "the error"), (self.proxy_property(self.conn), "Proxy"),
                                    (tasks, "the tasks"), (self.agent.logtext(), "the log")):
                    for part in ("pa55", "w0rd", "school"):
                        self.assertNotIn(part, text, where)
                self.agent.stop()
                self.bus.stop()

    def test_a_redirect_is_routed_as_its_own_url_says(self):
        proxy = ForwardProxy({HOST: 0})
        self.addCleanup(proxy.stop)
        self.start(proxy.url, no_proxy="127.0.0.1")
        proxy.hosts[HOST] = self.http.port
        # Through the proxy to /redirect, whose Location (/img/target.png) stays on the proxied host.
        status, err = self.fetch(self.bus, "http://%s/redirect" % HOST)
        self.assertEqual(status, 0, err)
        self.assertEqual(proxy.seen(), ["GET http://%s/redirect" % HOST, "GET http://%s/img/target.png" % HOST])
        # A loop ends at the redirect limit, named for the URL asked for.
        status, err = self.fetch(self.bus, "http://%s/loop" % HOST)
        self.assertEqual(status, 1)
        self.assertIn("http://%s/loop: too many redirects" % HOST, err)
        self.assertIn(contract.Error.HTTP, err)

    def test_credentials_get_through_and_are_never_shown(self):
        proxy = ForwardProxy({HOST: 0}, mode="auth", credentials="school:s3cret-word")
        self.addCleanup(proxy.stop)
        self.start("http://school:s3cret-word@127.0.0.1:%d" % proxy.port)
        proxy.hosts[HOST] = self.http.port
        status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
        self.assertEqual(status, 0, err)
        self.assertEqual(self.proxy_property(self.conn), proxy.url, "no credentials in the property")
        # Wrong ones: the proxy's 407 is a Network error naming the proxy, without them.
        proxy.credentials = "school:another"
        status, err = self.fetch(self.bus, "http://%s/img/b.png" % HOST)
        self.assertEqual(status, 1)
        self.assertIn("the proxy %s asks for credentials" % proxy.url, err)
        self.assertIn(contract.Error.Network, err)
        shown = cli(self.bus, "status", "--json").stdout + cli(self.bus, "status").stdout
        self.agent.stop()
        for where, text in (("stderr", err), ("status", shown), ("log", self.agent.logtext())):
            self.assertNotIn("s3cret", text, where)

    def test_a_proxy_that_refuses_is_a_network_error_naming_it(self):
        unused = socket.socket()
        unused.bind(("127.0.0.1", 0))  # a port of ours that never listens
        self.addCleanup(unused.close)
        closed = "http://127.0.0.1:%d" % unused.getsockname()[1]
        self.start(closed, https_proxy=closed)
        status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
        self.assertEqual(status, 1)
        self.assertIn(contract.Error.Network, err)
        self.assertIn("Couldn't connect to server through the proxy %s" % closed, err)
        # https goes through CONNECT; a proxy that answers it 403 is named, with its answer.
        refusing = ForwardProxy({HOST: self.http.port}, mode="refuse")
        self.addCleanup(refusing.stop)
        self.agent.stop()
        self.agent = Agent(self.bus, env={"https_proxy": refusing.url})
        status, err = self.fetch(self.bus, "https://%s/img/a.png" % HOST)
        self.assertEqual(status, 1)
        self.assertEqual(refusing.seen(), ["CONNECT %s:443" % HOST])
        self.assertIn("through the proxy %s" % refusing.url, err)
        self.assertIn("403", err)

    def test_https_goes_through_a_connect_tunnel_to_the_server(self):
        # A TLS server the agent does not trust: its certificate error can only come from the far
        # end of the tunnel, so the tunnel was made.
        folder = tempfile.mkdtemp(prefix="netactivity-tls-")
        self.addCleanup(shutil.rmtree, folder, True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=" + HOST,
                        "-keyout", folder + "/key.pem", "-out", folder + "/cert.pem"], check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder + "/cert.pem", folder + "/key.pem")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.handle_error = lambda request, address: None
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        proxy = ForwardProxy({HOST: server.server_address[1]})
        self.addCleanup(proxy.stop)
        self.start(proxy.url, https_proxy=proxy.url)
        status, err = self.fetch(self.bus, "https://%s/img/a.png" % HOST)
        self.assertEqual(status, 1)
        self.assertEqual(proxy.seen(), ["CONNECT %s:443" % HOST])
        self.assertIn("certificate", err)


@timed
class StallingProxyTests(ProxyTestCase, AgentTestCase):
    """A proxy that takes the request and never answers holds that download only."""

    def setUp(self):
        self.proxy = ForwardProxy({}, mode="stall")
        self.addCleanup(self.proxy.stop)
        self.http = ImageServer()
        self.agent_env = {"http_proxy": self.proxy.url, "no_proxy": "127.0.0.1"}
        super().setUp()

    def test_the_loop_answers_other_downloads_go_on_and_cancel_ends_the_stalled_one(self):
        prober = Prober(self.bus)
        d = self.downloader(self.conn)
        receipt = d.get_dbus_method(D.DownloadImage)("http://%s/img/stalled.png" % HOST,
                                                     dbus.Dictionary({}, signature="sv"))[0]
        wait_until(lambda: self.proxy.seen(), what="the proxy to take the request")
        status, err = self.fetch(self.bus, self.http.url("/img/direct.png"))
        self.assertEqual(status, 0, err)
        report = prober.stop()
        self.assertLess(report["max_ms"], STALL_MS, "the loop never waited on the stalled proxy")
        d.get_dbus_method(D.CancelDownload)(receipt)
        wait_until(lambda: int(self.conn.get_object(NAME, PATH, introspect=False).Get(
            D.INTERFACE, D.ActiveDownloads, dbus_interface=PROPS)) == 0, what="the stalled download to end")


def private_dconf():
    """A folder for dconf's database and its runtime files: the bus's environment (dconf-service
    is activated with it) and the agent's and gsettings' (they read the database) share it."""
    folder = tempfile.mkdtemp(prefix="netactivity-dconf-")
    runtime = os.path.join(folder, "run")
    os.mkdir(runtime, 0o700)
    return folder, {"XDG_CONFIG_HOME": os.path.join(folder, "config"), "XDG_RUNTIME_DIR": runtime,
                    "XDG_CURRENT_DESKTOP": "GNOME"}


@unittest.skipUnless(have_desktop_proxy_modules(), "GIO's GNOME proxy module, dconf or GNOME's schemas are missing")
@unittest.skipIf(BROKER, "dbus-broker starts dconf-service and the PAC runner through systemd, which a private bus lacks")
class GnomeSettingsTests(ProxyTestCase):
    """GNOME's proxy settings in a private dconf, changed with gsettings as GNOME's Settings does."""

    def setUp(self):
        folder, self.desktop = private_dconf()
        self.addCleanup(shutil.rmtree, folder, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}
        env.update(self.desktop)
        self.bus = PrivateBus(env=env)
        self.addCleanup(self.bus.stop)
        self.http = ImageServer()

    def gsettings(self, *args):
        r = subprocess.run(["gsettings", "set", *args], env=self.bus.env(**self.desktop), capture_output=True,
                           text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)

    def agent(self):
        agent = Agent(self.bus, env=self.desktop)
        self.addCleanup(agent.stop)
        conn = connect(self.bus)
        self.addCleanup(conn.close)
        return agent, conn

    def test_manual_mode_its_ignore_hosts_and_changes_are_followed(self):
        first = ForwardProxy({HOST: self.http.port})
        second = ForwardProxy({HOST: self.http.port})
        for p in (first, second):
            self.addCleanup(p.stop)
        self.gsettings("org.gnome.system.proxy.http", "host", "127.0.0.1")
        self.gsettings("org.gnome.system.proxy.http", "port", str(first.port))
        self.gsettings("org.gnome.system.proxy", "ignore-hosts", "['localhost', '127.0.0.0/8']")
        self.gsettings("org.gnome.system.proxy", "mode", "manual")
        agent, conn = self.agent()
        status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
        self.assertEqual(status, 0, err)
        self.assertEqual(first.seen(), ["GET http://%s/img/a.png" % HOST])
        self.assertEqual(self.proxy_property(conn), first.url)
        self.assertIn("GProxyResolverGnome", agent.logtext())
        # ignore-hosts: straight to the server.
        status, err = self.fetch(self.bus, self.http.url("/img/direct.png"))
        self.assertEqual(status, 0, err)
        self.assertEqual(len(first.seen()), 1)
        # Settings changed: the next download takes the new proxy (well within the answers' lifetime).
        self.gsettings("org.gnome.system.proxy.http", "port", str(second.port))
        wait_until(lambda: self.fetch(self.bus, "http://%s/img/b.png" % HOST)[0] == 0 and second.seen(),
                   timeout=10, what="the new proxy to be used")
        self.assertEqual(second.seen()[-1], "GET http://%s/img/b.png" % HOST)
        # (Mode none is not tried: the one host it would send direct here is the proxy's .invalid
        # name, which this machine would then ask its DNS server about.)

    def test_a_pac_file_chooses_the_proxy_per_host(self):
        proxy = ForwardProxy({HOST: self.http.port})
        self.addCleanup(proxy.stop)
        pac = ("function FindProxyForURL(url, host) {\n"
               "  if (host == \"%s\") return \"PROXY 127.0.0.1:%d\";\n"
               "  return \"DIRECT\";\n}\n" % (HOST, proxy.port))
        folder = tempfile.mkdtemp(prefix="netactivity-pac-")
        self.addCleanup(shutil.rmtree, folder, True)
        with open(os.path.join(folder, "proxy.pac"), "w") as f:
            f.write(pac)
        self.gsettings("org.gnome.system.proxy", "autoconfig-url", "file://%s/proxy.pac" % folder)
        self.gsettings("org.gnome.system.proxy", "mode", "auto")
        agent, conn = self.agent()
        status, err = self.fetch(self.bus, "http://%s/img/a.png" % HOST)
        self.assertEqual(status, 0, err + agent.logtext()[-2000:])
        self.assertEqual(proxy.seen(), ["GET http://%s/img/a.png" % HOST])
        status, err = self.fetch(self.bus, self.http.url("/img/direct.png"))
        self.assertEqual(status, 0, err)
        self.assertEqual(len(proxy.seen()), 1, "DIRECT for every other host")
        self.assertEqual(self.proxy_property(conn), "direct")

    def test_only_dconfs_own_service_makes_the_agent_ask_again(self):
        from test_fetch import BusMonitor
        proxy = ForwardProxy({HOST: self.http.port})
        self.addCleanup(proxy.stop)
        folder = tempfile.mkdtemp(prefix="netactivity-pac-")
        self.addCleanup(shutil.rmtree, folder, True)
        for name in ("proxy.pac", "again.pac"):
            with open(os.path.join(folder, name), "w") as f:
                f.write("function FindProxyForURL(url, host) { return \"PROXY 127.0.0.1:%d\"; }\n" % proxy.port)
        self.gsettings("org.gnome.system.proxy", "autoconfig-url", "file://%s/proxy.pac" % folder)
        self.gsettings("org.gnome.system.proxy", "mode", "auto")
        agent, conn = self.agent()
        monitor = BusMonitor(self.bus)
        self.addCleanup(monitor.close)
        monitor.mark(conn)

        def lookups():
            """The PAC runner's Lookup calls so far (GIO asks it for every answer the agent wants)."""
            with monitor.lock:
                return len([f for f in monitor.lines if f[0] == "mc" and f[-2:] == ["org.gtk.GLib.PACRunner", "Lookup"]])
        url = "http://%s/img/a.png" % HOST
        status, err = self.fetch(self.bus, url)
        self.assertEqual(status, 0, err)
        monitor.mark(conn)
        asked = lookups()
        self.assertGreaterEqual(asked, 1)
        status, err = self.fetch(self.bus, url)
        self.assertEqual(status, 0, err)
        monitor.mark(conn)
        self.assertEqual(lookups(), asked, "the second download takes the answer the first got")
        # Notify from a client that is not dconf's service, broadcast and sent to the agent alone.
        forger = connect(self.bus)
        self.addCleanup(forger.close)
        for destination in (None, conn.get_name_owner(NAME)):
            signal = dbus.lowlevel.SignalMessage("/ca/desrt/dconf/Writer/user", "ca.desrt.dconf.Writer", "Notify")
            signal.append("/system/proxy/", dbus.Array([""], signature="s"), "forged", signature="sass")
            if destination:
                signal.set_destination(destination)
            forger.send_message(signal)
        # The agent has handled both once it answers the forger's call after them (one
        # connection's messages reach it in order, and its loop handles them in order).
        self.proxy_property(forger)
        status, err = self.fetch(self.bus, url)
        self.assertEqual(status, 0, err)
        monitor.mark(conn)
        self.assertEqual(lookups(), asked, "a forged dconf Notify made the agent ask the resolver again")
        # dconf's own Notify (a real write) does.
        self.gsettings("org.gnome.system.proxy", "autoconfig-url", "file://%s/again.pac" % folder)
        wait_until(lambda: self.fetch(self.bus, url)[0] == 0 and monitor.mark(conn) and lookups() > asked,
                   timeout=10, what="a lookup after dconf's own Notify")


@unittest.skipUnless(can_fake_flatpak(), "unshare -rm (user namespaces) is not available")
class SandboxedThroughProxyTests(ProxyTestCase, StrangerTestCase):
    """A sandboxed app's download may go through the desktop's proxy (on loopback here: the
    administrator's choice), but not to an address of this machine or its networks that the
    proxy would reach for it: the URL's host is checked as this machine resolves it."""

    def setUp(self):
        self.http = image_server()
        self.addCleanup(self.http.stop)
        self.proxy = ForwardProxy({HOST: self.http.port, "localhost": self.http.port, "127.0.0.1": self.http.port})
        self.addCleanup(self.proxy.stop)
        self.agent_env = {"http_proxy": self.proxy.url}
        super().setUp()

    def test_the_proxy_serves_a_public_name_and_never_this_machines_addresses(self):
        app = self.stranger(flatpak="org.example.Reader")
        data, _ = app("fetch", "http://%s/a.png" % HOST)
        self.assertEqual(bytes.fromhex(data), bytes(png(2, 2)))
        # Refused before any request; and the test's proxy, the only place a request could go,
        # forwards only to this machine's ports it was given: 10.1.2.3 is never connected to.
        for host in ("127.0.0.1", "localhost", "[::1]", "10.1.2.3"):
            with self.subTest(host):
                with self.assertRaises(dbus.exceptions.DBusException) as cm:
                    app("fetch", "http://%s:%d/probe.png" % (host, self.http.port))
                self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
                self.assertIn("public addresses only", cm.exception.get_dbus_message())
                self.assertIn("through the proxy %s" % self.proxy.url, cm.exception.get_dbus_message())
        # Nor by a redirect: each one is checked as the URL asked for is.
        self.proxy.redirects["http://%s/moved.png" % HOST] = "http://localhost:%d/inside.png" % self.http.port
        with self.assertRaises(dbus.exceptions.DBusException) as cm:
            app("fetch", "http://%s/moved.png" % HOST)
        self.assertEqual(cm.exception.get_dbus_name(), contract.DBusError.AccessDenied)
        self.assertEqual(self.proxy.seen(), ["GET http://%s/a.png" % HOST, "GET http://%s/moved.png" % HOST],
                         "only the public name reached the proxy")
        # A host app's download of the same address goes through.
        host = self.downloader(self.conn)
        os.close(host.get_dbus_method(D.FetchImage)("http://127.0.0.1:%d/host.png" % self.http.port,
                                                    dbus.Dictionary({}, signature="sv"), timeout=60)[0].take())
        self.assertEqual(self.proxy.seen()[-1], "GET http://127.0.0.1:%d/host.png" % self.http.port)


class NoResolverTests(ProxyTestCase, AgentTestCase):
    """Without GIO, downloads go straight to their servers, and the log says why."""
    agent_env = {"NETACTIVITY_LIBGIO": "libnetactivity-missing-gio.so.0", "XDG_CURRENT_DESKTOP": "GNOME"}

    def test_downloads_go_direct_and_the_log_says_why(self):
        http = ImageServer()
        status, err = self.fetch(self.bus, http.url("/img/a.png"))
        self.assertEqual(status, 0, err)
        self.assertEqual(self.proxy_property(self.conn), "direct")
        wait_until(lambda: "The desktop's proxy settings need GIO, which could not be loaded" in self.agent.logtext(),
                   what="the log line")
