"""One frozen, validated configuration; environment and flags are parsed into it at the edge."""

from __future__ import annotations

import os

DEFAULT_DB_URL = "sqlite:///./tickwork.db"
DB_ENV = "TICKWORK_DB"


def resolve_db_url(flag: str | None) -> str:
    """``--db``, else ``TICKWORK_DB``, else ``sqlite:///./tickwork.db``."""
    return flag or os.environ.get(DB_ENV) or DEFAULT_DB_URL
