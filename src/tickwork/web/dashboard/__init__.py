"""The dashboard: server-rendered pages (Jinja2) refreshed live by vendored htmx.

A thin adapter over :class:`~tickwork.client.Client`, like the CLI and the JSON API: every
read and command is one client call with ``tenant=viewer.tenant``, so a tenant key sees
its own tenant only, and another tenant's job or run is the same 404 page as a missing one.

Pages
-----

====================  =========================================================================
``/``                 runs by state, due backlog, trigger lag p50/p99 (runs held by limits
                      left out), the leader and its epoch, the last hour of outcomes and lag
                      as small charts linking to ``/activity``
``/jobs``             jobs, filtered by state and task, recurring or one-off (tabs), newest
                      first, cursor pagination
``/jobs/{id}``        a job: state and commands, its definition (the schedule in words), next
                      fire times, ``explain`` for a slot; then its runs (attempts, exception
                      lines, output tails of ``shell`` and ``http`` runs) and the slot ledger
``/dead``             the dead-letter list: each run's exception line, its traceback a click
                      away, a Retry button per run; filtered by task, queue, tenant and error
                      text, with "retry all matching" through the bulk confirmation
``/tenants``          each tenant's limits and its runs running, due and held now; an admin
                      sets a tenant's limits with a form (a tenant key: its own tenant only)
``/tenants/{name}``   a tenant: its limits and runs now, and (admins) the form prefilled
``/runs``             runs across jobs, with started and duration columns, a tab per state
                      with its count, filtered by task, queue, tenant, error text and slot time;
                      bulk retry (dead) and cancel (waiting) of what a filter matches, each
                      through a confirmation page (``/bulk/retry``, ``/bulk/cancel``)
``/runs/{id}``        a run: args, result, error with traceback, attempts, timings, worker,
                      fencing token
``/activity``         runs finished per minute by outcome, start lag p50/p99 and queue depth
                      over 1 h, 6 h or 24 h: SVG drawn on the server from the store's
                      per-minute rollup (:mod:`~tickwork.web.dashboard.charts`)
``/queues``           each queue's due backlog, running count, oldest due run and consumers;
                      a queue with due runs and no live worker consuming it is called out
``/cluster``          the leader lease and every node, each up, silent or gone (a gone node's
                      running count is its last word, not live) with Forget for a gone one
                      (admin keys only: 403 page otherwise)
``/login``            the sign-in form; ``/logout`` signs out
====================  =========================================================================

A job's badge is its state (:class:`~tickwork.job.JobState`): a one-off job reads as its
run ("dead", coloured as a dead run). A job with no slot left (a one-off job once
triggered, a cancelled or finished one) offers no Run now and no Cancel job, and those
POSTs are refused (409); an unfinished run has its own Cancel button.

Every page renders completely on the server and reads without JavaScript. With it, htmx
re-fetches the live part of each page every :data:`REFRESH_SECONDS` from a fragment
endpoint (``/fragments/overview`` ...), which renders the same template the page includes.

Sign-in
-------

The dashboard takes the API's keys (:mod:`tickwork.web.auth`): a bearer header works, and
for a browser ``POST /login`` checks the key and starts a session, whose token (never the
key) goes in the ``tickwork_session`` cookie (http-only, ``SameSite=Lax``; ``Secure`` over
https, and always when the server listens beyond loopback, where a sign-in over plain http
is refused with the reason, since the browser would drop the cookie). ``POST /logout``
ends the session in the store, so a copy of the cookie is worth nothing afterwards;
revoking the key ends its sessions too. A page without a valid credential redirects to
``/login?next=<page>``; a fragment answers 401 with ``HX-Redirect`` so htmx leaves the page
for the form. On an open API (loopback, no key ever created) no sign-in is needed.

Cross-site requests
-------------------

Every POST (retry, pause, resume, trigger, cancel, tenant limits, sign-in and sign-out)
must come from a page of this origin: its ``Origin`` header, or ``Referer`` when a browser sends no
``Origin``, must name the host the request was sent to (``Host``, or ``X-Forwarded-Host``
behind a proxy); otherwise the answer is a 403 page and nothing changes. Requests that
authenticate with a bearer header are exempt: a browser never attaches one on its own.

Why this and not a CSRF token: the ``SameSite=Lax`` cookie already keeps other *sites*
from posting with the key, but not sibling hosts of the same site (``evil.example.com``
against ``tickwork.example.com``), not old browsers, and not the open API, which has no
cookie at all: any web page could otherwise post ``/runs/1/retry`` to ``127.0.0.1``. Every
browser in use sends ``Origin`` on a POST, and a cross-origin page can forge neither it
nor ``Referer``, so the header check closes all of these with no server-side state, no
token threaded through every form and htmx request, and no page that breaks when it is
left open past a token's lifetime. (Go 1.25's ``http.CrossOriginProtection`` rests on the
same headers.) The check is :func:`tickwork.web.auth.command_allowed`, the JSON API's,
with ``require_page``: a POST that names no page at all is refused too, since every
browser names the page a form was posted from. Hosts in ``Origin``, ``Referer`` and
``Host`` are all read by one strict parser, :func:`tickwork.web.auth.parse_authority`.

On the open API an anonymous viewer is served only when the request is addressed to a
loopback host, as in the JSON API: a page of ``evil.example`` whose name was made to
resolve to 127.0.0.1 (DNS rebinding) gets the sign-in form, not the jobs.

The pages also send a Content-Security-Policy that allows scripts and styles from this
origin only (htmx runs with ``allowEval`` off and injects no styles) and forbids framing,
so a Retry button cannot be clickjacked.

Query parameters
----------------

Every query parameter a page reads goes through the JSON API's check of the same parameter
(:mod:`tickwork.web.params`: one definition each): a value the API answers 422 (a control
character in ``?task=``, a name past 200 characters, a cursor that is no integer) is a 400
page naming the parameter in the API's words, never a 500; a choice (a state, ``range``,
``window``, the runs page's ``done``) is refused naming the choices. An empty field (a
filter form submitted blank) means no filter. Explain's ``?at=`` on a job page is checked
the same way, and its error is shown in the explain box, as a time that does not parse is.

User text
---------

Everything a user or a handler wrote (names, args, errors, output) is escaped, and shown,
not obeyed: a bidirectional control (U+202A to U+202E, U+2066 to U+2069) or another
control character is printed as its code, ``[U+202E]``, so a name cannot reverse the text
around it or hide what it says (``render._shown``, applied to every ``{{ ... }}``). Names
in running text are also isolated (``<bdi>``), so a right-to-left name cannot reorder the
words beside it. Submit refuses those controls in names (:func:`tickwork.job.check_label`); the
display does not rely on that, since older rows, args and errors may hold them.

The modules: :mod:`~tickwork.web.dashboard.pages` (the pages and their commands),
:mod:`~tickwork.web.dashboard.runs` (runs, a run, bulk commands),
:mod:`~tickwork.web.dashboard.activity` (the charts and queues pages),
:mod:`~tickwork.web.dashboard.session` (the viewer, sign-in, cross-site posts),
:mod:`~tickwork.web.dashboard.view` (serving a page, reading ids, cursors and filters from
its path and query: what the page families share) and
:mod:`~tickwork.web.dashboard.render` (templates, the error page, static files).
"""

from tickwork.web.dashboard import activity, pages, runs
from tickwork.web.dashboard.session import router

__all__ = ["activity", "pages", "router", "runs"]
