#!/usr/bin/env python3
"""Supervisor benchmark: meta-core's supervisor beside supervisord, s6, runit and Horust.

Every supervisor runs the same two children, the real `storaged` and `apid`
release binaries (meta-core starts watcherd and mountd as well: they count
as children, not as the supervisor), each tree in a fresh temp dir with its
own HTTP port. For each one, in one run:

  1. start latency: from launching the supervisor to storaged's socket
     `/health` and apid's HTTP `/health` both answering 200 (polled every
     ms); median over every tree the run starts;
  2. supervisor RSS: the sum of VmRSS of the supervisor's own processes
     (everything in the tree but its children), with their count;
  3. replacement ready: `kill -9` of storaged (then apid) after it ran
     1.5 s, time until a new process answers `/health`; median of 5 fresh
     trees (min-max beside it);
  4. status command latency: median of 20 runs of its status command
     (Horust's is horustctl, a crate of its own: "n/a" without it);
  5. orderly stop: from the stop request to no process of the tree left;
     median of 5 fresh idle trees (min-max beside it);
  6. children left alive 1 s after SIGKILL of the top supervisor process;
  7. meta-core only: failover. Two `meta-core run` on one META_CORE_PATH;
     SIGKILL of the leader's supervisor, time until the standby's apid
     answers `/health`, and the most storaged processes seen at once with
     the database file open.

Run from the repository root:

    cargo build --release --bins && python3 bench/supervisors.py
    python3 bench/supervisors.py --only meta-core,s6 --bin-dir target/release

Peers: `apt-get install supervisor s6 runit`, `cargo install horust --locked`;
a missing one is reported and skipped. meta-core is measured when
`meta-core run` brings its tree up, and reported "not available" otherwise.
Python 3.11, stdlib only. Every process started is killed before exit.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from trees import DAEMONS, SUPERVISORS, MetaCore, Sandbox, Supervisor, last_line
from procs import (
    POLL_S,
    Unavailable,
    get_unix,
    get_tcp,
    wait_until,
    free_port,
    running,
    vm_rss_kib,
    has_open,
    become_subreaper,
)

REPO = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 30.0
KILL_ROUNDS = 5
STOP_ROUNDS = 5
STATUS_RUNS = 20
ORPHAN_WAIT_S = 1.0
# The idle tree's wait before its orderly stop.
IDLE_S = 1.0
# How long a child runs before its kill -9.
KILL_AFTER_S = 1.5
FAILOVER_TIMEOUT_S = 15.0
# After the standby serves, keep watching this long for a late second writer.
FAILOVER_TAIL_S = 1.0

SEED_NOTE = (
    "seed reference (issue): supervisord 30 MiB RSS, ~1 s to restart; s6 8 MiB "
    "(5 processes), ~1 s (2.8 ms with its readiness fd); Horust 5 MiB, 1.2 s; "
    "runit 2.4 ms; each left all children running when killed"
)


# ---------------------------------------------------------------- measures


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def spread(samples: list[float]) -> str:
    return f"{ms(statistics.median(samples))} ({ms(min(samples))}-{ms(max(samples))})"


def start_tree(sup: Supervisor, sb: Sandbox, starts: list[float]) -> subprocess.Popen:
    """Launch the tree, wait for both children's /health; add the time to `starts`."""
    sup.prepare(sb)
    t0 = time.perf_counter()
    top = sup.launch(sb)
    took = wait_until(lambda: top.poll() is not None or sb.healthy(), READY_TIMEOUT_S, since=t0)
    if top.poll() is not None:
        raise Unavailable(f"{Path(top.args[0]).name} exited {top.returncode}: {last_line(top.log_path)}")
    if took is None:
        raise Unavailable(f"children not healthy {READY_TIMEOUT_S:.0f} s after start")
    starts.append(took)
    return top


def supervisor_rss(sb: Sandbox) -> str:
    pids = sb.own_pids()
    mib = sum(vm_rss_kib(p) for p in pids) / 1024
    return f"{mib:.1f} MiB ({len(pids)} proc{'s' if len(pids) > 1 else ''})"


def status_latency(sup: Supervisor, sb: Sandbox) -> str:
    argv = sup.status_argv(sb)
    if argv is None:
        return "n/a (no command)"

    def answers() -> bool:
        return subprocess.run(argv, env=sb.env, capture_output=True).returncode == 0

    # Horust opens its control socket a moment after its children are up.
    if wait_until(answers, READY_TIMEOUT_S, every=0.05) is None:
        return f"failed: {Path(argv[0]).name} never exited 0"
    samples = []
    for _ in range(STATUS_RUNS):
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=sb.env, capture_output=True)
        samples.append(time.perf_counter() - t0)
        if done.returncode != 0:
            return f"failed: exit {done.returncode}"
    return ms(statistics.median(samples))


