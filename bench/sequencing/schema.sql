-- Prototypes of four ways to give appended records their feed positions, side by side in one
-- scratch database, each in its own schema with its own copy of a table shaped like
-- statesman.history (sql/install/01_tables.sql):
--
--   bare  a bare INSERT: the history table with its primary key only, nothing sequenced
--   base  today's design: insert with global_position NULL, then the sequencer's UPDATE
--         (statesman.sequence_feed of sql/install/07_sequencer.sql, copied)
--   a     PgQ-style snapshot ticks: nothing written per record; a tick stores two snapshots
--         and (base, lo, hi); position = base + (id - lo)
--   b     a narrow insert-only position map (global_position, history_id) written by the
--         sequencer, found through the same snapshot diff as the ticks
--   a2    as a, without the transaction-id index (the ticker finds records by id bounds)
--   c     the map batched: one row per run chunk (base, ids bigint[]); position = base + index
--
-- Only the sequencing differs. The append's own work (address lock, revision lookup, retention)
-- is the same in every design and left out.

SET client_min_messages = warning;
DROP SCHEMA IF EXISTS tpl, bare, base, a, a2, b, c, bench CASCADE;
CREATE SCHEMA tpl;
CREATE SCHEMA bench;

-- The columns of statesman.history, without global_position.
CREATE TABLE tpl.history (
    id              bigint GENERATED ALWAYS AS IDENTITY (CACHE 1),
    address         text NOT NULL,
    root            text NOT NULL,
    path            text NOT NULL,
    partition       text NOT NULL DEFAULT '',
    revision        bigint NOT NULL,
    occurred_at     timestamptz NOT NULL,
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

-------------------------------------------------------------------------------
-- bare
-------------------------------------------------------------------------------
CREATE SCHEMA bare;
CREATE TABLE bare.history (LIKE tpl.history INCLUDING ALL);

-------------------------------------------------------------------------------
-- base: today's design (insert, then UPDATE by the sequencer)
-------------------------------------------------------------------------------
CREATE SCHEMA base;
CREATE TABLE base.history (LIKE tpl.history INCLUDING ALL);
ALTER TABLE base.history ADD COLUMN global_position bigint;
CREATE UNIQUE INDEX history_global_position ON base.history (global_position)
    WHERE global_position IS NOT NULL;
CREATE INDEX history_unsequenced ON base.history (id) WHERE global_position IS NULL;
CREATE SEQUENCE base.feed_position_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- statesman.sequence_feed as in sql/install/07_sequencer.sql (argument checks left out).
CREATE FUNCTION base.sequence_feed(max_records integer DEFAULT 10000) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET plan_cache_mode = force_generic_plan
    SET jit = off
    AS $$
DECLARE
    sequenced bigint;
    head bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1398033743, 0) THEN
        RETURN NULL;
    END IF;
    WITH todo AS MATERIALIZED (
        SELECT h.ctid AS tid FROM base.history h
        WHERE h.global_position IS NULL
        ORDER BY h.id
        LIMIT max_records
    ), numbered AS MATERIALIZED (
        SELECT t.tid, pg_catalog.nextval('base.feed_position_seq'::regclass) AS pos FROM todo t
    )
    UPDATE base.history h SET global_position = n.pos
    FROM numbered n
    WHERE h.ctid = n.tid;
    GET DIAGNOSTICS sequenced = ROW_COUNT;
    head := (SELECT max(h.global_position) FROM base.history h);
    IF sequenced > 0 THEN
        PERFORM set_config('synchronous_commit', 'on', true);
        PERFORM pg_notify('statesman', head::text);
    END IF;
    RETURN head;
END
$$;

-- One page of the feed after position p (the rows only; building the message is the same
-- work in every design).
CREATE FUNCTION base.page_sql() RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT 'SELECT h.global_position AS pos, h.* FROM base.history h
WHERE h.global_position > $1 ORDER BY h.global_position LIMIT $2'
$$;

