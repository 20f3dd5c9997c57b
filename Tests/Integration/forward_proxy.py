# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""A forward HTTP proxy on 127.0.0.1 for the tests: GET in absolute form (plain http) and CONNECT
tunnels (https). Only the proxy knows the names in `hosts` (name -> a loopback port): a download
of such a name that succeeds went through it. It records each request line it was sent.

`mode`: "pass" (serve), "refuse" (answer every request 403), "stall" (read the request, never
answer, until stop()), "auth" (answer 407 until the request carries `credentials` in
Proxy-Authorization)."""
import base64
import socket
import threading


class ForwardProxy:
    def __init__(self, hosts, mode="pass", credentials=None):
        self.hosts = hosts
        self.mode = mode
        self.credentials = credentials
        # Absolute URLs the proxy answers itself with a 302 to another.
        self.redirects = {}
        self.lock = threading.Lock()
        self.requests = []
        self.authorizations = []
        self.stopped = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.stopped.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: nothing listens after
        except OSError:
            pass
        self.sock.close()

    def seen(self):
        with self.lock:
            return list(self.requests)

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.stopped.is_set():
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _upstream(self, authority):
        host, _, port = authority.rpartition(":")
        if host not in self.hosts:
            return None
        return socket.create_connection(("127.0.0.1", self.hosts[host]), timeout=10)

    def _serve(self, conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            fields = [line.split(":", 1) for line in lines[1:] if ":" in line]
            auth = next((v.strip() for k, v in fields if k.lower() == "proxy-authorization"), None)
            with self.lock:
                self.requests.append("%s %s" % (method, target))
                self.authorizations.append(auth)
            if self.mode == "stall":
                self.stopped.wait(120)
                return
            if self.mode == "refuse":
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if self.mode == "auth":
                wanted = "Basic " + base64.b64encode(self.credentials.encode()).decode()
                if auth != wanted:
                    conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                 b"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                    return
            if target in self.redirects:
                conn.sendall(("HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                              % self.redirects[target]).encode())
                return
            if method == "CONNECT":
                upstream = self._upstream(target)
                if upstream is None:
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    return
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                self._pipe(conn, upstream)
                return
            # GET http://host:port/path: to the host's server, one request per connection.
            assert target.startswith("http://"), target
            authority, _, path = target[len("http://"):].partition("/")
            if ":" not in authority:
                authority += ":80"
            upstream = self._upstream(authority)
            if upstream is None:
                conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            kept = ["%s:%s" % (k, v) for k, v in fields
                    if k.lower() not in ("connection", "proxy-connection", "proxy-authorization")]
            request = "%s /%s HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n" % (method, path, "\r\n".join(kept))
            with upstream:
                upstream.sendall(request.encode("latin-1") + rest)
                while True:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    conn.sendall(data)

    def _pipe(self, a, b):
        def one_way(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        t = threading.Thread(target=one_way, args=(b, a), daemon=True)
        t.start()
        one_way(a, b)
        t.join(30)
        b.close()
