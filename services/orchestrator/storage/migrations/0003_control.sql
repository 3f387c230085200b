-- Operator control: pause holds, why an instance is paused, and each
-- workflow's draft (dry runs walk it).

CREATE TABLE holds (
    organization_id text NOT NULL,
    -- '' for organization scope; subject '' unless subject scope. Empty
    -- strings rather than nulls so the primary key covers every scope.
    project_id      text NOT NULL DEFAULT '',
    subject         text NOT NULL DEFAULT '',
    scope           text NOT NULL CHECK (scope IN ('subject', 'project', 'organization')),
    created_by      text NOT NULL,
    create_time     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, project_id, subject)
);

-- Set while status = 'paused': 'instance' (paused by id), 'workflow' (its
-- workflow was disabled), or the scope of the hold that paused it.
ALTER TABLE instances ADD COLUMN pause_reason text;
CREATE INDEX instances_live ON instances (organization_id, project_id, subject)
    WHERE status IN ('running', 'paused');

ALTER TABLE workflows ADD COLUMN draft_definition jsonb;
