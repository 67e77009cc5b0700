#include "models/collective.h"

namespace kvtier {

double allreduce_bytes_per_rank(int ranks, double bytes) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks * bytes : 0.0;
}

double ring_allreduce_s(int ranks, double bytes, double link_Bps, double step_latency_s) {
  if (ranks <= 1) return 0.0;
  return allreduce_bytes_per_rank(ranks, bytes) / link_Bps + 2.0 * (ranks - 1) * step_latency_s;
}

double switch_allreduce_s(int ranks, double bytes, double port_Bps, double latency_s) {
  if (ranks <= 1) return 0.0;
  return allreduce_bytes_per_rank(ranks, bytes) / port_Bps + 2.0 * latency_s;
}

double ring_allgather_s(int ranks, double bytes, double link_Bps, double step_latency_s) {
  if (ranks <= 1) return 0.0;
  return double(ranks - 1) / ranks * bytes / link_Bps + double(ranks - 1) * step_latency_s;
}

double send_recv_s(double bytes, double link_Bps, double latency_s) { return latency_s + bytes / link_Bps; }

double allreduce_bus_Bps(int ranks, double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds * 2.0 * (ranks - 1) / ranks : 0.0;
}

}  // namespace kvtier
