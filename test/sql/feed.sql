--
-- feed: read_feed() and its messages, head_position(), paging, cursors.
--
-- Positions differ between installations, so they are shown relative to the
-- head captured before this file's first write, or as booleans.
--
-- settle() comes from store.sql, the first file of the schedule.

SELECT public.settle() AS sequenced;
SELECT statesman.head_position() AS base \gset
SELECT store AS store, epoch AS epoch FROM statesman.store_info() \gset

SELECT * FROM statesman.append('Feed', 'item/1', '{"n": 1, "s": "x"}');
SELECT * FROM statesman.append('Feed', 'item/1', '{"n": 2}',
    partition => 'p1', status => 'warn', value_type => 'Item', schema_version => 3,
    source => 'svc-a', correlation_id => 'corr-1', causation_id => 'cause-1',
    metadata => '{"k": [1, 2], "z": null}', error => 'none',
    fresh_until => '2030-01-01 00:00:00+00', serve_until => '2031-01-01 00:00:00+00');
-- 300 bytes: long enough that MIME-style base64 would break lines.
SELECT * FROM statesman.append_bytes('Feed', 'blob/long',
    convert_to(repeat('0123456789', 30), 'UTF8'), 'text/plain', 'ser.v2');
SELECT * FROM statesman.append_delete('Feed', 'item/1');
SELECT * FROM statesman.append('Other', 'x/1', '1');
SELECT * FROM statesman.append('Feed', 'item/2', '"text"', schema_version => 0);
SELECT public.settle() AS sequenced;

--
-- read_feed(after): the records after a position, in position order.
--
SELECT row_number() OVER () AS n, message_id, address, revision,
       global_position > :base AS after_base
  FROM statesman.read_feed(after => :base);
SELECT bool_and(global_position > prev) AS strictly_increasing
  FROM (SELECT global_position, lag(global_position, 1, :base) OVER () AS prev
          FROM statesman.read_feed(after => :base)) f;

-- The columns agree with the message.
SELECT bool_and(message_id = message->>'messageId'
                AND address = message->>'address'
                AND revision = (message->>'revision')::bigint
                AND global_position = (message->>'globalPosition')::bigint) AS columns_match_message,
       bool_and(message_id = :'store' || '/' || address || '#' || revision) AS message_id_shape
  FROM statesman.read_feed(after => :base);

--
-- The message (docs/design.md §5), without the values that differ between runs.
--
-- A plain put: every key but serializerId, absent values as null.
SELECT jsonb_pretty(message - '{epoch,occurredAt,globalPosition}'::text[]) AS message
  FROM statesman.read_feed(after => :base) WHERE address = 'feed/item/1' AND revision = 1;
-- Every optional value given (freshUntil and serveUntil never on the wire).
SELECT jsonb_pretty(message - '{epoch,occurredAt,globalPosition}'::text[]) AS message
  FROM statesman.read_feed(after => :base) WHERE address = 'feed@p1/item/1';
-- append_bytes with a serializer id: serializerId present (the 400-character
-- payload is checked below).
SELECT jsonb_pretty(message - '{epoch,occurredAt,globalPosition,payload}'::text[]) AS message
  FROM statesman.read_feed(after => :base) WHERE address = 'feed/blob/long';
-- A tombstone: null payload.
SELECT jsonb_pretty(message - '{epoch,occurredAt,globalPosition}'::text[]) AS message
  FROM statesman.read_feed(after => :base) WHERE address = 'feed/item/1' AND revision = 2;

-- Every message has exactly the documented keys, plus serializerId when there is one.
CREATE TEMP TABLE spec_keys (key text PRIMARY KEY);
INSERT INTO spec_keys VALUES
  ('schema'), ('messageId'), ('store'), ('root'), ('path'), ('partition'), ('address'),
  ('revision'), ('globalPosition'), ('epoch'), ('occurredAt'), ('operation'), ('status'),
  ('valueType'), ('schemaVersion'), ('source'), ('fingerprint'), ('contentType'),
  ('payload'), ('correlationId'), ('causationId'), ('metadata'), ('error');
