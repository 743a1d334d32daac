#!/usr/bin/env python3
"""Self-test of ferry-fault-proxy (plain python3, standard library only).

    python3 tools/fault-proxy/test_fault_proxy.py path/to/ferry-fault-proxy

Each test starts a fresh proxy in front of an in-test echo server on 127.0.0.1 (port 0), or
in front of several that greet each client with their name (the load-balancing tests), and
drives it through its control port. Every wait has a deadline; the only sleeps are short
polling steps. Exits 0 when every test passes, 1 otherwise.
"""

import concurrent.futures
import faulthandler
import hashlib
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

TIMEOUT = 10.0  # any single wait that should succeed
WHOLE_RUN_LIMIT = 600  # seconds: dump the stacks and exit non-zero past this


def wait_until(predicate, timeout, what, step=0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


class EchoServer:
    """Echoes every byte back; on EOF from the peer it half-closes, then closes. With a
    greeting, it first sends that to each new client, so that a test sees which of several
    servers the proxy routed a connection to."""

    def __init__(self, greeting=b""):
        self.greeting = greeting
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = set()
        self.stopping = False
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def _accept_loop(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            conn.sendall(self.greeting)
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            with self.lock:
                self.conns.discard(conn)
            conn.close()

    def open_count(self):
        with self.lock:
            return len(self.conns)

    def stop(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(TIMEOUT)


class Control:
    """A control connection: one command line out, one reply line back."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = b""

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("control connection closed by the proxy")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace")

    def cmd(self, line):
        self.send_raw(line.encode() + b"\n")
        return self.read_line()

    def ok(self, line):
        reply = self.cmd(line)
        assert reply == "ok" or reply.startswith("ok "), f"{line!r} answered {reply!r}"
        return reply

    def error(self, line):
        reply = self.cmd(line) if isinstance(line, str) else self._raw_cmd(line)
        assert reply.startswith("error "), f"{line!r} answered {reply!r}, want an error"
        return reply

    def _raw_cmd(self, raw):
        self.send_raw(raw + b"\n")
        return self.read_line()

    def stats(self):
        reply = self.ok("stats")
        m = re.fullmatch(r"ok accepted=(\d+) active=(\d+) reset=(\d+) refused=(\d+)", reply)
        assert m, f"stats answered {reply!r}"
        return dict(zip(("accepted", "active", "reset", "refused"), map(int, m.groups())))

    def targets(self):
        """The `targets` reply as one dict per target, in index order."""
        reply = self.ok("targets")
        out = []
        for i, part in enumerate(reply[len("ok "):].split("; ")):
            m = re.fullmatch(r"(\d+) (\S+) (up|down) open=(\d+) routed=(\d+)", part)
            assert m and int(m[1]) == i, f"targets answered {reply!r}"
            out.append({"addr": m[2], "state": m[3], "open": int(m[4]), "routed": int(m[5])})
        return out

    def close(self):
        self.sock.close()


class Proxy:
    """A ferry-fault-proxy process in front of target_port (a port, or a list of ports: one
    --target each). As a context manager it stops the proxy with SIGTERM at the end and checks
    that it exits 0 (a crash fails the test)."""

    def __init__(self, binary, target_port, seed=1, max_fds=None):
        target_ports = target_port if isinstance(target_port, list) else [target_port]
        target_args = [arg for port in target_ports for arg in ("--target", f"127.0.0.1:{port}")]
        self.dir = tempfile.mkdtemp(prefix="fault-proxy-test-")
        self.port_file = os.path.join(self.dir, "port")
        self.ctl_port_file = os.path.join(self.dir, "control-port")
        self.stdout_path = os.path.join(self.dir, "stdout")
        self.stderr_path = os.path.join(self.dir, "stderr")
        self.exit_expected = False
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [binary] + target_args + ["--port-file", self.port_file,
                                          "--control-port-file", self.ctl_port_file,
                                          "--seed", str(seed)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        if max_fds:  # applies from now on: the proxy is only listening yet
            resource.prlimit(self.proc.pid, resource.RLIMIT_NOFILE, (max_fds, max_fds))
        self.port = int(wait_until(lambda: self._read_port(self.port_file), TIMEOUT, "port file"))
        self.ctl_port = int(self._read_port(self.ctl_port_file))
        self._ctl = None

    def _read_port(self, path):
        assert self.proc.poll() is None, f"proxy exited early: {self.proc.returncode}"
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        assert re.fullmatch(r"\d+\n", text), f"{path}: {text!r}"
        return text.strip()

    @property
    def ctl(self):
        if self._ctl is None:
            self._ctl = Control(self.ctl_port)
        return self._ctl

    def alive(self):
        return self.proc.poll() is None

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def wait_fds(self, n):
        """Wait until the proxy has exactly n open file descriptors (no leak)."""
        try:
            wait_until(lambda: self.fd_count() == n, TIMEOUT, f"{n} open fds", step=0.02)
        except AssertionError:
            fd_dir = f"/proc/{self.proc.pid}/fd"
            links = sorted(os.readlink(os.path.join(fd_dir, f)) for f in os.listdir(fd_dir))
            raise AssertionError(f"proxy has {len(links)} fds, want {n}: {links}")

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def wait_active(self, n):
        wait_until(lambda: self.ctl.stats()["active"] == n, TIMEOUT, f"active={n}", step=0.02)

    def signal_and_wait(self, sig):
        self.proc.send_signal(sig)
        rc = self.proc.wait(TIMEOUT)
        self.exit_expected = True
        return rc

    def stderr_text(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if self._ctl:
                self._ctl.close()
            if exc_type is not None:
                print("---- proxy stderr (last 40 lines) ----")
                print("\n".join(self.stderr_text().splitlines()[-40:]))
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    rc = self.proc.wait(TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(TIMEOUT)
                    raise AssertionError("proxy did not exit on SIGTERM")
                assert rc == 0 or exc_type is not None, f"proxy exited {rc} on SIGTERM"
            elif not self.exit_expected and exc_type is None:
                raise AssertionError(f"proxy died during the test: {self.proc.returncode}")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False


# ---- client helpers ----

def connect(port, timeout=TIMEOUT):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return data


def echo_ok(s, payload=b"ping"):
    s.sendall(payload)
    got = recv_exact(s, len(payload))
    assert got == payload, f"echo {got!r} != {payload!r}"


def expect_silence(s, seconds):
    """Nothing arrives and the connection stays open for `seconds`."""
    s.settimeout(seconds)
    try:
        data = s.recv(65536)
    except socket.timeout:
        return
    except OSError as e:
        raise AssertionError(f"connection failed instead of staying silent: {e!r}")
    finally:
        s.settimeout(TIMEOUT)
    raise AssertionError(f"expected silence, got {'EOF' if not data else repr(data[:40])}")


def expect_closed(s, timeout=TIMEOUT):
    """The peer resets or closes the connection (no data first)."""
    s.settimeout(timeout)
    try:
        data = s.recv(65536)
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return "reset"
    except socket.timeout:
        raise AssertionError("connection still open")
    assert data == b"", f"expected EOF or reset, got {data[:40]!r}"
    return "eof"


class Upstreams:
    """Named echo servers, the nodes behind a load-balancing proxy: each greets a new client
    with its name and a newline. Stopped at the end of the `with` block."""

    def __init__(self, *names):
        self.servers = [EchoServer(greeting=name.encode() + b"\n") for name in names]

    def __enter__(self):
        return self.servers

    def __exit__(self, *exc):
        for server in self.servers:
            server.stop()
        return False


def routed_to(s):
    """The name of the server a new proxied connection reached (its greeting)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            raise AssertionError(f"EOF before the greeting, after {line!r}")
        line += chunk
    return line[:-1].decode()


def connect_routed(port):
    """A new connection through the proxy, and the name of the server it reached."""
    s = connect(port)
    name = routed_to(s)
    echo_ok(s)
    return s, name


def transfer(port, payload, timeout=60.0):
    """Send payload, half-close, read the echo until EOF; check size and SHA-256."""
    s = connect(port, timeout=timeout)
    sent_error = []

    def sender():
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            sent_error.append(e)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    h = hashlib.sha256()
    count = 0
    while True:
        chunk = s.recv(1 << 18)
        if not chunk:
            break
        h.update(chunk)
        count += len(chunk)
    t.join(timeout)
    s.close()
    assert not t.is_alive(), "sender stuck"
    assert not sent_error, f"send failed: {sent_error[0]!r}"
    assert count == len(payload), f"echoed {count} bytes of {len(payload)}"
    assert h.digest() == hashlib.sha256(payload).digest(), "echo checksum differs"


# ---- tests ----

def test_startup_output(binary, echo):
    with Proxy(binary, echo.port, seed=42) as p:
        wait_until(lambda: open(p.stdout_path).read().count("\n") >= 3, TIMEOUT, "stdout")
        text = open(p.stdout_path).read()
        assert text == f"proxy port {p.port}\ncontrol port {p.ctl_port}\nseed 42\n", repr(text)
        assert not [f for f in os.listdir(p.dir) if f.endswith(".tmp")], "leftover .tmp file"
        assert p.port != p.ctl_port


def test_bad_command_line(binary, echo):
    too_many_targets = [arg for port in range(1, 18) for arg in ("--target", f"127.0.0.1:{port}")]
    for args in ([], ["--target"], ["--target", "nocolon"], ["--target", "127.0.0.1:1", "--bogus"],
                 ["--target", "127.0.0.1:1", "--seed", "x"],
                 ["--target", "127.0.0.1:1", "--target", "nocolon"],
                 ["--target", "127.0.0.1:99999"], too_many_targets):
        r = subprocess.run([binary] + args, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=TIMEOUT)
        assert r.returncode == 2, f"{args}: exit {r.returncode}"


def test_large_payload_both_directions(binary, echo):
    with Proxy(binary, echo.port) as p:
        payload = random.Random(1).randbytes(8 * 1024 * 1024)
        transfer(p.port, payload)  # client -> target and target -> client, then EOF both ways
        # Several at once, in parallel.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for f in [pool.submit(transfer, p.port, random.Random(i).randbytes(2 << 20))
                      for i in range(4)]:
                f.result()
        p.wait_active(0)


def test_backpressure_bounds_memory(binary, echo):
    """A client that writes without reading fills the kernel buffers and the proxy's bounded
    queues, then stalls; the proxy's memory does not grow with what the client pushes."""
    with Proxy(binary, echo.port) as p:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)  # keep the client's own
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # kernel buffers small
        s.settimeout(TIMEOUT)
        s.connect(("127.0.0.1", p.port))
        echo_ok(s)
        rss_before = p.rss_kib()
        s.setblocking(False)
        block = random.Random(2).randbytes(65536)
        sent_hash, sent, cap = hashlib.sha256(), 0, 96 << 20
        last_progress = time.monotonic()
        while sent < cap and time.monotonic() - last_progress < 0.5:
            try:
                n = s.send(block)
            except BlockingIOError:
                select.select([], [s], [], 0.05)
                continue
            sent_hash.update(block[:n])
            sent += n
            last_progress = time.monotonic()
        grown = p.rss_kib() - rss_before
        print(f"    client pushed {sent >> 10} KiB before stalling; proxy RSS +{grown} KiB")
        assert sent < cap, "the client never stalled: no backpressure"
        assert grown < 16 * 1024, f"proxy RSS grew by {grown} KiB while the client pushed {sent}"
        s.setblocking(True)
        s.settimeout(TIMEOUT)
        got_hash, got = hashlib.sha256(), 0
        while got < sent:
            chunk = s.recv(min(1 << 18, sent - got))
            assert chunk, "EOF while draining"
            got_hash.update(chunk)
            got += len(chunk)
        assert got_hash.digest() == sent_hash.digest(), "data changed under backpressure"
        s.close()


def test_delay(binary, echo):
    with Proxy(binary, echo.port) as p:
        before = connect(p.port)  # an existing connection is delayed too
        echo_ok(before)
        ms = 150
        p.ctl.ok(f"delay {ms}")
        for s in (before, connect(p.port)):
            t0 = time.monotonic()
            echo_ok(s)
            rtt = time.monotonic() - t0
            # Held `ms` on the way to the echo server and `ms` on the way back.
            assert rtt >= 2 * ms / 1000 - 0.005, f"round trip {rtt * 1000:.1f} ms < 2 x {ms} ms"
            s.close()
        p.ctl.ok("delay 20")  # many delayed chunks keep their order
        transfer(p.port, random.Random(3).randbytes(1 << 20))
        p.ctl.ok("pass")
        s = connect(p.port)
        echo_ok(s)
        s.close()


def test_blackhole_then_reset(binary, echo):
    with Proxy(binary, echo.port) as p:
        old = connect(p.port)
        echo_ok(old)
        p.ctl.ok("blackhole")
        old.sendall(b"into the void")
        expect_silence(old, 0.5)
        new = connect(p.port)  # new connections are accepted, then swallowed too
        new.sendall(b"hello?")
        expect_silence(new, 0.3)
        assert p.ctl.ok("reset") == "ok 2"
        for s in (old, new):
            expect_closed(s)
            s.close()
        p.ctl.ok("pass")
        s = connect(p.port)
        echo_ok(s)
        s.close()
        st = p.ctl.stats()
        assert st["reset"] == 2 and st["accepted"] == 3, st


def test_blackhole_then_pass_resumes(binary, echo):
    with Proxy(binary, echo.port) as p:
        # A blackhole that swallowed nothing resumes after `pass`.
        s = connect(p.port)
        echo_ok(s)
        p.ctl.ok("blackhole")
        expect_silence(s, 0.1)
        p.ctl.ok("pass")
        echo_ok(s, b"found")
        # One that swallowed bytes is reset by `pass`: TCP never resumes a stream with a gap,
        # and a client must not read the frames after the gap as if nothing was missing.
        p.ctl.ok("blackhole")
        s.sendall(b"lost")
        expect_silence(s, 0.3)
        before = p.ctl.stats()["reset"]
        p.ctl.ok("pass")
        expect_closed(s)
        assert p.ctl.stats()["reset"] == before + 1
        # A connection closed by its client while blackholed goes away after `pass`.
        s = connect(p.port)
        echo_ok(s)
        p.ctl.ok("blackhole")
        s.close()
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:  # the EOF stays in the hole
            assert p.ctl.stats()["active"] == 1, "a blackhole passes no EOF"
            time.sleep(0.02)
        p.ctl.ok("pass")
        p.wait_active(0)


def test_refuse(binary, echo):
    with Proxy(binary, echo.port) as p:
        old = connect(p.port)
        echo_ok(old)
        p.ctl.ok("refuse")
        for _ in range(3):
            t0 = time.monotonic()
            try:
                s = connect(p.port)
            except OSError:
                continue  # refused at connect: fine too
            expect_closed(s, timeout=2.0)
            assert time.monotonic() - t0 < 2.0
            s.close()
        echo_ok(old)  # existing connections are unaffected
        st = p.ctl.stats()
        assert st == {"accepted": 4, "active": 1, "reset": 0, "refused": 3}, st
        p.ctl.ok("pass")
        s = connect(p.port)
        echo_ok(s)
        s.close()
        old.close()


def test_stats(binary, echo):
    with Proxy(binary, echo.port) as p:
        assert p.ctl.stats() == {"accepted": 0, "active": 0, "reset": 0, "refused": 0}
        socks = [connect(p.port) for _ in range(3)]
        for s in socks:
            echo_ok(s)
        assert p.ctl.stats() == {"accepted": 3, "active": 3, "reset": 0, "refused": 0}
        socks.pop().close()
        p.wait_active(2)
        assert p.ctl.ok("reset") == "ok 2"
        for s in socks:
            expect_closed(s)
            s.close()
        assert p.ctl.ok("reset") == "ok 0"
        assert p.ctl.stats() == {"accepted": 3, "active": 0, "reset": 2, "refused": 0}
        # One --target: one entry, with the same counts.
        assert p.ctl.ok("targets") == f"ok 0 127.0.0.1:{echo.port} up open=0 routed=3"


def test_target_unreachable(binary, echo):
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nobody listens there now
    with Proxy(binary, port) as p:
        try:
            s = connect(p.port)
        except (ConnectionResetError, ConnectionRefusedError):
            pass  # the reset can beat connect() back: fine too
        else:
            expect_closed(s)
            s.close()
        p.wait_active(0)
        assert p.ctl.stats()["accepted"] == 1


def test_chaos_200_connections(binary, echo):
    with Proxy(binary, echo.port, seed=12345) as p:
        p.ctl.stats()
        baseline = p.fd_count()  # with the control connection open
        p.ctl.ok("chaos 100 100 20 50")
        outcomes, lock = {}, threading.Lock()

        def one(i):
            rng = random.Random(i)
            payload = rng.randbytes(rng.randint(100, 50000))
            got, outcome = b"", "echoed"
            try:
                s = connect(p.port, timeout=2.0)
            except OSError:
                outcome = "connect failed"
            else:
                s.settimeout(0.5)
                try:
                    s.sendall(payload)
                    while len(got) < len(payload):
                        chunk = s.recv(65536)
                        if not chunk:
                            outcome = "eof"
                            break
                        got += chunk
                except socket.timeout:
                    outcome = "silent"
                except OSError:
                    outcome = "reset"
                s.close()
            # Faults close or stall a connection; they never corrupt or skip bytes.
            assert payload.startswith(got), f"connection {i}: corrupted stream"
            with lock:
                outcomes[outcome] = outcomes.get(outcome, 0) + 1

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(one, i) for i in range(200)]:
                f.result(timeout=60)
        assert p.alive(), "proxy died under chaos"
        st = p.ctl.stats()
        print(f"    outcomes {outcomes}, stats {st}")
        assert st["accepted"] == 200, st
        assert st["refused"] > 0 and st["reset"] > 0, st
        assert outcomes.get("echoed", 0) > 0, outcomes
        p.ctl.ok("pass")
        s = connect(p.port)
        echo_ok(s)
        s.close()
        p.wait_active(0)  # blackholed connections drain once `pass` lets their EOFs through
        p.wait_fds(baseline)


