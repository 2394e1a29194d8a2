-------------------------------------------------------------------------------
-- Types
-------------------------------------------------------------------------------

-- One record as current() and history() return it.
CREATE TYPE statesman.record AS (
    root            text,
    path            text,
    partition       text,
    address         text,
    revision        bigint,
    global_position bigint,
    occurred_at     timestamptz,
    operation       text,
    status          text,
    value_type      text,
    schema_version  integer,
    source          text,
    payload         bytea,
    fingerprint     text,
    content_type    text,
    serializer_id   text,
    correlation_id  text,
    causation_id    text,
    error           text,
    metadata        jsonb,
    fresh_until     timestamptz,
    serve_until     timestamptz
);
