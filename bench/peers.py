"""What the file benchmarks share (bench/files.py, bench/webdav.py): a
temporary tree, storaged + apid from target/release, the peers (nginx,
rclone) serving the same folder, the load tools (curl, wrk) and apid's
RSS sampled while it works. Python 3.11, stdlib only."""

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
SIZE = 1 << 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, deadline=20):
    end = time.time() + deadline
    while time.time() < end:
        try:
            req = urllib.request.Request(url, headers={"Range": "bytes=0-0"})
            urllib.request.urlopen(req, timeout=1).read()
            return
        except Exception:
            time.sleep(0.05)
    sys.exit(f"{url} never answered")


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def need(*tools):
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")


def write_big(path):
    """SIZE random bytes at `path`, read once into the page cache."""
    with open(path, "wb") as f:
        chunk = secrets.token_bytes(1 << 20)
        for _ in range(SIZE >> 20):
            f.write(chunk)
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def curl_mbps(url):
    best = 0.0
    for _ in range(3):
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}", url],
            capture_output=True, text=True, check=True,
        ).stdout
        best = max(best, float(out) / 1e6)
    return best


def wrk_ranges(url):
    """64 KiB ranges under 32 connections for 10 s: (req/s, p50 ms, p99 ms, non-2xx)."""
    out = subprocess.run(
        ["wrk", "-t2", "-c32", "-d10s", "--latency",
         "-H", "Range: bytes=1048576-1114111", url],
        capture_output=True, text=True,
    ).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)

    def ms(m):
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    return (float(rps.group(1)) if rps else 0.0, ms(p50), ms(p99),
            int(non2xx.group(1)) if non2xx else 0)


class Peak:
    """The peak RSS of a process while a `with` block runs (every 20 ms)."""

    def __init__(self, pid):
        self.pid, self.kib = pid, rss_kib(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        while not self._stop.is_set():
            self.kib = max(self.kib, rss_kib(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Bench:
    """A temporary tree and the processes started in it, all killed and
    removed on exit."""

    def __init__(self, prefix):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.tmp, 0o755)  # nginx's workers run as another user under root
        self.files = os.path.join(self.tmp, "files")
        os.makedirs(self.files)
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, cmd, env=None):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def apid(self):
        """storaged and apid on this tree: (apid's process, its base URL)."""
        env = dict(os.environ, META_CORE_PATH=os.path.join(self.tmp, "meta-core"),
                   META_CORE_RUN_DIR=os.path.join(self.tmp, "run"), FILES_PATH=self.files,
                   META_CORE_HTTP_HOST="127.0.0.1", RUST_LOG="warn")
        port = free_port()
        env["META_CORE_HTTP_PORT"] = str(port)
        self.spawn([os.path.join(BIN, "storaged")], env)
        time.sleep(0.3)
        apid = self.spawn([os.path.join(BIN, "apid")], env)
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health")
        return apid, base

    def nginx(self, probe, http_extra="", server_extra=""):
        """nginx serving FILES_PATH with sendfile; its base URL, or None."""
        if not shutil.which("nginx"):
            print("nginx: not installed, skipped")
            return None
        port, tmp = free_port(), self.tmp
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;
events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; tcp_nopush on; proxy_temp_path {tmp}/np;
  fastcgi_temp_path {tmp}/nf; uwsgi_temp_path {tmp}/nu; scgi_temp_path {tmp}/ns;
  {http_extra or f"client_body_temp_path {tmp}/nb;"}
  server {{ listen 127.0.0.1:{port}; root {self.files}; {server_extra} }} }}
""")
        self.spawn(["nginx", "-c", conf, "-p", tmp])
        base = f"http://127.0.0.1:{port}"
        wait_http(base + probe)
        return base

    def rclone(self, kind, probe):
        """`rclone serve <kind>` of FILES_PATH; its base URL, or None."""
        if not shutil.which("rclone"):
            print("rclone: not installed, skipped")
            return None
        port = free_port()
        self.spawn(["rclone", "serve", kind, self.files, "--addr", f"127.0.0.1:{port}"])
        base = f"http://127.0.0.1:{port}"
        wait_http(base + probe)
        return base
