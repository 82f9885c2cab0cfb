"""PostgreSQL's schema refuses limits no tickwork path writes: a rate or a weight that is not
a finite positive number, written by hand or by another client past the store's checks
(NaN sorts above every number in PostgreSQL, so ``rate > 0`` alone let it in, and an
infinite rate or weight would break the claim's bucket and share arithmetic)."""

from __future__ import annotations

import psycopg
import pytest

BAD = ["NaN", "Infinity"]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    ("table", "key", "column"),
    [
        ("tickwork_tenants", "tenant", "rate"),
        ("tickwork_tenants", "tenant", "weight"),
        ("tickwork_task_limits", "task", "rate"),
    ],
)
def test_a_rate_or_weight_that_is_not_finite_is_refused(
    pg_database: str, table: str, key: str, column: str, bad: str
) -> None:
    statement = (
        f"INSERT INTO {table} ({key}, {column}, updated_at) VALUES ('x', %(bad)s::float8, now())"
    )
    with psycopg.connect(pg_database, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(statement, {"bad": bad})
        assert conn.execute("SELECT count(*) FROM tickwork_tenants").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM tickwork_task_limits").fetchone() == (0,)


def test_a_finite_rate_and_weight_are_stored(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tickwork_tenants (tenant, rate, weight, updated_at) "
            "VALUES ('a', 1e6, 1e-3, now())"
        )
        assert conn.execute("SELECT rate, weight FROM tickwork_tenants").fetchone() == (1e6, 1e-3)
