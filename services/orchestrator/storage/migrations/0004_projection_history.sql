-- Projection reads: every write kept as history, the producer's event id on
-- the row (read without a join), and a listing index in the order reads use.

ALTER TABLE projections ADD COLUMN last_event_id text NOT NULL DEFAULT '';
UPDATE projections SET last_event_id = events.event_id
    FROM events WHERE events.id = projections.last_event;

-- One row per write, in the transaction of the step result that wrote it.
-- Writes from before this migration have no history.
CREATE TABLE projection_writes (
    id               bigserial PRIMARY KEY,
    -- Sandbox reset deletes a projection together with its history.
    projection       uuid NOT NULL REFERENCES projections (id) ON DELETE CASCADE,
    event            uuid NOT NULL,
    event_id         text NOT NULL,
    instance_id      uuid NOT NULL,
    workflow_id      uuid NOT NULL,
    workflow_version integer NOT NULL,
    step             integer NOT NULL,
    title            text NOT NULL,
    status           text NOT NULL,
    data             jsonb,
    -- The writing instance was a replay (side effects suppressed or not).
    replay           boolean NOT NULL,
    write_time       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projection_writes_history ON projection_writes (projection, write_time DESC, id DESC);

DROP INDEX projections_listing;
CREATE INDEX projections_listing
    ON projections (organization_id, project_id, environment, name, update_time DESC, id DESC);
