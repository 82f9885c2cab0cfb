"""PostgreSQL clusters owned by the harness: a primary, a streaming standby, and a fail-over.

The harness runs its own servers (never the machine's): ``initdb`` into a directory of the
run, a standby copied by ``pg_basebackup``, and the operator's fail-over procedure. Each
server listens on 127.0.0.1 only; the nodes, each in its own network namespace, reach it
through a proxy of ``chaos.net`` that forwards from the host side of their veth link.

Who runs what
-------------
PostgreSQL refuses to run as root, and the harness needs root for network namespaces, so
every server program (``initdb``, ``pg_ctl``, ``pg_basebackup``) runs as the OS user
``postgres`` through ``runuser`` when the harness is root, and directly otherwise. The data
directory and its log file are owned by that user; every parent directory must be
traversable by it (``/tmp/pytest-of-root`` is not: take a fresh ``tempfile.mkdtemp()``
and ``chmod 0755`` it).

Leftovers
---------
A harness that crashes leaves its postmasters running: ``pg_ctl`` detaches them. Three
nets catch them:

1. ``atexit`` stops, immediately, every server this process started and has not stopped.
2. ``start()`` first stops a postmaster still running on its data directory
   (``postmaster.pid``) or on its port: each server is started with
   ``-c cluster_name=chaos-<name>`` on its command line, so an old postmaster of the
   harness is told apart from anyone else's in ``/proc`` (the machine's own server has no
   such argument, and port 5432 is refused outright).
3. ``PgCluster`` is a context manager whose exit stops the server (``destroy()`` also
   deletes the data).

Settings worth knowing
----------------------
``synchronous_standby_names`` is set with ``ALTER SYSTEM`` on the primary by
``make_standby(sync=True)``; ``fail_over()`` resets it on the promoted standby, else every
commit there would wait for a standby that no longer exists. There is no replication slot:
``wal_keep_size`` keeps enough WAL for a standby that falls behind during a run, and a slot
on a dead primary would only be in the way.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, LiteralString

import psycopg
from psycopg import sql as pgsql
from psycopg.abc import Params

log = logging.getLogger(__name__)

SUPERUSER = "chaos"
"""The superuser ``initdb`` creates; every connection of the harness and the nodes uses it."""
OS_USER = "postgres"
"""The OS user that owns the data directories and runs the server programs."""
FORBIDDEN_PORT = 5432
"""The machine's own PostgreSQL listens here; the harness never touches it."""
CLUSTER_NAME_PREFIX = "chaos-"
"""Prefix of ``cluster_name`` on the postmaster's command line: marks it as the harness's."""
SOCKET_DIR_PREFIX = "tw-pg-"
"""Unix sockets go to ``$TMPDIR/tw-pg-<port>`` while the server runs."""
BIN_GLOB = "/usr/lib/postgresql/*/bin"
"""Where Debian installs the server binaries, one directory per major version."""

MAX_CONNECTIONS = 200
WAL_KEEP_SIZE = "1GB"
"""WAL kept for a standby that falls behind: far more than a run writes."""
MAX_WAL_SENDERS = 10
WAL_RETRY = "200ms"
"""A standby's ``wal_retrieve_retry_interval``: how soon it reconnects to a primary that
restarted. With synchronous replication the primary's commits wait for it meanwhile."""

START_TIMEOUT_S = 60.0
"""Seconds ``pg_ctl start`` waits; crash recovery after an immediate stop is part of it."""
STOP_TIMEOUT_S = 60.0
"""Seconds ``pg_ctl stop`` waits; a fast stop still writes a checkpoint."""
STALE_STOP_TIMEOUT_S = 10.0
"""Seconds an old postmaster gets to exit after SIGQUIT before it is sent SIGKILL."""
COMMAND_TIMEOUT_S = 120.0
"""Seconds any other server program (initdb, pg_basebackup) may take."""
REPLICATION_TIMEOUT_S = 60.0
"""Seconds to wait for a standby to stream, to become synchronous, or to be promoted."""
CONNECT_TIMEOUT_S = 5
"""libpq ``connect_timeout`` of the harness's own connections (whole seconds)."""
COMMIT_TIMEOUT_S = 10.0
"""Seconds ``commit_probe`` keeps trying before the server counts as stuck."""
COMMIT_ATTEMPT_S = 1.0
"""Seconds one probe commit may wait before it is cancelled and tried again."""
POLL_INTERVAL_S = 0.05


