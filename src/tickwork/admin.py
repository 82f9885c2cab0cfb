"""The administration calls of :class:`~tickwork.client.Client`: business-day calendars,
fault injection's opt-in, tenants' limits, API keys and the dashboard's sessions. A part of
the client (``Client`` inherits them), apart only to keep each module short; they check
their input as the rest of the client does, and reach the store only through ``store``.
"""

from __future__ import annotations

import hmac
from datetime import timedelta

from tickwork import auth
from tickwork.calendar import check_name, make_calendar, parse_date, parse_weekend
from tickwork.errors import (
    ApiKeyNotFound,
    NotFound,
    UnknownCalendar,
    ValidationError,
)
from tickwork.inputs import (
    check_page,
    parse_rate,
)
from tickwork.job import (
    MAX_NAME_LENGTH,
    check_label,
)
from tickwork.records import (
    DEFAULT_PAGE,
    KEEP,
    ApiKey,
    CalendarChange,
    CalendarRecord,
    InjectedRun,
    Keep,
    Page,
    Session,
    SignedIn,
    TenantStatus,
)
from tickwork.schedule import (
    Cron,
)
from tickwork.store import Store


class Administration:
    """Calendars, fault injection, tenants, API keys and sessions, on ``store``."""

    store: Store

    # -- calendars ---------------------------------------------------------------------------

    def create_calendar(
        self,
        name: str,
        *,
        country: str | None = None,
        subdiv: str | None = None,
        weekend: str | None = None,
        add: list[str] | None = None,
        remove: list[str] | None = None,
    ) -> CalendarRecord:
        """A new calendar: ``country``'s public holidays (and ``subdiv``'s, a region), a
        ``weekend`` (``"SAT,SUN"``, the default; ``"none"``), plus the dates in ``add``
        (YYYY-MM-DD) and minus those in ``remove``. InvalidCalendar for an unknown country or
        region or a malformed date; ValidationError when the name is taken."""
        calendar = make_calendar(
            name,
            country=country,
            subdiv=subdiv,
            weekend=weekend,
            add=add or (),
            remove=remove or (),
        )
        return self.store.create_calendar(calendar)

    def update_calendar(
        self,
        name: str,
        *,
        country: str | None = None,
        subdiv: str | None = None,
        weekend: str | None = None,
        add: list[str] | None = None,
        remove: list[str] | None = None,
    ) -> CalendarChange:
        """Change a calendar: a given ``country``, ``subdiv`` or ``weekend`` replaces the
        stored one; dates in ``add`` become days off and dates in ``remove`` business days
        (each undoes the other for its dates). The jobs that use it are re-planned in the
        same transaction. CalendarNotFound when there is none; InvalidCalendar (from
        :class:`Calendar` itself) for a date both added and removed."""
        return self.store.update_calendar(
            check_name(name),
            country=country if country is not None else KEEP,
            subdiv=subdiv if subdiv is not None else KEEP,
            weekend=parse_weekend(weekend) if weekend is not None else KEEP,
            add={parse_date(d, field="add") for d in add or ()},
            remove={parse_date(d, field="remove") for d in remove or ()},
        )

    def get_calendar(self, name: str) -> CalendarRecord:
        return self.store.get_calendar(check_name(name))

    def list_calendars(self) -> list[CalendarRecord]:
        return self.store.list_calendars()

    def calendar_jobs(self, name: str) -> list[int]:
        """The active and paused jobs that use calendar ``name``."""
        return self.store.calendar_jobs(check_name(name))

    def delete_calendar(self, name: str) -> None:
        """Delete a calendar no active or paused job uses (CalendarInUse names them)."""
        self.store.delete_calendar(check_name(name))

    def bind_calendar(self, schedule: Cron) -> Cron:
        """``schedule`` with the calendar it names read from the store (``tickwork next
        --calendar``); UnknownCalendar when there is none."""
        if schedule.calendar is None:
            return schedule
        try:
            found = self.store.get_calendar(schedule.calendar).calendar
        except NotFound:
            raise UnknownCalendar(schedule.calendar) from None
        return schedule.bind(found)

    # -- fault injection (tickwork.faults) ---------------------------------------------------

    def set_fault_injection(self, allowed: bool) -> None:
        """Opt the database in to workers that inject faults (``allowed``), or out: a
        worker started with ``--inject-faults`` on a database that has not opted in
        refuses to start, so injection cannot reach production by accident."""
        if not isinstance(allowed, bool):
            raise ValidationError(f"allowed must be true or false, got {allowed!r}")
        self.store.set_fault_injection(allowed)

    def fault_injection_allowed(self) -> bool:
        return self.store.fault_injection_allowed()

    def injected_runs(
        self, *, tenant: str | None = None, after: int | None = None, limit: int = DEFAULT_PAGE
    ) -> Page[InjectedRun]:
        """One page of the runs that executed more than once because of injected faults,
        newest first, each with its faults: the runs whose side effects to check for
        duplicates."""
        check_page(after, limit)
        return self.store.injected_runs(tenant=tenant, after=after, limit=limit)

    # -- tenants -----------------------------------------------------------------------------

    def list_tenants(self) -> list[TenantStatus]:
        """Every tenant with limits or runs running or queued-and-due, by name, with its
        limits and counts now."""
        return self.store.list_tenants()

    def tenant(self, tenant: str) -> TenantStatus:
        """One tenant's limits and counts now (a tenant never seen has none and zeros)."""
        check_label("tenant", tenant)
        return self.store.list_tenants(tenant=tenant)[0]

    def set_tenant_limits(
        self,
        tenant: str,
        *,
        max_running: int | Keep | None = KEEP,
        rate: float | str | Keep | None = KEEP,
        burst: int | Keep | None = KEEP,
        weight: float | Keep | None = KEEP,
    ) -> TenantStatus:
        """Change ``tenant``'s limits: None clears one, one not given stays (see
        :meth:`Store.set_tenant_limits`); every worker obeys them from its next claim.
        ``rate`` is runs per second, or text as the CLI takes it (``"20/s"``, ``"30/m"``).
        ValidationError for a bad name or value, or a burst without a rate; nothing written.

        ::

            client.set_tenant_limits("acme", max_running=5, rate="20/s", burst=40)
            client.set_tenant_limits("acme", rate=None, burst=None)  # no rate; the rest stay
        """
        check_label("tenant", tenant)
        if isinstance(rate, str):
            rate = parse_rate(rate)
        self.store.set_tenant_limits(
            tenant, max_running=max_running, rate=rate, burst=burst, weight=weight
        )
        return self.tenant(tenant)

    # -- API keys ----------------------------------------------------------------------------

    def create_api_key(
        self, *, tenant: str, admin: bool = False, label: str | None = None
    ) -> tuple[ApiKey, str]:
        """A new key for ``tenant`` (``admin``: every tenant): its record, and the key
        itself, which is shown this once and never stored (see :mod:`tickwork.auth`)."""
        check_label("tenant", tenant)
        if label is not None:
            check_label("label", label)
        if not isinstance(admin, bool):
            raise ValidationError(f"admin must be true or false, got {admin!r}", field="admin")
        key, prefix = auth.generate_key()
        record = self.store.create_api_key(
            key_hash=auth.hash_key(key), prefix=prefix, tenant=tenant, admin=admin, label=label
        )
        return record, key

    def authenticate(self, secret: str) -> ApiKey | None:
        """The unrevoked key ``secret`` is, or None (malformed, unknown or revoked)."""
        if not isinstance(secret, str):
            return None
        prefix = auth.key_prefix(secret)
        if prefix is None:
            return None
        found = self.store.api_key_by_hash(auth.hash_key(secret))
        if found is None or not hmac.compare_digest(found.prefix, prefix):
            return None
        return found

    def list_api_keys(self) -> list[ApiKey]:
        """Every key, revoked ones too, newest first (never a secret or a hash)."""
        return self.store.list_api_keys()

    def api_keys_exist(self) -> bool:
        """Whether a key was ever created, revoked ones included (keys are never deleted):
        the HTTP API runs open on loopback only while none was."""
        return bool(self.store.list_api_keys())

    def revoke_api_key(self, key: str) -> ApiKey:
        """Revoke a key named by its id, its prefix, or the whole key; idempotent.
        ApiKeyNotFound when none matches."""
        if not isinstance(key, str) or not key.strip():
            raise ValidationError("name the key by its id or prefix", field="key")
        text = key.strip()
        name = auth.key_prefix(text) or text.removeprefix(f"{auth.KEY_SCHEME}_")
        if not name or len(name) > MAX_NAME_LENGTH:
            raise ApiKeyNotFound(key)
        return self.store.revoke_api_key(name)

    # -- sessions (the dashboard's sign-in) ----------------------------------------------------

    def sign_in(
        self,
        key: str,
        *,
        idle_timeout: timedelta = auth.SESSION_IDLE_TIMEOUT,
        lifetime: timedelta = auth.SESSION_LIFETIME,
    ) -> SignedIn | None:
        """Start a session with ``key``, or None when the key is malformed, unknown or
        revoked (also when it is revoked while this runs: the store checks again)."""
        found = self.authenticate(key)
        if found is None:
            return None
        token = auth.generate_session_token()
        try:
            session = self.store.sign_in(
                key_id=found.id,
                token_hash=auth.hash_key(token),
                idle_timeout=idle_timeout,
                lifetime=lifetime,
            )
        except ApiKeyNotFound:
            return None
        return SignedIn(token, session, found)

    def authenticate_session(self, token: str) -> tuple[Session, ApiKey] | None:
        """The live session ``token`` names, and its key; None when it is malformed,
        unknown, signed out, expired or its key revoked."""
        if not isinstance(token, str) or not auth.is_session_token(token):
            return None
        return self.store.session_by_hash(auth.hash_key(token))

    def sign_out(self, token: str) -> bool:
        """End the session ``token`` names; False when there was none to end."""
        if not isinstance(token, str) or not auth.is_session_token(token):
            return False
        return self.store.sign_out(auth.hash_key(token))
