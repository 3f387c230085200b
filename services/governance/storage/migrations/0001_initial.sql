-- Governance: actions, immutable versions with their modules, review
-- history, the usages read model fed by the registry's state topic, and the
-- outbox that carries runnable state to the bus.

CREATE TABLE actions (
    id              uuid PRIMARY KEY,
    organization_id text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    enabled         boolean NOT NULL DEFAULT true,
    -- Bumped on every change of runnable state; orders state-topic records.
    revision        bigint NOT NULL DEFAULT 1,
    create_time     timestamptz NOT NULL DEFAULT now(),
    update_time     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (organization_id, name)
);

CREATE TABLE action_versions (
    action_id        uuid NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    version          integer NOT NULL CHECK (version > 0),
    sha256           text NOT NULL,
    size_bytes       bigint NOT NULL,
    module           bytea NOT NULL,
    permissions      jsonb NOT NULL,
    review_status    text NOT NULL DEFAULT 'pending_review'
                     CHECK (review_status IN ('pending_review', 'approved', 'rejected')),
    review_comment   text NOT NULL DEFAULT '',
    reviewed_by      text NOT NULL DEFAULT '',
    review_time      timestamptz,
    uploaded_by      text NOT NULL,
    signature_status text NOT NULL CHECK (signature_status IN ('verified', 'unverified')),
    key_fingerprint  text NOT NULL DEFAULT '',
    create_time      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (action_id, version)
);
CREATE INDEX action_versions_by_digest ON action_versions (sha256);

CREATE TABLE review_events (
    id          bigserial PRIMARY KEY,
    action_id   uuid NOT NULL,
    version     integer NOT NULL,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    comment     text NOT NULL DEFAULT '',
    actor       text NOT NULL,
    create_time timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (action_id, version) REFERENCES action_versions (action_id, version)
        ON DELETE CASCADE
);

-- Which actions each workflow references, from eventflow.registry.workflows.
CREATE TABLE workflow_usages (
    workflow_id     uuid PRIMARY KEY,
    organization_id text NOT NULL,
    project_id      text NOT NULL,
    workflow_name   text NOT NULL,
    workflow_status text NOT NULL,
    draft_refs      text[] NOT NULL,
    published_refs  text[] NOT NULL,
    revision        bigint NOT NULL
);
CREATE INDEX workflow_usages_by_org ON workflow_usages (organization_id);

CREATE TABLE outbox (
    id          bigserial PRIMARY KEY,
    topic       text NOT NULL,
    key         bytea,
    value       bytea,
    headers     jsonb NOT NULL DEFAULT '[]',
    create_time timestamptz NOT NULL DEFAULT now()
);
