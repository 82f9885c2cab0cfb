"""What the CLI says once, on stderr, where a command does what the user may not expect:
``--db`` over the ``App`` of ``--app``; a calendar of a country's holidays with a cron in
UTC."""

from __future__ import annotations

from pathlib import Path

from cli_support import Result, ok, tickwork

from tickwork.client import Client
from tickwork.store import Store


def in_project(cwd: Path, *argv: str) -> Result:
    """``tickwork ARGV`` run from ``cwd``, whose modules ``--app`` can name."""
    return tickwork(*argv, cwd=cwd)


def test_db_over_the_apps_own_database_is_said_once(store: Store, tmp_path: Path) -> None:
    own = tmp_path / "own.db"
    (tmp_path / "proj.py").write_text(
        "from tickwork import App\n"
        f"app = App('sqlite:///{own}')\n\n"
        "@app.task()\ndef ping(ctx):\n    pass\n"
    )
    result = in_project(tmp_path, "submit", "--app", "proj", "--db", store.url, "ping")
    assert result.code == 0, result.err
    warnings = [line for line in result.err.splitlines() if "overrides" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("tickwork: warning: --db ")
    assert "the App in proj" in warnings[0]
    assert store.get_job(int(result.last_line)).task == "ping"
    assert not own.exists()


def test_a_country_calendar_with_a_utc_cron_warns_and_with_tz_does_not(store: Store) -> None:
    with Client.open(store.url) as client:
        client.create_calendar("de-by", country="DE", subdiv="BY")
        client.create_calendar("plain", weekend="SAT,SUN")
    argv = ("submit", "--db", store.url, "--cron", "@monthly", "--business-day", "-1")
    utc = tickwork(*argv, "--calendar", "de-by", "shell", "--", "true")
    assert utc.code == 0, utc.err
    assert "tickwork: warning: calendar de-by has DE's holidays, but the cron's times are UTC" in (
        utc.err
    )
    local = tickwork(*argv, "--calendar", "de-by", "--tz", "Europe/Berlin", "shell", "--", "x")
    assert local.code == 0
    assert "de-by" not in local.err
    plain = tickwork(*argv, "--calendar", "plain", "shell", "--", "true")
    assert "plain" not in plain.err
    assert ok("jobs", "--db", store.url, "--json").json()[0]["id"] == int(plain.last_line)
