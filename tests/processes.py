"""What the tests ask of the operating system's processes (Linux ``/proc``)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def group_alive(pgid: int) -> bool:
    """Whether any live process is left in process group ``pgid``. Zombies do not count:
    a container's init may never reap them, and they can do nothing more."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            return True
    return False
