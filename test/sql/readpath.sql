--
-- readpath: the read path built in C++ (src/feed/page.cpp). Every reader gets its records
-- from statesman._feed_page and builds each message from the row; the messages must be
-- byte for byte what statesman._message builds from the same fields, with the envelope
-- fallbacks in their order: the record's own, else the outbox's, else the root's.
-- The workers are off in this cluster: delivery here is dispatch_once().
--
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT statesman.sequence_feed() IS NOT NULL AS sequenced;
SELECT statesman.head_position() AS base \gset
CREATE SCHEMA rp;

-- Two roots, interleaved. rp-a's first records are appended before it is declared (no
-- envelope of their own), one with its own content type; the later ones carry the
-- declaration. rp-b is never declared.
SELECT * FROM statesman.append_bytes('rp-a', 'early', '\x01', NULL);
SELECT * FROM statesman.append('rp-b', 'one', '{"b": 1}');
SELECT * FROM statesman.append_bytes('rp-a', 'typed', '\x02', 'ct/record');
SELECT statesman.declare_root('rp-a', fingerprint => 'fp-root', content_type => 'ct/root');
SELECT * FROM statesman.append_bytes('rp-a', 'late', '\x03', NULL);
SELECT * FROM statesman.append('rp-b', 'two', '{"b": 2}');
SELECT * FROM statesman.append('rp-a', 'json', '{"a": [1, "x\ty"]}');
SELECT statesman.sequence_feed() > 0 AS sequenced;
SELECT address, fingerprint, content_type FROM statesman.history h
 WHERE statesman._position_of(h) > :base ORDER BY statesman._position_of(h);

-- _feed_page: after, upto, root and max_records as its contract says; the record's own
-- envelope only.
SELECT global_position - :base AS position, address, fingerprint, content_type
  FROM statesman._feed_page(:base, NULL, 100, NULL);
SELECT global_position - :base AS position, address
  FROM statesman._feed_page(:base + 1, :base + 5, 100, 'rp-a');
SELECT global_position - :base AS position, address
  FROM statesman._feed_page(:base, NULL, 2, 'rp-b');

-- read_feed: the record's envelope, else the root's; every message equal to the one
-- statesman._message builds from the same fields (as jsonb and as text).
SELECT f.global_position - :base AS position, f.address, f.message->>'fingerprint' AS fingerprint,
       f.message->>'contentType' AS content_type
  FROM statesman.read_feed(:base, 100) f ORDER BY f.global_position;
SELECT count(*) AS messages,
       count(*) FILTER (WHERE f.message = m.message AND f.message::text = m.message::text
                        AND f.message_id = m.message->>'messageId') AS same_as_message
  FROM statesman.read_feed(:base, 100) f
  JOIN (SELECT statesman._position_of(h) AS global_position,
               statesman._message(s.store, s.epoch, h.address, h.root, h.path, h.partition, h.revision,
                   statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                   h.source, COALESCE(h.fingerprint, r.fingerprint), COALESCE(h.content_type, r.content_type),
                   h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error) AS message
          FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
         CROSS JOIN (SELECT COALESCE(store_name, current_database()) AS store, epoch FROM statesman.store) s
         WHERE statesman._position_of(h) > :base) m USING (global_position);
-- The jsonb is written in its binary form directly: byte for byte (record_image_eq, *=) what
-- PostgreSQL makes of the same message's text, also with metadata of every shape (an object
-- with nested numbers that need alignment, an array, a scalar, a string).
SELECT statesman.head_position() AS mbase \gset
SELECT count(*) AS appended FROM (VALUES
    ('{"n": 1.5, "s": "t", "arr": [1, 2.25, {"k": null, "z": [true, false]}], "b": true}'::jsonb),
    ('[3, "x", 1e-3]'), ('7'), ('"str"'), ('{}'), (NULL)) m(metadata),
  LATERAL statesman.append('rp-m', 'm' || md5(COALESCE(m.metadata::text, 'none')), '{"v": 1}', metadata => m.metadata);
SELECT statesman.sequence_feed() > 0 AS sequenced;
CREATE TYPE rp.image AS (j jsonb);
SELECT count(*) AS messages,
       count(*) FILTER (WHERE ROW(f.message)::rp.image *= ROW(t.message::jsonb)::rp.image) AS same_bytes,
       count(*) FILTER (WHERE f.message::text = t.message) AS same_text
  FROM statesman.read_feed(:base, 100) f
  JOIN (SELECT statesman._position_of(h) AS global_position,
               statesman._message_text(s.store, s.epoch, h.address, h.root, h.path, h.partition, h.revision,
                   statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                   h.source, COALESCE(h.fingerprint, r.fingerprint), COALESCE(h.content_type, r.content_type),
                   h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error) AS message
          FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
         CROSS JOIN (SELECT COALESCE(store_name, current_database()) AS store, epoch FROM statesman.store) s
         WHERE statesman._position_of(h) > :base) t USING (global_position);
