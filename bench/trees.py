"""The trees the supervisor benchmark starts: a sandbox a tree runs in
(its own temp dir, port and environment) and each supervisor it compares,
told how to start, query and stop the same children. Python 3.11, stdlib
only.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from procs import all_pids, descendants, exe_of, free_port, get_tcp, get_unix, read_proc, reap_orphans

DAEMONS = ("storaged", "apid")
# Every program a tree's supervisor may start (meta-core starts all four
# daemons whatever the peers are given).
CHILDREN = {"storaged", "apid", "watcherd", "mountd", "rclone"}


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
        """The supervisor's own processes: the tree less its children.

        meta-core also starts watcherd and mountd (and mountd rclone), which
        the peers are not given: they are children too, not the supervisor.
        """
        return [p for p in self.pids() if Path(exe_of(p) or "").name not in CHILDREN]

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
