// Streams of work that run concurrently on real hardware (a copy engine
// direction, a storage queue): each is a SimGrid actor that runs its jobs in
// FIFO order, one at a time. Jobs may depend on jobs of other streams (a fetch
// of a block that is still being demoted); the JobBoard tracks completion.
#pragma once

#include <simgrid/s4u.hpp>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "sim/core/job.h"
#include "sim/platform/platform.h"
#include "sim/core/timeline.h"

namespace kvtier {

class JobBoard {
 public:
  JobBoard();
  JobId create();
  // A job that `parts` finish() calls complete (a tensor-parallel
  // instance's copy, one transfer per rank): done with the last of them.
  void expect(JobId j, uint32_t parts) { left_[j] = parts; }
  bool done(JobId j) const { return j == kNoJob || done_[j] != 0; }
  // Per job, nonzero once done (kNoJob's too): what a MoveSink reads.
  const std::vector<uint8_t>& done_flags() const { return done_; }
  void finish(JobId j, double duration_s = 0);
  double duration(JobId j) const { return j == kNoJob ? 0 : dur_[j]; }
  void wait(JobId j);  // blocks the calling actor until j is done
  // Blocks the calling actor until `ready` holds, looking again each time a
  // job of this board finishes (what it waits for is decided by jobs not
  // created yet: another engine's next transfers).
  void wait_until(const std::function<bool()>& ready);

 private:
  std::vector<uint8_t> done_;
  std::vector<double> dur_;  // how long each finished job ran (excluding waits for its dependencies)
  std::vector<uint32_t> left_;  // finish() calls a job still waits for (1 unless expect()ed)
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr cv_;
};

// A job is a transfer of `bytes` from device `from` to device `to`, or, when
// `exec_on` names a device, `seconds` of work on that device (scoring,
// (de)compression).
struct TransferJob {
  JobId id = kNoJob;
  size_t from = 0, to = 0;  // device indices
  double bytes = 0;
  std::vector<JobId> deps;
  int exec_on = -1;
  double seconds = 0;
  const char* label = "transfer";
  // What the job is for, shown on its timeline slice when set (>= 0).
  int32_t step = -1, layer = -1;
  // A copy into pageable host memory also passes through the host's relay
  // (software copying it on from a pinned buffer), which moves relay_Bps
  // (0: no relay): the relay's work runs beside the link transfer, on the
  // destination device, shared by the copies relayed at the same time, and
  // the job ends when both are done.
  double relay_Bps = 0;
  // Work on `threads` threads (a CPU codec's pool): `seconds` is its time on
  // that many cores, and it runs on at most min(threads, cores) of the
  // device's cores, sharing them with the device's other work. 0: the work
  // may use the whole device and `seconds` is its time there alone.
  uint32_t threads = 0;
  // Size of the requests the transfer is issued as, where it is not made of
  // whole blocks (Platform::set_request_bytes); 0: whole blocks.
  double request_bytes = 0;
  // Every rank of a tensor-parallel instance moves `bytes`, as one folded
  // flow (Platform::folded); from and to are the first rank's devices.
  const Platform::FoldedPair* fold = nullptr;
};

class Stream {
 public:
  Stream(std::string name, Platform& platform, JobBoard& board, Timeline& timeline);
  const std::string& name() const { return name_; }
  void submit(TransferJob job);
  // Called with every job submitted to any stream (the invariant checker's
  // count of what should cross each link); empty: nothing is called.
  static void observe(std::function<void(const TransferJob&)> f);
  void start();  // creates the actor on the controller host
  void stop();   // the actor ends once its queue is empty

 private:
  void run();
  std::string slice_name(const TransferJob& job) const;
  json slice_args(const TransferJob& job) const;
  std::string name_;
  Platform& platform_;
  JobBoard& board_;
  Timeline& timeline_;
  uint32_t track_ = 0;
  std::deque<TransferJob> queue_;
  bool stopping_ = false;
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr cv_;
};

}  // namespace kvtier
