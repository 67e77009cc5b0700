// Something to do the moment a job is done, from an actor of its own, so
// that no engine's actor waits for it: a prompt's KV pushed layer by layer to
// another GPU is in once its last transfer lands, whatever either GPU's
// engine is doing then.
#pragma once

#include <functional>
#include <vector>

#include "sim/core/job.h"

namespace kvtier {

class JobBoard;
class Platform;

// Calls `then` once job `j` of `board` is done (at once, from the new actor,
// if it already is).
void when_done(Platform& platform, JobBoard& board, JobId j, std::function<void()> then);
// Once every job of `jobs` is done.
void when_done(Platform& platform, JobBoard& board, std::vector<JobId> jobs, std::function<void()> then);

}  // namespace kvtier
