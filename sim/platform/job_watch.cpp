#include "sim/platform/job_watch.h"

#include "sim/platform/platform.h"
#include "sim/platform/streams.h"

namespace kvtier {

void when_done(Platform& platform, JobBoard& board, JobId j, std::function<void()> then) {
  sg4::Actor::create("kv arrival", platform.controller(), [&board, j, then = std::move(then)] {
    board.wait(j);
    then();
  });
}

void when_done(Platform& platform, JobBoard& board, std::vector<JobId> jobs, std::function<void()> then) {
  sg4::Actor::create("kv arrival", platform.controller(), [&board, jobs = std::move(jobs), then = std::move(then)] {
    for (JobId j : jobs) board.wait(j);
    then();
  });
}

}  // namespace kvtier
