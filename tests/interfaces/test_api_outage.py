"""The HTTP API while the database does not answer, with a real ``tickwork api``.

The API reaches PostgreSQL through a TCP proxy of the test's (``chaos.net.Proxy``): one that
*refuses* (closes every connection, accepts none: a restarting server) or *cuts* (delivers
nothing but keeps the sockets open: a black hole, where nothing fails and everything
hangs). ``/readyz`` must answer 503 within its bound either way, and ``/metrics`` must
count the process's outages and reconnects.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from api_support import serving

from chaos.net import Proxy
from tickwork.testing import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(pg_database: str) -> Iterator[Proxy]:
    with Proxy.to_url(pg_database) as opened:
        yield opened


def eventually_ready(web: httpx.Client, timeout: float = 10.0) -> None:
    wait_until(lambda: web.get("/readyz").status_code == 200, timeout, what="/readyz 200")


def test_readyz_answers_503_within_its_bound_while_the_database_is_black_holed(
    proxy: Proxy,
) -> None:
    with serving(_api(proxy.url)) as server, httpx.Client(base_url=server.url, timeout=30) as web:
        assert web.get("/readyz").status_code == 200
        proxy.cut()  # packets go nowhere: nothing fails, everything hangs
        began = time.monotonic()
        hung = web.get("/readyz")
        took = time.monotonic() - began
        again = web.get("/readyz")  # the first read still hangs: no second thread piles up
        assert web.get("/healthz").status_code == 200
        proxy.restore()
        eventually_ready(web)

    assert hung.status_code == 503
    assert hung.json()["error"]["code"] == "store_unavailable"
    assert 1.5 <= took < 3.5
    assert again.status_code == 503


def test_metrics_count_the_processes_outages_and_reconnects(proxy: Proxy, pg_database: str) -> None:
    with serving(_api(proxy.url)) as server, httpx.Client(base_url=server.url, timeout=30) as web:
        before = _store_metrics(web)
        proxy.refuse()
        # An outage is failures that last (one cut-off call is none): probe for 1.5 s.
        until = time.monotonic() + 1.5
        failed: list[int] = []
        while time.monotonic() < until:
            failed.append(web.get("/readyz").status_code)
        proxy.accept()
        eventually_ready(web)
        after = _store_metrics(web)
        log = "".join(server.err) + "".join(server.out)

    assert before == {"up": 1.0, "outages": 0.0, "reconnects": 0.0}
    assert failed
    assert set(failed) == {503}
    assert after["up"] == 1.0
    assert after["outages"] == 1.0
    assert after["reconnects"] >= 1.0
    assert len(lines(log, r" lost: ")) == 1, log
    assert len(lines(log, r" is back after ")) == 1, log


def _api(url: str) -> list[str]:
    return ["api", "--db", url, "--host", "127.0.0.1", "--port", "0"]


def _store_metrics(web: httpx.Client) -> dict[str, float]:
    text = web.get("/metrics").text
    found: dict[str, float] = {}
    for name, key in (
        ("tickwork_store_up", "up"),
        ("tickwork_store_outages_total", "outages"),
        ("tickwork_store_reconnects_total", "reconnects"),
    ):
        match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
        assert match, text
        found[key] = float(match.group(1))
    return found


def lines(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]
