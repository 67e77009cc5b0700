#include "sim/core/checks.h"

#include <cstdlib>
#include <cstring>

namespace kvtier {

namespace {
bool requested_ = false;
}

bool invariants_requested() {
  const char* e = std::getenv("KVTIER_CHECK_INVARIANTS");
  return requested_ || (e && std::strcmp(e, "0") != 0 && *e != '\0');
}

void request_invariants() { requested_ = true; }

bool planted_fault(const char* name) {
  const char* e = std::getenv("KVTIER_PLANT_FAULT");
  return e && std::strcmp(e, name) == 0;
}

}  // namespace kvtier