-------------------------------------------------------------------------------
-- a: PgQ-style snapshot ticks
-------------------------------------------------------------------------------
-- The record carries its inserting (top-level) transaction id. Indexes: the primary key, the
-- transaction id (the ticker finds a tick's records through it, as pgq.batch_event_sql does)
-- and the insert order id (readers walk a tick's records in id order).
CREATE SCHEMA a;
CREATE TABLE a.history (LIKE tpl.history INCLUDING ALL);
ALTER TABLE a.history ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX history_txid ON a.history (txid);
CREATE INDEX history_id ON a.history (id);

-- Tick k holds the records visible in snap and not in prev_snap (the previous tick's snap).
-- Their positions are base + (id - lo) for id in [lo, hi]: derived from the row's own id and
-- numbers stored in the tick, so deleting records (retention) changes no other position.
-- Positions of tick k lie in [base, base + hi - lo]; the next tick's base follows.
CREATE TABLE a.ticks (
    tick_id   bigint PRIMARY KEY,
    base      bigint NOT NULL,
    lo        bigint NOT NULL,
    hi        bigint NOT NULL,
    snap      pg_snapshot NOT NULL,
    prev_snap pg_snapshot NOT NULL
);
CREATE INDEX ticks_base ON a.ticks (base);
-- Tick 0 only starts the chain (its one position, 0, is never used): tick 1's base is 1.
INSERT INTO a.ticks VALUES (0, 0, 0, 0, pg_current_snapshot(), pg_current_snapshot());

-- The ticker: one at a time (lock); stores a tick only when something new committed.
CREATE FUNCTION a.tick() RETURNS bigint LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET plan_cache_mode = force_custom_plan
    SET jit = off
    AS $$
DECLARE
    last a.ticks;
    cur pg_snapshot;
    was_running xid8[];
    v_lo bigint;
    v_hi bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1398033743, 1) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO last FROM a.ticks ORDER BY tick_id DESC LIMIT 1;
    cur := pg_current_snapshot();
    -- transactions running at the last tick that have ended since
    was_running := ARRAY(SELECT x FROM pg_snapshot_xip(last.snap) x
                         WHERE pg_visible_in_snapshot(x, cur));
    -- MATERIALIZED: else min/max would be planned as scans of the id index from either end
    WITH s AS MATERIALIZED (
        SELECT h.id FROM a.history h
        WHERE h.txid >= pg_snapshot_xmax(last.snap) AND h.txid < pg_snapshot_xmax(cur)
          AND pg_visible_in_snapshot(h.txid, cur)
        UNION ALL
        SELECT h.id FROM a.history h WHERE h.txid = ANY (was_running)
    )
    SELECT min(s.id), max(s.id) INTO v_lo, v_hi FROM s;
    IF v_lo IS NULL THEN
        RETURN NULL;      -- nothing new: no tick, the last one's snapshot stays the reference
    END IF;
    INSERT INTO a.ticks VALUES (last.tick_id + 1, last.base + (last.hi - last.lo + 1),
                                v_lo, v_hi, cur, last.snap);
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN last.base + (last.hi - last.lo + 1) + (v_hi - v_lo);
END
$$;

-- A page after p: the tick holding p + 1 (the last with base <= p + 1) and the ticks after
-- it, each one's records in id order from the id that p + 1 maps to.
CREATE FUNCTION a.page_sql() RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT 'SELECT t.base + (h.id - t.lo) AS pos, h.*
FROM a.ticks t
CROSS JOIN LATERAL (
    SELECT h.* FROM a.history h
    WHERE h.id >= GREATEST(t.lo, t.lo + ($1 + 1 - t.base)) AND h.id <= t.hi
      AND pg_visible_in_snapshot(h.txid, t.snap)
      AND NOT pg_visible_in_snapshot(h.txid, t.prev_snap)
    ORDER BY h.id LIMIT $2) h
WHERE t.tick_id >= COALESCE((SELECT t2.tick_id FROM a.ticks t2 WHERE t2.base <= $1 + 1
                             ORDER BY t2.base DESC LIMIT 1), 0)
  AND t.tick_id > 0
ORDER BY t.tick_id, h.id
LIMIT $2'
$$;

-------------------------------------------------------------------------------
-- a2: snapshot ticks without the transaction-id index
-------------------------------------------------------------------------------
-- As a, but the ticker finds a tick's records through the insert-order index alone. It relies
-- on two facts: a record's id is drawn after its transaction got its (top-level) xid (here the
-- txid column comes before id and defaults are evaluated in column order; the product's append
-- can call GetTopTransactionId() before it draws the id), and ids rise in real time (CACHE 1).
-- Each tick reads the identity's last value L, then takes its own xid X, then its snapshot.
-- A transaction with xid x > X got x after X, so every id it draws is above L. A record new in
-- tick k belongs to a transaction not visible in the previous tick's snapshot, so its xid is at
-- least m = least(previous xmax, the smallest xid of the previous xip list that has ended); the
-- newest tick j with X_j < m bounds all of them: ids > L_j. In a steady stream that is about
-- one or two ticks of records; once, when a writer held open commits, the ids since it began.
-- (The snapshot's xmax is not the next xid: xids at or above it may have been assigned before
-- the snapshot, which is why the bound uses the ticks' own xids.)
CREATE SCHEMA a2;
CREATE TABLE a2.history (txid xid8 NOT NULL DEFAULT pg_current_xact_id(), LIKE tpl.history INCLUDING ALL);
CREATE INDEX history_id ON a2.history (id);
CREATE TABLE a2.ticks (
    tick_id   bigint PRIMARY KEY,
    base      bigint NOT NULL,
    lo        bigint NOT NULL,
    hi        bigint NOT NULL,
    last_id   bigint NOT NULL,
    xid       xid8 NOT NULL,
    snap      pg_snapshot NOT NULL,
    prev_snap pg_snapshot NOT NULL
);
CREATE INDEX ticks_base ON a2.ticks (base);
INSERT INTO a2.ticks VALUES (0, 0, 0, 0, 0, pg_current_xact_id(), pg_current_snapshot(), pg_current_snapshot());

CREATE FUNCTION a2.tick() RETURNS bigint LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET plan_cache_mode = force_custom_plan
    SET jit = off
    AS $$
DECLARE
    last a2.ticks;
    cur pg_snapshot;
    v_last_id bigint;
    v_xid xid8;
    m xid8;
    bound bigint;
    v_lo bigint;
    v_hi bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1398033743, 4) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO last FROM a2.ticks ORDER BY tick_id DESC LIMIT 1;
    -- first L, then X, then the snapshot (pg_sequence_last_value: a seq scan of the
    -- sequence relation took 10-45 ms while appends drew ids)
    v_last_id := COALESCE(pg_sequence_last_value('a2.history_id_seq'), 0);
    v_xid := pg_current_xact_id();
    cur := pg_current_snapshot();
    m := least(pg_snapshot_xmax(last.snap),
               (SELECT min(x) FROM pg_snapshot_xip(last.snap) x WHERE pg_visible_in_snapshot(x, cur)));
    bound := COALESCE((SELECT t.last_id FROM a2.ticks t WHERE t.xid < m
                       ORDER BY t.tick_id DESC LIMIT 1), 0);
    SELECT min(h.id), max(h.id) INTO v_lo, v_hi FROM a2.history h
    WHERE h.id > bound
      AND pg_visible_in_snapshot(h.txid, cur) AND NOT pg_visible_in_snapshot(h.txid, last.snap);
    IF v_lo IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO a2.ticks VALUES (last.tick_id + 1, last.base + (last.hi - last.lo + 1),
                                 v_lo, v_hi, v_last_id, v_xid, cur, last.snap);
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN last.base + (last.hi - last.lo + 1) + (v_hi - v_lo);
END
$$;

CREATE FUNCTION a2.page_sql() RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT replace(a.page_sql(), 'a.', 'a2.')
$$;

-------------------------------------------------------------------------------
-- b: narrow insert-only position map
-------------------------------------------------------------------------------
-- The sequencer finds newly committed records by the same snapshot diff as the ticker (it
-- keeps its last snapshot in a one-row table) and inserts (global_position, history_id).
CREATE SCHEMA b;
CREATE TABLE b.history (LIKE tpl.history INCLUDING ALL);
ALTER TABLE b.history ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX history_txid ON b.history (txid);
CREATE INDEX history_id ON b.history (id);
CREATE TABLE b.positions (
    global_position bigint PRIMARY KEY,
    history_id      bigint NOT NULL
);
CREATE TABLE b.state (singleton boolean PRIMARY KEY, snap pg_snapshot NOT NULL);
INSERT INTO b.state VALUES (true, pg_current_snapshot());
CREATE SEQUENCE b.feed_position_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

CREATE FUNCTION b.sequence_feed() RETURNS bigint LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET plan_cache_mode = force_custom_plan
    SET jit = off
    AS $$
DECLARE
    prev pg_snapshot;
    cur pg_snapshot;
    was_running xid8[];
    n bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1398033743, 2) THEN
        RETURN NULL;
    END IF;
    SELECT s.snap INTO prev FROM b.state s;
    cur := pg_current_snapshot();
    was_running := ARRAY(SELECT x FROM pg_snapshot_xip(prev) x WHERE pg_visible_in_snapshot(x, cur));
    WITH s AS MATERIALIZED (
        SELECT h.id FROM b.history h
        WHERE h.txid >= pg_snapshot_xmax(prev) AND h.txid < pg_snapshot_xmax(cur)
          AND pg_visible_in_snapshot(h.txid, cur)
        UNION ALL
        SELECT h.id FROM b.history h WHERE h.txid = ANY (was_running)
    ), o AS MATERIALIZED (SELECT s.id FROM s ORDER BY s.id)
    INSERT INTO b.positions (global_position, history_id)
    SELECT nextval('b.feed_position_seq'), o.id FROM o;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE b.state SET snap = cur;
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN n;
END
$$;

