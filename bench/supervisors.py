#!/usr/bin/env python3
"""Supervisor benchmark: meta-core's supervisor beside supervisord, s6, runit and Horust.

Every supervisor runs the same two children, the real `storaged` and `apid`
release binaries (watcherd and mountd are not built yet), each tree in a
fresh temp dir with its own HTTP port. For each one, in one run:

  1. start latency: from launching the supervisor to storaged's socket
     `/health` and apid's HTTP `/health` both answering 200 (polled every
     ms); median over every tree the run starts;
  2. supervisor RSS: the sum of VmRSS of the supervisor's own processes
     (everything in the tree but storaged and apid), with their count;
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
import ctypes
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAEMONS = ("storaged", "apid")
POLL_S = 0.001
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


class Unavailable(Exception):
    """This supervisor cannot be measured here; the message says why."""


# ---------------------------------------------------------------- HTTP probes


def _status_of(sock: socket.socket, path: str) -> int | None:
    """Send a GET and return the status code of the answer's first line."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(256)
        if not chunk:
            break
        head += chunk
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def get_unix(sock_path: Path, path: str = "/health") -> int | None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(sock_path))
            return _status_of(s, path)
    except OSError:
        return None


def get_tcp(port: int, path: str = "/health") -> int | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            return _status_of(s, path)
    except OSError:
        return None


