"""server_util.py -- helpers for the `kiln serve` tests (tests/test_server_*.py).

Starts a real `kiln serve --device cpu --port 0` on a tiny test model, parses
the address it prints once ready, and offers raw HTTP helpers (so malformed
requests can be sent), SSE parsing, /metrics parsing, promtool checks and file
descriptor counting. Environment (set by ctest): KILN_BIN, KILN_SOURCE_DIR,
KILN_BUILD_DIR.

Python packages (openai) come from the venv scripts/setup.sh makes at
$KILN_SOURCE_DIR/.venv: tests re-run themselves under it. Where setup.sh ran
(its marker file exists) or $CI is set, a missing dependency is a failure;
elsewhere the test skips with a message (exit 77).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ.get("KILN_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("KILN_BIN") or os.path.join(SRC, "build", "kiln")
MODELS = os.path.join(SRC, "tests", "data", "models")
VENV = os.path.join(SRC, ".venv")
SETUP_MARKER = os.path.join(VENV, ".kiln-setup-done")


def _must_have_deps():
    return bool(os.environ.get("CI")) or os.path.exists(SETUP_MARKER)


def missing_dependency(what):
    """Fail loudly where setup.sh ran (or in CI); skip elsewhere."""
    if _must_have_deps():
        print(f"FAIL: {what} is missing although scripts/setup.sh ran (or $CI is set); "
              f"run scripts/setup.sh", flush=True)
        sys.exit(1)
    print(f"SKIP: {what} is not installed; run scripts/setup.sh to install it", flush=True)
    sys.exit(77)


def require_python(*mods):
    """Import mods, re-executing under the setup.sh venv when needed."""
    try:
        for m in mods:
            __import__(m)
        return
    except ImportError:
        pass
    vpy = os.path.join(VENV, "bin", "python3")
    if os.path.exists(vpy) and not os.environ.get("KILN_TEST_REEXEC"):
        os.environ["KILN_TEST_REEXEC"] = "1"
        os.execv(vpy, [vpy] + sys.argv)
    missing_dependency("the Python package(s) " + ", ".join(mods))


def require_promtool():
    p = shutil.which("promtool")
    if not p:
        missing_dependency("promtool (Debian package prometheus)")
    return p


def _sanitized():
    try:
        out = subprocess.run(["ldd", BIN], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "libasan" in out or "libubsan" in out


# wall-clock limits in the tests are multiplied by this under ASan/UBSan
SLOW = 4.0 if _sanitized() else 1.0


def model_dir(name="llama3-gqa"):
    return os.path.join(MODELS, name)


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


class Server:
    """A `kiln serve` process on a free port."""

    def __init__(self, *args, model="llama3-gqa", env=None, ready_timeout=60):
        self.errlog = tempfile.NamedTemporaryFile(prefix="kiln-serve-", suffix=".log", delete=False)
        cmd = [BIN, "serve", "--model", model_dir(model), "--port", "0", "--device", "cpu",
               "--threads", "1", *[str(a) for a in args]]
        e = dict(os.environ)
        e.pop("KILN_API_KEY", None)
        if env:
            e.update(env)
        self.cmd = cmd
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.errlog, env=e, text=True)
        self.port = None
        deadline = time.time() + ready_timeout
        line = ""
        while time.time() < deadline:
            line = self.p.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on http://([^ ]+):(\d+)", line)
            if m:
                self.host = m.group(1).strip("[]")
                self.port = int(m.group(2))
                break
        if not self.port:
            self.p.kill()
            self.p.wait()
            raise Failure(f"kiln serve did not become ready: {line!r}\n{self.log_tail()}")
        self.ready_line = line
        # keep draining stdout so the server never blocks on it
        threading.Thread(target=self.p.stdout.read, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.port}"

    @property
    def pid(self):
        return self.p.pid

    def log_tail(self, n=40):
        try:
            with open(self.errlog.name, "r", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def log(self):
        with open(self.errlog.name, "r", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.p.poll() is None

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if headers:
            h.update(headers)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return Response(r.status, dict((k.lower(), v) for k, v in r.getheaders()), data)
        finally:
            c.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def raw(self, data, timeout=10, shutdown=False):
        """Send raw bytes, return everything the server answers until it closes."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            try:
                s.sendall(data)
            except OSError:
                pass
            if shutdown:
                s.shutdown(socket.SHUT_WR)
            out = b""
            while True:
                try:
                    d = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not d:
                    break
                out += d
            return out
        finally:
            s.close()

    def stream(self, path, body, headers=None, timeout=60):
        """POST and parse the SSE response: (status, [decoded JSON or '[DONE]'], comments)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if headers:
            h.update(headers)
        c.request("POST", path, body=json.dumps(body).encode(), headers=h)
        r = c.getresponse()
        if r.status != 200:
            data = r.read()
            c.close()
            return r.status, json.loads(data), 0
        events, comments = parse_sse(r.read().decode())
        c.close()
        return r.status, events, comments

    def metrics(self, headers=None):
        r = self.get("/metrics", headers=headers)
        check(r.status == 200, f"/metrics: {r}")
        return r.body.decode(), parse_metrics(r.body.decode())

    def wait_idle(self, timeout=20, headers=None):
        """Wait until no request runs or waits and the KV cache is empty."""
        deadline = time.time() + timeout * SLOW
        m = {}
        while time.time() < deadline:
            _, m = self.metrics(headers=headers)
            if (metric(m, "vllm:num_requests_running") == 0 and metric(m, "vllm:num_requests_waiting") == 0
                    and metric(m, "vllm:kv_cache_usage_perc") == 0
                    and metric(m, "kiln:http_generation_requests_active") == 0):
                return m
            time.sleep(0.05)
        raise Failure(f"server not idle after {timeout} s: running={metric(m, 'vllm:num_requests_running')} "
                      f"waiting={metric(m, 'vllm:num_requests_waiting')} kv={metric(m, 'vllm:kv_cache_usage_perc')} "
                      f"active={metric(m, 'kiln:http_generation_requests_active')}")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                raise Failure(f"kiln serve did not exit {timeout} s after signal {sig}\n{self.log_tail()}")
        return self.p.returncode

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        try:
            os.unlink(self.errlog.name)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            print("---- server log tail ----\n" + self.log_tail(), file=sys.stderr)
        self.close()


def parse_sse(text):
    events, comments = [], 0
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        for line in block.split("\n"):
            if line.startswith(":"):
                comments += 1
            elif line.startswith("data: "):
                d = line[6:]
                events.append(d if d == "[DONE]" else json.loads(d))
            elif line:
                raise Failure(f"unexpected SSE line {line!r}")
    return events, comments


def parse_metrics(text):
    """{name: [(labels dict, value)]}"""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            raise Failure(f"bad metrics line {line!r}")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def metric(m, name, **labels):
    total = 0.0
    found = False
    for lab, v in m.get(name, []):
        if all(lab.get(k) == v2 for k, v2 in labels.items()):
            total += v
            found = True
    if not found:
        raise Failure(f"metric {name}{labels} missing")
    return total


def promtool_check(text, promtool):
    """`promtool check metrics` on the exposition. vLLM's names contain ':',
    which promtool's linter always reports ("metric names should not contain
    ':'") while parsing them fine. So: the text as served must parse and have
    no lint problem other than that one; and with ':' mapped to '_' it must
    pass cleanly (counter suffixes, units, help...)."""
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    problems = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    other = [l for l in problems if not l.endswith("metric names should not contain ':'")]
    check(r.returncode in (0, 3), f"promtool failed to parse /metrics (rc {r.returncode}): {problems[:5]}")
    check(not other, f"promtool lint problems: {other[:10]}")
    mapped = re.sub(r"^(# (?:HELP|TYPE) )?(vllm|kiln):", r"\1\2_", text, flags=re.M)
    r2 = subprocess.run([promtool, "check", "metrics"], input=mapped, capture_output=True, text=True)
    check(r2.returncode == 0, f"promtool on /metrics with ':' mapped to '_': rc {r2.returncode} "
                              f"{(r2.stdout + r2.stderr)[:500]}")


def run_tests(tests):
    """Run test functions in order; print a line each; exit 1 on failure."""
    failed = 0
    t_all = time.time()
    for t in tests:
        t0 = time.time()
        try:
            t()
            print(f"ok    {t.__name__} ({time.time() - t0:.2f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 -- report every failure
            failed += 1
            import traceback
            print(f"FAIL  {t.__name__}: {e}", flush=True)
            traceback.print_exc()
    print(f"{len(tests) - failed}/{len(tests)} passed in {time.time() - t_all:.1f} s", flush=True)
    sys.exit(1 if failed else 0)