def test_many_connections_no_fd_leak(binary, echo):
    with Proxy(binary, echo.port) as p:
        p.ctl.stats()
        baseline = p.fd_count()  # with the control connection open

        def one(i):
            s = connect(p.port)
            echo_ok(s, b"x" * (i % 7 + 1) * 100)
            s.close()

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            for f in [pool.submit(one, i) for i in range(400)]:
                f.result(timeout=60)
        p.wait_active(0)
        # Some left open, then reset.
        socks = [connect(p.port) for _ in range(20)]
        for s in socks:
            echo_ok(s)
        assert p.ctl.ok("reset") == "ok 20"
        for s in socks:
            s.close()
        p.wait_active(0)
        p.wait_fds(baseline)
        assert p.ctl.stats()["accepted"] == 420


def test_out_of_fds(binary, echo):
    """Out of file descriptors, the proxy pauses accepting instead of spinning, and recovers."""
    with Proxy(binary, echo.port, max_fds=24) as p:
        p.ctl.stats()
        clients = []
        for _ in range(30):
            try:
                clients.append(connect(p.port))
            except OSError:
                pass
        cpu0, t0 = p.cpu_seconds(), time.monotonic()
        deadline = t0 + 0.5
        while time.monotonic() < deadline:
            assert p.alive()
            time.sleep(0.05)
        cpu = p.cpu_seconds() - cpu0
        assert cpu < 0.25, f"proxy burnt {cpu:.2f}s of CPU in 0.5s while out of fds"
        for s in clients:
            s.close()

        def echo_works():
            try:
                s = connect(p.port, timeout=1.0)
                echo_ok(s)
                s.close()
                return True
            except OSError:
                return False

        wait_until(echo_works, TIMEOUT, "a working connection once fds are free", step=0.05)


