"""The HTTP and HTTPS connections of the built-in ``http`` task, whose sockets come from
:meth:`tickwork.tasks.egress.EgressPolicy.connect`.

Apart from the policy (:mod:`tickwork.tasks.egress`) so that importing the task registry
(the CLI does, to read a task name) does not import http.client and ssl, which only a run
of the ``http`` task needs: the CLI's start-up (benchmarks/README.md).
"""

from __future__ import annotations

import http.client
import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tickwork.tasks.egress import EgressPolicy


class VettedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket comes from :meth:`EgressPolicy.connect`."""

    def __init__(
        self, host: str, port: int, *, timeout: float, policy: EgressPolicy, allow_private: bool
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._policy = policy
        self._allow_private = allow_private

    def connect(self) -> None:
        self.sock = self._policy.connect(
            self.host, self.port, self.timeout, allow_private=self._allow_private
        )


class VettedHTTPSConnection(http.client.HTTPSConnection):
    """An HTTPS connection whose socket comes from :meth:`EgressPolicy.connect`; TLS
    checks the certificate against the URL's host name, which is also the SNI."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float,
        policy: EgressPolicy,
        allow_private: bool,
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._policy = policy
        self._allow_private = allow_private
        self._tls = context

    def connect(self) -> None:
        sock = self._policy.connect(
            self.host, self.port, self.timeout, allow_private=self._allow_private
        )
        try:
            self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
