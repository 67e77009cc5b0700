// The analytic NVMe throughput model, apart from the device kind so that the
// SmartSSD, RAID arrays and tests share it.
//
// One drive serving requests of s bytes with q outstanding is limited by
// whichever binds first:
//   - its sequential bandwidth B (large requests, enough depth),
//   - its IOPS ceiling x s (small requests, enough depth: the controller and
//     flash dies run out of parallelism), and
//   - Little's law, q x s / (L + s/B): each request costs its per-I/O latency L
//     plus its transfer, and only q are in flight (a 4 KB read at depth 1 is
//     latency-bound at ~s/L).
// RAID-0 of N drives with stripe (chunk) c: a request covers k = ceil(s/c)
// chunks on m = min(N, k) drives, so each drive sees requests of s/m bytes at
// depth q m / N; the array delivers N times one drive's rate at that size and
// depth. A 4 KB request at depth 1 is no faster on 4 drives; a deep queue of
// large requests is 4x faster.
#pragma once

namespace kvtier {

struct NvmeSpec {
  double read_Bps = 0, write_Bps = 0;              // sequential, per drive
  double read_iops = 0, write_iops = 0;            // random-I/O ceiling per drive; 0 = none
  double read_latency_s = 0, write_latency_s = 0;  // per I/O at depth 1
  int drives = 1;                                  // RAID-0 members
  double stripe_bytes = 512 * 1024;                // mdadm's default chunk
};

// Throughput of the whole array, B/s, for requests of `request_bytes` with
// `queue_depth` outstanding (depth < 1 is treated as 1).
double nvme_throughput_Bps(const NvmeSpec& s, bool write, double request_bytes, double queue_depth);
// One drive, no striping: the building block of the above.
double nvme_drive_throughput_Bps(double seq_Bps, double iops, double latency_s, double request_bytes,
                                 double queue_depth);

}  // namespace kvtier
