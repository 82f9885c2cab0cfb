"""The worker: claims runs, executes them under leases, reports what happened. Not
leader-only: run any number, on any host.

The claim loop
    Whenever the worker has room (``concurrency`` minus the runs it holds: a run occupies a
    slot from its claim until its outcome is written; by default 200 for a worker of async
    tasks, 10 with any sync one, see :func:`default_concurrency`) it calls
    ``Store.complete_and_claim``
    once: the successes finished since its last call are completed and up to
    ``min(room, claim_batch)`` runs are claimed, each with a lease of ``run_lease``
    (default 15 s) and a new fencing token, in one round trip and one commit. The claimed
    runs are started on the event loop's thread while this loop goes on. When the claim
    came back short, it sleeps until the earliest ``next_claimable_at`` (a retry's backoff,
    a delayed job), a notification on ``tickwork_runs``, or a handler finishing, whichever
    is first. With LISTEN/NOTIFY (PostgreSQL) it re-checks at least every IDLE_RECHECK;
    without it (SQLite across processes), and while the LISTEN connection is being
    re-established, every ``poll_interval`` (default 200 ms). That sleep is timed by the
    store's time as this node's clock and measured skew put it (no round trip in the way
    of the next notification); what is claimable is judged by the claim.

Outages
    A claim that fails for want of the database is retried after a capped, jittered
    backoff (at most about 1 s), and at once when another call of this process is answered
    first (the store's comeback), so the worker is back at speed within a round trip or so
    of the database answering again; the outage is logged once when it begins and once
    when it ends (:mod:`tickwork.store.health`). Running handlers run on through an
    outage: the heartbeat retries every half second or so (and at the comeback), and their
    outcomes wait to be written with their fencing tokens (:mod:`.heartbeat` says how long
    an outage may last). A claim whose answer did not arrive starts nothing: its runs are
    rescued when their (never heartbeated) leases expire.

Execution (:mod:`.executor`)
    Sync handlers on a pool of threads, async handlers on one event loop. A run with a
    ``timeout`` that runs past it fails with a timeout error and is retried per its policy.

Leases (:mod:`.heartbeat`)
    Every ``run_heartbeat`` (default 3 s) all held leases are extended in one call. A run
    the store reports LOST (rescued after a stall, re-claimed) or CANCELLED is stopped and
    nothing is reported for it: its fate is someone else's now. A worker that stalled past
    a lease may claim the same run again before a beat tells it; that claim proves the old
    lease was taken over, so the old attempt is stopped right there. A handler never
    starts once its lease may have lapsed: the worker knows, by its monotonic clock, when
    it sent the claim (and each heartbeat that kept the lease), and a run whose handler
    would start later than that plus the lease, less START_MARGIN, is not started but
    released (a worker stopped between its claim and the start: by the time it resumes,
    another worker may be running the same run under a newer token).

Outcomes (:mod:`.reporter`)
    Successes are completed in batches by the claim loop (above), and by the reporter once
    the loop has stopped; failures are failed one by one: a handler's ``Retry`` sets the
    wait, ``Discard`` ends the run dead. A write rejected for a stale fencing token
    (``LeaseLost``) is logged and dropped. A run its handler completed itself, in its own
    transaction (``ctx.transaction()``: the handler's writes and the completion commit
    together, fenced by the token), is not written again, nor heartbeated from then on.

Fault injection (:mod:`.faults`)
    With ``--inject-faults`` (staging only: the database must have opted in, or the worker
    refuses to start) each claimed run may get a fault after its handler returned: a
    crash, a stall past the lease, or a failure, marked on the run first. The opt-in is
    re-read every heartbeat interval: a revoke stops the injecting within seconds.

Where ``http`` runs may connect (:mod:`.egress`)
    Public addresses, plus the networks and host names of ``config.http_allow``
    (``--http-allow``), plus anything for a job that says ``"allow_private": true``. A
    run whose destination is refused ends ``dead`` at once, with an error that names the
    address and the flag; as with ``shell``, give every worker of a queue the same policy.

Runs this worker cannot execute
    are never claimed: the claim takes only runs of the tasks this worker has (``tasks``:
    its app's, ``http``, and ``shell`` with ``--allow-shell``; the store's ``tasks=``
    filter, in the statement that takes runs). A run of any other task stays queued,
    spending no attempt, until a worker that has its task claims it; ``tickwork queues``,
    ``explain`` and ``tickwork_unserved_runs`` say when no live worker has it, and a
    submit warns. Nor does such a run wake an idle worker (``next_claimable_at`` is asked
    for this worker's tasks). The refusal below is a last resort, for a claim that did not
    filter (a :class:`~tickwork.store.base.Store` of another implementation that ignores
    ``tasks``; the test kit, which claims every run and so reports a task its app lacks as
    a failed attempt): the store's own two never hand a worker one. Such a run fails its
    attempt (retried with backoff, so that a worker that has it can take it; in the end
    dead); a ``shell`` run on a worker without ``--allow-shell`` ends ``dead`` at once,
    as releasing it would bounce it between incapable workers.

Stopping (:meth:`Worker.stop_gracefully`)
    Stop claiming; let running handlers finish for up to ``grace`` (default 30 s) while
    their leases are still heartbeated; stop and ``release`` what is left (back to queued
    now, without spending an attempt); write every outcome; then stop the threads.
    :meth:`Worker.stop` is the same with no grace.
"""

from tickwork.tasks import Context, Discard, Registry, Retry, Task
from tickwork.worker.capability import claimable_tasks, default_concurrency
from tickwork.worker.worker import Worker

__all__ = [
    "Context",
    "Discard",
    "Registry",
    "Retry",
    "Task",
    "Worker",
    "claimable_tasks",
    "default_concurrency",
]
