"""One network namespace per node, a veth link to the host, and a latency proxy per link.

Topology
--------
Node ``i`` (1..250) runs in namespace ``tw<run>n<i>``, with one veth pair to the host::

    namespace tw<run>n<i>                    root namespace
    tw<run>c<i> 10.213.i.2/24  <--veth-->  tw<run>h<i> 10.213.i.1/24
                                              Proxy 10.213.i.1:P  ->  127.0.0.1:P (PostgreSQL)

The namespace has no default route: the node reaches the database only through its own
link and the proxies listening on the host end of it, so a fault on the link cuts it off
completely. ``<run>`` is 4 hex digits, which keeps interface names within Linux's 15
characters (``tw1a2bh250``).

Faults
------
- **Black hole** (``Link.blackhole()``): the host end of the veth goes down. Packets are
  dropped silently, no RST and no ICMP reaches the node: a query sent into it hangs until
  the client's own TCP gives up (libpq ``tcp_user_timeout`` / keepalives), exactly like a
  partition. While it is down a blackhole route (metric 4000, below the link's own route)
  keeps the host's replies from leaking out of the default route. ``heal()`` brings the
  link back and flushes the neighbour caches (an entry that failed while the link was down
  would answer the next connect with EHOSTUNREACH).
- **Latency** (``Proxy.set_latency()``): the kernel here has no ``netem``, so the proxy
  holds every chunk for the given time, per connection and per direction, in order.
- **Cut** (``Proxy.cut()``): a userspace fallback for machines without namespaces: the
  proxy stops delivering but keeps the sockets open. Unlike a black hole the client's
  kernel still sees ACKs, so only application timeouts fire, never ``tcp_user_timeout``.

The proxy terminates the node's TCP connection, so the server's own dead-peer detection
never sees the node: the proxy does it for the server (``peer_timeout``) and then closes
the upstream connection, which ends the node's session and releases its locks.

Cleanup
-------
Namespaces and veths are global state of the machine. A ``Network`` owns its links and
proxies and closes them on ``close()``, on leaving its ``with`` block and at exit. A run
that was killed leaves them behind: ``cleanup_stale()`` (called by every new ``Network``)
deletes every ``tw<run>n<i>`` / ``tw<run>h<i>`` whose run is not alive. A run is alive
while it holds the flock on ``/run/tw-chaos/tw<run>.lock``, so two runs on one machine do
not delete each other's links.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import logging
import os
import re
import secrets
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

PREFIX = "tw"
"""Names of namespaces and interfaces start with it; ``cleanup_stale`` looks only at these."""
SUBNET_FORMAT = "10.213.{index}.{host}"
"""Link ``i``: the host end is ``.1``, the namespace end ``.2``, on a /24."""
PREFIX_LENGTH = 24
MIN_INDEX = 1
MAX_INDEX = 250
BLACKHOLE_METRIC = 4000
"""Metric of the per-link blackhole route: only used while the link's own route is gone."""
LOCK_DIR = Path("/run/tw-chaos") if os.geteuid() == 0 else Path(tempfile.gettempdir())
"""Where each live run holds the flock that tells ``cleanup_stale`` to leave it alone."""
IP_TIMEOUT_S = 10.0
"""Seconds one ``ip`` command may take."""
LINK_UP_TIMEOUT_S = 5.0
"""Seconds ``heal()`` waits for the veth to carry again."""
POLL_INTERVAL_S = 0.02

CHUNK_BYTES = 64 * 1024
"""Most bytes the proxy reads at once: one chunk, one timestamp."""
MAX_QUEUED_CHUNKS = 1024
"""Chunks held per connection and direction (64 MiB) before the proxy stops reading."""
PEER_TIMEOUT_S: float | None = 10.0
"""Seconds of silence after which the proxy drops a node it cannot reach (and its session).

Stands in for the server's ``tcp_user_timeout`` / keepalives (a production server should
set them); None models a server on the OS defaults, where a vanished client's session
lives on for two hours.
"""
KEEPALIVE_IDLE_S = 2
"""Idle seconds before the proxy probes the node, so an idle dead node is noticed too."""
KEEPALIVE_INTERVAL_S = 1
"""Seconds between the proxy's keepalive probes (``PEER_TIMEOUT_S`` ends them)."""
UPSTREAM_CONNECT_TIMEOUT_S = 5.0
PROXY_START_TIMEOUT_S = 5.0
PROXY_CLOSE_TIMEOUT_S = 5.0
PROXY_SETTLE_S = 1.0
"""Seconds a closing proxy lets its aborted connections end by themselves before it
cancels what is left."""
PROXY_SETTLE_TURNS_S = 0.05
"""Seconds a closing proxy lets its loop turn, for connections on their way in or out."""
RUN_ID_PATTERN = re.compile(r"[0-9a-f]{4}")