def test_bad_control_input(binary, echo):
    with Proxy(binary, echo.port) as p:
        c = p.ctl
        for bad in ["bogus", "delay", "delay abc", "delay -5", "delay 1.5", "delay 99999999999",
                    "chaos 1 2", "chaos 1001 0 0 0", "chaos 0 0 0 x", "pass now", "stats 1",
                    "", "   ", "a b c d e f g h", "PASS"]:
            c.error(bad)
        c.error(b"stats\x00x")
        c.error(b"\xff\xfe\x01")
        c.ok("pass\r")  # CRLF line ends are fine
        # A line over 1 KiB: exactly one error, and the next command is answered normally.
        c.send_raw(b"A" * 5000 + b"\nstats\n")
        assert c.read_line().startswith("error ")
        assert c.read_line().startswith("ok accepted=")
        # Random garbage: one reply per line, the proxy stays up.
        garbage = random.Random(4).randbytes(200000)
        c.send_raw(garbage + b"\nstats\n")
        replies = [c.read_line() for _ in range(garbage.count(b"\n") + 2)]
        assert all(r.startswith("error ") for r in replies[:-1]), replies[:5]
        assert replies[-1].startswith("ok accepted="), replies[-1]
        # A control client that floods commands and never reads does not block forwarding.
        flood = Control(p.ctl_port)
        p.ctl.close()
        p._ctl = None
        flood.sock.setblocking(False)
        lines, pushed = b"stats\n" * 10000, 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                pushed += flood.sock.send(lines)
            except BlockingIOError:
                break
        s = connect(p.port)
        echo_ok(s)
        s.close()
        # A second control client waits until the first one goes away.
        second = Control(p.ctl_port)
        second.send_raw(b"stats\n")
        second.sock.settimeout(0.3)
        try:
            second.read_line()
            raise AssertionError("second control client served while the first was connected")
        except socket.timeout:
            pass
        second.sock.settimeout(TIMEOUT)
        flood.close()
        assert second.read_line().startswith("ok accepted=")
        second.close()
        assert p.alive()
        assert p.ctl.stats()["accepted"] == 1


