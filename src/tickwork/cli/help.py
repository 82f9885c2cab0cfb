"""How ``--help`` reads: plain text, like ``git`` and ``kubectl``, written by tickwork rather
than typer's rich panels.

Typer's panels print a type for every option (``<bool>``, ``<list[str]>``, ``<int range>
[x>=1]``) and a docstring's reST as it is written (````tickwork worker````). Here an option
shows its metavar only (a flag none), a docstring's reST is read as text, and paragraphs are
re-flowed to the terminal. It imports nothing of rich: ``tickwork --help`` stays cheap.

::

    Usage: tickwork jobs pause [OPTIONS] JOB_ID

    Pause a job: no slot is triggered until it is resumed.

    Arguments:
      JOB_ID

    Options:
      --db URL  Database URL (sqlite:///PATH or postgresql://...); ...
      --json    Print one JSON document, nothing else.
      --help    Show this message and exit.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Iterable, Sequence

from typer import _click as click
from typer.core import TyperArgument, TyperOption

MAX_WIDTH = 100
"""Help is wrapped to the terminal, and never wider than this many columns."""
_RST_LITERAL = re.compile(r"``(.+?)``")
_RST_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr):`~?([^`]+)`")


def width() -> int:
    return max(40, min(shutil.get_terminal_size((80, 24)).columns, MAX_WIDTH))


def plain(text: str) -> str:
    """A docstring's reST as text: ````x```` and ``:func:`x``` read ``x``; ``::`` ends ``:``."""
    text = _RST_ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = _RST_LITERAL.sub(r"\1", text)
    return text.replace("::\n", ":\n")


def paragraphs(text: str) -> list[str]:
    """Each paragraph of a docstring on one line (an indented block keeps its lines)."""
    out = []
    for block in textwrap.dedent(plain(text)).strip().split("\n\n"):
        lines = block.splitlines()
        if lines and all(line.startswith(" ") for line in lines):
            out.append("\n".join(lines))  # an example block: keep it as written
        else:
            out.append(" ".join(line.strip() for line in lines))
    return out


def summary(command: click.Command) -> str:
    """A command's one line: its short help, else its help's first paragraph."""
    if command.short_help:
        return plain(command.short_help)
    found = paragraphs(command.help or "")
    return found[0] if found else ""


def _wrap(text: str, indent: int, total: int) -> list[str]:
    if "\n" in text:
        return [" " * indent + line for line in text.splitlines()]
    return textwrap.wrap(
        text, total, initial_indent=" " * indent, subsequent_indent=" " * indent
    ) or [""]


def table(rows: Sequence[tuple[str, str]], total: int, indent: int = 2, left: int = 0) -> list[str]:
    """Two columns, the second wrapped beside the first (under it when the first is long),
    the first at least ``left`` wide."""
    if not rows:
        return []
    left = min(max(left, *(len(name) for name, _ in rows)), 28)
    lines = []
    for name, text in rows:
        start = indent + left + 2
        body = textwrap.wrap(text, max(total - start, 20)) or [""]
        if len(name) > left:
            lines.append(" " * indent + name)
            lines.extend(" " * start + line for line in body)
            continue
        lines.append(" " * indent + name.ljust(left) + "  " + body[0])
        lines.extend(" " * start + line for line in body[1:])
    return lines


def _option_name(param: click.Parameter) -> str:
    names = sorted(param.opts, key=len)
    secondary = sorted(getattr(param, "secondary_opts", []), key=len)
    shown = ", ".join(names) + (" / " + ", ".join(secondary) if secondary else "")
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return shown
    metavar = param.metavar or (param.name or "value").upper()
    return f"{shown} {metavar}"


def _default(param: click.Parameter) -> str | None:
    show = getattr(param, "show_default", None)
    if show is False or getattr(param, "is_flag", False):
        return None
    if isinstance(show, str):
        return show
    value = param.default
    if value is None or value in ("", (), []) or callable(value):
        return None
    return str(value.value if hasattr(value, "value") else value)


def _param_help(param: click.Parameter) -> str:
    text = " ".join(paragraphs(getattr(param, "help", None) or ""))
    extra = []
    default = _default(param)
    if default is not None:
        extra.append(f"default {default}")
    if param.required and isinstance(param, TyperOption):
        extra.append("required")
    return f"{text} [{'; '.join(extra)}]".strip() if extra else text


def params_sections(
    command: click.Command, ctx: click.Context, total: int
) -> Iterable[tuple[str, list[tuple[str, str]]]]:
    arguments: list[tuple[str, str]] = []
    options: list[tuple[str, str]] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, TyperArgument):
            name = param.metavar or (param.name or "").upper()
            arguments.append((name, _param_help(param)))
        else:
            options.append((_option_name(param), _param_help(param)))
    if any(text for _, text in arguments):
        yield "Arguments", arguments
    yield "Options", options


def usage(command: click.Command, ctx: click.Context) -> str:
    """``Usage: tickwork runs retry [OPTIONS] RUN_ID`` (an optional argument in brackets)."""
    pieces = [ctx.command_path, "[OPTIONS]"]
    for param in command.get_params(ctx):
        if isinstance(param, TyperArgument):
            name = param.metavar or (param.name or "").upper()
            if name.startswith("["):  # its metavar says it all: [-- CMD ARGS... | URL]
                pieces.append(name)
                continue
            many = "..." if param.nargs != 1 else ""
            pieces.append(f"{name}{many}" if param.required else f"[{name}]{many}")
    subcommands = getattr(command, "subcommand_metavar", None)
    if subcommands and getattr(command, "invoke_without_command", False):
        pieces.append(f"[{subcommands}]")  # alone, the group lists: tickwork jobs
    elif subcommands:
        pieces.append(subcommands)
    return "Usage: " + " ".join(pieces)


def render(
    command: click.Command,
    ctx: click.Context,
    panels: Sequence[tuple[str, Sequence[tuple[str, str]]]] = (),
) -> str:
    """The help of ``command``: usage, its help re-flowed, its arguments and options, and
    ``panels`` of sub-commands (name, summary), then its epilog."""
    total = width()
    lines = [usage(command, ctx), ""]
    for paragraph in paragraphs(command.help or ""):
        lines.extend(_wrap(paragraph, 0, total))
        lines.append("")
    sections = list(params_sections(command, ctx, total))
    left = max((len(name) for _, rows in panels for name, _ in rows), default=0)
    for title, rows in [*sections[:-1], *panels, *sections[-1:]]:
        if not rows:
            continue
        lines.append(f"{title}:")
        lines.extend(table(rows, total, left=left if (title, rows) in panels else 0))
        lines.append("")
    for paragraph in paragraphs(command.epilog or ""):
        lines.extend(_wrap(paragraph, 0, total))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
