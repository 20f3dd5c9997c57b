# SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
"""Private bus, real agent and helpers for the integration tests.

Everything runs on a dbus-daemon of our own (the stock session configuration, but that it never
activates an installed netactivity), never the user's bus.
"""
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import struct
import tempfile
import zlib
import time

import dbus

import contract

BIN = os.environ.get("NETACTIVITY_BIN", ".build/debug")
NAME = contract.BUS_NAME
PATH = contract.OBJECT_PATH
IFACE = contract.Activity.INTERFACE
PROPS = contract.PROPERTIES
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The first lines of a `python3 -c` child: the contract's names, as in the tests themselves.
CHILD_PRELUDE = "import sys\nsys.path.insert(0, %r)\nimport contract\n" % os.path.dirname(os.path.abspath(__file__))


# `run.py --bus broker` runs the suite on dbus-broker (Fedora's and Arch's session bus) instead of
# dbus-daemon: every PrivateBus with the default configuration is then a dbus-broker.
BROKER = os.environ.get("NETACTIVITY_TEST_BUS") == "broker"

# libnetactivity-1's file, as the Makefile names it (print-lib-file): the soname, then the version.
LIB_FILE = subprocess.run(["make", "-s", "--no-print-directory", "-C", ROOT, "print-lib-file"], capture_output=True,
                          text=True, check=True).stdout.strip()


def listening(path):
    """Whether a Unix stream socket at `path` accepts connections."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def broker_usable():
    return os.geteuid() == 0 and shutil.which("dbus-broker-launch") is not None and shutil.which("systemd-socket-activate") is not None


STOCK_SESSION_CONFIG = "/usr/share/dbus-1/session.conf"


def session_service_files(env=None):
    """{file name: path} of the service files a session bus started in `env` would read, the
    first of a name winning, as dbus-daemon(1) lists its standard session directories."""
    env = os.environ if env is None else env
    home = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME", "/root"), ".local/share")
    dirs = [home] + (env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":") + ["/usr/share"]
    found = {}
    for d in dirs:
        folder = os.path.join(d, "dbus-1", "services")
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".service"):
                found.setdefault(name, os.path.join(folder, name))
    return found


def activates(path, name):
    try:
        with open(path, errors="replace") as f:
            return any(line.strip() == "Name=" + name for line in f)
    except OSError:
        return False


def isolated_services(folder, env=None, own=None):
    """Fills `folder` with links to the desktop's session services (dconf, GLib's PAC runner, what
    GTK asks for), but for any that activates the agent's name: a netactivity installed on this
    machine (the package, or `make install` into /usr/local or ~/.local) must never be started on
    a test's bus, where it would take the name the test's own agent is about to own, or answer
    where a test expects no agent. `own`: a folder of the test's own (an install prefix it made),
    whose files are kept. Returns `folder`."""
    os.makedirs(folder, exist_ok=True)
    for name, path in session_service_files(env).items():
        ours = name == NAME + ".service" or activates(path, NAME)
        if not ours or (own is not None and path.startswith(own.rstrip("/") + "/")):
            os.symlink(path, os.path.join(folder, name))
    return folder


def isolated_session_config(text, servicedir):
    """A session bus's configuration `text` with its standard service directories replaced by
    `servicedir` (isolated_services), and its relative includes made absolute (the copy is
    read from elsewhere)."""
    replaced = re.sub(r"<standard_session_servicedirs\s*/>", "<servicedir>%s</servicedir>" % servicedir, text)
    assert replaced != text, "no <standard_session_servicedirs/> to replace"
    return re.sub(r"<includedir>(?!/)", "<includedir>%s/" % os.path.dirname(STOCK_SESSION_CONFIG), replaced)


class PrivateBus:
    def __init__(self, config_file=None, env=None):
        """`env`: the daemon's environment (the services it activates inherit it); by default
        ours without our bus addresses. Without `config_file`, the stock session configuration
        but for the services it may activate (isolated_services)."""
        self.dir = tempfile.mkdtemp(prefix="netactivity-test-")
        self.cache_home = os.path.join(self.dir, "cache")
        self.config_home = os.path.join(self.dir, "config")
        self.system_config = os.path.join(self.dir, "xdg")
        self.runtime = os.path.join(self.dir, "runtime")
        os.mkdir(self.runtime, 0o700)
        self.daemon_env = clean_env() if env is None else env
        self.default_config = config_file is None
        if config_file is None:
            with open(STOCK_SESSION_CONFIG) as f:
                stock = f.read()
            config_file = os.path.join(self.dir, "session.conf")
            with open(config_file, "w") as f:
                f.write(isolated_session_config(stock, isolated_services(os.path.join(self.dir, "services"), self.daemon_env)))
            self.bus_args = ["--config-file=" + config_file, "--nopidfile", "--address=unix:path=%s/bus" % self.dir]
        else:
            self.bus_args = ["--config-file=" + config_file]
        self.config_file = config_file
        self.broker = BROKER and self.default_config
        self.start()

    def start(self):
        if self.broker:
            # socket activation: the bus answers once the launcher listens on the socket (the file
            # is there from bind(), a moment before listen(): a connection then is refused)
            self.proc = subprocess.Popen([os.path.join(os.path.dirname(os.path.abspath(__file__)), "broker.sh"), self.dir,
                                          self.config_file],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.daemon_env,
                                         start_new_session=True)
            self.address = "unix:path=%s/bus" % self.dir
            wait_until(lambda: listening("%s/bus" % self.dir), what="dbus-broker's socket")
            return
        self.proc = subprocess.Popen(
            ["dbus-daemon", *self.bus_args, "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.daemon_env)
        self.address = self.proc.stdout.readline().decode().strip()
        assert self.address, "dbus-daemon did not start"

    def _end(self):
        if self.broker:
            os.killpg(self.proc.pid, signal.SIGTERM)
        else:
            self.proc.terminate()
        self.proc.wait(5)

    def env(self, **extra):
        e = clean_env()
        e["DBUS_SESSION_BUS_ADDRESS"] = self.address
        # Agents on this bus keep their disk cache here, never in the user's ~/.cache.
        e["XDG_CACHE_HOME"] = self.cache_home
        # ... and read their settings file from here, never the user's ~/.config, and the system's
        # from here, never /etc/xdg.
        e["XDG_CONFIG_HOME"] = self.config_home
        e["XDG_CONFIG_DIRS"] = self.system_config
        # ... and their runtime files (dconf's, where GIO reads the desktop's proxy settings) here.
        e["XDG_RUNTIME_DIR"] = self.runtime
        e.update(extra)
        return e

    def restart(self):
        """A new bus at the same socket (a new guid): what a session bus's restart looks like."""
        assert self.default_config, "only the default bus restarts"
        self._end()
        if os.path.exists("%s/bus" % self.dir):  # dbus-daemon removes it on a clean exit
            os.unlink("%s/bus" % self.dir)
        self.start()

    def stop(self):
        self._end()
        shutil.rmtree(self.dir, ignore_errors=True)


