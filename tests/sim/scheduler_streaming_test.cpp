// The scheduler's part in layer-wise KV streaming between a prefill and a
// decode instance (sim/cluster/layerwise_transfer.h): the decode side
// reserves a streamed prompt's blocks when they and the watermark are free,
// holds them until the KV is in, and then runs it without taking more; the
// prefill side keeps a finished prompt's blocks until they are released.
// Pure bookkeeping: no SimGrid.
#include <catch2/catch.hpp>

#include "sim/serving/scheduler.h"

using namespace kvtier;

namespace {

SchedulerLimits limits(uint64_t gpu_blocks) {
  SchedulerLimits l;
  l.block_tokens = 16;
  l.gpu_blocks = gpu_blocks;
  l.watermark = 0;
  return l;
}

ServingRequest streamed(uint32_t id, uint32_t prompt, uint32_t output) {
  ServingRequest r;
  r.id = id;
  r.input_tokens = prompt;
  r.output_tokens = output;
  r.ctx = prompt;  // prefilled elsewhere
  r.generated = 1;
  return r;
}

}  // namespace

TEST_CASE("scheduler: a streamed prompt's blocks are reserved, held while its KV comes, then it decodes in them") {
  std::vector<ServingRequest> reqs{streamed(0, 160, 3)};
  Scheduler s(limits(100), reqs, [](ServingRequest&) { return 0u; });
  s.arrive_streamed(0);
  REQUIRE_FALSE(s.idle());
  const IterationPlan& p = s.plan();
  CHECK(p.items.empty());                       // nothing runs until the KV is in
  CHECK(p.reserved == std::vector<uint32_t>{0});
  CHECK(s.used_blocks() == 11);                 // 161 tokens' blocks: the prompt and the next token
  CHECK(s.awaiting_kv() == 1);
  CHECK(reqs[0].state == ServingRequest::State::Incoming);
  CHECK(s.idle());                              // only an arrival of the KV can change anything
  CHECK(s.plan().items.empty());
  s.kv_in(0);
  CHECK(s.awaiting_kv() == 0);
  const IterationPlan& q = s.plan();
  REQUIRE(q.items.size() == 1);
  CHECK(q.items[0].past == 160);
  CHECK(q.items[0].tokens == 1);
  CHECK(s.used_blocks() == 11);                 // its reserved blocks, no more
  CHECK(reqs[0].state == ServingRequest::State::Running);
}

TEST_CASE("scheduler: a reservation waits for room, in arrival order") {
  std::vector<ServingRequest> reqs{streamed(0, 800, 2), streamed(1, 800, 2), streamed(2, 16, 2)};
  Scheduler s(limits(103), reqs, [](ServingRequest&) { return 0u; });
  for (uint32_t id : {0u, 1u, 2u}) s.arrive_streamed(id);
  // 51 blocks each for the long prompts: two fit; the short one's 2 do not
  // fit in the one left, and it waits.
  CHECK(s.plan().reserved == std::vector<uint32_t>{0, 1});
  CHECK(s.used_blocks() == 102);
  s.kv_in(0);
  CHECK(s.plan().reserved.empty());  // request 0 runs in its blocks; still no room
  s.complete(1.0);                   // and finishes (2 output tokens): its blocks are free
  CHECK(s.used_blocks() == 51);
  CHECK(s.plan().reserved == std::vector<uint32_t>{2});
}

TEST_CASE("scheduler: a finished prompt whose KV streams out keeps its blocks until released") {
  ServingRequest r;
  r.input_tokens = 64;
  r.output_tokens = 1;  // a prefill instance's request: done at its first token
  r.hold_kv = true;
  std::vector<ServingRequest> reqs{r};
  Scheduler s(limits(10), reqs, [](ServingRequest&) { return 0u; });
  s.arrive(0);
  CHECK(s.plan().items.size() == 1);
  CHECK(s.complete(1.0) == std::vector<uint32_t>{0});
  CHECK(reqs[0].state == ServingRequest::State::Done);
  CHECK(s.used_blocks() == 4);
  CHECK(s.held_blocks() == 4);
  s.release(0);
  CHECK(s.used_blocks() == 0);
  CHECK(s.held_blocks() == 0);
}
