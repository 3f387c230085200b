-- The vault's schema: secrets, their encrypted versions, retired key
-- versions, and the append-only audit log. No plaintext value is stored.

CREATE TABLE secrets (
    organization_id text NOT NULL,
    action          text NOT NULL,
    key             text NOT NULL,
    -- Monotonic, never reused (not even after a delete): the served version.
    latest_version  integer NOT NULL CHECK (latest_version > 0),
    create_time     timestamptz NOT NULL DEFAULT now(),
    update_time     timestamptz NOT NULL DEFAULT now(),
    updated_by      text NOT NULL,
    -- Set by DeleteSecret: not listed, not served; versions destroyed.
    delete_time     timestamptz,
    PRIMARY KEY (organization_id, action, key)
);

CREATE TABLE secret_versions (
    organization_id text NOT NULL,
    action          text NOT NULL,
    key             text NOT NULL,
    version         integer NOT NULL CHECK (version > 0),
    created_by      text NOT NULL,
    create_time     timestamptz NOT NULL DEFAULT now(),
    -- The envelope (see services/vault/domain/envelope.py). All NULL once
    -- destroyed; the metadata stays for the audit trail.
    format          smallint,
    kek_version     integer,
    dek_nonce       bytea,
    wrapped_dek     bytea,
    value_nonce     bytea,
    ciphertext      bytea,
    destroy_time    timestamptz,
    PRIMARY KEY (organization_id, action, key, version),
    FOREIGN KEY (organization_id, action, key) REFERENCES secrets ON DELETE CASCADE,
    CHECK (num_nulls(format, kek_version, dek_nonce, wrapped_dek, value_nonce, ciphertext)
           IN (0, 6)),
    CHECK ((destroy_time IS NULL) = (ciphertext IS NOT NULL))
);
-- Usage counts per key version and the rows Rewrap still has to visit.
CREATE INDEX secret_versions_by_kek ON secret_versions (kek_version)
    WHERE kek_version IS NOT NULL;

-- Key versions the operator retired: never used again, safe to remove from
-- the configuration.
CREATE TABLE retired_key_versions (
    version     integer PRIMARY KEY,
    retired_by  text NOT NULL,
    retire_time timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_events (
    id              bigserial PRIMARY KEY,
    create_time     timestamptz NOT NULL DEFAULT now(),
    -- '' for platform entries (key ring operations, refused resolves).
    organization_id text NOT NULL,
    action          text NOT NULL DEFAULT '',
    key             text NOT NULL DEFAULT '',
    secret_version  integer NOT NULL DEFAULT 0,
    operation       text NOT NULL CHECK (operation IN ('set_secret', 'delete_secret',
                        'purge_secret_versions', 'resolve', 'rewrap', 'retire_key_version')),
    caller          text NOT NULL,
    outcome         text NOT NULL CHECK (outcome IN ('ok', 'not_found', 'denied',
                        'integrity_error', 'key_unavailable', 'refused')),
    detail          text NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_by_org ON audit_events (organization_id, id);

-- The audit log is append-only: rows can be neither changed nor removed.
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'vault.audit_events is append-only';
END;
$$;
CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
