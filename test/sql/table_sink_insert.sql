--
-- table_sink_insert: what the `table` sink's insert does to its target is what an INSERT of
-- (message_id, global_position, message) does. A plain table gets its rows written a batch at
-- a time (src/pg/bulk_insert.cpp): the other columns' defaults (identity, serial, expressions,
-- now()), NOT NULL and CHECK constraints, unique and exclusion indexes, expression and partial
-- indexes apply as they would. A table with what only INSERT's executor applies (a rule, a
-- generated column, a domain-typed column, a partitioned table, other column types) gets its
-- rows through INSERT itself: each case below would come out differently through the batch.
--
-- The workers are off in this cluster: every cycle is a dispatch_once() call. Each outbox is
-- seeded at the head, then three records are appended for all of them.
--
CREATE EXTENSION IF NOT EXISTS statesman;
CREATE SCHEMA tsi;
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT coalesce(statesman.head_position(), 0) AS base \gset

-- The tables, in the shape create_outbox accepts, then changed where the case needs it.
CREATE TABLE tsi.plain (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    n bigint GENERATED ALWAYS AS IDENTITY, s bigserial, label text DEFAULT 'x' || 'y', note text);
CREATE INDEX plain_path ON tsi.plain ((message->>'path'));
CREATE UNIQUE INDEX plain_position ON tsi.plain (global_position) WHERE global_position > 0;
CREATE TABLE tsi.checked (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL,
    CONSTRAINT not_k2 CHECK (message->>'path' <> 'k/2'));
CREATE TABLE tsi.required (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL);
CREATE TABLE tsi.one_root (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL);
CREATE UNIQUE INDEX one_root_root ON tsi.one_root ((message->>'root'));
CREATE TABLE tsi.excluded (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL,
    EXCLUDE USING btree ((message->>'root') WITH =));
CREATE TABLE tsi.ruled (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL);
CREATE TABLE tsi.rule_log (message_id text, path text);
CREATE TABLE tsi.generated (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL,
    path text GENERATED ALWAYS AS (message->>'path') STORED);
CREATE DOMAIN tsi.positive AS integer NOT NULL CHECK (VALUE > 0);
CREATE TABLE tsi.domained (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL);
CREATE TABLE tsi.parted (message_id text, global_position bigint NOT NULL, message jsonb NOT NULL,
    PRIMARY KEY (message_id, global_position)) PARTITION BY RANGE (global_position);
CREATE TABLE tsi.parted_all PARTITION OF tsi.parted FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
CREATE UNIQUE INDEX parted_all_id ON tsi.parted_all (message_id);
CREATE TABLE tsi.other_types (message_id varchar(200) PRIMARY KEY, global_position numeric NOT NULL, message json NOT NULL);

SELECT count(*) AS outboxes
  FROM unnest(ARRAY['plain', 'checked', 'required', 'one_root', 'excluded', 'ruled', 'generated', 'domained',
                    'parted_all', 'other_types']) t,
       LATERAL statesman.create_outbox('tsi_' || t, 'table', jsonb_build_object('table', 'tsi.' || t)) o,
       LATERAL statesman.seed_cursor('tsi_' || t) c;
-- After create_outbox (which refuses them): a NOT NULL column without a default, an INSTEAD
-- rule, a domain column that does not allow NULL.
ALTER TABLE tsi.required ADD COLUMN required text NOT NULL;
CREATE RULE log_instead AS ON INSERT TO tsi.ruled DO INSTEAD
    INSERT INTO tsi.rule_log VALUES (NEW.message_id, NEW.message->>'path');
ALTER TABLE tsi.domained ADD COLUMN d tsi.positive DEFAULT 1;
ALTER TABLE tsi.domained ALTER COLUMN d DROP DEFAULT;

SELECT count(*) AS appended FROM generate_series(1, 3) i, statesman.append('tsi', 'k/' || i, jsonb_build_object('i', i)) a;
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;

-- A delivery cycle of one outbox: what it published, and its state afterwards.
CREATE FUNCTION pg_temp.deliver(outbox text, OUT published bigint, OUT deduplicated bigint, OUT moved bigint,
    OUT attempts integer, OUT last_error text)