CREATE FUNCTION b.page_sql() RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT 'SELECT m.global_position AS pos, h.*
FROM b.positions m JOIN b.history h ON h.id = m.history_id
WHERE m.global_position > $1 ORDER BY m.global_position LIMIT $2'
$$;

-------------------------------------------------------------------------------
-- c: the map batched into run chunks (base, ids[])
-------------------------------------------------------------------------------
-- One row per up to 200 records (an array of 1.6 kB stays inline and uncompressed); position
-- = base + i - 1 for ids[i]. Dense positions; retention leaves the arrays alone.
CREATE SCHEMA c;
CREATE TABLE c.history (LIKE tpl.history INCLUDING ALL);
ALTER TABLE c.history ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX history_txid ON c.history (txid);
CREATE INDEX history_id ON c.history (id);
CREATE TABLE c.runs (
    base bigint PRIMARY KEY,
    ids  bigint[] NOT NULL
);
CREATE TABLE c.state (singleton boolean PRIMARY KEY, snap pg_snapshot NOT NULL, next_base bigint NOT NULL);
INSERT INTO c.state VALUES (true, pg_current_snapshot(), 1);

CREATE FUNCTION c.sequence_feed() RETURNS bigint LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET plan_cache_mode = force_custom_plan
    SET jit = off
    AS $$
