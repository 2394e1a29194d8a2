-------------------------------------------------------------------------------
-- Tables
-------------------------------------------------------------------------------

-- The store: one row. store_name NULL means "the current database's name".
CREATE TABLE statesman.store (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    store_name  text,
    epoch       uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO statesman.store (singleton) VALUES (true);

-- pg_restore runs CREATE EXTENSION (which inserts the row above) and then copies the dumped
-- row in: that row replaces this one, so a restored store keeps its name and epoch.
CREATE FUNCTION statesman._store_restore() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.store s
    SET store_name = NEW.store_name, epoch = NEW.epoch, created_at = NEW.created_at
    WHERE s.singleton;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION statesman._store_restore() IS
    'a restored store row replaces the one CREATE EXTENSION made';
CREATE TRIGGER store_restore BEFORE INSERT ON statesman.store
    FOR EACH ROW EXECUTE FUNCTION statesman._store_restore();

-- Root declarations: envelope defaults and retention (NULL limits: keep all).
CREATE TABLE statesman.roots (
    root          text PRIMARY KEY,
    fingerprint   text,
    content_type  text,
    max_revisions integer CHECK (max_revisions >= 1),
    max_bytes     bigint CHECK (max_bytes >= 1),
    declared_at   timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The ledger and the feed. A committed record has global_position NULL until the sequencer
-- gives it one (see statesman.sequence_feed); id is the insert order.
CREATE TABLE statesman.history (
    -- Insert order. CACHE 1 matters: the sequencer relies on a later revision of an address
    -- always having a larger id than the earlier one, which per-backend caching would break.
    id              bigint GENERATED ALWAYS AS IDENTITY (CACHE 1),
    address         text NOT NULL,
    root            text NOT NULL,
    path            text NOT NULL,
    partition       text NOT NULL DEFAULT '',
    revision        bigint NOT NULL,
    global_position bigint,
    occurred_at     timestamptz NOT NULL,
    -- 'put' or 'delete', checked by the append functions (a CHECK constraint here would be
    -- re-compiled on every single-row insert).
    operation       text NOT NULL DEFAULT 'put',
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
    serve_until     timestamptz,
    PRIMARY KEY (address, revision)
);
CREATE UNIQUE INDEX history_global_position ON statesman.history (global_position)
    WHERE global_position IS NOT NULL;
CREATE INDEX history_unsequenced ON statesman.history (id)
    WHERE global_position IS NULL;

-- Feed positions. A sequence, not a counter row: a position handed out by a sequencer run
-- that later rolls back is burnt, never reused for another record.
-- Never move it backwards (setval): positions must only grow.
CREATE SEQUENCE statesman.feed_position_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- Durable cursors, keyed by outbox (or external consumer) id. Positions only move forward
-- through advance_cursor.
CREATE TABLE statesman.cursors (
    outbox_id   text PRIMARY KEY,
    position    bigint NOT NULL CHECK (position >= 1),
    updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Consumer kit: the (epoch, position) a consumer last applied, per feed. owner is the role
-- that stored it first: only that role moves it (row-level security, see the grants; NULL for
-- a row from before 0.4.0, claimed by the first role that moves it).
CREATE TABLE statesman.applied (
    consumer    text NOT NULL,
    feed        text NOT NULL,
    epoch       uuid NOT NULL,
    position    bigint NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    owner       name DEFAULT CURRENT_USER,
    PRIMARY KEY (consumer, feed)
);

-- Outboxes: where the dispatcher delivers the feed. sink_options may hold secrets, so this
-- table is readable only by the extension's owner (statesman.outbox_status shows no options).
CREATE TABLE statesman.outboxes (
    outbox_id                  text PRIMARY KEY,
    sink                       text NOT NULL,
    sink_options               jsonb NOT NULL,
    root                       text,
    batch_size                 integer NOT NULL,
    poll_interval              interval NOT NULL,
    require_lease              boolean NOT NULL,
    lease_ttl                  interval NOT NULL,
    lease_renew_interval       interval,      -- NULL: lease_ttl / 3
    min_retry_delay            interval NOT NULL,
    max_retry_delay            interval NOT NULL,
    skip_poison_after_attempts integer,       -- NULL: never skip
    fingerprint                text,
    payload_content_type       text,
    enabled                    boolean NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at                 timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- The role that created the outbox or last altered it (statesman._calling_role()); NULL:
    -- unknown (an outbox from before 0.4.0). The postgres sink's password rule is judged by it
    -- at every connection (statesman._sink_options_to_use).
    changed_by                 name
);

-- What the dispatcher of each outbox is doing: failures, totals, its process. Bounded: one row
-- per outbox, updated in place.
CREATE TABLE statesman.outbox_state (
    outbox_id          text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    dispatcher_pid     integer,
    dispatcher_state   text,        -- 'leading' or 'standby', as the dispatcher last said
    attempts           integer NOT NULL DEFAULT 0,   -- consecutive failed attempts
    last_error         text,
    last_error_at      timestamptz,
    last_published_at  timestamptz,
    published_total    bigint NOT NULL DEFAULT 0,
    deduplicated_total bigint NOT NULL DEFAULT 0,
    skipped_total      bigint NOT NULL DEFAULT 0
);

-- The lease row of each outbox; the lease itself is a session advisory lock (see
-- statesman._acquire_lease). round_trips counts acquisitions and renewals.
CREATE TABLE statesman.leases (
    outbox_id    text PRIMARY KEY REFERENCES statesman.outboxes ON DELETE CASCADE,
    holder_pid   integer,
    acquired_at  timestamptz,
    renewed_at   timestamptz,
    round_trips  bigint NOT NULL DEFAULT 0
);

-- Messages skipped by skip_poison_after_attempts, parked in the same transaction as the cursor
-- move that skipped them. statesman.redeliver() sets requeued_at; the dispatcher then hands
-- them to the sink again and removes them once the sink accepted them. message is NULL for a
-- record whose message cannot be built (last_error says why): it is never requeued.
CREATE TABLE statesman.dead_letters (
    outbox_id       text NOT NULL REFERENCES statesman.outboxes ON DELETE CASCADE,
    global_position bigint NOT NULL,
    message_id      text NOT NULL,
    message         jsonb,
    last_error      text,
    attempts        integer NOT NULL,
    parked_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    requeued_at     timestamptz,
    PRIMARY KEY (outbox_id, global_position)
);

-- Addresses whose retention could not prune everything it wanted, because an enabled outbox
-- had not delivered those records yet (or they had no feed position yet). The worker prunes
-- them again once the cursors have passed.
CREATE TABLE statesman.prune_pending (
    address     text PRIMARY KEY,
    noted_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- The default target of the `table` sink.
CREATE TABLE statesman.delivered (
    message_id      text PRIMARY KEY,
    global_position bigint NOT NULL,
    message         jsonb NOT NULL,
    published_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- pg_dump keeps the contents of extension tables only when told to.
SELECT pg_catalog.pg_extension_config_dump('statesman.store', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.roots', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.history', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.feed_position_seq', '');
-- The insert order that the sequencer follows: restored records keep theirs, new ones come after.
SELECT pg_catalog.pg_extension_config_dump('statesman.history_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.cursors', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.applied', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outboxes', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outbox_state', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.leases', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.prune_pending', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.delivered', '');