# The caller's proxy: the tests' servers are on loopback, and the proxy tests name their own.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


def clean_env():
    """The environment without the caller's own bus addresses and proxy."""
    return {k: v for k, v in os.environ.items() if not k.startswith("DBUS_") and k not in PROXY_VARIABLES}


# The agents' logs, read by tests after the agent stopped (failure messages quote them), removed
# when the test run ends: the suite leaves nothing behind in /tmp.
_LOGS = []


@atexit.register
def _remove_logs():
    for path in _LOGS:
        try:
            os.unlink(path)
        except OSError:
            pass


class Agent:
    """netactivityd on the given bus. `env` adds to the bus's environment; `preexec` runs in the
    child before exec (resource limits)."""

    def __init__(self, bus, *args, wait=True, env=None, preexec=None):
        self.bus = bus
        self.log = tempfile.NamedTemporaryFile(prefix="netactivityd-", suffix=".log", delete=False)
        _LOGS.append(self.log.name)
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "netactivityd"), "--log-level", "debug", *args],
            env=bus.env(**(env or {})), stdout=subprocess.PIPE, stderr=self.log, preexec_fn=preexec)
        if wait:
            wait_for_name(bus, NAME, self.proc)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        # An exit takes milliseconds here; the bound leaves room for a disk kept busy beside the
        # suite (the agent's last cache writes; a Debian root being unpacked), and a stuck agent
        # still fails here, with where its threads wait.
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            where = self.stacks()
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"netactivityd did not exit within {timeout} s of signal {sig}; where its threads "
                                 f"were:\n{where}\n--- the end of its log:\n{self.logtext()[-4000:]}") from None

    def stacks(self):
        """Where each thread of a stuck agent waits: gdb's backtraces when gdb is there, else each
        thread's name, state and kernel wait channel."""
        pid = self.proc.pid
        if shutil.which("gdb"):
            out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                                 capture_output=True, text=True, timeout=60).stdout
            return "\n".join(line for line in out.splitlines() if line.startswith(("#", "Thread")))
        lines = []
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    wchan = f.read()
            except OSError:
                continue
            lines.append(f"{name} [{tid}] {state} {wchan}")
        return "\n".join(lines)

    def alive(self):
        return self.proc.poll() is None

    def logtext(self):
        with open(self.log.name) as f:
            return f.read()


def connect(bus):
    return dbus.bus.BusConnection(bus.address)


def task_states(conn):
    """{task path: (State, Error)} of every task object the agent shows."""
    objects = conn.get_object(NAME, PATH, introspect=False).GetManagedObjects(
        dbus_interface="org.freedesktop.DBus.ObjectManager")
    task = IFACE + ".Task"
    return {str(p): (str(i[task]["State"]), str(i[task]["Error"])) for p, i in objects.items() if task in i}