def test_quit(binary, echo):
    with Proxy(binary, echo.port) as p:
        s = connect(p.port)
        echo_ok(s)
        assert p.ctl.cmd("quit") == "ok"
        assert p.proc.wait(TIMEOUT) == 0
        p.exit_expected = True
        expect_closed(s)
        s.close()


def test_sigterm_and_sigint(binary, echo):
    for sig in (signal.SIGTERM, signal.SIGINT):
        with Proxy(binary, echo.port) as p:
            s = connect(p.port)
            echo_ok(s)
            p.ctl.ok("delay 5000")  # pending timers do not hold up the exit
            s.sendall(b"pending")
            t0 = time.monotonic()
            assert p.signal_and_wait(sig) == 0, f"exit code on {sig.name}"
            assert time.monotonic() - t0 < 2.0
            expect_closed(s)
            s.close()


# ---- several targets: the proxy as a load balancer in front of a cluster ----

def test_round_robin(binary, echo):
    with Upstreams("A", "B") as (a, b), Proxy(binary, [a.port, b.port]) as p:
        assert [t["addr"] for t in p.ctl.targets()] == [f"127.0.0.1:{a.port}",
                                                        f"127.0.0.1:{b.port}"]
        socks, names = [], []
        for _ in range(6):
            s, name = connect_routed(p.port)
            socks.append(s)
            names.append(name)
        assert names == ["A", "B"] * 3, names  # no stickiness: every connection moves on
        counts = [(t["state"], t["open"], t["routed"]) for t in p.ctl.targets()]
        assert counts == [("up", 3, 3)] * 2, counts
        for s in socks:
            s.close()
        p.wait_active(0)
        assert [(t["open"], t["routed"]) for t in p.ctl.targets()] == [(0, 3)] * 2
        assert p.ctl.stats() == {"accepted": 6, "active": 0, "reset": 0, "refused": 0}


