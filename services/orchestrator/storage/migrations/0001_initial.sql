-- The orchestrator: events, quarantine, read models of workflows and
-- tenants (fed by the registry's topics), instances with their event logs,
-- the dead-letter queue, and the outbox.

CREATE TABLE events (
    id                       uuid PRIMARY KEY,
    organization_id          text NOT NULL,
    project_id               text NOT NULL,
    environment              text NOT NULL,
    event_id                 text NOT NULL,
    type                     text NOT NULL,
    source                   text NOT NULL,
    subject                  text,
    data                     jsonb NOT NULL,
    time                     timestamptz,
    receive_time             timestamptz NOT NULL DEFAULT now(),
    replay_skip_side_effects boolean NOT NULL DEFAULT false,
    causation_id             text,
    correlation_id           text,
    depth                    integer NOT NULL DEFAULT 0,
    -- Ingest is idempotent on this key: a redelivered event is stored once.
    UNIQUE (organization_id, project_id, environment, event_id)
);
CREATE INDEX events_by_type ON events (organization_id, project_id, environment, type, receive_time);

-- Records that could not be taken as events, with why; never dropped.
CREATE TABLE quarantine (
    id           bigserial PRIMARY KEY,
    reason       text NOT NULL,
    detail       text NOT NULL,
    topic        text NOT NULL,
    partition    integer NOT NULL,
    record_offset bigint NOT NULL,
    key          bytea,
    value        bytea,
    headers      jsonb NOT NULL,
    -- With the offset, identifies a redelivered record; the digest keeps the
    -- in-process bus (whose offsets restart at 0) from matching old rows.
    value_digest text NOT NULL,
    receive_time timestamptz NOT NULL DEFAULT now(),
    UNIQUE (topic, partition, record_offset, value_digest)
);

CREATE TABLE workflows (
    workflow_id     uuid PRIMARY KEY,
    organization_id text NOT NULL,
    project_id      text NOT NULL,
    environment     text NOT NULL,
    status          text NOT NULL,
    trigger_event   text,
    version         integer,
    definition      jsonb,
    revision        bigint NOT NULL
);
CREATE INDEX workflows_matching ON workflows (organization_id, project_id, environment, trigger_event)
    WHERE status = 'active';

CREATE TABLE tenants (
    organization_id text NOT NULL,
    project_id      text NOT NULL,
    plan            text NOT NULL,
    revision        bigint NOT NULL,
    PRIMARY KEY (organization_id, project_id)
);

CREATE TABLE instances (
    id               uuid PRIMARY KEY,
    organization_id  text NOT NULL,
    project_id       text NOT NULL,
    environment      text NOT NULL,
    workflow_id      uuid NOT NULL,
    workflow_version integer NOT NULL,
    definition       jsonb NOT NULL,
    event            uuid NOT NULL REFERENCES events (id),
    -- The producer's event id, for reading without a join.
    event_id         text NOT NULL,
    subject          text,
    status           text NOT NULL
                     CHECK (status IN ('running', 'paused', 'completed', 'failed', 'canceled')),
    next_step        integer NOT NULL DEFAULT 0,
    attempt          integer NOT NULL DEFAULT 0,
    -- A delay step's timer is set: the step completes when wake_time passes.
    waiting          boolean NOT NULL DEFAULT false,
    wake_time        timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    claim_expires    timestamptz,
    is_test          boolean NOT NULL DEFAULT false,
    skip_side_effects boolean NOT NULL DEFAULT false,
    -- Distinguishes a redrive from the original run of the same event.
    run_key          text NOT NULL DEFAULT '',
    create_time      timestamptz NOT NULL DEFAULT now(),
    update_time      timestamptz NOT NULL DEFAULT now(),
    -- One instance per event, workflow and run: redelivery cannot start a second.
    UNIQUE (event, workflow_id, run_key)
);
CREATE INDEX instances_due ON instances (wake_time) WHERE status = 'running';
CREATE INDEX instances_by_subject ON instances (workflow_id, subject, create_time) WHERE subject IS NOT NULL;
CREATE INDEX instances_listing ON instances (organization_id, project_id, create_time DESC, id);

CREATE TABLE instance_log (
    instance_id uuid NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    position    integer NOT NULL CHECK (position > 0),
    kind        text NOT NULL,
    step        integer,
    attempt     integer,
    detail      jsonb NOT NULL DEFAULT '{}',
    time        timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (instance_id, position)
);

CREATE TABLE dead_letters (
    id                  uuid PRIMARY KEY,
    organization_id     text NOT NULL,
    project_id          text NOT NULL,
    environment         text NOT NULL,
    event               uuid NOT NULL REFERENCES events (id),
    event_id            text NOT NULL,
    instance_id         uuid NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    workflow_id         uuid NOT NULL,
    workflow_version    integer NOT NULL,
    step                integer NOT NULL,
    step_name           text NOT NULL,
    attempts            integer NOT NULL,
    reason              text NOT NULL,
    error               text NOT NULL,
    status              text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'redriven', 'discarded')),
    redrive_instance_id uuid,
    create_time         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id)
);
CREATE INDEX dead_letters_listing ON dead_letters (organization_id, project_id, create_time DESC, id);

CREATE TABLE outbox (
    id          bigserial PRIMARY KEY,
    topic       text NOT NULL,
    key         bytea,
    value       bytea,
    headers     jsonb NOT NULL DEFAULT '[]',
    create_time timestamptz NOT NULL DEFAULT now()
);