def nothing_held(conn):
    """True when the agent holds nothing for anyone: no activity, no client, the indicator off, no
    download running or queued, and no task running or suspended."""
    obj = conn.get_object(NAME, PATH, introspect=False)
    p = obj.GetAll(IFACE, dbus_interface=PROPS)
    d = obj.GetAll(IFACE + ".Downloader", dbus_interface=PROPS)
    return int(p["ActivityCount"]) == 0 and len(p["Clients"]) == 0 and not bool(p["Visible"]) and \
        int(d["ActiveDownloads"]) == 0 and int(d["QueuedDownloads"]) == 0 and \
        all(state == contract.Task.STATE_COMPLETED for state, _ in task_states(conn).values())


def fd_kinds(pid):
    """A process's open fds by kind: pipe, socket, memfd, anon_inode, file."""
    kinds = {}
    folder = "/proc/%d/fd" % pid
    for name in os.listdir(folder):
        try:
            target = os.readlink(os.path.join(folder, name))
        except OSError:
            continue
        kind = target.split(":")[0] if ":" in target and not target.startswith("/") else \
            ("memfd" if target.startswith("/memfd:") else "file")
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def status_kib(pid, field):
    """A size from /proc/PID/status (VmRSS, RssAnon, ...), in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_for_name(bus, name, proc=None, timeout=10):
    conn = connect(bus)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if conn.name_has_owner(name):
                return
            if proc is not None and proc.poll() is not None:
                raise AssertionError("process exited with %s before owning %s" % (proc.returncode, name))
            time.sleep(0.02)
        raise AssertionError("%s did not appear" % name)
    finally:
        conn.close()


def timed(cls):
    """Marks a test class that bounds how long the agent takes to answer (a Peer.Ping prober, a
    deadline in milliseconds): make test runs these alone, after its other parts, which run at
    once and would otherwise be part of what they measure (`run.py --timed only|skip`)."""
    cls.timed = True
    return cls


def wait_until(predicate, timeout=5.0, interval=0.01, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + (what() if callable(what) else what))


def run(cmd, bus, check=False, timeout=20, **kw):
    return subprocess.run(cmd, env=bus.env(), capture_output=True, text=True, timeout=timeout, check=check, **kw)


def busctl(bus, *args, **kw):
    return run(["busctl", "--address=" + bus.address, *args], bus, **kw)


def gdbus(bus, *args, **kw):
    return run(["gdbus", *args[:1], "--address", bus.address, *args[1:]], bus, **kw)


def cli(bus, *args, **kw):
    return run([os.path.join(BIN, "netactivity"), *args], bus, **kw)


def props(conn):
    obj = conn.get_object(NAME, PATH)
    return obj.GetAll(IFACE, dbus_interface=PROPS)


def prop(conn, name):
    return conn.get_object(NAME, PATH).Get(IFACE, name, dbus_interface=PROPS)


def iface(conn):
    return dbus.Interface(conn.get_object(NAME, PATH), IFACE)


def dbus_send(bus, *args, **kw):
    return run(["dbus-send", "--bus=" + bus.address, *args], bus, **kw)


def png(width=4, height=3, extra=0):
    """A real PNG (RGBA, one colour), optionally with a private chunk to make it bigger."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + b"\x10\x20\x30\xff" * width for _ in range(height))
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows))
    if extra:
        body += chunk(b"prVt", os.urandom(extra))
    return b"\x89PNG\r\n\x1a\n" + body + chunk(b"IEND", b"")


def decoded_charge(pixel_bytes, capacity=100 << 20):
    """What the decoded tier charges an entry of `pixel_bytes` (DecodedMemoryUsage counts it): its
    bytes in whole pages, and at least the capacity's share of one of the descriptors the tier may
    keep (an eighth of the agent's open-file limit, which it raises to this process's hard limit,
    between 16 and 4,096)."""
    import resource
    entries = max(16, min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1] // 8))
    return max((pixel_bytes + 4095) // 4096 * 4096, capacity // entries)


def image_adder(bus, data, names, refusals_ok=False):
    """The argv of a process of its own (another app, to the agent) that adds `data` with AddImage
    under each of `names`; with `refusals_ok`, a D-Bus error skips that name instead of failing."""
    code = CHILD_PRELUDE + """
import sys, dbus
bus = dbus.bus.BusConnection(sys.argv[1])
cache = dbus.Interface(bus.get_object(contract.BUS_NAME, contract.OBJECT_PATH, introspect=False),
                       contract.ImageCache.INTERFACE)
data = dbus.ByteArray(bytes.fromhex(sys.argv[2]))
for name in sys.argv[4:]:
    try:
        cache.AddImage(name, data)
    except dbus.exceptions.DBusException:
        if sys.argv[3] != "1":
            raise
"""
    return ["/usr/bin/python3", "-c", code, bus.address, bytes(data).hex(), "1" if refusals_ok else "0", *names]


def descendants_named(pid, prefix):
    """The processes below `pid` (children, grandchildren...) whose name starts with `prefix`:
    the agent's decoders, directly or inside bubblewrap."""
    children, names = {}, {}
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            with open("/proc/%s/comm" % d) as f:
                names[int(d)] = f.read().strip()
        except (OSError, ValueError, IndexError):
            continue
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        if names.get(p, "").startswith(prefix):
            found.append(p)
        todo += children.get(p, [])
    return found