DECLARE
    st c.state;
    cur pg_snapshot;
    was_running xid8[];
    n bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1398033743, 3) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO st FROM c.state s;
    cur := pg_current_snapshot();
    was_running := ARRAY(SELECT x FROM pg_snapshot_xip(st.snap) x WHERE pg_visible_in_snapshot(x, cur));
    WITH s AS MATERIALIZED (
        SELECT h.id FROM c.history h
        WHERE h.txid >= pg_snapshot_xmax(st.snap) AND h.txid < pg_snapshot_xmax(cur)
          AND pg_visible_in_snapshot(h.txid, cur)
        UNION ALL
        SELECT h.id FROM c.history h WHERE h.txid = ANY (was_running)
    ), todo AS (
        SELECT s.id, row_number() OVER (ORDER BY s.id) - 1 AS k FROM s
    )
    INSERT INTO c.runs (base, ids)
    SELECT st.next_base + (k / 200) * 200, array_agg(id ORDER BY k)
    FROM todo GROUP BY k / 200;
    SELECT COALESCE(sum(cardinality(r.ids)), 0) INTO n FROM c.runs r WHERE r.base >= st.next_base;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE c.state SET snap = cur, next_base = st.next_base + n;
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN n;
END
$$;

CREATE FUNCTION c.page_sql() RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT 'SELECT r.base + u.i - 1 AS pos, h.*
FROM c.runs r
CROSS JOIN LATERAL unnest(r.ids) WITH ORDINALITY u(id, i)
JOIN c.history h ON h.id = u.id
WHERE r.base >= COALESCE((SELECT r2.base FROM c.runs r2 WHERE r2.base <= $1 + 1
                          ORDER BY r2.base DESC LIMIT 1), 0)
  AND r.base + u.i - 1 > $1
ORDER BY r.base, u.i
LIMIT $2'
$$;