LANGUAGE plpgsql AS $$
DECLARE
  before bigint := statesman.cursor_position(outbox);
BEGIN
  SELECT d.published, d.deduplicated, d.cursor_position - before INTO published, deduplicated, moved
    FROM statesman.dispatch_once(outbox) d;
  SELECT s.attempts, s.last_error INTO attempts, last_error FROM statesman.outbox_status s WHERE s.outbox_id = outbox;
END $$;
SET client_min_messages = error;   -- the failed cycles' WARNINGs: their errors are shown below

-- A plain table: every row as INSERT writes it, with the other columns' defaults.
SELECT * FROM pg_temp.deliver('tsi_plain');
SELECT message->>'path' AS path, global_position - :base > 0 AS positioned, published_at IS NOT NULL AS stamped,
       n, s, label, note
  FROM tsi.plain ORDER BY global_position;
SELECT count(*) = count(DISTINCT published_at) * 3 AS one_stamp_per_page FROM tsi.plain;
-- Its indexes hold every row: the expression index, the partial unique one.
SET enable_seqscan = off;
SELECT count(*) AS by_path_index FROM tsi.plain WHERE message->>'path' = 'k/2';
SELECT count(*) AS by_position_index FROM tsi.plain WHERE global_position > 0;
RESET enable_seqscan;
-- The rows are read_feed's messages.
SELECT count(*) AS same_as_feed
  FROM tsi.plain s JOIN statesman.read_feed(:base, 100, 'tsi') f
    ON f.message_id = s.message_id AND f.global_position = s.global_position AND f.message = s.message;
-- Delivered again from the same position: the rows already there are kept, none is added
-- (the batch meets the primary key; the page is inserted with ON CONFLICT DO NOTHING).
SELECT statesman.seed_cursor('tsi_plain', :base) = :base AS seeded_back;
SELECT * FROM pg_temp.deliver('tsi_plain');
SELECT count(*) AS rows, max(n) AS last_identity FROM tsi.plain;

-- Constraints refuse the page as they refuse INSERT: nothing of it is written, the cursor
-- stays, the attempt is recorded with INSERT's error.
SELECT * FROM pg_temp.deliver('tsi_checked');
SELECT count(*) AS rows FROM tsi.checked;
SELECT * FROM pg_temp.deliver('tsi_required');
SELECT count(*) AS rows FROM tsi.required;
-- A unique index other than the message id's: ON CONFLICT (message_id) does not cover it.
SELECT * FROM pg_temp.deliver('tsi_one_root');
SELECT count(*) AS rows FROM tsi.one_root;
SELECT * FROM pg_temp.deliver('tsi_excluded');
SELECT count(*) AS rows FROM tsi.excluded;
-- Accepted once the constraint goes.
ALTER TABLE tsi.checked DROP CONSTRAINT not_k2;
SELECT * FROM pg_temp.deliver('tsi_checked');
SELECT string_agg(message->>'path', ' ' ORDER BY global_position) AS paths FROM tsi.checked;

-- What only INSERT applies. The rule sends the rows elsewhere.
SELECT * FROM pg_temp.deliver('tsi_ruled');
SELECT (SELECT count(*) FROM tsi.ruled) AS in_table,
       (SELECT string_agg(path, ' ' ORDER BY path) FROM tsi.rule_log) AS logged_by_rule;
-- The generated column is computed.
SELECT * FROM pg_temp.deliver('tsi_generated');
SELECT string_agg(path, ' ' ORDER BY global_position) AS generated_paths FROM tsi.generated;
-- The domain refuses the NULL the column would get.
SELECT * FROM pg_temp.deliver('tsi_domained');
SELECT count(*) AS rows FROM tsi.domained;
-- A partition takes its rows with the partition's constraint checked.
SELECT * FROM pg_temp.deliver('tsi_parted_all');
SELECT count(*) AS rows FROM tsi.parted;
-- Other accepted column types, with INSERT's casts.
SELECT * FROM pg_temp.deliver('tsi_other_types');
SELECT pg_typeof(global_position) AS position_type, count(*) AS rows,
       bool_and(message::jsonb ? 'payload') AS messages
  FROM tsi.other_types GROUP BY 1;

