// Module entry: the magic block, the settings and _PG_init.
#include "statesman/worker/workers.hpp"

extern "C" {
#include "miscadmin.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void _PG_init(void);
}

namespace statesman::pg {

bool guc_enabled = true;
int guc_max_workers = 8;
int guc_naptime_ms = 5000;
bool guc_hints = true;

void DefineSettings() {
  DefineCustomBoolVariable("statesman.enabled",
                           "Runs statesman's background workers (the launcher stays, idle, when off).", nullptr,
                           &guc_enabled, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  // A PGC_POSTMASTER setting can only be defined while the server starts; a backend that
  // loads the library later has no workers to size anyway.
  if (process_shared_preload_libraries_in_progress)
    DefineCustomIntVariable("statesman.max_workers",
                            "Most statesman workers (database workers plus dispatchers) running at once.",
                            "Each also needs one of max_worker_processes.", &guc_max_workers, 8, 1, 1024,
                            PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("statesman.naptime", "How often the launcher looks for databases that use statesman.",
                          nullptr, &guc_naptime_ms, 5000, 100, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
                          nullptr);
  DefineCustomBoolVariable(
      "statesman.hints",
      "Wakes the sequencer and the dispatchers when appends commit, instead of waiting for the poll interval.", nullptr,
      &guc_hints, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("statesman");
}

}  // namespace statesman::pg

// Defines the settings; when preloaded, also reserves the shared registry and the revision
// hints, and registers the launcher. Every backend that loads the library gets the commit hint.
extern "C" void _PG_init(void) {
  using namespace statesman::pg;
  if (IsBinaryUpgrade) return;
  DefineSettings();
  RegisterCommitHint();
  if (!process_shared_preload_libraries_in_progress) return;
  RequestSharedMemory();
  RegisterLauncher();
}