def kill_child(sb: Sandbox, daemon: str) -> float | str:
    """SIGKILL the child; seconds until a new one answers /health, or why not."""
    old = sb.daemon_pids(daemon)
    if len(old) != 1:
        return f"{len(old)} {daemon} running before the kill"
    if daemon == "storaged":
        probe = lambda: get_unix(sb.run_dir / "storaged.sock") == 200  # noqa: E731
    else:
        probe = lambda: get_tcp(sb.port) == 200  # noqa: E731
    t0 = time.perf_counter()
    os.kill(old[0], signal.SIGKILL)
    # Once it is dead its listener is closed, so any 200 comes from a new process.
    wait_until(lambda: not running(old[0]), READY_TIMEOUT_S)
    took = wait_until(probe, READY_TIMEOUT_S, since=t0)
    return took if took is not None else f"not replaced in {READY_TIMEOUT_S:.0f} s"


def replacement_latency(sup: Supervisor, bins: dict[str, str], daemon: str, starts: list[float]) -> str:
    """Median over fresh trees of the time from a child's SIGKILL to its replacement's /health.

    Each kill is the first failure of a child that has run KILL_AFTER_S, so
    every supervisor is measured on its single-crash path, not on its
    crash-loop guard: runsv holds a restart back for 1 s when `run` exits
    at once, and meta-core's backoff, as drafted, grows with each failure
    within 30 s of the last start.
    """
    samples = []
    for _ in range(KILL_ROUNDS):
        with Sandbox(bins, sup.name) as sb:
            start_tree(sup, sb, starts)
            time.sleep(KILL_AFTER_S)
            took = kill_child(sb, daemon)
        if isinstance(took, str):
            return took
        samples.append(took)
    return spread(samples)


def stop_time(sup: Supervisor, sb: Sandbox, top: subprocess.Popen) -> float | str:
    """Orderly stop of an idle tree, until no process of it is left; seconds, or why not."""
    time.sleep(IDLE_S)
    t0 = time.perf_counter()
    sup.request_stop(sb, top)
    took = wait_until(lambda: top.poll() is not None and not sb.pids(), STOP_TIMEOUT_S, since=t0)
    return took if took is not None else f"> {STOP_TIMEOUT_S:.0f} s"


def stop_latency(sup: Supervisor, bins: dict[str, str], first: float | str, starts: list[float]) -> str:
    """Median of `first` and more orderly stops of fresh idle trees.

    One stop is one sample of a few milliseconds, at the mercy of the
    machine's scheduling; the median of several is what a run can compare.
    """
    samples = [first]
    while len(samples) < STOP_ROUNDS and not isinstance(samples[-1], str):
        with Sandbox(bins, sup.name) as sb:
            samples.append(stop_time(sup, sb, start_tree(sup, sb, starts)))
    failed = [s for s in samples if isinstance(s, str)]
    return failed[0] if failed else spread(samples)


def children_after_sigkill(sb: Sandbox, top: subprocess.Popen) -> str:
    top.kill()
    top.wait()
    time.sleep(ORPHAN_WAIT_S)
    left = sum(len(sb.daemon_pids(d)) for d in DAEMONS)
    return f"{left} of {len(DAEMONS)}"


def measure(sup: Supervisor, bins: dict[str, str]) -> dict[str, str]:
    """Every measure of one supervisor, each on trees of its own sandboxes."""
    res, starts = {}, []
    with Sandbox(bins, sup.name) as sb:
        top = start_tree(sup, sb, starts)
        res["rss"] = supervisor_rss(sb)
        res["status"] = status_latency(sup, sb)
        first_stop = stop_time(sup, sb, top)
    res["stop"] = stop_latency(sup, bins, first_stop, starts)
    for daemon in DAEMONS:
        res[f"kill-{daemon}"] = replacement_latency(sup, bins, daemon, starts)
    with Sandbox(bins, sup.name) as sb:
        res["orphans"] = children_after_sigkill(sb, start_tree(sup, sb, starts))
    res["start"] = spread(starts)
    return res


def role_of(sb: Sandbox, env: dict[str, str]) -> str | None:
    """The role `meta-core status --json` reports for the tree that `env` names."""
    done = subprocess.run([sb.bins["meta-core"], "status", "--json"], env=env, capture_output=True)
    try:
        return json.loads(done.stdout).get("role") if done.returncode == 0 else None
    except ValueError:
        return None


