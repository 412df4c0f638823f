"""The cost of apid's open key-space reads on a large store (issue 13,
point 5): `GET /api/kv/tree`, `/api/kv/search` and `/api/kv/find` on about
667,000 rows, one at a time and 8 at once, with the CPU time apid and
storaged spent on them.

The reference is the figure the outside attack measured on the build
before the bounds: `tree?prefix=file:&max=10000` took 7 s of CPU on
667,000 rows, and 8 at once took 58 s each. The peer measured in the same
run is Python's sqlite3 reading the same database file directly: a full
scan of the key column for the search, and the skip-scan of the tree (one
indexed seek per branch) in a single process with no socket between.

    cargo build --release --bins && python3 bench/kv_reads.py

Python 3.11, stdlib only."""

import concurrent.futures
import json
import os
import secrets
import sqlite3
import statistics
import time
import urllib.request

from peers import Bench

RECORDS = 14_170  # x 40 fields, with the index and event rows: about 667,000 rows
FIELDS = 40
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def rid():
    """A random RID: a UUIDv7 in 26 Crockford base32 characters."""
    v = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    v = (v & ~(0xF << 76)) | (0x7 << 76)
    v = (v & ~(0x3 << 62)) | (0x2 << 62)
    return "".join(ALPHABET[(v >> (5 * i)) & 31] for i in reversed(range(26)))


def record(i):
    r = {f"field{j:02}": f"value {i} {j} {secrets.token_hex(4)}" for j in range(FIELDS - 2)}
    r["title"] = f"Title number {i}"
    r["tmdbid"] = str(100000 + i)
    return r


def send(base, method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def cpu_secs(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(base, path, n, pids, concurrency=1):
    """n requests (concurrency at once): (p50 ms, p99 ms, CPU s per request, last answer)."""
    before = sum(cpu_secs(p) for p in pids)
    times, last = [], None

    def one(_):
        t = time.perf_counter()
        a = send(base, "GET", path)
        return (time.perf_counter() - t) * 1000, a

    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        for ms, a in ex.map(one, range(n)):
            times.append(ms)
            last = a
    cpu = (sum(cpu_secs(p) for p in pids) - before) / n
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, cpu, last


def direct_tree(db, prefix, limit):
    """The tree's skip-scan straight on the file: one seek per branch."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    t = time.perf_counter()
    branches, start = [], prefix
    while len(branches) < limit:
        row = con.execute("SELECT k FROM kv WHERE k >= ? ORDER BY k LIMIT 1", (start,)).fetchone()
        if not row or not row[0].startswith(prefix):
            break
        rest = row[0][len(prefix):]
        cut = rest.find("/")
        if cut < 0:
            start = row[0] + "\0"
            continue
        branch = prefix + rest[:cut + 1]
        branches.append(branch)
        start = branch[:-1] + chr(ord("/") + 1)
    ms = (time.perf_counter() - t) * 1000
    con.close()
    return ms, len(branches)


def direct_scan(db, needle):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    t = time.perf_counter()
    n = con.execute("SELECT count(*) FROM kv WHERE instr(k, ?) > 0", (needle,)).fetchone()[0]
    ms = (time.perf_counter() - t) * 1000
    rows = con.execute("SELECT count(*) FROM kv").fetchone()[0]
    con.close()
    return ms, n, rows


def main():
    with Bench("kv-bench-") as b:
        apid, base = b.apid()
        storaged = b.procs[0]
        pids = [apid.pid, storaged.pid]
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: send(base, "PATCH", f"/meta/{rid()}", record(i)), range(RECORDS)))
        load = time.perf_counter() - t
        db = os.path.join(b.tmp, "meta-core", "db", "meta-core.db")
        print(f"loaded {RECORDS:,} records x {FIELDS} fields in {load:.1f} s "
              f"({RECORDS / load:,.0f} records/s)")
        _, _, rows = direct_scan(db, "\x01")
        print(f"rows in the kv table: {rows:,}\n")

        print(f"{'request':<52} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/req':>10}  answer")
        cases = [
            ("tree prefix=file: max=5000 (the cap)", "/api/kv/tree?prefix=file:&max=5000", 10, 1),
            ("tree prefix=file: max=500", "/api/kv/tree?prefix=file:&max=500", 30, 1),
            ("tree of one record (prefix=file:<rid>/)", None, 30, 1),
            ("search contains=title limit=500", "/api/kv/search?contains=title&limit=500", 30, 1),
            ("search, no match (examines 100,000 keys)", "/api/kv/search?contains=nomatch", 10, 1),
            ("find title contains 'number 1' limit=200", "/api/kv/find?contains=number%201&fields=title", 10, 1),
            ("find, no match (every record: at most 100,000)", "/api/kv/find?contains=nomatch&fields=title", 5, 1),
            ("tree max=5000, 8 at once", "/api/kv/tree?prefix=file:&max=5000", 16, 8),
        ]
        for name, path, n, conc in cases:
            if path is None:
                first = send(base, "GET", "/api/kv/tree?prefix=file:&max=1")["branches"][0]
                path = f"/api/kv/tree?prefix={urllib.request.quote(first)}&max=100"
            p50, p99, cpu, a = timed(base, path, n, pids, conc)
            if "branches" in a:
                what = f"{len(a['branches'])} branches, {len(a['leaves'])} leaves"
            elif "keys" in a:
                what = f"{len(a['keys'])} keys, truncated={a['truncated']}"
            else:
                what = f"{len(a['matches'])} matches, truncated={a['truncated']}"
            print(f"{name:<52} {p50:>8.1f} {p99:>8.1f} {cpu:>10.3f}  {what}")

        print("\nreference (the attack, before the bounds): tree prefix=file: max=10000 on "
              "667,000 rows: 7 s of CPU; 8 at once: 58 s each")
        ms, n = direct_tree(db, "file:", 5000)
        print(f"peer, sqlite3 on the same file: the tree's skip-scan, {n} branches: {ms:.1f} ms")
        ms, n, _ = direct_scan(db, "nomatch")
        print(f"peer, sqlite3 on the same file: a full scan of every key for a substring: "
              f"{ms:.1f} ms ({n} found)")


if __name__ == "__main__":
    main()
