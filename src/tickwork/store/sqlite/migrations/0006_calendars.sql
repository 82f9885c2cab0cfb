-- v6: business-day calendars by name (tickwork calendars create de-by --country DE ...).
-- definition: the calendar's JSON (country, subdiv, weekend, added and removed dates), as
-- tickwork.calendar.Calendar.definition() writes it. A cron schedule that names a
-- calendar carries a copy of it (schedule.calendar_def); editing the calendar rewrites the
-- copies and re-plans those jobs in the same transaction.
CREATE TABLE tickwork_calendars (
    name        TEXT    PRIMARY KEY,
    definition  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
-- The jobs that use a calendar (its edit and delete read them), without a table scan.
CREATE INDEX tickwork_jobs_calendar ON tickwork_jobs (json_extract(schedule, '$.calendar'))
    WHERE json_extract(schedule, '$.calendar') IS NOT NULL;
