"""The CLI's one error mapping and the --db option, in process, on throwaway typer apps."""

from __future__ import annotations

import pytest
import typer

from tickwork.cli.app import exit_code, run
from tickwork.cli.options import DbOption
from tickwork.cli.output import EXIT_FAILURE, EXIT_USAGE, error, fail
from tickwork.config import DB_ENV, DEFAULT_DB_URL
from tickwork.errors import (
    InvalidCron,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)


def raising(exc: Exception) -> typer.Typer:
    cli = typer.Typer()

    @cli.callback()
    def root() -> None:
        pass

    @cli.command("go")
    def go() -> None:
        raise exc

    return cli


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    captured = capsys.readouterr()
    return captured.err.splitlines(), captured.out


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (InvalidCron("61 * * * *", "bad minute field '61'"), EXIT_USAGE),
        (ValidationError("bad"), EXIT_USAGE),
        (JobNotFound(7), EXIT_FAILURE),
        (InvalidTransition("job", 7, "cancelled", "pause"), EXIT_FAILURE),
        (LeaseLost(7, 3), EXIT_FAILURE),
        (StoreUnavailable("database is down"), EXIT_FAILURE),
    ],
)
def test_bad_input_exits_2_and_any_other_tickwork_error_exits_1(
    exc: TickworkError, code: int
) -> None:
    assert exit_code(exc) == code


def test_not_found_is_one_error_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["go"], cli=raising(JobNotFound(42))) == 1
    err, _ = stderr_lines(capsys)
    assert err == ["tickwork: error: job 42 not found"]


def test_validation_error_is_one_error_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["go"], cli=raising(InvalidCron("* *", "expected 5 fields"))) == 2
    err, _ = stderr_lines(capsys)
    assert err == ["tickwork: error: invalid cron expression '* *': expected 5 fields"]


def test_multi_line_message_is_folded_onto_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["go"], cli=raising(StoreUnavailable("connection refused\nis the server up?"))) == 1
    err, _ = stderr_lines(capsys)
    assert err == ["tickwork: error: connection refused is the server up?"]


def test_usage_error_is_one_error_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["go", "--nope"], cli=raising(JobNotFound(1))) == 2
    err, out = stderr_lines(capsys)
    assert err == ["tickwork: error: No such option: --nope"]
    assert out == ""


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["stop"], cli=raising(JobNotFound(1))) == 2
    err, _ = stderr_lines(capsys)
    assert err == ["tickwork: error: No such command 'stop'."]


def test_bug_is_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        run(["go"], cli=raising(ZeroDivisionError("a bug")))


def test_fail_prints_its_message_and_exits_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = typer.Typer()

    @cli.callback()
    def root() -> None:
        pass

    @cli.command("go")
    def go() -> None:
        fail("--in and --at are exclusive")

    assert run(["go"], cli=cli) == 2
    err, _ = stderr_lines(capsys)
    assert err == ["tickwork: error: --in and --at are exclusive"]


def test_error_line_has_the_program_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    error("something broke")
    assert capsys.readouterr().err == "tickwork: error: something broke\n"


def test_success_exits_0() -> None:
    cli = typer.Typer()

    @cli.callback()
    def root() -> None:
        pass

    @cli.command("go")
    def go() -> None:
        pass

    assert run(["go"], cli=cli) == 0


# -- --db ------------------------------------------------------------------------------------


def db_cli() -> typer.Typer:
    cli = typer.Typer()

    @cli.callback()
    def root() -> None:
        pass

    @cli.command("where")
    def where(db: DbOption = "") -> None:
        typer.echo(db)

    return cli


def test_db_flag_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DB_ENV, "sqlite:///from-env.db")
    assert run(["where", "--db", "postgresql://db.example/tick"], cli=db_cli()) == 0
    assert capsys.readouterr().out == "postgresql://db.example/tick\n"


def test_db_comes_from_the_environment_without_a_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DB_ENV, "sqlite:///from-env.db")
    assert run(["where"], cli=db_cli()) == 0
    assert capsys.readouterr().out == "sqlite:///from-env.db\n"


def test_db_defaults_to_tickwork_db_in_the_current_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(DB_ENV, raising=False)
    assert run(["where"], cli=db_cli()) == 0
    assert capsys.readouterr().out == f"{DEFAULT_DB_URL}\n"
    assert DEFAULT_DB_URL == "sqlite:///./tickwork.db"
