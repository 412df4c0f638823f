#!/usr/bin/env python3
"""WebDAV: apid's `/webdav/` beside nginx (its dav module) and
`rclone serve webdav` serving the same folder over loopback, in one run.

  1. GET of a 1 GiB file (curl to /dev/null): MB/s, best of 3;
  2. PUT of a 1 GiB file (curl -T from the page cache): MB/s, best of 3;
     each server makes the upload durable its own way (apid: temporary
     file, fdatasync, rename; nginx: temporary file, rename; rclone:
     written in place), so the figures are beside each other, not alike;
  3. 64 KiB Range reads under 32 connections for 10 s (wrk): requests/s
     and latency p50/p99;
  4. PROPFIND Depth 1 of a folder of 10,000 files: ms, best of 5 (nginx's
     dav module has no PROPFIND);
  5. apid's RSS before, and its peak while it streams the GETs and takes
     the PUTs (sampled every 20 ms).

The file is in the page cache for every server alike. Run from the
repository root:

    cargo build --release --bins && python3 bench/webdav.py

Peers: `apt-get install nginx-light rclone wrk curl`; a missing one is
reported and skipped. Python 3.11, stdlib only. Every process started is
killed before exit.
"""

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from files import BIN, SIZE, curl_mbps, free_port, rss_kib, wait_http, wrk_ranges  # noqa: E402

FOLDER_FILES = 10_000


def curl_put_mbps(src, url):
    best = 0.0
    for _ in range(3):
        out = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{speed_upload} %{http_code}",
             "-T", src, url],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        if out[1] not in ("200", "201", "204"):
            return float("nan")
        best = max(best, float(out[0]) / 1e6)
    return best


def propfind_ms(url):
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        out = subprocess.run(
            ["curl", "-s", "-X", "PROPFIND", "-H", "Depth: 1", "-o", "-", url],
            capture_output=True, check=True,
        ).stdout
        took = (time.perf_counter() - start) * 1000
        if out.count(b"<D:response") + out.count(b"<d:response") < FOLDER_FILES:
            return float("nan")
        best = min(best, took)
    return best


def main():
    for tool in ["curl", "wrk"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")
    procs = []
    tmp = tempfile.mkdtemp(prefix="webdav-bench-")
    os.chmod(tmp, 0o755)  # nginx's workers run as another user under root
    try:
        files = os.path.join(tmp, "files")
        plugin = os.path.join(files, "plugin")
        many = os.path.join(plugin, "many")
        os.makedirs(many)
        os.makedirs(os.path.join(plugin, "up"))
        os.chmod(os.path.join(plugin, "up"), 0o777)
        big = os.path.join(plugin, "big.bin")
        with open(big, "wb") as f:
            chunk = secrets.token_bytes(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(chunk)
        with open(big, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
        for i in range(FOLDER_FILES):
            with open(os.path.join(many, f"episode-{i:05}.mkv"), "wb") as f:
                f.write(b"x" * (i % 100))

        env = dict(os.environ, META_CORE_PATH=os.path.join(tmp, "meta-core"),
                   META_CORE_RUN_DIR=os.path.join(tmp, "run"), FILES_PATH=files,
                   META_CORE_HTTP_HOST="127.0.0.1", RUST_LOG="warn")
        port = free_port()
        env["META_CORE_HTTP_PORT"] = str(port)
        procs.append(subprocess.Popen([os.path.join(BIN, "storaged")], env=env,
                                      stdout=subprocess.DEVNULL))
        time.sleep(0.3)
        apid = subprocess.Popen([os.path.join(BIN, "apid")], env=env, stdout=subprocess.DEVNULL)
        procs.append(apid)
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health")
        servers = [("apid /webdav", base + "/webdav")]

        if shutil.which("nginx"):
            nport = free_port()
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(f"""daemon off; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;
events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; tcp_nopush on; client_max_body_size 0;
  client_body_temp_path {tmp}/files/plugin/up/.nb; proxy_temp_path {tmp}/np;
  fastcgi_temp_path {tmp}/nf; uwsgi_temp_path {tmp}/nu; scgi_temp_path {tmp}/ns;
  server {{ listen 127.0.0.1:{nport}; root {files};
    dav_methods PUT DELETE MKCOL COPY MOVE; dav_access user:rw group:r all:r; }} }}
""")
            procs.append(subprocess.Popen(["nginx", "-c", conf, "-p", tmp],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_http(f"http://127.0.0.1:{nport}/plugin/big.bin")
            servers.append(("nginx dav (sendfile)", f"http://127.0.0.1:{nport}"))
        else:
            print("nginx: not installed, skipped")
        if shutil.which("rclone"):
            rport = free_port()
            procs.append(subprocess.Popen(
                ["rclone", "serve", "webdav", files, "--addr", f"127.0.0.1:{rport}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_http(f"http://127.0.0.1:{rport}/plugin/big.bin")
            servers.append(("rclone serve webdav", f"http://127.0.0.1:{rport}"))
        else:
            print("rclone: not installed, skipped")

        print("GET and PUT of a 1 GiB file over loopback, best of 3 (curl); 64 KiB Range "
              "reads, 32 connections, 10 s (wrk); PROPFIND Depth 1 of 10,000 files, best of 5")
        print(f"{'server':<22} {'GET MB/s':>9} {'PUT MB/s':>9} {'range req/s':>12} "
              f"{'p50 ms':>7} {'p99 ms':>7} {'PROPFIND ms':>12}")
        rss_before = rss_kib(apid.pid)
        peak = [rss_before]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kib(apid.pid))
                time.sleep(0.02)

        for name, root in servers:
            sampler = None
            if name.startswith("apid"):
                sampler = threading.Thread(target=sample)
                sampler.start()
            get = curl_mbps(root + "/plugin/big.bin")
            put = curl_put_mbps(big, root + "/plugin/up/big-copy.bin")
            if sampler:
                stop.set()
                sampler.join()
            rps, p50, p99, bad = wrk_ranges(root + "/plugin/big.bin")
            note = f"  ({bad} non-2xx)" if bad else ""
            pf = propfind_ms(root + "/plugin/many/") if not name.startswith("nginx") else None
            pf_text = f"{pf:>12.0f}" if pf is not None else f"{'-':>12}"
            print(f"{name:<22} {get:>9.0f} {put:>9.0f} {rps:>12.0f} {p50:>7.2f} {p99:>7.2f}"
                  f"{pf_text}{note}")
            up = os.path.join(plugin, "up", "big-copy.bin")
            if os.path.exists(up):
                os.remove(up)
        print(f"apid RSS: {rss_before / 1024:.1f} MiB before, {peak[0] / 1024:.1f} MiB peak "
              "while streaming 1 GiB out three times and taking it in three times")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
