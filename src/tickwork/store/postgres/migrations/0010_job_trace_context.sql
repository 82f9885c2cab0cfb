-- v10: the W3C traceparent of the span that submitted a job (OpenTelemetry, the otel extra),
-- so each run attempt's span links to it. NULL: submitted with no span active.
ALTER TABLE tickwork_jobs ADD COLUMN trace_context text;