SELECT f.address, f.revision,
       (SELECT count(*) FROM jsonb_object_keys(f.message)) AS keys,
       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(f.message) k
         WHERE k NOT IN (SELECT key FROM spec_keys)) AS extra_keys,
       (SELECT array_agg(key ORDER BY key) FROM spec_keys WHERE NOT f.message ? key) AS missing_keys
  FROM statesman.read_feed(after => :base) f
 ORDER BY f.global_position;
-- JSON types of a message with every optional value given.
SELECT k.key, jsonb_typeof(k.value) AS json_type
  FROM statesman.read_feed(after => :base) f, jsonb_each(f.message) k
 WHERE f.address = 'feed@p1/item/1'
 ORDER BY k.key;
-- schemaVersion is carried verbatim, 0 included.
SELECT address, message->'schemaVersion' AS schema_version
  FROM statesman.read_feed(after => :base) ORDER BY global_position;
DROP TABLE spec_keys;

-- The values that differ between runs, checked against the ledger and the store.
SELECT f.address, f.revision,
       f.message->>'epoch' = :'epoch' AS epoch_is_store_epoch,
       f.message->'globalPosition' = to_jsonb(f.global_position) AS position_exact,
       f.message->>'globalPosition' ~ '^[1-9][0-9]*$' AS position_is_integer,
       f.message->>'revision' ~ '^[1-9][0-9]*$' AS revision_is_integer,
       f.message->>'occurredAt' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' AS occurred_at_format,
       (f.message->>'occurredAt')::timestamptz = h.occurred_at AS occurred_at_is_ledger_time
  FROM statesman.read_feed(after => :base) f
  JOIN statesman.history h ON h.address = f.address AND h.revision = f.revision
 ORDER BY f.global_position;

-- Payloads: base64 of the stored bytes, without line breaks; null for a tombstone.
SELECT f.address, f.revision,
       f.message->'payload' = 'null'::jsonb AS payload_null,
       position(E'\n' IN f.message->>'payload') = 0 AS one_line,
       decode(f.message->>'payload', 'base64') IS NOT DISTINCT FROM h.payload AS payload_is_ledger_bytes,
       length(f.message->>'payload') AS base64_length
  FROM statesman.read_feed(after => :base) f
  JOIN statesman.history h ON h.address = f.address AND h.revision = f.revision
 ORDER BY f.global_position;
SELECT convert_from(decode(message->>'payload', 'base64'), 'UTF8') AS decoded_payload
  FROM statesman.read_feed(after => :base)
 WHERE message->>'contentType' = 'application/json'
 ORDER BY global_position;

-- serializerId: omitted when absent, present when given.
SELECT address, message ? 'serializerId' AS has_serializer_id, message->>'serializerId' AS serializer_id
  FROM statesman.read_feed(after => :base) ORDER BY global_position;

-- freshUntil / serveUntil are stored but never on the wire.
SELECT count(*) AS messages_with_fresh_or_serve_keys
  FROM statesman.read_feed() f
 WHERE f.message ?| ARRAY['freshUntil', 'serveUntil', 'fresh_until', 'serve_until'];
SELECT fresh_until = '2030-01-01 00:00:00+00' AS fresh_until_stored,
       serve_until = '2031-01-01 00:00:00+00' AS serve_until_stored
  FROM statesman.current('feed', 'item/1', 'p1');

-- Envelope fallbacks from the root declarations made by the store test.
SELECT address, revision, message->>'fingerprint' AS fingerprint,
       message->>'contentType' AS content_type, message ? 'serializerId' AS has_serializer_id
  FROM statesman.read_feed(root => 'blobs')
UNION ALL
SELECT address, revision, message->>'fingerprint', message->>'contentType', message ? 'serializerId'
  FROM statesman.read_feed(root => 'plain')
UNION ALL
SELECT address, revision, message->>'fingerprint', message->>'contentType', message ? 'serializerId'
  FROM statesman.read_feed(root => 'orders') WHERE address = 'orders/O/1';

--
-- The root filter is case-insensitive.
--
SELECT (SELECT count(*) FROM statesman.read_feed(after => :base, root => 'feed')) AS feed,
       (SELECT count(*) FROM statesman.read_feed(after => :base, root => 'FEED')) AS feed_upper,
       (SELECT count(*) FROM statesman.read_feed(after => :base, root => 'Other')) AS other,
       (SELECT count(*) FROM statesman.read_feed(after => :base, root => 'nosuch')) AS nosuch,
       (SELECT count(*) FROM statesman.read_feed(after => :base)) AS all_roots;
