#!/usr/bin/env python3
"""File bytes by content ID: apid's `GET /file/{cid}` beside nginx and
`rclone serve http` serving the same folder over loopback, in one run.

  1. GET of a 1 GiB file (curl, to /dev/null): MB/s, best of 3 runs each;
     apid's peak RSS while it streams (sampled every 20 ms) beside its RSS
     before;
  2. 64 KiB Range reads under 32 connections for 10 s (wrk, one range):
     requests/s and latency p50/p99.

The file is in the page cache for every server alike (it is read once
first). nginx runs with `sendfile on` (the kernel copies the bytes); apid
and rclone read and write them. WebDAV (issue 12) is measured when it
lands; this is the `/file/{cid}` half.

Run from the repository root:

    cargo build --release --bins && python3 bench/files.py

Peers: `apt-get install nginx-light rclone wrk curl`; a missing one is
reported and skipped. Python 3.11, stdlib only. Every process started is
killed before exit.
"""

import json
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


def b32(data):
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    bits, value, out = 0, 0, []
    for byte in data:
        value = (value << 8) | byte
        bits += 8
        while bits >= 5:
            out.append(alphabet[(value >> (bits - 5)) & 31])
            bits -= 5
    if bits:
        out.append(alphabet[(value << (5 - bits)) & 31])
    return "".join(out)


def random_midhash_cid():
    # 0x01, varint 0x1000 (codec), varint 0x1000 (multihash), 0x20, digest
    return "b" + b32(bytes([0x01, 0x80, 0x20, 0x80, 0x20, 0x20]) + secrets.token_bytes(32))


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


def main():
    for tool in ["curl", "wrk"]:
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")
    procs = []
    tmp = tempfile.mkdtemp(prefix="files-bench-")
    # nginx's workers run as another user when it is started as root.
    os.chmod(tmp, 0o755)
    try:
        files = os.path.join(tmp, "files")
        os.makedirs(os.path.join(files, "watch"))
        big = os.path.join(files, "watch", "big.bin")
        with open(big, "wb") as f:
            chunk = secrets.token_bytes(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(chunk)
        with open(big, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass

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
        cid = random_midhash_cid()
        req = urllib.request.Request(base + f"/meta/{cid}", method="PATCH",
                                     data=json.dumps({"filePath": big}).encode())
        urllib.request.urlopen(req).read()
        servers = [("apid /file/{cid}", base + f"/file/{cid}")]

        if shutil.which("nginx"):
            nport = free_port()
            conf = os.path.join(tmp, "nginx.conf")
            with open(conf, "w") as f:
                f.write(f"""daemon off; pid {tmp}/nginx.pid; error_log {tmp}/nginx.err;
events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path {tmp}/nb; proxy_temp_path {tmp}/np; fastcgi_temp_path {tmp}/nf;
  uwsgi_temp_path {tmp}/nu; scgi_temp_path {tmp}/ns;
  server {{ listen 127.0.0.1:{nport}; root {files}; }} }}
""")
            procs.append(subprocess.Popen(["nginx", "-c", conf, "-p", tmp],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_http(f"http://127.0.0.1:{nport}/watch/big.bin")
            servers.append(("nginx (sendfile)", f"http://127.0.0.1:{nport}/watch/big.bin"))
        else:
            print("nginx: not installed, skipped")
        if shutil.which("rclone"):
            rport = free_port()
            procs.append(subprocess.Popen(
                ["rclone", "serve", "http", files, "--addr", f"127.0.0.1:{rport}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_http(f"http://127.0.0.1:{rport}/watch/big.bin")
            servers.append(("rclone serve http", f"http://127.0.0.1:{rport}/watch/big.bin"))
        else:
            print("rclone: not installed, skipped")

        print(f"GET of a 1 GiB file over loopback, best of 3 (curl); "
              f"64 KiB Range reads, 32 connections, 10 s (wrk)")
        print(f"{'server':<22} {'GET MB/s':>9} {'range req/s':>12} {'p50 ms':>7} {'p99 ms':>7}")
        rss_before = rss_kib(apid.pid)
        peak = [rss_before]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_kib(apid.pid))
                time.sleep(0.02)

        for name, url in servers:
            sampler = None
            if name.startswith("apid"):
                sampler = threading.Thread(target=sample)
                sampler.start()
            mbps = curl_mbps(url)
            if sampler:
                stop.set()
                sampler.join()
            rps, p50, p99, bad = wrk_ranges(url)
            note = f"  ({bad} non-2xx)" if bad else ""
            print(f"{name:<22} {mbps:>9.0f} {rps:>12.0f} {p50:>7.2f} {p99:>7.2f}{note}")
        print(f"apid RSS: {rss_before / 1024:.1f} MiB before, "
              f"{peak[0] / 1024:.1f} MiB peak while streaming 1 GiB three times")
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
