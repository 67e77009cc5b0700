#include "sim/platform/sim_clock.h"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>

namespace kvtier {

double sim_now() { return simgrid::s4u::Engine::get_clock(); }

void sim_sleep_until(double t) { simgrid::s4u::this_actor::sleep_until(t); }

}  // namespace kvtier
