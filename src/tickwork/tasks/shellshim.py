"""The shim between a worker and a shell task's command: ``python -I -S shellshim.py PPID CMD...``.

It runs as the leader of a new session (the worker starts it so), asks the kernel for
SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), forks and execs the command in
its own process group, waits for it and exits with the command's status. On SIGTERM it
kills the whole group, itself included, with SIGKILL: so a worker that dies, even by
SIGKILL, takes its commands' process trees with it. See :mod:`tickwork.tasks.builtins`.

Run as a script with ``-I -S`` (isolated, no site): it starts in about 20 ms and imports
only the standard library, never tickwork.
"""

import os
import signal
import sys

PR_SET_PDEATHSIG = 1
EXIT_CANNOT_RUN = 127


def _kill_group(signum: int, frame: object) -> None:
    os.killpg(0, signal.SIGKILL)


def main() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    signal.signal(signal.SIGTERM, _kill_group)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: the worker still kills the group on every exit it lives through
    if os.getppid() != parent:
        os.killpg(0, signal.SIGKILL)  # the worker died before prctl took effect
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"tickwork: cannot run {argv[0]!r}: {exc.strerror}\n".encode())
        os._exit(EXIT_CANNOT_RUN)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code < 0:  # killed by a signal: die the same way, so the worker sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
