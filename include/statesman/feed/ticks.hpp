// The feed's ticks, as the append path needs them (src/feed/ticks.cpp).
#pragma once

namespace statesman::feed {

// Whether this transaction has stored a tick that counted its own records as ended
// (statesman._note_own_tick): each record it appends from then on needs a tick of its own.
// Plain PostgreSQL code that cannot fail: no pg::Call needed.
bool TickedInThisTransaction();
// Flushes the WAL inserted so far, as statesman._durable does (nothing on a standby in
// recovery): every reader of the feed calls it before it hands on a position it read. Plain
// PostgreSQL code: run it under pg::Call.
void FlushReadPositions();

}  // namespace statesman::feed
