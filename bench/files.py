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
and rclone read and write them. WebDAV is measured by bench/webdav.py.

Run from the repository root:

    cargo build --release --bins && python3 bench/files.py

Peers: `apt-get install nginx-light rclone wrk curl`; a missing one is
reported and skipped. Python 3.11, stdlib only (shared parts in
bench/peers.py). Every process started is killed before exit.
"""

import json
import os
import secrets
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import Bench, Peak, curl_mbps, need, write_big, wrk_ranges  # noqa: E402


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


def main():
    need("curl", "wrk")
    with Bench("files-bench-") as b:
        os.makedirs(os.path.join(b.files, "watch"))
        big = os.path.join(b.files, "watch", "big.bin")
        write_big(big)
        apid, base = b.apid()
        cid = random_midhash_cid()
        req = urllib.request.Request(base + f"/meta/{cid}", method="PATCH",
                                     data=json.dumps({"filePath": big}).encode())
        urllib.request.urlopen(req).read()
        servers = [("apid /file/{cid}", base + f"/file/{cid}")]
        nginx = b.nginx("/watch/big.bin")
        if nginx:
            servers.append(("nginx (sendfile)", nginx + "/watch/big.bin"))
        rclone = b.rclone("http", "/watch/big.bin")
        if rclone:
            servers.append(("rclone serve http", rclone + "/watch/big.bin"))

        print("GET of a 1 GiB file over loopback, best of 3 (curl); "
              "64 KiB Range reads, 32 connections, 10 s (wrk)")
        print(f"{'server':<22} {'GET MB/s':>9} {'range req/s':>12} {'p50 ms':>7} {'p99 ms':>7}")
        peak = Peak(apid.pid)
        before = peak.kib
        for name, url in servers:
            if name.startswith("apid"):
                with peak:
                    mbps = curl_mbps(url)
            else:
                mbps = curl_mbps(url)
            rps, p50, p99, bad = wrk_ranges(url)
            note = f"  ({bad} non-2xx)" if bad else ""
            print(f"{name:<22} {mbps:>9.0f} {rps:>12.0f} {p50:>7.2f} {p99:>7.2f}{note}")
        print(f"apid RSS: {before / 1024:.1f} MiB before, "
              f"{peak.kib / 1024:.1f} MiB peak while streaming 1 GiB three times")


if __name__ == "__main__":
    main()