Query = LiteralString | bytes | pgsql.SQL | pgsql.Composed
"""A statement psycopg accepts: a literal string or a composed one (never formatted text)."""


class PgError(RuntimeError):
    """A server program failed or a server did not reach the state waited for."""


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` that has ``pg_ctl``."""
    candidates = [p for p in Path("/").glob(BIN_GLOB.lstrip("/")) if (p / "pg_ctl").exists()]
    if not candidates:
        raise PgError(f"no PostgreSQL server binaries in {BIN_GLOB}")

    def major(path: Path) -> int:
        version = path.parent.name
        return int(version) if version.isdigit() else -1

    return max(candidates, key=major)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the kernel's pick; never 5432)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port != FORBIDDEN_PORT:
            return port


def _as_root() -> bool:
    return os.geteuid() == 0


def _os_user_ids() -> tuple[int, int]:
    if not _as_root():
        return os.geteuid(), os.getegid()
    entry = pwd.getpwnam(OS_USER)
    return entry.pw_uid, entry.pw_gid


def _run(argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT_S, check: bool = True) -> str:
    """Run a server program as ``postgres``; its combined output, or PgError on failure."""
    full = ["runuser", "-u", OS_USER, "--", *argv] if _as_root() else list(argv)
    # cwd "/": the postgres user cannot read root's home, and initdb warns about it.
    proc = subprocess.run(
        full,
        cwd="/",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = proc.stdout + proc.stderr
    if check and proc.returncode != 0:
        raise PgError(f"{shlex.join(argv)} exited {proc.returncode}:\n{output.strip()}")
    return output


def _owned_dir(path: Path, mode: int = 0o700) -> None:
    """Create ``path`` (empty) for the postgres user, and check that user can reach it."""
    path.mkdir(parents=True, exist_ok=True)
    uid, gid = _os_user_ids()
    os.chown(path, uid, gid)
    path.chmod(mode)
    if _as_root():
        reach = subprocess.run(
            ["runuser", "-u", OS_USER, "--", "test", "-w", str(path)], check=False, cwd="/"
        )
        if reach.returncode != 0:
            raise PgError(
                f"user {OS_USER} cannot write {path}: every parent directory must be "
                "traversable by it (chmod o+x)"
            )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _harness_postmasters(data_dir: Path, port: int) -> list[int]:
    """Pids of postmasters of the harness on ``data_dir`` or on ``port`` (any data dir).

    A postmaster keeps its command line (its children retitle theirs), and every one the
    harness starts carries ``-p <port>`` and ``cluster_name=chaos-...``: nobody else's
    server matches.
    """
    found: set[int] = set()
    pid_file = data_dir / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pid_file.read_text().splitlines()[0])
        argv = _cmdline(pid)
        if argv and Path(argv[0]).name in {"postgres", "postmaster"}:
            found.add(pid)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = _cmdline(int(entry.name))
        if not argv or Path(argv[0]).name not in {"postgres", "postmaster"}:
            continue
        ours = any(arg.startswith(f"cluster_name={CLUSTER_NAME_PREFIX}") for arg in argv)
        on_port = any(a == "-p" and b == str(port) for a, b in itertools.pairwise(argv))
        if ours and on_port:
            found.add(int(entry.name))
    return sorted(found)


def _kill_postmaster(pid: int) -> None:
    """Immediate shutdown (SIGQUIT) of a postmaster; SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + STALE_STOP_TIMEOUT_S
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            break
        time.sleep(POLL_INTERVAL_S)


_live: dict[int, PgCluster] = {}
_live_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    """Stop, immediately, every server this process started and has not stopped."""
    with _live_lock:
        clusters = list(_live.values())
    for cluster in clusters:
        try:
            cluster.stop("immediate")
        except Exception:  # best effort at exit; the next start() retries
            log.exception("could not stop %s at exit", cluster.name)


atexit.register(_stop_all_at_exit)


class PgCluster:
    """One PostgreSQL server of the harness: a data directory and a port on 127.0.0.1.

    ``name`` shows in ``ps`` (``cluster_name=chaos-<name>``) and in error messages. The
    server's log is ``<data_dir>.log``, beside the data directory. Connections: superuser
    ``chaos`` without password, to ``url(dbname)``.
    """

    def __init__(
        self, data_dir: Path | str, port: int, *, bin_dir: Path | str | None = None, name: str
    ) -> None:
        if port == FORBIDDEN_PORT:
            raise ValueError(f"port {FORBIDDEN_PORT} belongs to the machine's own PostgreSQL")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"cluster name {name!r}: letters, digits, '_', '.', '-' only")
        self.data_dir = Path(data_dir).absolute()
        self.port = port
        self.name = name
        self.bin_dir = Path(bin_dir) if bin_dir is not None else find_bin_dir()
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        # Not the data directory: pg_basebackup would warn about a socket in it, and a
        # socket's path must stay under ~107 bytes. One name per port: a restart after a
        # crash reuses it, and ports are never shared.
        self.socket_dir = Path(tempfile.gettempdir()) / f"{SOCKET_DIR_PREFIX}{port}"

    def __repr__(self) -> str:
        return f"PgCluster({self.name!r}, port={self.port}, data_dir={str(self.data_dir)!r})"

    def __enter__(self) -> PgCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The data stays for a post-mortem; destroy() is explicit.
        self.stop("immediate")

    def _bin(self, program: str) -> str:
        return str(self.bin_dir / program)

    # -- lifecycle -------------------------------------------------------------------------

    def init(self) -> None:
        """``initdb`` a fresh cluster: superuser ``chaos``, trust auth, ready to replicate."""
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise PgError(f"{self.data_dir} is not empty")
        _owned_dir(self.data_dir)
        # --no-sync: a postmaster crash (stop immediate) keeps the page cache; only an OS
        # crash needs initdb's fsyncs, and the harness never simulates one.
        _run(
            [
                self._bin("initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ]
        )
        hba = "\n".join(
            [
                "# Written by chaos/pg.py: trust for the harness and the nodes.",
                "local all all trust",
                "local replication all trust",
                "host all all 127.0.0.1/32 trust",
                "host replication all 127.0.0.1/32 trust",
                "host all all 10.0.0.0/8 trust",
                "host replication all 10.0.0.0/8 trust",
                "",
            ]
        )
        (self.data_dir / "pg_hba.conf").write_text(hba)
        settings = {
            # Proxies in the root namespace forward to it: nothing else may reach it.
            "listen_addresses": "'127.0.0.1'",
            "max_connections": str(MAX_CONNECTIONS),
            "wal_level": "replica",
            "max_wal_senders": str(MAX_WAL_SENDERS),
            "hot_standby": "on",
            "wal_keep_size": f"'{WAL_KEEP_SIZE}'",
            "fsync": "on",
            "log_line_prefix": "'%m [%p] %q%u@%d '",
            "log_connections": "off",
        }
        conf = "\n# chaos/pg.py\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
        with (self.data_dir / "postgresql.conf").open("a") as f:
            f.write(conf)

    def _postmaster_options(self) -> str:
        return shlex.join(
            [
                "-p",
                str(self.port),
                "-k",
                str(self.socket_dir),
                "-c",
                f"cluster_name={CLUSTER_NAME_PREFIX}{self.name}",
            ]
        )

    def _running_pid(self) -> int | None:
        """The postmaster's pid from ``postmaster.pid`` when that process is alive."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _pid_alive(pid) else None

    def start(self) -> None:
        """Start the server and wait until it accepts connections (a standby: read-only).

        A postmaster this object already runs is left alone. One left behind by an earlier
        run on this data directory or port is stopped immediately first.
        """
        if self.port in _live and _live[self.port] is self and self._running_pid() is not None:
            return
        for pid in _harness_postmasters(self.data_dir, self.port):
            log.warning("stopping a postmaster left behind on port %d: pid %d", self.port, pid)
            _kill_postmaster(pid)
        if self.socket_dir.is_symlink() or (
            self.socket_dir.exists() and not self.socket_dir.is_dir()
        ):
            self.socket_dir.unlink()
        _owned_dir(self.socket_dir, 0o755)
        if not self.log_path.exists():
            self.log_path.touch()
        uid, gid = _os_user_ids()
        os.chown(self.log_path, uid, gid)
        # Tracked before it runs: a start that times out may still leave a postmaster.
        with _live_lock:
            _live[self.port] = self
        try:
            _run(
                [
                    self._bin("pg_ctl"),
                    "start",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_path),
                    "-w",
                    "-t",
                    str(int(START_TIMEOUT_S)),
                    "-o",
                    self._postmaster_options(),
                ],
                timeout=START_TIMEOUT_S + 10,
            )
        except PgError as exc:
            raise PgError(f"{self.name}: {exc}\n--- log tail ---\n{self.log_tail()}") from None
        self.wait_ready(START_TIMEOUT_S)

    def stop(self, mode: Literal["fast", "immediate", "smart"] = "fast") -> None:
        """Stop the server (no-op when it is not running).

        ``fast`` rolls back open transactions and checkpoints; ``immediate`` is a crash:
        the next start runs recovery.
        """
        if self._running_pid() is not None:
            _run(
                [
                    self._bin("pg_ctl"),
                    "stop",
                    "-D",
                    str(self.data_dir),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    str(int(STOP_TIMEOUT_S)),
                ],
                timeout=STOP_TIMEOUT_S + 10,
            )
        # Only now: a stop that failed is retried at exit.
        with _live_lock:
            if _live.get(self.port) is self:
                del _live[self.port]
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    def restart(self, mode: Literal["fast", "immediate", "smart"] = "fast") -> None:
        """Stop and start the postmaster: every connection drops, the data stays."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop immediately and delete the data directory and its log."""
        self.stop("immediate")
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.log_path.unlink(missing_ok=True)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server log (for error messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- state ------------------------------------------------------------------------------

    def is_ready(self) -> bool:
        """The server answers a query on 127.0.0.1 (a hot standby counts)."""
        try:
            with psycopg.connect(
                self.url("postgres"), connect_timeout=CONNECT_TIMEOUT_S, autocommit=True
            ) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Block until ``is_ready()``; PgError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_ready():
            if time.monotonic() > deadline:
                raise PgError(
                    f"{self.name} not ready within {timeout:g} s\n"
                    f"--- log tail ---\n{self.log_tail()}"
                )
            time.sleep(POLL_INTERVAL_S)

    def in_recovery(self) -> bool:
        """``pg_is_in_recovery()``: true on a standby, false on a primary."""
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])

    def promote(self, timeout: float = REPLICATION_TIMEOUT_S) -> None:
        """Promote a standby and wait until it is out of recovery (read-write)."""
        _run(
            [
                self._bin("pg_ctl"),
                "promote",
                "-D",
                str(self.data_dir),
                "-w",
                "-t",
                str(int(timeout)),
            ],
            timeout=timeout + 10,
        )
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(psycopg.OperationalError):
                if not self.in_recovery():
                    return
            if time.monotonic() > deadline:
                raise PgError(f"{self.name} still in recovery {timeout:g} s after promote")
            time.sleep(POLL_INTERVAL_S)

    # -- SQL ----------------------------------------------------------------------------------

    def url(self, dbname: str, host: str = "127.0.0.1") -> str:
        """``postgresql://chaos@host:port/dbname`` for this server."""
        return f"postgresql://{SUPERUSER}@{host}:{self.port}/{dbname}"

    def sql(
        self, query: Query, params: Params | None = None, *, dbname: str = "postgres"
    ) -> list[tuple[Any, ...]]:
        """Run one statement in its own autocommit connection; the rows it returned."""
        with (
            psycopg.connect(
                self.url(dbname), connect_timeout=CONNECT_TIMEOUT_S, autocommit=True
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(query, params)
            return list(cur.fetchall()) if cur.description is not None else []

    def terminate_backends(self, dbname: str) -> int:
        """``pg_terminate_backend`` every session on ``dbname`` but this one; how many."""
        rows = self.sql(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        )
        return int(rows[0][0])

    def commit_probe(self, timeout: float = COMMIT_TIMEOUT_S) -> float:
        """Commit a transaction that writes WAL; the wall time at which it returned.

        Proves the server read-write and its commits not held by a synchronous standby.
        A commit waits for one after the statement, outside ``statement_timeout``, so each
        attempt is cancelled after ``COMMIT_ATTEMPT_S`` from a timer thread: the cancel
        ends the wait with a warning (the commit is then only local), and that attempt
        counts as held. PgError when every attempt for ``timeout`` seconds was held.
        """
        deadline = time.monotonic() + timeout
        while True:
            answered, warnings = self._probe_once()
            if not warnings:
                return answered
            if time.monotonic() > deadline:
                raise PgError(f"{self.name}: commits held for {timeout:g} s: {warnings}")

    def _probe_once(self) -> tuple[float, list[str]]:
        warnings: list[str] = []
        answered = 0.0
        with psycopg.connect(
            self.url("postgres"), connect_timeout=CONNECT_TIMEOUT_S, autocommit=True
        ) as conn:
            conn.add_notice_handler(lambda diag: warnings.append(str(diag.message_primary)))
            timer = threading.Timer(COMMIT_ATTEMPT_S, conn.cancel_safe)
            timer.start()
            try:
                # A transactional logical message: an xid and a WAL record, nothing else
                # (txid_current() alone writes no WAL, so its commit never waits).
                conn.execute("SELECT pg_logical_emit_message(true, 'chaos', 'probe')")
                answered = time.time()
            except psycopg.errors.QueryCanceled:
                warnings.append("cancelled")
            finally:
                timer.cancel()
        return answered, warnings

    def create_database(self, name: str) -> None:
        self.sql(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))

    def set_system(self, setting: str, value: str | None) -> None:
        """``ALTER SYSTEM SET setting = value`` (``RESET`` for None), then reload."""
        if value is None:
            query = pgsql.SQL("ALTER SYSTEM RESET {}").format(pgsql.Identifier(setting))
        else:
            query = pgsql.SQL("ALTER SYSTEM SET {} = {}").format(
                pgsql.Identifier(setting), pgsql.Literal(value)
            )
        self.sql(query)
        self.sql("SELECT pg_reload_conf()")


def _wait_for(description: str, condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise PgError(f"{description}: not within {timeout:g} s")
        time.sleep(POLL_INTERVAL_S)


def make_standby(
    primary: PgCluster,
    data_dir: Path | str,
    port: int,
    *,
    sync: bool,
    application_name: str = "tw_standby",
    name: str | None = None,
) -> PgCluster:
    """A streaming standby of ``primary``, started; synchronous when ``sync``.

    Copied by ``pg_basebackup -R -X stream`` (no slot); its ``primary_conninfo`` carries
    ``application_name``, which is what ``synchronous_standby_names`` names. Returns once
    the primary's ``pg_stat_replication`` shows it streaming (and, with ``sync``, with
    ``sync_state = 'sync'``: from then on every commit on the primary waits for it).
    """
    standby = PgCluster(
        data_dir, port, bin_dir=primary.bin_dir, name=name or f"{primary.name}-standby"
    )
    if standby.data_dir.exists() and any(standby.data_dir.iterdir()):
        raise PgError(f"{standby.data_dir} is not empty")
    _owned_dir(standby.data_dir)
    _run(
        [
            primary._bin("pg_basebackup"),
            "-D",
            str(standby.data_dir),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            SUPERUSER,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        ]
    )
    conninfo = (
        f"host=127.0.0.1 port={primary.port} user={SUPERUSER} application_name={application_name}"
    )
    # The last setting in postgresql.auto.conf wins over the one -R wrote.
    with (standby.data_dir / "postgresql.auto.conf").open("a") as f:
        f.write(f"primary_conninfo = '{conninfo}'\n")
        # After the primary restarts, every commit there waits until this standby streams
        # again (it is synchronous): retry every WAL_RETRY, not every 5 s (the default).
        f.write(f"wal_retrieve_retry_interval = '{WAL_RETRY}'\n")
    standby.start()

    def replication_state() -> tuple[str, str] | None:
        rows = primary.sql(
            "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
            (application_name,),
        )
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def streaming() -> bool:
        state = replication_state()
        return state is not None and state[0] == "streaming"

    _wait_for(f"{standby.name} streaming from {primary.name}", streaming, REPLICATION_TIMEOUT_S)
    if sync:
        primary.set_system("synchronous_standby_names", application_name)

        def synchronous() -> bool:
            state = replication_state()
            return state is not None and state[1] == "sync"

        _wait_for(f"{standby.name} synchronous", synchronous, REPLICATION_TIMEOUT_S)
    return standby


def fail_over(primary: PgCluster, standby: PgCluster) -> float:
    """The operator's fail-over: the primary dies, the standby is promoted and takes writes.

    The primary is stopped immediately (as if it crashed), the standby promoted, and its
    ``synchronous_standby_names`` reset (a commit there must not wait for a standby that
    no longer exists). Returns the wall time (``time.time()``) at which the new primary
    committed a transaction.
    """
    primary.stop("immediate")
    standby.promote()
    standby.set_system("synchronous_standby_names", None)
    _wait_for(
        f"{standby.name} reloaded its configuration",
        lambda: standby.sql("SHOW synchronous_standby_names") == [("",)],
        REPLICATION_TIMEOUT_S,
    )
    return standby.commit_probe()
