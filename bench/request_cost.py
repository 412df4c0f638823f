#!/usr/bin/env python3
"""Instructions apid spends per request, counted by callgrind: a figure
this machine's varying speed does not move (the same binary and requests
count the same within about 0.5 %), for judging small costs such as the
request metrics that wrk's run-to-run noise hides.

    cargo build --release --bins
    python3 bench/request_cost.py target/release [other/target/release ...]

For each folder of binaries: its storaged, and its apid under
`valgrind --tool=callgrind`; one 40-field record written, then
`GET /api/meta/{cid}` on one kept-alive connection, SMALL and LARGE times
in two runs. The difference of the two runs' totals over LARGE - SMALL is
the cost of one request (start and stop cancel out). The first folder is
the reference the others are compared with.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SMALL, LARGE = 200, 1200
CID = "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what, deadline=120):
    start = time.monotonic()
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() - start > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.1)


def instructions(bindir, requests):
    d = tempfile.mkdtemp(prefix="request-cost-")
    try:
        os.makedirs(f"{d}/files")
        port = free_port()
        env = dict(
            os.environ,
            META_CORE_PATH=f"{d}/meta-core",
            META_CORE_RUN_DIR=f"{d}/run",
            FILES_PATH=f"{d}/files",
            META_CORE_HTTP_HOST="127.0.0.1",
            META_CORE_HTTP_PORT=str(port),
            RUST_LOG="warn",
        )
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        storaged = subprocess.Popen([f"{bindir}/storaged"], **quiet)
        wait_for(lambda: os.path.exists(f"{d}/run/storaged.sock"), "storaged")
        out = f"{d}/callgrind.out"
        apid = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", f"{bindir}/apid"],
            **quiet,
        )

        def healthy():
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request("GET", "/health")
                r = c.getresponse()
                r.read()
                return c if r.status == 200 else None
            except OSError:
                return None

        c = wait_for(healthy, "apid under callgrind")
        record = {f"field{i}": f"value {i}" for i in range(40)}
        record["filePath"] = "/files/watch/x.mkv"
        c.request("PATCH", f"/meta/{CID}", body=json.dumps(record),
                  headers={"content-type": "application/json"})
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status
        for _ in range(requests):
            c.request("GET", f"/api/meta/{CID}")
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
        c.close()
        for p in (apid, storaged):
            p.send_signal(signal.SIGTERM)
            p.wait()
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        sys.exit(f"no totals in {out}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    dirs = sys.argv[1:] or ["target/release"]
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    print(f"apid instructions per GET /api/meta/{{cid}} (callgrind, {LARGE - SMALL} requests)")
    ref = None
    for d in dirs:
        per = (instructions(d, LARGE) - instructions(d, SMALL)) / (LARGE - SMALL)
        ref = ref or per
        print(f"  {d:40} {per:10.0f}  {per / ref * 100:6.1f} % of {dirs[0]}")


main()
