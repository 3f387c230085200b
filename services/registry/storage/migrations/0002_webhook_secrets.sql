-- Per-workflow webhook signing secrets (SPEC §4), and the revision that
-- orders the records of the tenants topic.

-- One row per workflow. A rotation moves `secret` to `previous_secret`, which
-- stays valid for a grace period after `rotate_time` (the rule lives in
-- domain/webhook_secrets.py), so receivers can switch without a gap.
CREATE TABLE webhook_secrets (
    workflow_id     uuid PRIMARY KEY REFERENCES workflows (id) ON DELETE CASCADE,
    secret          text NOT NULL,
    previous_secret text,
    rotate_time     timestamptz,
    create_time     timestamptz NOT NULL DEFAULT now()
);

-- Workflows created before this migration get a secret their owners can
-- learn by rotating it. 32 bytes: SHA-256 over three random UUIDs (366 bits
-- from the server's strong random source), since gen_random_bytes needs the
-- pgcrypto extension.
INSERT INTO webhook_secrets (workflow_id, secret)
SELECT id,
       'whsec_' || encode(
           sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid())
                  || uuid_send(gen_random_uuid())),
           'base64')
FROM workflows;

-- Bumped on every plan change; every project's TenantState record carries
-- its organization's revision.
ALTER TABLE organizations ADD COLUMN revision bigint NOT NULL DEFAULT 1;

-- Projects created before the tenants topic existed: the registry announces
-- them once at start-up and deletes the rows (new projects are announced
-- when they are created).
CREATE TABLE unannounced_projects (
    organization_id text NOT NULL,
    project_id      text NOT NULL,
    PRIMARY KEY (organization_id, project_id),
    FOREIGN KEY (organization_id, project_id) REFERENCES projects (organization_id, id)
);
INSERT INTO unannounced_projects (organization_id, project_id)
SELECT organization_id, id FROM projects;
