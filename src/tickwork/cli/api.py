"""``tickwork api``: serve the HTTP API, the dashboard and ``/metrics`` until SIGTERM.

Run it on any number of hosts against one database, behind a load balancer (``/healthz``
and ``/readyz`` are its checks). It executes nothing and triggers nothing: it reads the
store and sends commands through the client, like the CLI. It shows in ``tickwork
cluster`` as an ``api`` node, with its clock offset (:mod:`tickwork.presence`).

Keys: every endpoint but the health checks needs an API key (``tickwork keys create``).
Bound to a loopback address (127.0.0.1, ::1, localhost) while no key was ever created, the
API runs *open*: a caller without a key acts as an admin, with a warning in the log, until
the first key is created. A revoked key still counts: revoking every key leaves an API that
refuses everyone, never an open one. ``--open`` forces the open mode on a loopback address
even though keys exist (for a developer's machine); it is refused on any other address.
Bound to any other address with no key ever created, it refuses to start (exit 2), so a
scheduler's data is never served to a network by accident.

Behind a TLS proxy: the dashboard's sign-in cookie is ``Secure`` when the request came
over https, which the server learns from ``X-Forwarded-Proto`` only when the proxy's
address is in ``--forwarded-allow-ips`` (default: this host, 127.0.0.1 and ::1); bound to
any address but loopback, the cookie is ``Secure`` always.

Started while the database does not answer, it waits for it before it listens (whether it
may serve open depends on the keys the store holds), logging the wait once
(``--exit-on-unavailable``: exit 1 at once instead; :mod:`tickwork.node`). On SQLite it
creates the store when there is none, as ``tickwork run`` does.

``tickwork run`` serves the same app beside its scheduler and worker (:class:`ApiServer`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from enum import Enum
from typing import Annotated

import typer

from tickwork.cli.app import app
from tickwork.cli.options import (
    AppOption,
    DbOption,
    ExitOnUnavailableOption,
    ForwardedAllowIpsOption,
    HostOption,
    LogFormatOption,
    LogLevelOption,
    OpenOption,
    PortOption,
)
from tickwork.cli.output import echo, redact
from tickwork.cli.serve import StopWait, configure_logging, serve_until_signal
from tickwork.cli.worker import app_and_db
from tickwork.client import Client
from tickwork.config import Config, default_node_id
from tickwork.errors import TickworkError, ValidationError
from tickwork.tasks.registry import Registry

log = logging.getLogger("tickwork.web")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
STARTUP_TIMEOUT = 15.0
"""Seconds the server may take to start listening before the command gives up."""
SHUTDOWN_TIMEOUT = 10
"""Seconds open requests may take to finish once the server stops."""
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
"""Peers whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are believed: a proxy on
this host (uvicorn's own default)."""


class Access(Enum):
    """Who may call the API, as decided at start (:func:`check_access`)."""

    KEYS = "API keys required"
    OPEN_UNTIL_FIRST_KEY = "open access: no API key was ever created"
    OPEN_FORCED = "open access (--open)"

    @property
    def open(self) -> bool:
        return self is not Access.KEYS


@app.command("api")
def api(
    *,
    db: DbOption = "",
    host: HostOption = DEFAULT_HOST,
    port: PortOption = DEFAULT_PORT,
    app_module: AppOption = None,
    force_open: OpenOption = False,
    forwarded_allow_ips: ForwardedAllowIpsOption = DEFAULT_FORWARDED_ALLOW_IPS,
    node_id: Annotated[
        str | None,
        typer.Option(
            "--node-id",
            metavar="ID",
            show_default=False,
            help="This process's name in `tickwork cluster` (default: host-pid-random).",
        ),
    ] = None,
    exit_on_unavailable: ExitOnUnavailableOption = False,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = "text",
) -> None:
    """Serve the HTTP API, the dashboard and /metrics (keys required off loopback)."""
    from tickwork.node import when_store_answers  # here: the other commands load no worker

    configure_logging(log_level, log_format)
    proxies = trusted_proxies(forwarded_allow_ips)
    loaded, url = app_and_db(app_module, db)
    exit_now = exit_on_unavailable or Config.from_env().exit_on_unavailable
    try:
        client = Client.open(
            url,
            loaded.registry if loaded is not None else Registry(),
            create=True,
            connect=exit_now,  # else the wait below rides out an outage at start
        )
        try:
            presence = client.presence("api", node_id or default_node_id())
            servers: list[ApiServer] = []

            def start(wait: StopWait) -> None:
                # Whether it may serve open depends on the keys in the store: during an
                # outage at start it waits for the database before it listens.
                access = when_store_answers(
                    lambda: check_access(client, host, force_open=force_open),
                    exit_on_unavailable=exit_now,
                    wait=wait,
                )
                if access is None:
                    return
                server = ApiServer(client, host, port, access=access, trusted_proxies=proxies)
                servers.append(server)
                server.start()
                presence.start()
                echo(f"tickwork api: ready on {server.url} (db {redact(url)}; {access.value})")

            def stop() -> None:
                for server in servers:
                    server.stop()

            try:
                serve_until_signal(start, stop)
            finally:
                presence.stop()
                stop()  # idempotent; closes the socket even if it never served
        finally:
            client.close()
    finally:
        if loaded is not None:
            loaded.close()
    log.info("tickwork api stopped")


def check_access(client: Client, host: str, *, force_open: bool = False) -> Access:
    """Who may call an API served on ``host``: open only on loopback, and only while no
    key was ever created (a revoked key counts) or with ``force_open`` (``--open``).

    Raises ValidationError (exit 2) for ``force_open`` off loopback, and for a non-loopback
    address while no key was ever created.
    """
    loopback = is_loopback(host)
    if force_open:
        if not loopback:
            raise ValidationError(
                f"--open serves without keys, so only on a loopback address, not on {host}",
                field="open",
            )
        log.warning(
            "open access on %s (--open): callers without a key act as admin, whatever keys exist",
            host,
        )
        return Access.OPEN_FORCED
    keys = client.list_api_keys()
    if keys:
        if all(key.revoked_at is not None for key in keys):
            log.warning(
                "every API key is revoked: every request is refused until a key is created "
                "('tickwork keys create')"
            )
        return Access.KEYS
    if not loopback:
        raise ValidationError(
            f"refusing to serve on {host} without API keys: create one with "
            "'tickwork keys create --tenant NAME --admin', or listen on 127.0.0.1",
            field="host",
        )
    log.warning(
        "open access on %s: no API key was ever created, so callers without a key act as "
        "admin until one is ('tickwork keys create')",
        host,
    )
    return Access.OPEN_UNTIL_FIRST_KEY


def trusted_proxies(value: str) -> list[str]:
    """``--forwarded-allow-ips`` as uvicorn takes it: addresses and CIDR networks, or
    ``*`` alone. ValidationError (exit 2) for anything else: uvicorn would take a typo for
    a literal that no peer ever matches, and the cookie would silently lose ``Secure``."""
    items = [item.strip() for item in value.split(",")]
    if items == ["*"]:
        return items
    for item in items:
        try:
            if "/" in item:
                ipaddress.ip_network(item)
            else:
                ipaddress.ip_address(item)
        except ValueError:
            raise ValidationError(
                f"--forwarded-allow-ips: {item!r} is not an IP address or network "
                "(write 10.0.0.5, 10.0.0.0/8, a list of them, or * alone)",
                field="forwarded_allow_ips",
            ) from None
    return items


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (no network reaches it)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


class ApiServer:
    """The app on uvicorn, in a thread: bound at construction, serving from ``start()``.

    Binding here rather than inside uvicorn turns a taken port into a clear error in the
    caller's thread (uvicorn would exit its own thread quietly) and tells the real port
    when 0 was asked for.
    """

    def __init__(
        self,
        client: Client,
        host: str,
        port: int,
        *,
        access: Access,
        trusted_proxies: list[str] | None = None,
        rescues: Callable[[], int] | None = None,
    ) -> None:
        # Imported here: the web stack costs most of the CLI's start-up time, and only the
        # commands that serve HTTP need it.
        import uvicorn

        from tickwork.web.app import create_app

        self.socket = _bind(host, port)
        bound = self.socket.getsockname()
        self.host, self.port = str(bound[0]), int(bound[1])
        self.app = create_app(
            client,
            open_access=access.open,
            force_open=access is Access.OPEN_FORCED,
            # Off loopback the browser talks to this server across a network: its cookie
            # must never travel in clear, whatever a proxy says or fails to say. Judged by
            # the address bound, not by resolving the name again.
            secure_cookies=not ipaddress.ip_address(self.host).is_loopback,
            rescues=rescues,
        )
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host=self.host,
                port=self.port,
                log_config=None,
                access_log=False,  # AccessLogMiddleware writes one line per request
                lifespan="off",
                server_header=False,
                proxy_headers=True,
                forwarded_allow_ips=(
                    trusted_proxies
                    if trusted_proxies is not None
                    else DEFAULT_FORWARDED_ALLOW_IPS.split(",")
                ),
                timeout_graceful_shutdown=SHUTDOWN_TIMEOUT,
            )
        )
        self._thread = threading.Thread(target=self._serve, name="api", daemon=True)
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _serve(self) -> None:
        try:
            self.server.run(sockets=[self.socket])
        except BaseException as exc:  # SystemExit from uvicorn's startup included
            self._failure = exc
            log.exception("the HTTP server stopped")

    def start(self) -> None:
        """Serve in a thread; return once it accepts connections."""
        _route_uvicorn_logs()
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise TickworkError(f"the HTTP server on {self.url} did not start")
            time.sleep(0.01)
        log.info("serve url=%s", self.url)

    def stop(self) -> None:
        """Stop accepting, let open requests finish (up to SHUTDOWN_TIMEOUT s). Idempotent."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(SHUTDOWN_TIMEOUT + 5)
        self.socket.close()


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ValidationError(f"cannot listen on {host!r}: {exc}", field="host") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise TickworkError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _route_uvicorn_logs() -> None:
    """uvicorn's own lines (startup, protocol errors) go where tickwork's go."""
    ours = logging.getLogger("tickwork")
    theirs = logging.getLogger("uvicorn")
    theirs.handlers[:] = ours.handlers
    theirs.setLevel(max(ours.getEffectiveLevel(), logging.WARNING))
    theirs.propagate = False
