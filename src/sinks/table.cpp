// The embedded `table` sink: SQL delivers its pages into a table of this database, inside the
// page's transaction, so delivery into it is exactly-once (statesman._deliver_table_page, in C:
// src/feed/page.cpp, DeliverTablePage).
// Its options are checked in SQL as well (statesman._check_sink), which creates the table.
#include "statesman/sinks/sink.hpp"

namespace statesman::sink {

extern const SinkType kTableSink;
const SinkType kTableSink = {"table", true, nullptr, nullptr, nullptr};

}  // namespace statesman::sink