SELECT DISTINCT message->>'root' AS root FROM statesman.read_feed(after => :base, root => 'FeEd');

--
-- after = NULL starts at the oldest retained record; after = head returns nothing.
--
SELECT global_position = (SELECT oldest_position FROM statesman.store_info()) AS starts_at_oldest
  FROM statesman.read_feed() LIMIT 1;
SELECT count(*) AS after_head FROM statesman.read_feed(after => statesman.head_position());
SELECT count(*) = (SELECT count(*) FROM statesman.history) AS default_page_has_everything
  FROM statesman.read_feed();

--
-- Paging with max_records.
--
SELECT count(*) AS page_of_two FROM statesman.read_feed(after => :base, max_records => 2);
SELECT max(global_position) AS page1_end FROM statesman.read_feed(after => :base, max_records => 2) \gset
SELECT message_id FROM statesman.read_feed(after => :page1_end, max_records => 2);
-- Paging through with pages of 2 yields exactly what one read yields.
DO $$
DECLARE
  pos bigint := NULL;
  got text[] := '{}';
  page text[];
  pages int := 0;
BEGIN
  LOOP
    SELECT array_agg(message_id ORDER BY global_position), max(global_position)
      INTO page, pos
      FROM statesman.read_feed(after => pos, max_records => 2);
    EXIT WHEN page IS NULL;
    pages := pages + 1;
    got := got || page;
  END LOOP;
  RAISE NOTICE 'pages of 2: %, same as one read: %', pages > 1,
    got = (SELECT array_agg(message_id ORDER BY global_position)
             FROM statesman.read_feed(max_records => 100000));
END $$;

--
-- head_position(): the highest readable position.
--
SELECT statesman.head_position() = (SELECT max(global_position) FROM statesman.read_feed(after => :base)) AS head_is_last,
       statesman.head_position() = (SELECT head_position FROM statesman.store_info()) AS matches_store_info;

--
-- Only committed records reach the feed. Inside a transaction block
-- read_feed() serves what is already sequenced.
--
SELECT statesman.head_position() AS head \gset
BEGIN;
SELECT revision FROM statesman.append('Feed', 'tx/1', '{}');
SELECT count(*) AS uncommitted_visible FROM statesman.read_feed(after => :head);
ROLLBACK;
SELECT count(*) AS rolled_back_visible FROM statesman.read_feed(after => :head);
BEGIN;
SELECT revision FROM statesman.append('Feed', 'tx/2', '{}');
COMMIT;
SELECT public.settle() AS sequenced;
SELECT address, revision FROM statesman.read_feed(after => :head);
SELECT statesman.head_position() > :head AS head_moved;

--
-- Cursors: unset before the first write, monotonic, keyed by any id.
--
SELECT statesman.cursor_position('feed-reader') IS NULL AS unset;
SELECT statesman.advance_cursor('feed-reader', :base + 2) AS advanced;
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;
SELECT statesman.advance_cursor('feed-reader', :base + 2) AS equal_advances;
SELECT statesman.advance_cursor('feed-reader', :base + 1) AS lower_advances;
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;
SELECT statesman.advance_cursor('feed-reader', :base + 4) AS advanced;
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;
SELECT statesman.cursor_position('other-reader') IS NULL AS other_unset;
-- A cursor write belongs to the caller's transaction.
BEGIN;
SELECT statesman.advance_cursor('feed-reader', :base + 5) AS advanced;
ROLLBACK;
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;