--
-- The target's own code runs as the target's owner, never with the rights of the role that
-- delivers (the extension's owner, a superuser here), in a security-restricted operation: the
-- defaults of a plain table (written a batch at a time), the trigger of another (INSERT), also
-- for requeued dead letters. The trigger tries what only a superuser may and records who it ran
-- as; the owner has no privilege of its own beyond its tables.
--
CREATE ROLE regress_tsi_owner;
GRANT USAGE ON SCHEMA tsi TO regress_tsi_owner;
CREATE TABLE tsi.owned_plain (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL,
    inserted_by name NOT NULL DEFAULT current_user);
CREATE TABLE tsi.owned (message_id text PRIMARY KEY, global_position bigint NOT NULL, message jsonb NOT NULL);
CREATE TABLE tsi.owned_log (who name, is_superuser boolean, escalation text);
CREATE FUNCTION tsi.owned_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    ALTER ROLE regress_tsi_owner SUPERUSER;
    INSERT INTO tsi.owned_log SELECT current_user, r.rolsuper, 'done' FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
  EXCEPTION WHEN OTHERS THEN
    INSERT INTO tsi.owned_log SELECT current_user, r.rolsuper, SQLSTATE FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
  END;
  RETURN NEW;
END $$;
CREATE TRIGGER owned_trigger BEFORE INSERT ON tsi.owned FOR EACH ROW EXECUTE FUNCTION tsi.owned_trigger();
ALTER TABLE tsi.owned_plain OWNER TO regress_tsi_owner;
ALTER TABLE tsi.owned OWNER TO regress_tsi_owner;
ALTER TABLE tsi.owned_log OWNER TO regress_tsi_owner;
ALTER FUNCTION tsi.owned_trigger() OWNER TO regress_tsi_owner;
SELECT count(*) AS outboxes
  FROM unnest(ARRAY['owned_plain', 'owned']) t,
       LATERAL statesman.create_outbox('tsi_' || t, 'table', jsonb_build_object('table', 'tsi.' || t)) o,
       LATERAL statesman.seed_cursor('tsi_' || t) c;
SELECT count(*) AS appended FROM statesman.append('tsi-owned', 'o/1', '{}') a;
SELECT * FROM pg_temp.deliver('tsi_owned_plain');
SELECT message->>'path' AS path, inserted_by FROM tsi.owned_plain;
SELECT * FROM pg_temp.deliver('tsi_owned');
SELECT * FROM tsi.owned_log;
-- A requeued dead letter of the same message, inserted again.
DELETE FROM tsi.owned;
INSERT INTO statesman.dead_letters (outbox_id, global_position, message_id, message, last_error, attempts)
SELECT 'tsi_owned', global_position, message_id, message, 'test', 1 FROM statesman.read_feed(NULL, 100000, 'tsi-owned');
SELECT statesman.redeliver('tsi_owned') AS requeued;
SELECT * FROM pg_temp.deliver('tsi_owned');
SELECT (SELECT count(*) FROM tsi.owned) AS redelivered, (SELECT count(*) FROM statesman.dead_letters) AS still_parked;
SELECT * FROM tsi.owned_log;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_tsi_owner';
-- The internal insert refuses a NULL argument (22004) and writes nothing.
\set VERBOSITY sqlstate
SELECT statesman._insert_sink_rows('tsi.owned', NULL, '{1}', ARRAY['{}'::jsonb]);
SELECT statesman._insert_sink_rows(NULL, '{x}', '{1}', ARRAY['{}'::jsonb]);
\set VERBOSITY default
SELECT count(*) AS rows FROM tsi.owned;
RESET client_min_messages;

SELECT count(*) AS dropped
  FROM statesman.outbox_status s, LATERAL statesman.drop_outbox(s.outbox_id) d
 WHERE s.outbox_id LIKE 'tsi\_%';
DROP SCHEMA tsi CASCADE;
DROP ROLE regress_tsi_owner;
