"""Business-day calendars: read by anyone, written by admin keys. Changing one re-plans
its jobs in the same transaction; one that active or paused jobs use cannot be deleted."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Response, status
from pydantic import BaseModel, ConfigDict, Field

from tickwork.records import to_json
from tickwork.web.api.auth import AdminDep, ClientDep, PrincipalDep, resource_router
from tickwork.web.api.errors import COMMON_ERRORS, error_doc
from tickwork.web.api.fields import Text

router = resource_router()

CalendarName = Annotated[
    str, Path(max_length=63, pattern=r"^[a-z0-9][a-z0-9._-]*$", description="A calendar.")
]
DateList = Annotated[list[Annotated[str, Field(max_length=10)]] | None, Field(max_length=1000)]


class CalendarOut(BaseModel):
    name: str
    country: str | None
    subdiv: str | None
    weekend: list[str]
    added: list[str]
    removed: list[str]
    created_at: str
    updated_at: str


class CalendarIn(BaseModel):
    """A new calendar, or (PATCH) a change: a given country, subdiv or weekend replaces the
    stored one; add and remove list days off and business days (YYYY-MM-DD)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"country": "DE", "subdiv": "BY", "add": ["2026-12-24"]}]},
    )

    country: Text = Field(None, description="ISO 3166-1 code: its public holidays.")
    subdiv: Text = Field(None, description="A region of the country: its holidays too.")
    weekend: Text = Field(None, description="SAT,SUN (the default), FRI,SAT, or none.")
    add: DateList = Field(None, description="Days off besides the holidays.")
    remove: DateList = Field(None, description="Business days despite a holiday.")


class CalendarChangeOut(BaseModel):
    calendar: CalendarOut
    replanned: list[int] = Field(description="The jobs whose next run was re-planned.")


@router.get("/calendars", response_model=list[CalendarOut], summary="Every calendar, by name")
def list_calendars(principal: PrincipalDep, client: ClientDep) -> list[dict[str, Any]]:
    return [to_json(record) for record in client.list_calendars()]


@router.get(
    "/calendars/{name}",
    response_model=CalendarOut,
    summary="A calendar",
    responses={**COMMON_ERRORS, 404: error_doc("No such calendar.")},
)
def get_calendar(name: CalendarName, principal: PrincipalDep, client: ClientDep) -> dict[str, Any]:
    return to_json(client.get_calendar(name))


@router.put(
    "/calendars/{name}",
    status_code=status.HTTP_201_CREATED,
    response_model=CalendarOut,
    summary="Create a calendar (admin keys only)",
    responses={
        **COMMON_ERRORS,
        400: error_doc("Unknown country or region, a malformed date, or the name is taken."),
        403: error_doc("A tenant key: calendars are for admins."),
    },
)
def create_calendar(
    name: CalendarName, body: CalendarIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    record = client.create_calendar(name, **body.model_dump())
    return to_json(record)


@router.patch(
    "/calendars/{name}",
    response_model=CalendarChangeOut,
    summary="Change a calendar (admin keys only); its jobs are re-planned in one transaction",
    responses={
        **COMMON_ERRORS,
        400: error_doc("Unknown country or region, or a malformed date."),
        403: error_doc("A tenant key: calendars are for admins."),
        404: error_doc("No such calendar."),
    },
)
def update_calendar(
    name: CalendarName, body: CalendarIn, principal: AdminDep, client: ClientDep
) -> dict[str, Any]:
    change = client.update_calendar(name, **body.model_dump())
    return {"calendar": to_json(change.record), "replanned": change.replanned}


@router.delete(
    "/calendars/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a calendar no active or paused job uses (admin keys only)",
    responses={
        **COMMON_ERRORS,
        403: error_doc("A tenant key: calendars are for admins."),
        404: error_doc("No such calendar."),
        409: error_doc("Active or paused jobs use the calendar (the message names them)."),
    },
)
def delete_calendar(name: CalendarName, principal: AdminDep, client: ClientDep) -> Response:
    client.delete_calendar(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
