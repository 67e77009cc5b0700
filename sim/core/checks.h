// Checks a run can be asked for: the engine's invariants
// (sim/engine/invariants.h checks them), and faults planted on purpose to
// show that the checker catches them.
#pragma once

namespace kvtier {

// Whether this process was asked to check invariants (`kvtier run
// --check-invariants`, or KVTIER_CHECK_INVARIANTS=1 in the environment).
bool invariants_requested();
void request_invariants();
// A fault planted on purpose, to show that the checker catches it
// (KVTIER_PLANT_FAULT=<name>); only tests set it.
bool planted_fault(const char* name);

}  // namespace kvtier
