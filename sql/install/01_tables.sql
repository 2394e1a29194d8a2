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

-- The ledger and the feed. A record is written once: its feed position is never stored in its
-- row but derived from the tick that took it (statesman.ticks, below): base + (id - lo).
CREATE TABLE statesman.history (
    -- Insert order. CACHE 1 matters: the ticker relies on ids rising in real time (a later
    -- revision of an address always has a larger id, and an id drawn after a tick read the
    -- identity's last value is above it), which per-backend caching would break.
    id              bigint GENERATED ALWAYS AS IDENTITY (CACHE 1),
    -- Byte order ("C"): an address is an identifier, and every append descends the primary key
    -- twice (its latest revision, then the insert), where a comparison under the database's
    -- collation costs several times a memcmp.
    address         text COLLATE "C" NOT NULL,
    root            text NOT NULL,
    path            text NOT NULL,
    partition       text NOT NULL DEFAULT '',
    revision        bigint NOT NULL,
    -- The position a record got before 0.4.0 (the sequencer then stored it in the row); NULL
    -- for every record appended since. Read only by statesman._feed_page and _position_of.
    legacy_position bigint,
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
    -- The top-level id of the inserting transaction, taken before the record's id is drawn
    -- (the append does so): the ticks find a record's transaction in their snapshots by it.
    -- NULL for records from before 0.4.0 (they have legacy_position).
    txid            xid8,
    PRIMARY KEY (address, revision)
);
-- Readers walk a tick's records in id order; the ticker finds its bounds at the two ends.
CREATE INDEX history_id ON statesman.history (id);
-- Only pre-0.4.0 records are in it: a fresh install's stays empty.
CREATE UNIQUE INDEX history_legacy_position ON statesman.history (legacy_position)
    WHERE legacy_position IS NOT NULL;

-- The append keeps each root's declaration in its session between appends; a change of
-- statesman.roots (any statement, TRUNCATE included) invalidates those copies in every session
-- when it commits, as a change of the table's definition would (src/store/append.cpp).
CREATE FUNCTION statesman._roots_changed() RETURNS trigger
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'statesman_roots_changed';
COMMENT ON FUNCTION statesman._roots_changed() IS
    'invalidates the sessions'' copies of the root declarations when statesman.roots changes';
CREATE TRIGGER roots_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON statesman.roots
    FOR EACH STATEMENT EXECUTE FUNCTION statesman._roots_changed();

-- Helpers of the ticks, in C (src/feed/ticks.cpp): the cluster's system identifier, stored in
-- every tick; and the WAL flush that every reader of the feed does before it hands on what it
-- read (the ticker commits asynchronously).
CREATE FUNCTION statesman._system_id() RETURNS bigint
    LANGUAGE c STABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_system_id';
COMMENT ON FUNCTION statesman._system_id() IS 'the cluster''s system identifier (each tick stores it)';
CREATE FUNCTION statesman._durable(value bigint) RETURNS bigint
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_durable';
COMMENT ON FUNCTION statesman._durable(bigint) IS
    'flushes the WAL written so far (not when value is NULL) and returns value';

CREATE FUNCTION statesman._note_own_tick() RETURNS void
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_note_own_tick';
COMMENT ON FUNCTION statesman._note_own_tick() IS
    'notes that this transaction stored a tick counting its own records (see src/feed/ticks.cpp)';

-- The snapshot a tick stores: pg_current_snapshot(), except that a transaction that has an
-- xid (it has written) counts as ended in it. A snapshot never lists its own transaction as
-- running, so it counts as ended already when its xid is below the snapshot's xmax; at or above
-- it, the xmax moves past it and the xids between are listed as running (none of them had ended
-- when the snapshot was taken, since they are at or above its xmax). Whoever stores a tick with
-- it while the transaction has an xid calls statesman._note_own_tick(): no later snapshot
-- tick will take this transaction's later records, so each gets a tick of its own when it is
-- appended (statesman._tick_own_record).
-- In C (src/feed/ticker.cpp), the same code as the ticker's own.
CREATE FUNCTION statesman._tick_snapshot() RETURNS pg_snapshot
    LANGUAGE c VOLATILE
    AS 'MODULE_PATHNAME', 'statesman_tick_snapshot';
COMMENT ON FUNCTION statesman._tick_snapshot() IS
    'the current snapshot with the current transaction (when it has an xid) counted as ended';

-- The feed's ticks: one row per sequencing step that found records (statesman.sequence_feed).
-- Tick k holds the records whose transaction is visible in snap and not in prev_snap (the
-- previous tick's snap); their positions are base + (id - lo) for id in [lo, hi], so they
-- lie in [base, base + hi - lo], and the next tick's base is base + hi - lo + 1. Derived only
-- from this row, never updated, and the record's own id: pruning records moves no position.
-- Two other kinds of rows: an anchor (lo = hi + 1: no records) starts a chain (the install,
-- the upgrade from 0.3.0, a restore into another cluster); a range tick (snap NULL) holds
-- every committed record with id in [lo, hi], written only when a chain restarts after a
-- restore (statesman._restart_ticks). last_id is the identity's last value read before xid,
-- the tick's own transaction id (0 for an anchor: it bounds every later scan), was taken:
-- the ticker bounds its scan by them (see sequence_feed).
CREATE TABLE statesman.ticks (
    tick_id    bigint PRIMARY KEY,
    base       bigint NOT NULL,
    lo         bigint NOT NULL,
    hi         bigint NOT NULL CHECK (hi >= lo - 1),
    last_id    bigint NOT NULL,
    xid        xid8 NOT NULL,
    snap       pg_snapshot,
    prev_snap  pg_snapshot,
    system_id  bigint NOT NULL,          -- the cluster's (statesman._system_id())
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
-- A reader resuming after position p starts at the last tick whose base is <= p + 1.
CREATE INDEX ticks_base ON statesman.ticks (base);
-- The tick holding one record (statesman._position_of): from the ticks whose range ends at or
-- above its id, in that order, the ones whose range starts at or below it (checked in the index
-- entry, without visiting the row). The ends mostly rise with the ticks, so a tick's entry
-- mostly goes at the right end, and only a page split touches a page above the leaf. A GiST
-- index of the ranges widened its parents' keys on nearly every tick: about 230 bytes of WAL a
-- tick against some 70 (docs/feed.md "What the ticks cost").
CREATE INDEX ticks_hi ON statesman.ticks (hi, lo);
-- The anchors (few): the newest one is where the ticker's scans start at the earliest.
CREATE INDEX ticks_anchors ON statesman.ticks (tick_id) WHERE hi < lo;
-- The chain's start: position 1 comes next.
INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
VALUES (0, 1, 1, 0, 0, '0', statesman._tick_snapshot(), statesman._tick_snapshot(), statesman._system_id());
-- (This transaction counts as ended in tick 0: its appends, if it makes any, get ticks of their own.)
SELECT statesman._note_own_tick();

-- pg_restore runs CREATE EXTENSION (which inserts tick 0 above) and then copies the dumped
-- ticks in: the dumped tick 0 replaces this one, so the restored chain is the dumped one.
CREATE FUNCTION statesman._ticks_restore() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    UPDATE statesman.ticks t
    SET base = NEW.base, lo = NEW.lo, hi = NEW.hi, last_id = NEW.last_id, xid = NEW.xid, snap = NEW.snap,
        prev_snap = NEW.prev_snap, system_id = NEW.system_id, created_at = NEW.created_at
    WHERE t.tick_id = NEW.tick_id;
    IF FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION statesman._ticks_restore() IS
    'a restored tick 0 replaces the one CREATE EXTENSION made';
CREATE TRIGGER ticks_restore BEFORE INSERT ON statesman.ticks
    FOR EACH ROW WHEN (NEW.tick_id = 0) EXECUTE FUNCTION statesman._ticks_restore();

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
-- Positions are derived from the ticks: restored ticks keep every position (a restore into
-- another cluster starts a new chain after them, see statesman._restart_ticks).
SELECT pg_catalog.pg_extension_config_dump('statesman.ticks', '');
-- The insert order that the ticks follow: restored records keep theirs, new ones come after.
SELECT pg_catalog.pg_extension_config_dump('statesman.history_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.cursors', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.applied', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outboxes', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.outbox_state', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.leases', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.prune_pending', '');
SELECT pg_catalog.pg_extension_config_dump('statesman.delivered', '');
