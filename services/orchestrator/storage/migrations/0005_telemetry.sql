-- Telemetry.
--
-- The W3C trace context of each event's ingest span. Steps run later, by
-- whichever worker claims the instance, and start their spans under it, so
-- one trace reaches from the producer to every step. Empty for events
-- stored before this migration (their steps start new traces).
ALTER TABLE events ADD COLUMN traceparent text, ADD COLUMN tracestate text;

-- The DLQ depth gauge counts open dead letters every few seconds.
CREATE INDEX dead_letters_open ON dead_letters (environment) WHERE status = 'open';
