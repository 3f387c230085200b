-- Projections (read models) written by custom actions, in the same
-- transaction as the step result that produced them.

CREATE TABLE projections (
    id              uuid PRIMARY KEY,
    organization_id text NOT NULL,
    project_id      text NOT NULL,
    environment     text NOT NULL,
    name            text NOT NULL,
    -- Both set: one row per key, updated in place. Both null: appended rows.
    entity_type     text,
    entity_id       text,
    title           text NOT NULL DEFAULT '',
    status          text NOT NULL DEFAULT '',
    data            jsonb,
    last_event      uuid NOT NULL,
    last_instance   uuid NOT NULL,
    create_time     timestamptz NOT NULL DEFAULT now(),
    update_time     timestamptz NOT NULL DEFAULT now(),
    CHECK ((entity_type IS NULL) = (entity_id IS NULL))
);
CREATE UNIQUE INDEX projections_key
    ON projections (organization_id, project_id, environment, name, entity_type, entity_id)
    WHERE entity_type IS NOT NULL;
CREATE INDEX projections_listing ON projections (organization_id, project_id, environment, name);