def test_target_down_resets_its_connections(binary, echo):
    with Upstreams("A", "B") as (a, b), Proxy(binary, [a.port, b.port]) as p:
        on_a, name_a = connect_routed(p.port)
        on_b, name_b = connect_routed(p.port)
        assert (name_a, name_b) == ("A", "B")
        assert p.ctl.ok("target-down 0") == "ok 1"
        expect_closed(on_a)  # the client sees its node die at once...
        on_a.close()
        wait_until(lambda: a.open_count() == 0, TIMEOUT, "the server side closed too")
        echo_ok(on_b)  # ...and the other node's connections carry on
        socks = [connect_routed(p.port) for _ in range(3)]
        assert [name for _, name in socks] == ["B"] * 3  # new connections skip the down node
        t = p.ctl.targets()
        assert (t[0]["state"], t[0]["open"], t[0]["routed"]) == ("down", 0, 1), t
        assert (t[1]["state"], t[1]["open"], t[1]["routed"]) == ("up", 4, 4), t
        assert p.ctl.stats() == {"accepted": 5, "active": 4, "reset": 1, "refused": 0}
        assert p.ctl.ok("target-down 0") == "ok 0"  # already down: nothing left to reset
        for s, _ in socks:
            s.close()
        on_b.close()


def test_target_up(binary, echo):
    with Upstreams("A", "B") as (a, b), Proxy(binary, [a.port, b.port]) as p:
        p.ctl.ok("target-down 0")
        socks = [connect_routed(p.port) for _ in range(2)]
        assert [name for _, name in socks] == ["B", "B"]
        assert p.ctl.ok("target-up 0") == "ok"
        assert p.ctl.ok("target-up 0") == "ok"  # already up: fine
        assert [t["state"] for t in p.ctl.targets()] == ["up", "up"]
        more = [connect_routed(p.port) for _ in range(4)]
        names = [name for _, name in more]
        assert names in (["A", "B"] * 2, ["B", "A"] * 2), names  # both again, alternating
        for s, _ in socks + more:
            s.close()


