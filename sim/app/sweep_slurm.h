// `kvtier sweep S.json --slurm`: the sweep's points run as a Slurm job
// array, one task per shard (`kvtier sweep --shard I/N` on the cluster's
// nodes, each into its own JSON-lines file), followed with progress and
// merged into the usual sweep.jsonl, CSV and manifest, each point once (by
// its key). The job's script, its record and the shards' files live in
// FILE.slurm/ beside the JSON-lines file; the same command again follows a
// job still running, or submits the points still missing (docs/sweep.md).
#pragma once

#include "sim/app/sweep.h"

namespace kvtier {

// The whole `--slurm` sweep; the exit status (0, or 1 when points are
// missing at the end: failed, or their tasks cancelled).
int run_slurm_sweep(const SweepOptions& options);

}  // namespace kvtier
