--
-- consumer: exactly-once bookkeeping with (epoch, position).
--
-- Explicit epochs are fixed UUIDs; the store's own epoch is only compared.
--
\set e1 '00000000-0000-4000-8000-000000000001'
\set e2 '00000000-0000-4000-8000-000000000002'

-- Nothing applied yet.
SELECT count(*) AS rows FROM statesman.applied_position('billing', 'remote-store');
SELECT statesman.already_applied('billing', 'remote-store', :'e1', 1) AS already;

--
-- mark_applied(consumer, feed, epoch, position)
--
SELECT statesman.mark_applied('billing', 'remote-store', :'e1', 10) AS applied;
SELECT * FROM statesman.applied_position('billing', 'remote-store');
-- At or before the stored position: already applied, nothing changes.
SELECT statesman.mark_applied('billing', 'remote-store', :'e1', 10) AS applied;
SELECT statesman.mark_applied('billing', 'remote-store', :'e1', 3) AS applied;
SELECT * FROM statesman.applied_position('billing', 'remote-store');
-- Later positions move forward (gaps are normal).
SELECT statesman.mark_applied('billing', 'remote-store', :'e1', 25) AS applied;
SELECT * FROM statesman.applied_position('billing', 'remote-store');

--
-- already_applied(): read-only.
--
SELECT statesman.already_applied('billing', 'remote-store', :'e1', 24) AS at_24,
       statesman.already_applied('billing', 'remote-store', :'e1', 25) AS at_25,
       statesman.already_applied('billing', 'remote-store', :'e1', 26) AS at_26;
SELECT * FROM statesman.applied_position('billing', 'remote-store');

--
-- (consumer, feed) pairs are independent.
--
SELECT statesman.already_applied('shipping', 'remote-store', :'e1', 1) AS other_consumer,
       statesman.already_applied('billing', 'other-store', :'e1', 1) AS other_feed;
SELECT statesman.mark_applied('shipping', 'remote-store', :'e1', 5) AS applied;
SELECT statesman.mark_applied('billing', 'other-store', :'e1', 7) AS applied;
SELECT consumer, feed, epoch, position
  FROM (VALUES ('billing', 'remote-store'), ('billing', 'other-store'),
               ('shipping', 'remote-store')) v(consumer, feed),
       LATERAL statesman.applied_position(v.consumer, v.feed)
 ORDER BY consumer, feed;

--
-- A different epoch is never already applied, whatever the positions.
--
SELECT statesman.already_applied('billing', 'remote-store', :'e2', 1) AS other_epoch_low;
SELECT statesman.mark_applied('billing', 'remote-store', :'e2', 1) AS applied;
SELECT * FROM statesman.applied_position('billing', 'remote-store');
-- Now e2 is stored: e1 is the different one, even at positions below 25.
SELECT statesman.already_applied('billing', 'remote-store', :'e1', 2) AS old_epoch;
SELECT statesman.already_applied('billing', 'remote-store', :'e2', 1) AS same_epoch;

--
-- The bookkeeping belongs to the caller's transaction.
--
BEGIN;
SELECT statesman.mark_applied('audit', 'remote-store', :'e1', 3) AS applied;
SELECT statesman.already_applied('audit', 'remote-store', :'e1', 3) AS inside;
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM statesman.applied_position('audit', 'remote-store');

--
-- mark_applied(consumer, message): feed = store, epoch and globalPosition
-- taken from the message.
--
SELECT jsonb_build_object('store', 'remote-store', 'epoch', :'e2', 'globalPosition', 40,
                          'messageId', 'remote-store/x/y#1') AS msg40 \gset
SELECT statesman.mark_applied('billing', :'msg40'::jsonb) AS applied;
SELECT statesman.mark_applied('billing', :'msg40'::jsonb) AS applied;
SELECT * FROM statesman.applied_position('billing', 'remote-store');
SELECT statesman.mark_applied('billing', jsonb_set(:'msg40'::jsonb, '{globalPosition}', '39')) AS applied_39;
SELECT statesman.mark_applied('billing', jsonb_set(:'msg40'::jsonb, '{globalPosition}', '41')) AS applied_41;
SELECT * FROM statesman.applied_position('billing', 'remote-store');

-- With real messages from this store's feed.
SELECT store AS store, epoch AS epoch FROM statesman.store_info() \gset
SELECT global_position AS first_pos, message AS first_msg
  FROM statesman.read_feed(root => 'feed', max_records => 1) \gset
SELECT statesman.mark_applied('projector', :'first_msg'::jsonb) AS applied;
SELECT statesman.mark_applied('projector', :'first_msg'::jsonb) AS applied;
SELECT epoch = :'epoch'::uuid AS store_epoch, position = :first_pos AS first_position
  FROM statesman.applied_position('projector', :'store');
SELECT statesman.already_applied('projector', :'store', :'epoch', :first_pos) AS already;
-- Applying the whole feed in order: every message but the first (applied
-- above) once, then none again.
SELECT count(*) FILTER (WHERE applied) AS applied, count(*) FILTER (WHERE NOT applied) AS skipped
  FROM (SELECT statesman.mark_applied('projector', message) AS applied
          FROM statesman.read_feed(root => 'feed')) s;
SELECT count(*) FILTER (WHERE applied) AS applied, count(*) FILTER (WHERE NOT applied) AS skipped
  FROM (SELECT statesman.mark_applied('projector', message) AS applied
          FROM statesman.read_feed(root => 'feed')) s;
SELECT position = (SELECT max(global_position) FROM statesman.read_feed(root => 'feed')) AS at_last_feed_position
  FROM statesman.applied_position('projector', :'store');