class NetError(RuntimeError):
    """An ``ip`` command failed or a link did not reach the state waited for."""


def _ip(command: str, *, check: bool = True) -> str:
    """Run ``ip <command>`` (split on spaces: no name or address here has one)."""
    args = command.split()
    proc = subprocess.run(
        ["ip", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise NetError(f"ip {command} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def host_address(index: int) -> str:
    """The host end of link ``index``: where its proxies listen."""
    return SUBNET_FORMAT.format(index=index, host=1)


def node_address(index: int) -> str:
    """The namespace end of link ``index``: the node's own address."""
    return SUBNET_FORMAT.format(index=index, host=2)


def _subnet(index: int) -> str:
    return f"{SUBNET_FORMAT.format(index=index, host=0)}/{PREFIX_LENGTH}"


def new_run_id() -> str:
    """4 random hex digits: unique enough per machine, short enough for interface names."""
    return secrets.token_hex(2)


class Link:
    """Namespace ``tw<run_id>n<index>`` joined to the host by a veth pair; created here.

    ``argv()`` wraps a command to run in the namespace; ``blackhole()`` / ``heal()`` cut
    and restore the link; ``close()`` removes everything (idempotent).
    """

    def __init__(self, index: int, *, run_id: str) -> None:
        if not MIN_INDEX <= index <= MAX_INDEX:
            raise ValueError(f"link index {index}: must be {MIN_INDEX}..{MAX_INDEX}")
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"run id {run_id!r}: must be 4 lowercase hex digits")
        self.index = index
        self.run_id = run_id
        self.namespace = f"{PREFIX}{run_id}n{index}"
        self.host_if = f"{PREFIX}{run_id}h{index}"
        self.node_if = f"{PREFIX}{run_id}c{index}"
        self.host_ip = host_address(index)
        self.node_ip = node_address(index)
        self.blackholed = False
        self._closed = False
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"Link({self.index}, namespace={self.namespace!r}, blackholed={self.blackholed})"

    def _create(self) -> None:
        ns, host_if, node_if = self.namespace, self.host_if, self.node_if
        _ip(f"netns add {ns}")
        _ip(f"link add {host_if} type veth peer name {node_if} netns {ns}")
        _ip(f"addr add {self.host_ip}/{PREFIX_LENGTH} dev {host_if}")
        _ip(f"link set {host_if} up")
        _ip(f"-n {ns} addr add {self.node_ip}/{PREFIX_LENGTH} dev {node_if}")
        _ip(f"-n {ns} link set {node_if} up")
        _ip(f"-n {ns} link set lo up")
        _ip(f"route replace blackhole {_subnet(self.index)} metric {BLACKHOLE_METRIC}")
        self._wait_carrier()

    def argv(self, cmd: list[str]) -> list[str]:
        """``cmd`` run inside the namespace (``ip netns exec``)."""
        return ["ip", "netns", "exec", self.namespace, *cmd]

    def blackhole(self) -> None:
        """Drop every packet on the link, silently (the host end goes down)."""
        _ip(f"link set {self.host_if} down")
        self.blackholed = True

    def heal(self) -> None:
        """Bring the link back: up, addressed, routed, neighbour caches fresh."""
        ns, host_if, node_if = self.namespace, self.host_if, self.node_if
        _ip(f"link set {host_if} up")
        _ip(f"-n {ns} link set {node_if} up")
        # Addresses survive a link going down, and the kernel re-adds the prefix route on
        # up; "replace" puts back whatever a hand-made change took away.
        _ip(f"addr replace {self.host_ip}/{PREFIX_LENGTH} dev {host_if}")
        _ip(f"-n {ns} addr replace {self.node_ip}/{PREFIX_LENGTH} dev {node_if}")
        self._wait_carrier()
        _ip(f"neigh flush dev {host_if}", check=False)
        _ip(f"-n {ns} neigh flush dev {node_if}", check=False)
        self.blackholed = False

    def _wait_carrier(self) -> None:
        deadline = time.monotonic() + LINK_UP_TIMEOUT_S
        operstate = Path(f"/sys/class/net/{self.host_if}/operstate")
        while True:
            routed = f"dev {self.host_if}" in _ip(f"route show {_subnet(self.index)}")
            if operstate.read_text().strip() == "up" and routed:
                return
            if time.monotonic() > deadline:
                raise NetError(f"{self.host_if} not up within {LINK_UP_TIMEOUT_S:g} s")
            time.sleep(POLL_INTERVAL_S)

    def close(self) -> None:
        """Delete the namespace, the veth pair and the blackhole route (idempotent)."""
        if self._closed:
            return
        self._closed = True
        # Deleting either end of a veth deletes both; the namespace goes with its name.
        _ip(f"link del {self.host_if}", check=False)
        _ip(f"netns del {self.namespace}", check=False)
        _ip(f"route del blackhole {_subnet(self.index)} metric {BLACKHOLE_METRIC}", check=False)


class _Pair:
    """The two streams of one proxied connection, for closing them from outside."""

    def __init__(self, downstream: asyncio.StreamWriter) -> None:
        self.downstream = downstream
        self.upstream: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        self.downstream.transport.abort()
        if self.upstream is not None:
            self.upstream.transport.abort()


class Proxy:
    """A TCP forwarder from ``listen_host:listen_port`` to ``upstream_host:upstream_port``.

    It runs an asyncio loop in a thread of its own. Each connection gets one queue per
    direction: a chunk read at time t is written at t + latency, in order, while later
    chunks keep being read; so 300 ms of latency adds 300 ms per direction (600 ms to a
    round trip) without capping throughput, and one slow connection holds up no other.
    ``listen_port=0`` takes an ephemeral port: see ``port``.
    """

    def __init__(
        self,
        listen_host: str,
        listen_port: int,
        upstream_host: str,
        upstream_port: int,
        *,
        latency: float = 0.0,
        peer_timeout: float | None = PEER_TIMEOUT_S,
    ) -> None:
        self.listen_host = listen_host
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.peer_timeout = peer_timeout
        self._latency = 0.0
        self.set_latency(latency)
        self._pairs: set[_Pair] = set()
        self._closed = False
        self._accepting = True  # False from refuse() to accept(), and once closed
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._thread = threading.Thread(
            target=self._loop.run_forever,
            name=f"proxy-{listen_host}:{listen_port}",
            daemon=True,
        )
        self._thread.start()
        try:
            self._server = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(self._serve, listen_host, listen_port, reuse_address=True),
                self._loop,
            ).result(PROXY_START_TIMEOUT_S)
        except BaseException:
            self._stop_loop()
            raise
        self.port: int = self._server.sockets[0].getsockname()[1]
        self.url = ""
        """The database URL through this proxy, when made by :meth:`to_url`."""

    def __repr__(self) -> str:
        return (
            f"Proxy({self.listen_host}:{self.port} -> {self.upstream_host}:{self.upstream_port},"
            f" latency={self._latency:g})"
        )

    @property
    def latency(self) -> float:
        return self._latency

    def set_latency(self, seconds: float) -> None:
        """Delay each chunk read from now on by ``seconds``, each direction (0: none)."""
        if seconds < 0:
            raise ValueError(f"latency {seconds}: must be >= 0")
        self._latency = float(seconds)  # one attribute store: atomic for the loop thread

    @classmethod
    def to_url(cls, url: str, *, latency: float = 0.0) -> Proxy:
        """A proxy on loopback to the host and port of PostgreSQL URL ``url`` (one host);
        :attr:`url` is ``url`` through it."""
        parts = urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"{url!r}: a proxy needs a TCP host, not a socket directory")
        proxy = cls("127.0.0.1", 0, parts.hostname, parts.port or 5432, latency=latency)
        user = f"{parts.username}@" if parts.username else ""
        proxy.url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
        return proxy

    def __enter__(self) -> Proxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def refuse(self) -> None:
        """Drop every connection and accept none: what a client sees of a server that is
        restarting (connection refused), until :meth:`accept`."""
        asyncio.run_coroutine_threadsafe(self._refuse(), self._loop).result(PROXY_CLOSE_TIMEOUT_S)

    def accept(self) -> None:
        """Listen again, on the same port, after :meth:`refuse`."""
        self._server = asyncio.run_coroutine_threadsafe(self._accept(), self._loop).result(
            PROXY_START_TIMEOUT_S
        )

    async def _accept(self) -> asyncio.Server:
        self._accepting = True
        return await asyncio.start_server(
            self._serve, self.listen_host, self.port, reuse_address=True
        )

    async def _refuse(self) -> None:
        await self._stop_listening()
        for pair in list(self._pairs):
            pair.abort()
        await self._server.wait_closed()

    async def _stop_listening(self) -> None:
        """Accept no more connections, and close the listening socket.

        Not ``Server.close()`` at once: a connection asyncio accepted a moment before gets
        its transport a turn of the loop later, and on a closed server that transport's
        ``Server._attach`` fails an assertion, which asyncio swallows (Python 3.11),
        leaking the socket. So the loop stops accepting first, lets those connections
        reach ``_serve`` (which aborts them: ``_accepting`` is off), and then closes."""
        self._accepting = False
        for sock in self._server.sockets:
            self._loop.remove_reader(sock.fileno())
        await asyncio.sleep(PROXY_SETTLE_TURNS_S)
        self._server.close()

    def cut(self) -> None:
        """Stop delivering in both directions; the sockets stay open (see module doc)."""
        self._set_flowing(False)

    def restore(self) -> None:
        """Deliver again, starting with what was held back during the cut."""
        self._set_flowing(True)

    def _set_flowing(self, flowing: bool) -> None:
        async def apply() -> None:
            if flowing:
                self._flowing.set()
            else:
                self._flowing.clear()

        # Waits for the loop: once cut() returns, no further chunk goes out.
        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(PROXY_START_TIMEOUT_S)

    @property
    def connections(self) -> int:
        """Connections open through the proxy right now."""
        return len(self._pairs)

    def close(self) -> None:
        """Stop listening, drop every connection, stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(
                PROXY_CLOSE_TIMEOUT_S
            )
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(PROXY_CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server.is_serving():
            await self._stop_listening()
        for pair in list(self._pairs):
            pair.abort()
        await self._server.wait_closed()
        # Every connection now ends by itself: aborted, or aborting itself once its task
        # starts. Cancelled before it starts, or left behind when the loop stops, one would
        # never close its socket: only what is left after a moment (an upstream connect
        # that hangs) is cancelled; then the loop turns again, for the sockets to close.
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=PROXY_SETTLE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(PROXY_SETTLE_TURNS_S)

    def _tune(self, writer: asyncio.StreamWriter, *, downstream: bool) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if downstream and self.peer_timeout is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
            sock.setsockopt(
                socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(self.peer_timeout * 1000)
            )

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        if not self._accepting:  # accepted in the moment before a refuse() or close()
            down_w.transport.abort()
            return
        pair = _Pair(down_w)
        self._pairs.add(pair)
        try:
            await self._forward(pair, down_r)
        except asyncio.CancelledError:
            # Only close() cancels; a cancelled connection task makes asyncio (3.11) log a
            # spurious error from its done-callback, so end normally.
            pass
        finally:
            self._pairs.discard(pair)
            pair.abort()

    async def _forward(self, pair: _Pair, down_r: asyncio.StreamReader) -> None:
        self._tune(pair.downstream, downstream=True)
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection(self.upstream_host, self.upstream_port),
                UPSTREAM_CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError) as exc:
            log.info("proxy %d: upstream unreachable: %s", self.port, exc)
            return
        pair.upstream = up_w
        self._tune(up_w, downstream=False)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pipe(down_r, up_w))
                group.create_task(self._pipe(up_r, pair.downstream))
        except* OSError:
            pass  # a reset or a timed-out peer: _serve drops both sides

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction: read as fast as it comes, write each chunk when due."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(MAX_QUEUED_CHUNKS)

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._flowing.wait()
                if not data:
                    if writer.can_write_eof() and not writer.transport.is_closing():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        async def read() -> None:
            while True:
                data = await reader.read(CHUNK_BYTES)
                await queue.put((loop.time() + self._latency, data))
                if not data:
                    return

        reading = asyncio.create_task(read())
        delivery = asyncio.create_task(deliver())
        try:
            # Normally reading ends at EOF and delivery right after; a failure of either
            # (a reset, a timed-out peer) ends both.
            done, _ = await asyncio.wait({reading, delivery}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            reading.cancel()
            delivery.cancel()


def _lock_path(run_id: str, prefix: str = PREFIX) -> Path:
    return LOCK_DIR / f"{prefix}{run_id}.lock"


def _run_alive(run_id: str, prefix: str = PREFIX) -> bool:
    """Whether a live process holds run ``run_id``'s lock (then its links are in use)."""
    path = _lock_path(run_id, prefix)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def cleanup_stale(prefix: str = PREFIX, *, keep: Iterable[str] = ()) -> list[str]:
    """Delete namespaces and veths of runs that are gone; the names deleted.

    Only names of the form ``<prefix><4 hex>n<digits>`` (namespaces) and
    ``<prefix><4 hex>[hc]<digits>`` (interfaces) are looked at. A run is kept when its id
    is in ``keep`` or a live process holds its lock; its leftover blackhole routes go with
    its interfaces.
    """
    kept = set(keep)
    ns_pattern = re.compile(rf"{re.escape(prefix)}([0-9a-f]{{4}})n(\d+)")
    if_pattern = re.compile(rf"{re.escape(prefix)}([0-9a-f]{{4}})[hc](\d+)")
    alive: dict[str, bool] = {}

    def stale(run_id: str) -> bool:
        if run_id in kept:
            return False
        if run_id not in alive:
            alive[run_id] = _run_alive(run_id, prefix)
        return not alive[run_id]

    removed: list[str] = []
    indexes: set[int] = set()
    for line in _ip("netns list", check=False).splitlines():
        name = line.split(" ", 1)[0]
        match = ns_pattern.fullmatch(name)
        if match and stale(match.group(1)):
            _ip(f"netns del {name}", check=False)
            removed.append(name)
            indexes.add(int(match.group(2)))
    for line in _ip("-o link show", check=False).splitlines():
        # "8: tw1a2bh3@if7: <BROADCAST,...": the name ends at '@' or ':'.
        parts = line.split(":", 2)
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@", 1)[0]
        match = if_pattern.fullmatch(name)
        if match and stale(match.group(1)):
            _ip(f"link del {name}", check=False)
            removed.append(name)
            indexes.add(int(match.group(2)))
    for run_id, is_alive in alive.items():
        if not is_alive:
            _lock_path(run_id, prefix).unlink(missing_ok=True)
    in_use = _indexes_in_use()
    for index in sorted(indexes - in_use):
        _ip(f"route del blackhole {_subnet(index)} metric {BLACKHOLE_METRIC}", check=False)
    if removed:
        log.warning("removed links of dead runs: %s", ", ".join(removed))
    return removed


