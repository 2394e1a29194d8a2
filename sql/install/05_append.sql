-------------------------------------------------------------------------------
-- Writing
-------------------------------------------------------------------------------

-- The append functions are on every application's hot path, so they are not SECURITY DEFINER
-- (whose per-call search_path switch costs as much as the insert's own index work). The C code
-- instead acts on the ledger as its owner only around fixed statements in which every relation,
-- function and operator is schema-qualified, the way PostgreSQL's RI triggers do: a caller's
-- search_path cannot capture anything, and callers need no privileges on the tables.

-- The planner's support of the three append functions: at planning, it drops the trailing
-- arguments that hold constants the function reads for a missing argument anyway (NULL, and the
-- defaults of partition, operation and status), so that a statement does not set up a dozen
-- constant arguments again at every execution.
CREATE FUNCTION statesman._append_support(internal) RETURNS internal
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'statesman_append_support';
REVOKE ALL ON FUNCTION statesman._append_support(internal) FROM PUBLIC;

CREATE FUNCTION statesman.append(
    root text, path text, payload jsonb, partition text DEFAULT '', operation text DEFAULT 'put',
    status text DEFAULT 'ok', value_type text DEFAULT NULL, schema_version integer DEFAULT NULL,
    source text DEFAULT NULL, correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL,
    metadata jsonb DEFAULT NULL, error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    SUPPORT statesman._append_support
    AS 'MODULE_PATHNAME', 'statesman_append';
COMMENT ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text,
    text, jsonb, text, timestamptz, timestamptz) IS
    'appends a record with a JSON payload (stored as its UTF-8 text, content type application/json)';

CREATE FUNCTION statesman.append_bytes(
    root text, path text, payload bytea, content_type text, serializer_id text DEFAULT NULL,
    partition text DEFAULT '', operation text DEFAULT 'put', status text DEFAULT 'ok',
    value_type text DEFAULT NULL, schema_version integer DEFAULT NULL, source text DEFAULT NULL,
    correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL, metadata jsonb DEFAULT NULL,
    error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    SUPPORT statesman._append_support
    AS 'MODULE_PATHNAME', 'statesman_append_bytes';
COMMENT ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text,
    integer, text, text, text, jsonb, text, timestamptz, timestamptz) IS
    'appends a record with an opaque byte payload';

CREATE FUNCTION statesman.append_delete(
    root text, path text, partition text DEFAULT '', status text DEFAULT 'ok',
    value_type text DEFAULT NULL, schema_version integer DEFAULT NULL, source text DEFAULT NULL,
    correlation_id text DEFAULT NULL, causation_id text DEFAULT NULL, metadata jsonb DEFAULT NULL,
    error text DEFAULT NULL, fresh_until timestamptz DEFAULT NULL,
    serve_until timestamptz DEFAULT NULL)
    RETURNS TABLE (address text, revision bigint)
    LANGUAGE c VOLATILE
    SUPPORT statesman._append_support
    AS 'MODULE_PATHNAME', 'statesman_append_delete';
COMMENT ON FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) IS
    'appends a tombstone (operation delete, no payload)';

-- The plain twins of the three append functions: the same C code and arguments, OUT (address,
-- revision), not a set. The planner's support turns a call of an append function in a select
-- list into a call of its twin where that changes nothing the statement does (one set-returning
-- call in the list, not also in FROM): a set-returning call has its row type rebuilt from
-- pg_proc and a one-row result set made at every execution. Open to PUBLIC because a plan that
-- calls a twin is checked for EXECUTE on the twin; each twin checks EXECUTE on its declared
-- function itself, once per execution as the executor would, and refuses as that function
-- would (42501).
CREATE FUNCTION statesman._append_row(
    root text, path text, payload jsonb, partition text, operation text, status text,
    value_type text, schema_version integer, source text, correlation_id text, causation_id text,
    metadata jsonb, error text, fresh_until timestamptz, serve_until timestamptz,
    OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_row';
CREATE FUNCTION statesman._append_bytes_row(
    root text, path text, payload bytea, content_type text, serializer_id text, partition text,
    operation text, status text, value_type text, schema_version integer, source text,
    correlation_id text, causation_id text, metadata jsonb, error text, fresh_until timestamptz,
    serve_until timestamptz, OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_bytes_row';
CREATE FUNCTION statesman._append_delete_row(
    root text, path text, partition text, status text, value_type text, schema_version integer,
    source text, correlation_id text, causation_id text, metadata jsonb, error text,
    fresh_until timestamptz, serve_until timestamptz, OUT address text, OUT revision bigint)
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_append_delete_row';