def test_target_readdress(binary, echo):
    """A node restarted on another port: `target N ADDR:PORT` re-points slot N."""
    with Upstreams("A", "B", "C") as (a, b, c), Proxy(binary, [a.port, b.port]) as p:
        old, name = connect_routed(p.port)
        assert name == "A"
        assert p.ctl.ok(f"target 0 127.0.0.1:{c.port}") == "ok"
        t = p.ctl.targets()
        assert (t[0]["addr"], t[0]["state"], t[0]["open"]) == (f"127.0.0.1:{c.port}", "up", 1), t
        socks = [connect_routed(p.port) for _ in range(4)]
        assert [name for _, name in socks] == ["B", "C", "B", "C"]
        echo_ok(old)  # an open connection stays with the old address
        # The slot is the node: its connections to the old and the new address go down with it.
        assert p.ctl.ok("target-down 0") == "ok 3"
        expect_closed(old)
        old.close()
        # Bad indices and addresses change nothing.
        for bad in [f"target 2 127.0.0.1:{a.port}", "target 0 nocolon", "target 0 127.0.0.1:",
                    "target 0 127.0.0.1:99999", "target 0", "target x 127.0.0.1:1",
                    "target-down 2", "target-down x", "target-down -1", "target-down",
                    "target-up 2", "target-up 0 1", "targets now"]:
            p.ctl.error(bad)
        t = p.ctl.targets()
        assert [(x["addr"], x["state"]) for x in t] == [(f"127.0.0.1:{c.port}", "down"),
                                                        (f"127.0.0.1:{b.port}", "up")], t
        for s, _ in socks:
            s.close()