def _indexes_in_use() -> set[int]:
    """Link indexes whose host address is configured on some interface."""
    pattern = re.compile(r"inet 10\.213\.(\d+)\.1/")
    return {int(m.group(1)) for m in pattern.finditer(_ip("-o -4 addr show"))}


class Network:
    """The links and proxies of one run; ``close()`` (also at exit) removes them all.

    Creating one first deletes what dead runs left behind (``cleanup_stale``), then takes
    this run's lock so that other runs leave this one alone.
    """

    def __init__(self, run_id: str | None = None, *, clean_stale: bool = True) -> None:
        self.run_id = run_id if run_id is not None else new_run_id()
        if not RUN_ID_PATTERN.fullmatch(self.run_id):
            raise ValueError(f"run id {self.run_id!r}: must be 4 lowercase hex digits")
        self.links: dict[int, Link] = {}
        self.proxies: list[Proxy] = []
        self._closed = False
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        self._lock: IO[bytes] | None = _lock_path(self.run_id).open("wb")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise NetError(f"run id {self.run_id} is in use by a live process") from None
        if clean_stale:
            cleanup_stale(keep={self.run_id})
        atexit.register(self.close)

    def __repr__(self) -> str:
        return f"Network(run_id={self.run_id!r}, links={sorted(self.links)})"

    def __enter__(self) -> Network:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def link(self, index: int | None = None) -> Link:
        """A new link: ``index``, or the lowest whose 10.213.i.0/24 is free on the host."""
        in_use = _indexes_in_use()
        if index is None:
            free = [i for i in range(MIN_INDEX, MAX_INDEX + 1) if i not in in_use]
            if not free:
                raise NetError("every link index 1..250 is in use")
            index = free[0]
        elif index in in_use or index in self.links:
            raise NetError(f"link index {index}: {host_address(index)} is already on the host")
        link = Link(index, run_id=self.run_id)
        self.links[index] = link
        return link

    def proxy(
        self,
        listen_host: str,
        listen_port: int,
        upstream_host: str,
        upstream_port: int,
        *,
        latency: float = 0.0,
        peer_timeout: float | None = PEER_TIMEOUT_S,
    ) -> Proxy:
        """A new proxy owned by this network (closed with it)."""
        proxy = Proxy(
            listen_host,
            listen_port,
            upstream_host,
            upstream_port,
            latency=latency,
            peer_timeout=peer_timeout,
        )
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        """Close every proxy, then every link; release the run's lock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        for proxy in self.proxies:
            try:
                proxy.close()
            except Exception:  # keep closing the rest: namespaces must not leak
                log.exception("closing %r", proxy)
        for link in self.links.values():
            try:
                link.close()
            except Exception:
                log.exception("closing %r", link)
        if self._lock is not None:
            _lock_path(self.run_id).unlink(missing_ok=True)
            self._lock.close()
            self._lock = None
