// The feed's ticks, as the append path needs them (src/feed/ticks.cpp).
#pragma once

namespace statesman::feed {

// Whether this transaction has stored a tick that counted its own records as ended
// (statesman._note_own_tick): each record it appends from then on needs a tick of its own.
// Plain PostgreSQL code that cannot fail: no pg::Call needed.
bool TickedInThisTransaction();

}  // namespace statesman::feed