SELECT f.message->'metadata' AS metadata FROM statesman.read_feed(:mbase, 100) f ORDER BY f.global_position;
-- The message's integers (revision, globalPosition, schemaVersion) are written as numerics in
-- place: byte for byte what PostgreSQL makes of the same numbers, at every size, with zero
-- digits in their midst and at their end, and at the limits of their types.
SELECT count(*) AS numbers,
       count(*) FILTER (WHERE ROW(m)::rp.image *= ROW(m::text::jsonb)::rp.image) AS same_bytes,
       count(*) FILTER (WHERE (m->>'revision')::numeric = v AND (m->>'globalPosition')::numeric = v
                          AND (m->>'schemaVersion')::numeric = (v % 2147483648)) AS same_values
  FROM unnest(ARRAY[0, 1, -1, 9999, 10000, 10001, -10000, 100000000, 100000001, 123400005678, 1000000000000,
                    9999999999999999, 10000000000000000, 9223372036854775807, -9223372036854775808]::bigint[]) v,
       LATERAL statesman._message('s', '00000000-0000-0000-0000-000000000001', 'r/p', 'r', 'p', '', v, v,
                                  '2026-11-30 12:00:00+00', 'put', 'ok', NULL, (v % 2147483648)::int, NULL,
                                  NULL, NULL, NULL, '\x7b7d'::bytea, NULL, NULL, NULL, NULL) m;

-- Both shapes of the message (with serializerId and without it), with every optional field
-- set and with every one NULL, strings that need escapes, an empty payload: byte for byte what
-- PostgreSQL makes of the message's text.
SELECT count(*) AS shapes,
       count(*) FILTER (WHERE ROW(m)::rp.image *= ROW(m::text::jsonb)::rp.image) AS same_bytes,
       count(*) FILTER (WHERE (m ? 'serializerId') = (v.s IS NOT NULL)) AS serializer_id_when_set
  FROM (VALUES (NULL::text, NULL::text), ('ser-1', E'x"y\\z \u00e9 \U0001F600'), ('', E'tab\there')) v(s, t),
       LATERAL statesman._message('s', '00000000-0000-0000-0000-000000000001', 'r/p' || COALESCE(v.t, ''), 'r', 'p',
                                  COALESCE(v.t, ''), 5, NULL,
                                  CASE WHEN v.s IS NOT NULL THEN '2026-11-30 12:00:00+00'::timestamptz END,
                                  v.t, v.t, v.t, NULL, v.t, v.t, v.t, v.s,
                                  CASE WHEN v.s IS NOT NULL THEN convert_to(v.s, 'UTF8') END, v.t, v.t,
                                  CASE WHEN v.s IS NOT NULL THEN '{"a": [1, 2.5]}'::jsonb END, v.t) m;

-- The root argument is lower-cased; a page is at most max_records, also for one root.
SELECT global_position - :base AS position, address FROM statesman.read_feed(:base, 2, 'RP-A');
SELECT global_position - :base AS position, address FROM statesman.read_feed(:base + 3, 100, 'rp-a');

-- The table sink's page, for an outbox of rp-a with its own fingerprint (no content type), in
-- pages of 3 records of both roots: the record's envelope, else the outbox's, else the
-- root's; only rp-a's records, the cursor past every record of each page.
SELECT statesman.create_outbox('rp-table', sink_options => '{"table": "rp.delivered"}', root => 'rp-a',
                               batch_size => 3, fingerprint => 'fp-outbox');
SELECT statesman.seed_cursor('rp-table', :base) = :base AS seeded;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('rp-table');
SELECT d.global_position - :base AS position, d.message->>'address' AS address,
       d.message->>'fingerprint' AS fingerprint, d.message->>'contentType' AS content_type
  FROM rp.delivered d ORDER BY d.global_position;