def wait_until(done, timeout: float, since: float | None = None, every: float = POLL_S) -> float | None:
    """Poll `done()`; seconds from `since` (default: now) to true, or None on timeout."""
    start = time.perf_counter() if since is None else since
    deadline = time.perf_counter() + timeout
    while not done():
        if time.perf_counter() > deadline:
            return None
        time.sleep(every)
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- /proc


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def read_proc(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def exe_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:  # gone, or a zombie
        return None


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie (its sockets are still open)."""
    stat = read_proc(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def parent_of(pid: int) -> int:
    stat = read_proc(pid, "stat")
    return int(stat.rsplit(b")", 1)[1].split()[1]) if stat else 0


def descendants(root: int) -> list[int]:
    """Every live process below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        children.setdefault(parent_of(pid), []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return [p for p in found if running(p)]


def vm_rss_kib(pid: int) -> int:
    for line in read_proc(pid, "status").splitlines():
        if line.startswith(b"VmRSS:"):
            return int(line.split()[1])
    return 0


def has_open(pid: int, target: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def become_subreaper() -> None:
    """Adopt the trees' orphans, so that `Sandbox.close` can reap them.

    pid 1 here does not reap promptly: without this the runsv, s6-supervise
    and daemons killed after their supervisor's SIGKILL stay as zombies.
    """
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                return
        except ChildProcessError:
            return


# ---------------------------------------------------------------- sandbox


class Sandbox:
    """One supervisor tree's temp dir, port and environment.

    The processes of the tree are found by their environment, which holds the
    temp dir's path (META_CORE_PATH and friends): every supervisor here passes
    its environment on. `close` kills them and, as the script is a subreaper
    (orphans come to it) and runs one sandbox at a time, every descendant of
    the script too, so no run leaves a process behind.
    """

    def __init__(self, bins: dict[str, str], label: str):
        self.bins = bins
        self.bin_dir = str(Path(bins["meta-core"]).parent)
        self.root = Path(tempfile.mkdtemp(prefix=f"bench-sup-{label}-"))
        self.tag = str(self.root).encode()
        self.port = free_port()
        self.run_dir = self.root / "run"
        self.env = self.env_for(self.run_dir, self.port)
        self.db = str(self.root / "meta-core" / "db" / "meta-core.db")
        self.procs: list[subprocess.Popen] = []
        (self.root / "files").mkdir()
        (self.root / "logs").mkdir()

    def env_for(self, run_dir: Path, port: int) -> dict[str, str]:
        return {
            **os.environ,
            "META_CORE_PATH": str(self.root / "meta-core"),
            "META_CORE_RUN_DIR": str(run_dir),
            "FILES_PATH": str(self.root / "files"),
            "META_CORE_HTTP_HOST": "127.0.0.1",
            "META_CORE_HTTP_PORT": str(port),
            "META_CORE_LOG_DIR": str(self.root / "logs"),
            "META_CORE_BIN_DIR": self.bin_dir,
            "RUST_LOG": "warn",
        }

    def spawn(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start a process in its own session, its output in a log file of the sandbox."""
        log = open(self.root / f"{Path(argv[0]).name}-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            argv, env=env or self.env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        proc.log_path = log.name  # for the reason it gives when it exits early
        log.close()
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        """Live processes of this tree (zombies have an empty environ)."""
        return [p for p in all_pids() if p != os.getpid() and self.tag in read_proc(p, "environ")]

    def daemon_pids(self, name: str) -> list[int]:
        return [p for p in self.pids() if exe_of(p) == self.bins[name]]

    def own_pids(self) -> list[int]:
        """The supervisor's own processes: the tree less its children."""
        children = {self.bins[d] for d in DAEMONS}
        return [p for p in self.pids() if exe_of(p) not in children]

    def healthy(self) -> bool:
        return get_unix(self.run_dir / "storaged.sock") == 200 and get_tcp(self.port) == 200

    def close(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        # Children outside those groups (setsid, orphans) are found by
        # environment, or as the script's descendants.
        for _ in range(50):
            left = set(self.pids()) | set(descendants(os.getpid()))
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        for proc in self.procs:
            proc.wait()
        reap_orphans()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def last_line(path: str) -> str:
    lines = Path(path).read_text(errors="replace").strip().splitlines()
    return lines[-1][:160] if lines else "no output"


# ---------------------------------------------------------------- supervisors


class Supervisor:
    """How to run one supervisor over storaged and apid."""

    name = ""
    tools: tuple[str, ...] = ()
    install = ""

    def missing(self, bins: dict[str, str]) -> str | None:
        absent = [t for t in self.tools if shutil.which(t) is None]
        return f"not installed ({self.install})" if absent else None

    def prepare(self, sb: Sandbox) -> None:
        """Write its configuration (before the start clock runs)."""

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        raise NotImplementedError

    def status_argv(self, sb: Sandbox) -> list[str] | None:
        """The status command, or None where the supervisor has none."""
        return None

    def request_stop(self, sb: Sandbox, top: subprocess.Popen) -> None:
        top.send_signal(signal.SIGTERM)


def write_run_scripts(sb: Sandbox, parent: Path) -> None:
    """runit and s6 service dirs: a `run` script that execs the daemon."""
    for daemon in DAEMONS:
        service = parent / daemon
        service.mkdir(parents=True)
        run = service / "run"
        run.write_text(f"#!/bin/sh\nexec {sb.bins[daemon]} 2>>{sb.root}/logs/{daemon}.log\n")
        run.chmod(0o755)


class Supervisord(Supervisor):
    name = "supervisord"
    tools = ("supervisord", "supervisorctl")
    install = "apt-get install supervisor"

    def conf(self, sb: Sandbox) -> Path:
        return sb.root / "supervisord.conf"

    def prepare(self, sb: Sandbox) -> None:
        # startsecs=0 and autorestart: its fastest sane restart settings.
        programs = "".join(
            f"[program:{d}]\ncommand={sb.bins[d]}\npriority={i}\nautorestart=true\n"
            f"startsecs=0\nstartretries=100\nstopsignal=TERM\nstopwaitsecs=10\n"
            f"redirect_stderr=true\nstdout_logfile={sb.root}/logs/{d}.log\n\n"
            for i, d in enumerate(DAEMONS, 1)
        )
        self.conf(sb).write_text(
            f"[supervisord]\nnodaemon=true\nlogfile={sb.root}/supervisord.log\n"
            f"pidfile={sb.root}/supervisord.pid\nchildlogdir={sb.root}/logs\n\n"
            f"[unix_http_server]\nfile={sb.root}/supervisor.sock\n\n"
            f"[supervisorctl]\nserverurl=unix://{sb.root}/supervisor.sock\n\n"
            "[rpcinterface:supervisor]\n"
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
            + programs
        )

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        return sb.spawn(["supervisord", "-n", "-c", str(self.conf(sb))])

    def status_argv(self, sb: Sandbox) -> list[str]:
        return ["supervisorctl", "-c", str(self.conf(sb)), "status"]


class S6(Supervisor):
    name = "s6"
    tools = ("s6-svscan", "s6-svstat", "s6-svscanctl")
    install = "apt-get install s6"

    def prepare(self, sb: Sandbox) -> None:
        write_run_scripts(sb, sb.root / "s6")

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        return sb.spawn(["s6-svscan", str(sb.root / "s6")])

    def status_argv(self, sb: Sandbox) -> list[str]:
        return ["s6-svstat", str(sb.root / "s6" / "storaged")]

    def request_stop(self, sb: Sandbox, top: subprocess.Popen) -> None:
        # -t: TERM to every s6-supervise (which stops its service), then exit.
        subprocess.run(["s6-svscanctl", "-t", str(sb.root / "s6")])


class Runit(Supervisor):
    name = "runit"
    tools = ("runsvdir", "sv")
    install = "apt-get install runit"

    def prepare(self, sb: Sandbox) -> None:
        write_run_scripts(sb, sb.root / "runit")
        # runsvdir does not start a service dir modified within the current
        # second until the next; a real service dir is older than the boot.
        past = time.time() - 5
        os.utime(sb.root / "runit", (past, past))

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        return sb.spawn(["runsvdir", str(sb.root / "runit")])

    def status_argv(self, sb: Sandbox) -> list[str]:
        return ["sv", "status", str(sb.root / "runit" / "storaged")]

    def request_stop(self, sb: Sandbox, top: subprocess.Popen) -> None:
        # runsvdir(8): SIGTERM only exits it; SIGHUP sends TERM to each runsv,
        # which stops its service and exits.
        top.send_signal(signal.SIGHUP)


class Horust(Supervisor):
    name = "horust"
    tools = ("horust",)
    install = "cargo install horust --locked"

    def prepare(self, sb: Sandbox) -> None:
        services = sb.root / "horust"
        services.mkdir()
        for daemon in DAEMONS:
            after = 'start-after = ["storaged.toml"]\n' if daemon == "apid" else ""
            (services / f"{daemon}.toml").write_text(
                f'command = "{sb.bins[daemon]}"\n{after}'
                f'stdout = "{sb.root}/logs/{daemon}.log"\nstderr = "{sb.root}/logs/{daemon}.log"\n'
                '[restart]\nstrategy = "always"\nbackoff = "0s"\n'
                '[termination]\nsignal = "TERM"\nwait = "10s"\n'
                # Its default passes only PATH, HOME, USER and HOSTNAME.
                '[environment]\nkeep-env = true\n'
            )

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        return sb.spawn(["horust", "--services-path", str(sb.root / "horust"), "--uds-folder-path", str(sb.root)])

    def status_argv(self, sb: Sandbox) -> list[str] | None:
        # horustctl is a crate of its own, newer than the figures.
        if shutil.which("horustctl") is None:
            return None
        horust = sb.procs[0].pid  # its socket is named after its pid
        return ["horustctl", "-u", str(sb.root), "-p", str(horust), "status", "storaged.toml"]


class MetaCore(Supervisor):
    name = "meta-core"

    def missing(self, bins: dict[str, str]) -> str | None:
        exe = Path(bins["meta-core"])
        return None if exe.is_file() else f"not available: {exe} not built"

    def launch(self, sb: Sandbox) -> subprocess.Popen:
        return sb.spawn([sb.bins["meta-core"], "run"])

    def status_argv(self, sb: Sandbox) -> list[str]:
        return [sb.bins["meta-core"], "status"]


SUPERVISORS = [Supervisord(), S6(), Runit(), Horust(), MetaCore()]


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
          "(watcherd and mountd are not built yet: two children per tree)")
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
