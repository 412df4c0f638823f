"""Processes and sockets as the supervisor benchmark sees them: HTTP
status probes over a Unix socket or TCP, polling for a condition, and what
/proc says of a process tree (its members, RSS, open files). Linux, Python
3.11, stdlib only.
"""

import ctypes
import os
import socket
import time
from pathlib import Path

POLL_S = 0.001


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