SELECT count(*) AS delivered,
       count(*) FILTER (WHERE d.message = m.message AND d.message_id = m.message->>'messageId') AS same_as_message
  FROM rp.delivered d
  JOIN (SELECT statesman._position_of(h) AS global_position,
               statesman._message(s.store, s.epoch, h.address, h.root, h.path, h.partition, h.revision,
                   statesman._position_of(h), h.occurred_at, h.operation, h.status, h.value_type, h.schema_version,
                   h.source, COALESCE(h.fingerprint, o.fingerprint, r.fingerprint),
                   COALESCE(h.content_type, o.payload_content_type, r.content_type),
                   h.serializer_id, h.payload, h.correlation_id, h.causation_id, h.metadata, h.error) AS message
          FROM statesman.history h LEFT JOIN statesman.roots r ON r.root = h.root
         CROSS JOIN statesman.outboxes o
         CROSS JOIN (SELECT COALESCE(store_name, current_database()) AS store, epoch FROM statesman.store) s
         WHERE statesman._position_of(h) > :base AND o.outbox_id = 'rp-table') m USING (global_position);
SELECT position = statesman.head_position() AS cursor_at_head,
       (SELECT published_total FROM statesman.outbox_status WHERE outbox_id = 'rp-table') AS published_total
  FROM statesman.cursors WHERE outbox_id = 'rp-table';

-- Delivered again from the start: every message is already there (ON CONFLICT after the
-- unique violation), counted as deduplicated; nothing changes in the sink.
SELECT statesman.seed_cursor('rp-table', :base) = :base AS seeded_back;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('rp-table');
SELECT count(*) AS rows_in_sink FROM rp.delivered;

-- A failure of the sink (its table gone) is a failed attempt with the table's name in the
-- error, and the cursor stays.
SELECT * FROM statesman.append('rp-a', 'after-drop', '{}');
SELECT statesman.sequence_feed() > 0 AS sequenced;
DROP TABLE rp.delivered;
SELECT published, skipped, deduplicated, cursor_position - :base AS cursor_position
  FROM statesman.dispatch_once('rp-table');
SELECT attempts, last_error FROM statesman.outbox_status WHERE outbox_id = 'rp-table';
SELECT statesman.drop_outbox('rp-table');
DROP SCHEMA rp CASCADE;

-- The C++ row source (read_feed, the dispatcher's page) reads the tables directly; its rows
-- must be exactly statesman._feed_page's, the definition of what is readable, for every
-- starting position, page size and root: here over a feed with an aborted append, one
-- rolled back to a savepoint, records pruned by retention between others, two roots, and
-- several ticks. Inside a transaction block read_feed does not tick, so both read the same.
SELECT statesman.declare_root('rp-c', max_revisions => 1);
SELECT statesman.head_position() AS cmp_base \gset
SELECT revision FROM statesman.append('rp-c', 'kept', '1');
BEGIN;
SELECT revision FROM statesman.append('rp-a', 'aborted', '{}');
ROLLBACK;
SELECT statesman.sequence_feed() > 0 AS sequenced;
SELECT revision FROM statesman.append('rp-c', 'kept', '2');   -- prunes revision 1
BEGIN;
SELECT revision FROM statesman.append('rp-a', 'in-savepoint-before', '{}');
SAVEPOINT s;
SELECT revision FROM statesman.append('rp-b', 'rolled-back', '{}');
ROLLBACK TO SAVEPOINT s;
SELECT revision FROM statesman.append('rp-b', 'after-savepoint', '{}');
COMMIT;
SELECT statesman.sequence_feed() > 0 AS sequenced;
SELECT revision FROM statesman.append('rp-c', 'kept', '3');   -- prunes revision 2
SELECT revision FROM statesman.append('rp-a', 'last', '{}');
SELECT statesman.sequence_feed() > 0 AS sequenced;
BEGIN;
SELECT count(*) AS pages_compared,
       count(*) FILTER (WHERE ARRAY(SELECT ROW(f.global_position, f.address, f.revision)
                                      FROM statesman.read_feed(a, m, r) f ORDER BY f.global_position)
                             IS DISTINCT FROM
                             ARRAY(SELECT ROW(p.global_position, p.address, p.revision)
                                     FROM statesman._feed_page(a, NULL, m, r) p ORDER BY p.global_position))
         AS pages_that_differ,
       sum((SELECT count(*) FROM statesman._feed_page(a, NULL, m, r))) > 0 AS rows_compared
  FROM generate_series(:cmp_base - 3, statesman.head_position() + 1) a,
       unnest(ARRAY[1, 2, 3, 1000]) m,
       unnest(ARRAY[NULL, 'rp-a', 'rp-c']) r;
COMMIT;