def test_all_targets_down_refuses(binary, echo):
    with Upstreams("A", "B") as (a, b), Proxy(binary, [a.port, b.port]) as p:
        socks = [connect_routed(p.port) for _ in range(2)]
        assert p.ctl.ok("target-down 0") == "ok 1"
        assert p.ctl.ok("target-down 1") == "ok 1"
        for s, _ in socks:
            expect_closed(s)
            s.close()
        for _ in range(3):  # closed at once: the clients retry
            t0 = time.monotonic()
            try:
                s = connect(p.port)
            except OSError:
                continue  # refused at connect: fine too
            expect_closed(s, timeout=2.0)
            assert time.monotonic() - t0 < 2.0
            s.close()
        assert p.ctl.stats() == {"accepted": 5, "active": 0, "reset": 2, "refused": 3}
        assert [t["routed"] for t in p.ctl.targets()] == [1, 1]  # refusals go to no target
        p.ctl.ok("target-up 1")
        s, name = connect_routed(p.port)
        assert name == "B"
        s.close()


def test_targets_reply_flood(binary, echo):
    """With 16 targets at the longest IPv6 addresses, a `targets` reply is over 1 KiB, so the
    64 commands of one 512-byte read would overflow the proxy's 64 KiB of unsent replies. A
    control client that sends thousands before reading any still gets every reply, in order,
    and is not dropped."""
    with Proxy(binary, [echo.port] * 16) as p:
        far = "[1111:2222:3333:4444:5555:6666:7777:8888]:65535"  # never connected to here
        for i in range(16):
            p.ctl.ok(f"target {i} {far}")
        count = 3000
        p.ctl.send_raw(b"targets\n" * count + b"stats\n")
        replies = [p.ctl.read_line() for _ in range(count + 1)]
        want = "ok " + "; ".join(f"{i} {far} up open=0 routed=0" for i in range(16))
        assert len(want) > 1024
        assert all(r == want for r in replies[:-1]), replies[0]
        assert replies[-1] == "ok accepted=0 active=0 reset=0 refused=0", replies[-1]
        p.ctl.ok(f"target 0 127.0.0.1:{echo.port}")
        for i in range(1, 16):
            p.ctl.ok(f"target-down {i}")
        s = connect(p.port)
        echo_ok(s)
        s.close()

