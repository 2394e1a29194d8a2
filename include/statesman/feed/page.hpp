// The page reader (src/feed/page.cpp): every reader of the feed in C++ gets its records from one
// call of statesman._feed_page per page (a prepared plan, kept for the session) and builds each
// statesman.state-change/v1 message straight from the row's Datums (feed/message.hpp), with
// the envelope fallbacks: the record's own fingerprint / content type, else the outbox's, else
// the root's (statesman.roots, read once per call). read_feed, the dispatcher's page of a sink
// outside this database and the `table` sink's page use it. Pulls in postgres.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statesman/pg/work.hpp"
#include "statesman/sinks/sink.hpp"

namespace statesman::pg {

// One page of an outbox's feed for a sink outside this database, read in one step: the page
// lock taken (shared, until the transaction ends: see statesman._page_outbox), the outbox's
// row and cursor read once, the page's records read by statesman._feed_page once, and the
// messages of the records the outbox publishes (its root) built as JSON text.
struct OutboxPage {
  std::string status;         // "ready", "empty", "paused" or "gone"
  int64_t after = 0;          // the cursor before the page (0 when it has none)
  int64_t last_position = 0;  // the cursor after the page (when read > 0)
  int64_t read = 0;           // feed records in the page; -1 when reading it failed (unbuilt)
  int64_t matching = 0;       // of them, the records the outbox publishes
  int batch_size = 0;
  bool full_page = false;  // the page had batch_size records: more may follow at once
  std::string version;     // the outbox row's version (xmin) the messages were built under
  // What built the messages: the outbox's root filter and envelope fallbacks.
  std::optional<std::string> root, fingerprint, content_type;
  // Set when a message of the page cannot be built (a record too large for a message): why.
  // The page is then a failed attempt; `messages` is empty.
  std::optional<std::string> unbuilt;
  std::vector<sink::Message> messages;  // in feed order
};

// Takes the page lock and reads the outbox's row and cursor (one statement each): status
// "open" (the page is not read yet), "paused" or "gone"; `after` is the cursor.
OutboxPage OpenOutboxPage(const std::string &outbox_id);
// Reads an open page (after page.after) with one statesman._feed_page call and builds its
// messages: status "ready" or "empty". The reading and building runs in a subtransaction: an
// error there is reported in `unbuilt` (read -1 when the page could not even be counted).
void ReadOutboxPage(OutboxPage &page);
// The page after `current` (read ahead while the sink works on it), in the same transaction:
// the same outbox row, no lock or outbox read again.
OutboxPage ReadPageAfter(const OutboxPage &current);

// statesman._finish_page(outbox_id, last_position, published, deduplicated) with a kept plan.
void FinishPage(const std::string &outbox_id, const Value &last_position, int64_t published, int64_t deduplicated);

// One page to the `table` sink (statesman._deliver_table_page), as statesman._page_result:
// status, read, last_position, published, deduplicated, attempts, error, full_page.
Row DeliverTablePage(const std::string &outbox_id);

}  // namespace statesman::pg
