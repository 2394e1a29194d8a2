// The feed's ticks, as the append path needs them (src/feed/ticks.cpp).
#pragma once

#include <cstdint>

namespace statesman::feed {

// Whether this transaction has stored a tick that counted its own records as ended
// (statesman._note_own_tick): each record it appends from then on needs a tick of its own.
// Plain PostgreSQL code that cannot fail: no pg::Call needed.
bool TickedInThisTransaction();
// Notes that this transaction (and subtransaction) stored such a tick, as
// statesman._note_own_tick does. Plain PostgreSQL code: run it under pg::Call.
void NoteOwnTick();
// One step of the ticker, statesman._tick(max_records, durable) (src/feed/ticker.cpp): a tick
// for the records committed since the last one, when there are any, committed synchronously
// at the end of the transaction only when durable. Sets *head to the head position and
// returns true, or returns false when the feed has none yet. Plain PostgreSQL code: run it
// under pg::Call, in a transaction.
bool Tick(int32_t max_records, bool durable, int64_t *head);
// Flushes the WAL inserted so far, as statesman._durable does (nothing on a standby in
// recovery): every reader of the feed calls it before it hands on a position it read. Plain
// PostgreSQL code: run it under pg::Call.
void FlushReadPositions();

}  // namespace statesman::feed