def failover(sup: MetaCore, bins: dict[str, str]) -> dict[str, str]:
    """Leader and standby on one META_CORE_PATH; SIGKILL of the leader's supervisor.

    Both trees share the database; the standby has its own run dir and port.
    While the standby takes over, every storaged of the sandbox is checked for
    the database file among its open fds: two at once would be two writers.
    """
    with Sandbox(bins, "failover") as sb:
        try:
            leader = start_tree(sup, sb, [])
        except Unavailable as why:
            return {"failover": f"leader: {why}"}
        standby_port = free_port()
        # Each tree logs apart, so that neither writes over the other's logs.
        standby_env = {**sb.env_for(sb.root / "run-standby", standby_port),
                       "META_CORE_LOG_DIR": str(sb.root / "logs-standby")}
        (sb.root / "logs-standby").mkdir()
        standby = sb.spawn([bins["meta-core"], "run"], standby_env)
        if wait_until(lambda: role_of(sb, standby_env) == "standby", READY_TIMEOUT_S, every=0.05) is None:
            return {"failover": "second meta-core never reported role standby"}
        if get_tcp(standby_port) == 200:
            return {"failover": "standby's apid answered before the takeover"}
        holders = 0

        def serving() -> bool:
            nonlocal holders
            holders = max(holders, sum(has_open(p, sb.db) for p in sb.daemon_pids("storaged")))
            return get_tcp(standby_port) == 200

        t0 = time.perf_counter()
        leader.kill()
        took = wait_until(serving, FAILOVER_TIMEOUT_S, since=t0)
        tail_end = time.perf_counter() + FAILOVER_TAIL_S
        while time.perf_counter() < tail_end:
            serving()
            time.sleep(POLL_S)
        if standby.poll() is not None:
            return {"failover": f"standby exited {standby.returncode}", "db-holders": str(holders)}
        return {
            "failover": ms(took) if took is not None else f"> {FAILOVER_TIMEOUT_S:.0f} s",
            "db-holders": str(holders),
        }


# ---------------------------------------------------------------- report

ROWS = [
    ("rss", "supervisor RSS (its own processes)", "< 5 MB (4.8 MiB)"),
    ("start", "start -> both /health 200, median", "-"),
    ("kill-storaged", "kill -9 storaged -> new one ready, median", "< 100 ms"),
    ("kill-apid", "kill -9 apid -> new one ready, median", "< 100 ms"),
    ("status", f"status command, median of {STATUS_RUNS}", "< 10 ms"),
    ("stop", "orderly stop -> no process left, median", "< 1 s"),
    ("orphans", "children alive 1 s after SIGKILL of it", "0"),
    ("failover", "leader SIGKILL -> standby apid /health", "< 2 s"),
    ("db-holders", "max storaged with the DB open (failover)", "1"),
]


def print_table(names: list[str], results: dict[str, dict[str, str] | str]) -> None:
    header = ["measure", *names, "target (meta-core)"]
    rows = []
    for key, label, target in ROWS:
        cells = []
        for name in names:
            res = results[name]
            cells.append(res.get(key, "-") if isinstance(res, dict) else "n/a")
        rows.append([label, *cells, target])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    for name in names:
        if isinstance(results[name], str):
            print(f"{name}: {results[name]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated: " + ",".join(s.name for s in SUPERVISORS))
    parser.add_argument("--bin-dir", default=str(REPO / "target" / "release"),
                        help="where storaged, apid and meta-core are (default: target/release)")
    args = parser.parse_args()

    bin_dir = Path(args.bin_dir).resolve()
    bins = {n: os.path.realpath(bin_dir / n) for n in (*DAEMONS, "meta-core")}
    for daemon in DAEMONS:
        if not Path(bins[daemon]).is_file():
            sys.exit(f"{bins[daemon]} missing: cargo build --release --bins")
    names = [s.name for s in SUPERVISORS]
    wanted = args.only.split(",") if args.only else names
    unknown = set(wanted) - set(names)
    if unknown:
        sys.exit(f"unknown supervisor(s): {', '.join(sorted(unknown))}")
    chosen = [n for n in names if n in wanted]

    become_subreaper()
    # A SIGTERM unwinds like Ctrl-C, through every sandbox's cleanup.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"children: {bins['storaged']} and {bins['apid']} "
          "(two children per tree; meta-core starts watcherd and mountd as well, "
          "which the figures count as children, not as the supervisor)")
    results: dict[str, dict[str, str] | str] = {}
    for sup in (s for s in SUPERVISORS if s.name in chosen):
        print(f"measuring {sup.name} ...", flush=True)
        reason = sup.missing(bins)
        if reason:
            results[sup.name] = reason
            continue
        try:
            results[sup.name] = measure(sup, bins)
            if isinstance(sup, MetaCore):
                results[sup.name].update(failover(sup, bins))
        except Unavailable as why:
            results[sup.name] = f"not available: {why}"
    print()
    print_table(chosen, results)
    print(f"\nstart: median (min-max) of every tree started; kill -9: median (min-max) of "
          f"{KILL_ROUNDS} fresh trees, each child killed after {KILL_AFTER_S:g} s; "
          f"stop: median (min-max) of {STOP_ROUNDS} idle trees")
    print("status: supervisorctl status and meta-core status (every daemon); s6-svstat, sv status "
          "and horustctl status (storaged)")
    print(SEED_NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