-------------------------------------------------------------------------------
-- harness
-------------------------------------------------------------------------------
-- One sequencing step of a design.
CREATE FUNCTION bench.sequence(design text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    CASE design
        WHEN 'base' THEN RETURN base.sequence_feed(10000);
        WHEN 'a' THEN RETURN a.tick();
        WHEN 'a2' THEN RETURN a2.tick();
        WHEN 'b' THEN RETURN b.sequence_feed();
        WHEN 'c' THEN RETURN c.sequence_feed();
        ELSE RETURN NULL;
    END CASE;
END
$$;

-- The worker stand-in: a sequencing step, its commit, a nap; for dur seconds.
-- At the end it reports (NOTICE) its steps and its backend's CPU time (user + system, in
-- clock ticks of /proc/self/stat).
CREATE FUNCTION bench.cpu_ticks() RETURNS bigint LANGUAGE sql AS $$
SELECT (f[14]::bigint + f[15]::bigint)
FROM (SELECT string_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ') AS g) s,
     LATERAL (SELECT ARRAY['', ''] || g AS f) t
$$;
CREATE PROCEDURE bench.sequencer_loop(design text, dur float8, nap float8) LANGUAGE plpgsql AS $$
DECLARE
    t_end timestamptz := clock_timestamp() + dur * interval '1 second';
    cpu0 bigint := bench.cpu_ticks();
    steps bigint := 0;
    busy float8 := 0;
    t0 timestamptz;
BEGIN
    WHILE clock_timestamp() < t_end LOOP
        t0 := clock_timestamp();
        PERFORM bench.sequence(design);
        COMMIT;
        busy := busy + extract(epoch FROM clock_timestamp() - t0);
        steps := steps + 1;
        PERFORM pg_sleep(nap);
        COMMIT;
    END LOOP;
    RAISE NOTICE 'sequencer % steps % busy_s % cpu_ticks %', design, steps, round(busy::numeric, 3),
        bench.cpu_ticks() - cpu0;
END
$$;

-- Sequence until a step finds nothing new.
CREATE PROCEDURE bench.sequence_all(design text) LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        EXIT WHEN bench.sequence(design) IS NULL
              OR (design = 'base' AND NOT EXISTS (SELECT FROM base.history WHERE global_position IS NULL));
        COMMIT;
    END LOOP;
END
$$;

-- Drains n records in pages of page_size from after position p0; returns
-- (records, pages, seconds, last position).
CREATE FUNCTION bench.drain(design text, n bigint, page_size integer, p0 bigint DEFAULT 0,
                            OUT records bigint, OUT pages integer, OUT seconds float8, OUT last_pos bigint)
    LANGUAGE plpgsql AS $$
DECLARE
    q text := format('SELECT count(*), max(pos), sum(octet_length(payload)) FROM (%s) p',
                     CASE design WHEN 'base' THEN base.page_sql() WHEN 'a' THEN a.page_sql() WHEN 'a2' THEN a2.page_sql()
                                 WHEN 'b' THEN b.page_sql() WHEN 'c' THEN c.page_sql() END);
    got bigint;
    mx bigint;
    bytes bigint;
    t0 timestamptz := clock_timestamp();
BEGIN
    records := 0; pages := 0; last_pos := p0;
    WHILE records < n LOOP
        EXECUTE q INTO got, mx, bytes USING last_pos, page_size;
        EXIT WHEN got = 0;
        records := records + got; pages := pages + 1; last_pos := mx;
    END LOOP;
    seconds := extract(epoch FROM clock_timestamp() - t0);
END
$$;

-- A reader resuming mid-backlog: k pages, each after a random position in [lo, hi]; returns
-- the median milliseconds of one page.
CREATE FUNCTION bench.resume(design text, k integer, lo bigint, hi bigint, page_size integer)
    RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    q text := format('SELECT count(*), max(pos) FROM (%s) p',
                     CASE design WHEN 'base' THEN base.page_sql() WHEN 'a' THEN a.page_sql() WHEN 'a2' THEN a2.page_sql()
                                 WHEN 'b' THEN b.page_sql() WHEN 'c' THEN c.page_sql() END);
    got bigint;
    mx bigint;
    t0 timestamptz;
    ms float8[] := '{}';
BEGIN
    PERFORM setseed(0.42);
    FOR i IN 1..k LOOP
        t0 := clock_timestamp();
        EXECUTE q INTO got, mx USING lo + floor(random() * (hi - lo))::bigint, page_size;
        ms := ms || extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
    RETURN (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ms) x);
END
$$;

-- The position of every readable record of a design, for the invariant checks.
CREATE FUNCTION bench.positions(design text) RETURNS TABLE (pos bigint, id bigint)
    LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT p.pos, p.id FROM (%s) p',
        CASE design WHEN 'base' THEN base.page_sql() WHEN 'a' THEN a.page_sql() WHEN 'a2' THEN a2.page_sql()
                    WHEN 'b' THEN b.page_sql() WHEN 'c' THEN c.page_sql() END)
        USING 0::bigint, 2000000000;
END
$$;