-- seed_cursor(): NULL seeds at the head; an explicit position up to the head.
SELECT statesman.seed_cursor('seeded-at-head') = statesman.head_position() AS seeded_at_head;
SELECT statesman.cursor_position('seeded-at-head') = statesman.head_position() AS cursor_at_head;
SELECT statesman.seed_cursor('seeded-early', :base + 1) - :base AS seeded;
SELECT statesman.cursor_position('seeded-early') - :base AS cursor;
SELECT statesman.seed_cursor('seeded-exactly-head', statesman.head_position()) = statesman.head_position() AS seeded_exactly_at_head;
-- Seeding sets the cursor, also below where it was (the explicit way to rewind).
SELECT statesman.seed_cursor('feed-reader', :base + 3) - :base AS seeded;
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;
-- Seeding beyond the head is an error and changes nothing.
\set VERBOSITY sqlstate
SELECT statesman.seed_cursor('feed-reader', statesman.head_position() + 1);
SELECT statesman.seed_cursor('beyond-head', statesman.head_position() + 1);
\set VERBOSITY default
SELECT statesman.cursor_position('feed-reader') - :base AS cursor;
SELECT statesman.cursor_position('beyond-head') IS NULL AS beyond_head_unset;
-- at_position 0: before the first record. The cursor is removed (a stored position is never 0),
-- so the whole retained feed is read again, its oldest record included.
SELECT statesman.seed_cursor('seeded-at-head', 0) IS NULL AS seeded_before_first;
SELECT statesman.cursor_position('seeded-at-head') IS NULL AS cursor_unset;
SELECT (SELECT min(global_position) FROM statesman.read_feed(statesman.cursor_position('seeded-at-head'), 1))
       = (SELECT oldest_position FROM statesman.store_info()) AS reads_the_oldest_again;

--
-- read_feed sequences only when the records that already have positions do not fill the page:
-- a full page is served as it is; a short one is completed with what the sequencer gives out,
-- after the head as it was when the call started.
--
SELECT statesman.head_position() AS head0 \gset
SELECT count(*) AS appended FROM generate_series(1, 3) i, LATERAL statesman.append('Paging', 'p/' || i, '{}') a;
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h WHERE root = 'paging';
-- Nothing of them has a position: the read is short, so it sequences, then returns them.
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0, 2);
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h WHERE root = 'paging';
-- Two more. A page that the sequenced records fill leaves them without positions.
SELECT count(*) AS appended FROM generate_series(4, 5) i, LATERAL statesman.append('Paging', 'p/' || i, '{}') a;
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0, 2);
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0, 2, root => 'Paging');
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h WHERE root = 'paging';
-- A page that they do not fill: the sequenced record, then the new ones, in position order.
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0 + 2, 5);
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h WHERE root = 'paging';
-- With a root filter, other roots' records neither fill the page nor appear in it: five
-- sequenced records of another root after p/5 would fill an unfiltered page of 5 (which would
-- then not sequence), yet the filtered read is short, so it sequences p/6 and returns it.
SELECT count(*) AS appended FROM generate_series(1, 5) i, LATERAL statesman.append('Elsewhere', 'q/' || i, '{}') a;
SELECT public.settle() AS sequenced;
SELECT * FROM statesman.append('Paging', 'p/6', '{}');
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0 + 4, 5);
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h;
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0 + 4, 5, root => 'Paging');
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h;
-- Inside a transaction block it never sequences, short page or not.
SELECT * FROM statesman.append('Paging', 'p/7', '{}');
BEGIN;
SELECT global_position - :head0 AS pos, address FROM statesman.read_feed(:head0 + 10, 5);
COMMIT;
SELECT count(*) FILTER (WHERE statesman._position_of(h) IS NULL) AS unsequenced FROM statesman.history h;
SELECT public.settle() AS sequenced;

--
-- Positions are exact integers on the wire, also beyond 2^53.
--
-- (A new chain of ticks whose first position is 2^53 + 1, as a restore into another cluster starts one.)
INSERT INTO statesman.ticks (tick_id, base, lo, hi, last_id, xid, snap, prev_snap, system_id)
SELECT t.tick_id + 1, 9007199254740993, 1, 0, pg_sequence_last_value('statesman.history_id_seq'), '0',
       pg_current_snapshot(), pg_current_snapshot(), t.system_id
  FROM statesman.ticks t ORDER BY t.tick_id DESC LIMIT 1
RETURNING base - 1 AS position_jump;
SELECT * FROM statesman.append('Feed', 'big/1', '{}');
SELECT public.settle() AS sequenced;
SELECT global_position, message->'globalPosition' AS wire_position,
       message->>'globalPosition' = global_position::text AS exact
  FROM statesman.read_feed(after => 9007199254740000);
SELECT statesman.head_position() AS head;

