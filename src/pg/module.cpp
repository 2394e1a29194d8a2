// Module entry: the magic block and _PG_init.
#include "statesman/pg/guard.hpp"

extern "C" {
#include "miscadmin.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void _PG_init(void);
}

// Reserves the statesman.* GUC prefix. Loading the library has no other side effect yet.
extern "C" void _PG_init(void) {
  if (IsBinaryUpgrade) return;
  MarkGUCPrefixReserved("statesman");
}
