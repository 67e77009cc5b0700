// The simulated clock, for code outside sim/platform/: the engine, serving
// and cluster read the time and wait for it through here, so that only
// sim/platform/ talks to SimGrid.
#pragma once

namespace kvtier {

// Simulated time now, in seconds. A plain call: the pipeline reads it once
// per layer.
double sim_now();

// Blocks the calling actor until simulated time `t` (returns at once if it
// has passed): a request's arrival.
void sim_sleep_until(double t);

}  // namespace kvtier
