"""Where an ``http`` run may connect: the egress policy of the built-in ``http`` task.

Anyone who may submit an ``http`` job (any tenant key) chooses the URL a worker fetches,
and reads the answer back from the run's ``result``. Without a policy that is a
server-side request forgery: the worker's loopback services, the cloud's instance metadata
(``169.254.169.254``) and the private network behind it would all be one job away.

The rule
    A destination is refused when an address it resolves to is not a public one:

    ============ ====================================================================
    loopback     127.0.0.0/8, ::1
    unspecified  0.0.0.0/8, ::  (Linux connects 0.0.0.0 to loopback)
    link-local   169.254.0.0/16 (cloud metadata), fe80::/10
    private      10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7, fec0::/10,
                 64:ff9b:1::/48
    multicast    224.0.0.0/4, ff00::/8
    broadcast    255.255.255.255
    reserved     192.0.0.0/24, the documentation and benchmarking ranges, 240.0.0.0/4,
                 and every IPv6 address outside 2000::/3 (global unicast) but the
                 forms below, and 2001::/23, 2001:db8::/32, 3fff::/20 inside it
    ============ ====================================================================

    An IPv6 address that carries an IPv4 one is judged by that IPv4 address: IPv4-mapped
    (``::ffff:127.0.0.1``), NAT64 (``64:ff9b::/96``) and 6to4 (``2002::/16``). The table
    is written out here rather than taken from :mod:`ipaddress`, whose ``is_global``
    differs between Python versions (3.11 counts ``::ffff:0:7f00:1`` and ``fec0::1``
    as global).

Checked where the connection is made, on every hop
    The name is resolved once per connection, every address it resolves to is checked (one
    refused address refuses the destination: a name that answers both a public and a
    private address is not trusted with either), and the socket is connected to one of
    exactly those addresses. Nothing resolves the name again between the check and the
    connect, so a DNS answer that changes in between (DNS rebinding) changes nothing. The
    ``Host`` header and the TLS server name (SNI, certificate check) stay the URL's host
    name. A redirect is a new connection, so each hop is resolved and checked the same
    way (:mod:`tickwork.tasks.builtins` caps redirects at 5 and follows only http and
    https).

Widening it, on purpose
    - The operator: ``tickwork worker --http-allow 10.0.0.0/8,localhost`` (repeatable;
      env ``TICKWORK_HTTP_ALLOW``; ``Config.http_allow``). A network allows the addresses
      in it; a host name (``*.internal.example``: its subdomains) allows requests to that
      name whatever it resolves to. ``0.0.0.0/0,::/0`` turns the rule off.
    - An admin, per job: the http arg ``"allow_private": true`` lifts the rule for that
      job's runs (the HTTP API takes it only from an admin key).

A refused destination raises :class:`EgressRefused`; the ``http`` task ends its run
``dead`` at once (sending it again would be refused again).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from tickwork.config import HTTP_ALLOW_FLAG, AllowEntry, parse_http_allow

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]
"""``resolver(host, port)``: the IP addresses (as text) a host name stands for."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

REFUSED_V4: Final[tuple[tuple[_V4, str], ...]] = (
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("0.0.0.0/8"), "unspecified"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "private"),  # shared address space (CGNAT)
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (_V4("192.0.2.0/24"), "reserved"),  # documentation
    (_V4("192.88.99.0/24"), "reserved"),  # the retired 6to4 relay anycast
    (_V4("192.168.0.0/16"), "private"),
    (_V4("198.18.0.0/15"), "reserved"),  # benchmarking
    (_V4("198.51.100.0/24"), "reserved"),  # documentation
    (_V4("203.0.113.0/24"), "reserved"),  # documentation
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),
)
"""IPv4 networks refused by default, and why (the first match names the reason)."""

GLOBAL_UNICAST_V6 = _V6("2000::/3")
REFUSED_V6: Final[tuple[tuple[_V6, str], ...]] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fc00::/7"), "private"),  # unique local
    (_V6("fec0::/10"), "private"),  # the retired site-local
    (_V6("64:ff9b:1::/48"), "private"),  # local-use NAT64
    (_V6("ff00::/8"), "multicast"),
    (_V6("2001::/23"), "reserved"),  # IETF protocol assignments (Teredo, ORCHID ...)
    (_V6("2001:db8::/32"), "reserved"),  # documentation
    (_V6("3fff::/20"), "reserved"),  # documentation
)
"""IPv6 networks refused by default, and why; besides these, anything outside 2000::/3
(``::ffff:0:0/96`` and ``64:ff9b::/96`` are judged by their IPv4 address)."""
NAT64 = _V6("64:ff9b::/96")


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped, NAT64 or 6to4 (else None)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address.sixtofour


