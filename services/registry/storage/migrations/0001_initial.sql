-- The registry's schema: tenancy, API keys, workflows, versions, and the
-- outbox that carries state changes to the bus.

CREATE TABLE organizations (
    id            text PRIMARY KEY,
    display_name  text NOT NULL DEFAULT '',
    plan          text NOT NULL CHECK (plan IN ('starter', 'team', 'enterprise')),
    create_time   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE projects (
    organization_id text NOT NULL REFERENCES organizations (id),
    id              text NOT NULL,
    display_name    text NOT NULL DEFAULT '',
    create_time     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, id)
);

CREATE TABLE api_keys (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id),
    project_id      text,
    role            text NOT NULL CHECK (role IN ('viewer', 'developer', 'admin')),
    secret_hash     bytea NOT NULL,
    description     text NOT NULL DEFAULT '',
    create_time     timestamptz NOT NULL DEFAULT now(),
    revoke_time     timestamptz,
    FOREIGN KEY (organization_id, project_id) REFERENCES projects (organization_id, id)
);
CREATE INDEX api_keys_by_org ON api_keys (organization_id, create_time, id);

CREATE TABLE workflows (
    id                uuid PRIMARY KEY,
    organization_id   text NOT NULL,
    project_id        text NOT NULL,
    -- name, trigger_event and environment mirror the draft for filtering.
    name              text NOT NULL,
    trigger_event     text NOT NULL,
    environment       text NOT NULL CHECK (environment IN ('production', 'sandbox')),
    status            text NOT NULL CHECK (status IN ('draft', 'active', 'paused', 'archived')),
    draft             jsonb NOT NULL,
    draft_hash        text NOT NULL,
    published_version integer NOT NULL DEFAULT 0,
    -- Bumped on every change of runnable state; orders state-topic records.
    revision          bigint NOT NULL DEFAULT 0,
    create_time       timestamptz NOT NULL DEFAULT now(),
    update_time       timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (organization_id, project_id) REFERENCES projects (organization_id, id)
);
CREATE INDEX workflows_listing ON workflows (organization_id, project_id, create_time, id);

CREATE TABLE workflow_versions (
    workflow_id     uuid NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    version         integer NOT NULL CHECK (version > 0),
    definition      jsonb NOT NULL,
    definition_hash text NOT NULL,
    message         text NOT NULL DEFAULT '',
    created_by      text NOT NULL,
    create_time     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, version)
);

-- Records committed with the change they describe; a relay publishes them.
CREATE TABLE outbox (
    id          bigserial PRIMARY KEY,
    topic       text NOT NULL,
    key         bytea,
    value       bytea,
    headers     jsonb NOT NULL DEFAULT '[]',
    create_time timestamptz NOT NULL DEFAULT now()
);
