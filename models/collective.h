// Closed forms of the collectives tensor parallelism pays (docs/cluster.md):
// the time of one collective over n ranks on links of bandwidth B (B/s, each
// direction) with a per-step latency alpha (s). `bytes` is the buffer each
// rank holds (all-reduce: in and out; all-gather: the gathered output).
//
// Ring all-reduce (NCCL's ring: a reduce-scatter then an all-gather, 2(n-1)
// steps each moving bytes/n to the next rank):
//     2(n-1)/n x bytes / B + 2(n-1) x alpha
// All-reduce through a switch (NVSwitch; one-shot reduce-scatter and
// all-gather, each rank sending bytes/n to each of the n-1 others in each
// phase, all at once through its port):
//     2(n-1)/n x bytes / B + 2 x alpha
// Both move 2(n-1)/n x bytes through each rank's port, which is why NCCL's
// tests report bus bandwidth busbw = algbw x 2(n-1)/n (algbw = bytes / time):
// a port-bound all-reduce has busbw = B whatever the algorithm.
#pragma once

namespace kvtier {

double ring_allreduce_s(int ranks, double bytes, double link_Bps, double step_latency_s);
double switch_allreduce_s(int ranks, double bytes, double port_Bps, double latency_s);
// Ring all-gather: (n-1)/n x bytes / B + (n-1) x alpha.
double ring_allgather_s(int ranks, double bytes, double link_Bps, double step_latency_s);
// One message between two ranks: alpha + bytes / B.
double send_recv_s(double bytes, double link_Bps, double latency_s);
// Bytes each rank sends (and receives) in an all-reduce: 2(n-1)/n x bytes.
double allreduce_bytes_per_rank(int ranks, double bytes);
// NCCL's bus bandwidth of an all-reduce of `bytes` that took `seconds`.
double allreduce_bus_Bps(int ranks, double bytes, double seconds);

}  // namespace kvtier