def refusal(address: Address) -> str | None:
    """Why the default policy refuses ``address`` (``"loopback"``, ``"private"`` ...), or
    None for a public address."""
    inner = embedded_ipv4(address)
    if inner is not None:
        return refusal(inner)
    if isinstance(address, ipaddress.IPv4Address):
        table: Iterable[tuple[Network, str]] = REFUSED_V4
    else:
        table = REFUSED_V6
    for network, reason in table:
        if address in network:
            return reason
    if isinstance(address, ipaddress.IPv6Address) and address not in GLOBAL_UNICAST_V6:
        return "reserved"
    return None


class EgressRefused(Exception):
    """An ``http`` run's destination is not one it may reach.

    Not a :class:`~tickwork.errors.TickworkError`: it never leaves the worker, where the
    ``http`` task turns it into the run's error (and ends the run ``dead``).
    """

    def __init__(self, host: str, address: Address, reason: str) -> None:
        super().__init__(
            f"http: refused destination {address} ({reason}) for host {host}; "
            f"allow it with {HTTP_ALLOW_FLAG}"
        )
        self.host = host
        self.address = address
        self.reason = reason


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``host``, in its order, without repeats."""
    found: list[str] = []
    for family, _, _, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        text = str(sockaddr[0]).partition("%")[0]
        scope = sockaddr[3] if family == socket.AF_INET6 else 0  # type: ignore[misc]
        if scope:
            text = f"{text}%{scope}"  # a link-local address means nothing without its link
        if text not in found:
            found.append(text)
    return found


@dataclass(frozen=True)
class EgressPolicy:
    """The destinations ``http`` runs may connect to: public addresses, plus ``allow``.

    ``allow`` holds parsed ``--http-allow`` entries (networks and host name patterns, see
    :func:`tickwork.config.parse_http_allow`); ``resolver`` turns a host name into its
    addresses (the system's by default; tests give their own to change the answer).
    """

    allow: tuple[AllowEntry, ...] = ()
    resolver: Resolver = field(default=system_resolver, repr=False)

    @classmethod
    def from_entries(
        cls, entries: Iterable[str], resolver: Resolver = system_resolver
    ) -> EgressPolicy:
        """A policy from ``--http-allow`` entries as the operator wrote them."""
        return cls(tuple(parse_http_allow(entry) for entry in entries), resolver)

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` is allowed by name (whatever it resolves to)."""
        name = host.lower().removesuffix(".")
        for entry in self.allow:
            if not isinstance(entry, str):
                continue
            if entry.startswith("*."):
                if name.endswith(entry[1:]):
                    return True
            elif name == entry:
                return True
        return False

    def allows_address(self, address: Address) -> bool:
        """Whether ``address`` is public, or inside an allowed network."""
        if refusal(address) is None:
            return True
        inner = embedded_ipv4(address)
        return any(
            not isinstance(entry, str)
            and (address in entry or (inner is not None and inner in entry))
            for entry in self.allow
        )

    def vet(self, host: str, port: int, *, allow_private: bool = False) -> list[Address]:
        """Resolve ``host`` once and check every address it stands for: the addresses
        (the only ones to connect to), or EgressRefused. ``allow_private`` skips the
        check (an admin's job). A failed lookup raises ``OSError``, as a connect would."""
        literal = _ip(host)
        addresses = [literal] if literal is not None else self._resolve(host, port)
        if allow_private or self.allows_host(host):
            return addresses
        for address in addresses:
            reason = refusal(address)
            if reason is not None and not self.allows_address(address):
                raise EgressRefused(host, address, reason)
        return addresses

    def connect(
        self, host: str, port: int, timeout: float | None, *, allow_private: bool = False
    ) -> socket.socket:
        """A TCP connection to one of the addresses :meth:`vet` passed for ``host``
        (tried in order, like :func:`socket.create_connection`)."""
        error: OSError | None = None
        for address in self.vet(host, port, allow_private=allow_private):
            # Numeric only: turning the vetted address into a socket address can never
            # look the name up again.
            family, kind, proto, _, sockaddr = socket.getaddrinfo(
                str(address), port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
            )[0]
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.connect(sockaddr)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            return sock
        assert error is not None  # vet returns at least one address
        raise error

    def _resolve(self, host: str, port: int) -> list[Address]:
        answer = self.resolver(host, port)
        addresses: list[Address] = []
        for text in answer:
            address = _ip(text)
            if address is None:
                raise OSError(f"resolving {host} gave {text!r}, not an IP address")
            addresses.append(address)
        if not addresses:
            raise OSError(f"{host} resolves to no address")
        return addresses

    def describe(self) -> str:
        """For start-up log lines: what beyond public addresses this policy allows."""
        return ",".join(str(entry) for entry in self.allow) or "none"


def _ip(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