TESTS = [
    test_startup_output,
    test_bad_command_line,
    test_large_payload_both_directions,
    test_backpressure_bounds_memory,
    test_delay,
    test_blackhole_then_reset,
    test_blackhole_then_pass_resumes,
    test_refuse,
    test_stats,
    test_target_unreachable,
    test_chaos_200_connections,
    test_many_connections_no_fd_leak,
    test_out_of_fds,
    test_bad_control_input,
    test_quit,
    test_sigterm_and_sigint,
    test_round_robin,
    test_target_down_resets_its_connections,
    test_target_up,
    test_target_readdress,
    test_all_targets_down_refuses,
    test_targets_reply_flood,
]


def main():
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} path/to/ferry-fault-proxy", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        print(f"{binary}: not an executable", file=sys.stderr)
        return 2
    faulthandler.dump_traceback_later(WHOLE_RUN_LIMIT, exit=True)
    echo = EchoServer()
    failed = []
    try:
        for test in TESTS:
            t0 = time.monotonic()
            try:
                test(binary, echo)
            except Exception:
                traceback.print_exc()
                failed.append(test.__name__)
                print(f"FAIL {test.__name__}", flush=True)
            else:
                print(f"ok   {test.__name__} ({time.monotonic() - t0:.2f}s)", flush=True)
    finally:
        echo.stop()
    summary = f"{len(TESTS) - len(failed)}/{len(TESTS)} passed"
    print(summary + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
