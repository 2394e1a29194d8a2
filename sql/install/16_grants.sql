-------------------------------------------------------------------------------
-- Grants
-------------------------------------------------------------------------------

GRANT USAGE ON SCHEMA statesman TO PUBLIC;
GRANT SELECT ON statesman.feed_status TO PUBLIC;

-- Functions that change the store's identity, retention, sequencing or cursors are for the
-- extension owner and whoever it grants them to.
REVOKE ALL ON FUNCTION statesman.set_store_name(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.reset_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.declare_root(text, text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.sequence_feed(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.advance_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.seed_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean,
    interval, interval, interval, interval, integer, text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.drop_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.pause_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.resume_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.redeliver(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.dispatch_once(text) FROM PUBLIC;

-- Writing the ledger and reading its payloads are for the extension owner and the roles it
-- grants them to (docs/operations.md "Privileges" gives the GRANTs for a writing and a reading
-- role): whatever privileges an application sets up, no other role writes a root or reads a
-- payload through statesman.
REVOKE ALL ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer, text,
    text, text, jsonb, text, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.append_delete(text, text, text, text, text, integer, text, text, text, jsonb, text,
    timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.read_feed(bigint, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.history(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman.current(text, text, text) FROM PUBLIC;

-- The consumer kit is for every role, each with its own consumers: mark_applied,
-- already_applied and applied_position run as the caller, and row-level security lets a role
-- move only the positions it stored (every role may read every position: they are not data).
ALTER TABLE statesman.applied ENABLE ROW LEVEL SECURITY;
CREATE POLICY applied_read ON statesman.applied FOR SELECT USING (true);
CREATE POLICY applied_insert ON statesman.applied FOR INSERT WITH CHECK (owner = CURRENT_USER);
CREATE POLICY applied_update ON statesman.applied FOR UPDATE
    USING (owner IS NULL OR owner = CURRENT_USER) WITH CHECK (owner = CURRENT_USER);
GRANT SELECT, INSERT ON statesman.applied TO PUBLIC;
GRANT UPDATE (epoch, position, applied_at, owner) ON statesman.applied TO PUBLIC;

-- The delivery internals act on outboxes, cursors and leases: never for PUBLIC.
REVOKE ALL ON FUNCTION statesman._store_restore() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink_target(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink_options(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._check_sink_timeout(jsonb, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._outbox_for_update(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._acquire_lease(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._renew_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._expire_stuck_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._release_lease(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_dispatcher(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_failure(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._page_outbox(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._move_cursor(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._deliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._park_page(text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._redeliver_table_page(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._insert_sink_rows(text, text[], bigint[], jsonb[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._finish_page(text, bigint, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._requeued_messages(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._requeued_outcome(text, bigint[], boolean, bigint, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune(text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune_deferred(integer) FROM PUBLIC;

-- The feed's internals: the row source reads every payload, the flush is a write.
REVOKE ALL ON FUNCTION statesman._feed_page(bigint, bigint, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._durable(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._position_of(bigint, xid8, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._position_of(statesman.history) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._head() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._unsequenced() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._restart_ticks() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._prune_ticks() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._ticks_restore() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._roots_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._note_own_tick() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick_snapshot() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick_own_record() FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._tick(integer, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION statesman._next_occurred_at(bigint) FROM PUBLIC;

-- Monitoring: the outbox view shows no secrets, but its errors may quote sink data.
GRANT SELECT ON statesman.outbox_status TO pg_monitor;
GRANT EXECUTE ON FUNCTION statesman._next_occurred_at(bigint) TO pg_monitor;
