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
  5. apid's RSS before, its peak while it streams the GETs and its peak
     while it takes the PUTs (sampled every 20 ms).

The file is in the page cache for every server alike. Run from the
repository root:

    cargo build --release --bins && python3 bench/webdav.py

Peers: `apt-get install nginx-light rclone wrk curl`; a missing one is
reported and skipped. Python 3.11, stdlib only (shared parts in
bench/peers.py). Every process started is killed before exit.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import Bench, Peak, curl_mbps, need, write_big, wrk_ranges  # noqa: E402

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
    need("curl", "wrk")
    with Bench("webdav-bench-") as b:
        plugin = os.path.join(b.files, "plugin")
        many = os.path.join(plugin, "many")
        up = os.path.join(plugin, "up")
        os.makedirs(many)
        os.makedirs(up)
        os.chmod(up, 0o777)  # nginx's workers write there
        big = os.path.join(plugin, "big.bin")
        write_big(big)
        for i in range(FOLDER_FILES):
            with open(os.path.join(many, f"episode-{i:05}.mkv"), "wb") as f:
                f.write(b"x" * (i % 100))

        apid, base = b.apid()
        servers = [("apid /webdav", base + "/webdav")]
        # nginx renames its body file into place: same filesystem as up/.
        nginx = b.nginx("/plugin/big.bin",
                        http_extra=f"client_max_body_size 0; client_body_temp_path {up}/.nb;",
                        server_extra="dav_methods PUT DELETE MKCOL COPY MOVE; "
                                     "dav_access user:rw group:r all:r;")
        if nginx:
            servers.append(("nginx dav (sendfile)", nginx))
        rclone = b.rclone("webdav", "/plugin/big.bin")
        if rclone:
            servers.append(("rclone serve webdav", rclone))

        print("GET and PUT of a 1 GiB file over loopback, best of 3 (curl); 64 KiB Range "
              "reads, 32 connections, 10 s (wrk); PROPFIND Depth 1 of 10,000 files, best of 5")
        print(f"{'server':<22} {'GET MB/s':>9} {'PUT MB/s':>9} {'range req/s':>12} "
              f"{'p50 ms':>7} {'p99 ms':>7} {'PROPFIND ms':>12}")
        on_get, on_put = Peak(apid.pid), Peak(apid.pid)
        before = on_get.kib
        for name, root in servers:
            mine = name.startswith("apid")
            with on_get if mine else Peak(os.getpid()):
                get = curl_mbps(root + "/plugin/big.bin")
            with on_put if mine else Peak(os.getpid()):
                put = curl_put_mbps(big, root + "/plugin/up/big-copy.bin")
            rps, p50, p99, bad = wrk_ranges(root + "/plugin/big.bin")
            note = f"  ({bad} non-2xx)" if bad else ""
            pf = None if name.startswith("nginx") else propfind_ms(root + "/plugin/many/")
            pf_text = f"{pf:>12.0f}" if pf is not None else f"{'-':>12}"
            print(f"{name:<22} {get:>9.0f} {put:>9.0f} {rps:>12.0f} {p50:>7.2f} {p99:>7.2f}"
                  f"{pf_text}{note}")
            copy = os.path.join(up, "big-copy.bin")
            if os.path.exists(copy):
                os.remove(copy)
        print(f"apid RSS: {before / 1024:.1f} MiB before, {on_get.kib / 1024:.1f} MiB peak "
              f"while streaming 1 GiB out three times, {on_put.kib / 1024:.1f} MiB peak "
              "while taking it in three times")

if __name__ == "__main__":
    main()
