#include "sim/serving/scheduler.h"

#include <algorithm>

namespace kvtier {

Scheduler::Scheduler(const SchedulerLimits& limits, std::vector<ServingRequest>& reqs, Lookup lookup)
    : limits_(limits), reqs_(reqs), lookup_(std::move(lookup)) {}

bool Scheduler::before(uint32_t a, uint32_t b) const {
  const ServingRequest& x = reqs_[a];
  const ServingRequest& y = reqs_[b];
  if (limits_.order == QueueOrder::ShortestPrompt && x.prefill_target != y.prefill_target)
    return x.prefill_target < y.prefill_target;
  if (x.arrival_s != y.arrival_s) return x.arrival_s < y.arrival_s;
  return a < b;
}

void Scheduler::insert_waiting(uint32_t id) {
  auto it = std::upper_bound(waiting_.begin(), waiting_.end(), id, [this](uint32_t a, uint32_t b) { return before(a, b); });
  waiting_.insert(it, id);
}

void Scheduler::arrive(uint32_t id) {
  ServingRequest& r = reqs_[id];
  r.state = ServingRequest::State::Waiting;
  r.prefill_target = r.input_tokens;
  insert_waiting(id);
}

void Scheduler::arrive_prefilled(uint32_t id) {
  ServingRequest& r = reqs_[id];
  r.state = ServingRequest::State::Swapped;
  r.prefill_target = r.input_tokens;
  r.looked_up = true;
  pulled_.push_back(id);
}

void Scheduler::arrive_streamed(uint32_t id) {
  ServingRequest& r = reqs_[id];
  r.state = ServingRequest::State::Incoming;
  r.prefill_target = r.input_tokens;
  r.looked_up = true;
  reserving_.push_back(id);
}

void Scheduler::kv_in(uint32_t id) {
  --in_flight_;
  ready_.push_back(id);
}

void Scheduler::release(uint32_t id) {
  ServingRequest& r = reqs_[id];
  used_blocks_ -= r.held_blocks;
  held_blocks_ -= r.held_blocks;
  r.held_blocks = 0;
}

// The lowest-priority running sequence gives its blocks back: swapped out
// to host memory (while swap space lasts), or dropped and recomputed.
void Scheduler::preempt(uint32_t id) {
  ServingRequest& r = reqs_[id];
  ++r.preemptions;
  ++preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  used_blocks_ -= r.gpu_blocks;
  if (limits_.preemption == PreemptionMode::Swap && swapped_blocks_ + r.gpu_blocks <= limits_.swap_blocks) {
    r.state = ServingRequest::State::Swapped;
    swapped_blocks_ += r.gpu_blocks;
    auto it = std::upper_bound(swapped_.begin(), swapped_.end(), id, [this](uint32_t a, uint32_t b) { return before(a, b); });
    swapped_.insert(it, id);
    plan_.swapped_out.push_back(id);
    return;
  }
  // Recompute: the prompt and what was generated so far are prefilled again.
  r.state = ServingRequest::State::Waiting;
  r.gpu_blocks = 0;
  r.ctx = 0;
  r.prefill_target = r.input_tokens + r.generated;
  r.looked_up = false;
  waiting_.push_front(id);  // resumes before new requests
  plan_.recomputed.push_back(id);
}

const IterationPlan& Scheduler::plan() {
  plan_ = IterationPlan{};
  uint64_t budget = limits_.max_batched_tokens;
  bool preempted = false;
  if (limits_.prefill_first) {
    admit_waiting(budget);
    if (!plan_.items.empty()) return plan_;
  }
  // 1. Running sequences, in priority order.
  for (size_t i = 0; i < running_.size(); ++i) {
    const uint32_t id = running_[i];
    ServingRequest& r = reqs_[id];
    if (!r.prefilling()) {
      const uint64_t need = blocks_for(uint64_t(r.ctx) + 1) - r.gpu_blocks;
      while (need > free_blocks() && running_.back() != id) {
        preempt(running_.back());
        preempted = true;
      }
      if (need > free_blocks()) {  // r is the lowest priority left: it goes itself
        preempt(id);
        preempted = true;
        break;
      }
      used_blocks_ += need;
      r.gpu_blocks += need;
      plan_.items.push_back(IterationItem{id, r.ctx, 1, 0, false, false});
      r.ctx += 1;
      if (budget > 0) --budget;
      continue;
    }
    // A prompt being prefilled in chunks (its blocks were taken at admission): the next chunk.
    if (budget == 0) continue;
    const uint64_t k = std::min<uint64_t>(r.prefill_target - r.ctx, budget);
    plan_.items.push_back(IterationItem{id, r.ctx, uint32_t(k), 0, true, r.ctx + k == r.prefill_target});
    r.ctx += uint32_t(k);
    r.computed_tokens += k;
    plan_.computed_tokens += k;
    budget -= k;
  }
  // 2. Swapped-out sequences come back first, while nothing is being preempted.
  while (!preempted && !swapped_.empty() && running_.size() < limits_.max_running && budget > 0) {
    const uint32_t id = swapped_.front();
    ServingRequest& r = reqs_[id];
    const uint64_t need = blocks_for(uint64_t(r.ctx) + 1);
    if (need > free_blocks()) break;
    swapped_.pop_front();
    swapped_blocks_ -= r.gpu_blocks;
    plan_.swapped_in.push_back(id);
    used_blocks_ += need;
    r.gpu_blocks = need;
    r.state = ServingRequest::State::Running;
    running_.push_back(id);
    plan_.items.push_back(IterationItem{id, r.ctx, 1, 0, false, false});
    r.ctx += 1;
    --budget;
  }
  // 2b. Prompts prefilled elsewhere, in arrival order, while their blocks
  // and the watermark are free.
  while (!preempted && swapped_.empty() && !pulled_.empty() && running_.size() < limits_.max_running && budget > 0) {
    const uint32_t id = pulled_.front();
    ServingRequest& r = reqs_[id];
    const uint64_t need = blocks_for(uint64_t(r.ctx) + 1);
    if (need + watermark_blocks() > free_blocks()) break;
    pulled_.pop_front();
    plan_.pulled_in.push_back(id);
    used_blocks_ += need;
    r.gpu_blocks = need;
    r.state = ServingRequest::State::Running;
    running_.push_back(id);
    plan_.items.push_back(IterationItem{id, r.ctx, 1, 0, false, false});
    r.ctx += 1;
    --budget;
  }
  // 2c. KV streamed here and in: the request runs in the blocks it holds.
  while (!preempted && !ready_.empty() && running_.size() < limits_.max_running && budget > 0) {
    const uint32_t id = ready_.front();
    ServingRequest& r = reqs_[id];
    ready_.pop_front();
    r.state = ServingRequest::State::Running;
    running_.push_back(id);
    plan_.items.push_back(IterationItem{id, r.ctx, 1, 0, false, false});
    r.ctx += 1;
    --budget;
  }
  // 2d. KV to stream here: blocks for it, in arrival order, while they and
  // the watermark are free (as a pulled prompt's, 2b).
  while (!preempted && swapped_.empty() && !reserving_.empty()) {
    const uint32_t id = reserving_.front();
    ServingRequest& r = reqs_[id];
    const uint64_t need = blocks_for(uint64_t(r.ctx) + 1);
    if (need + watermark_blocks() > free_blocks()) break;
    reserving_.pop_front();
    used_blocks_ += need;
    r.gpu_blocks = need;
    ++in_flight_;
    plan_.reserved.push_back(id);
  }
  // 3. New (and recomputing) requests; first, and alone, when prefills go first.
  if (!preempted && !limits_.prefill_first) admit_waiting(budget);
  return plan_;
}

void Scheduler::admit_waiting(uint64_t& budget) {
  while (swapped_.empty() && !waiting_.empty() && running_.size() < limits_.max_running && budget > 0) {
    const uint32_t id = waiting_.front();
    ServingRequest& r = reqs_[id];
    const uint32_t cached = std::min<uint32_t>(lookup_(r), r.prefill_target - 1);
    const uint64_t remaining = r.prefill_target - cached;
    if (!limits_.chunked_prefill && remaining > budget) break;
    const uint64_t k = std::min<uint64_t>(remaining, budget);
    // The whole prompt's blocks at once (as vLLM's block manager allocates
    // them), keeping a watermark free so that running sequences can grow
    // without being preempted at once.
    const uint64_t need = blocks_for(r.prefill_target);
    if (need + watermark_blocks() > free_blocks()) break;
    waiting_.pop_front();
    used_blocks_ += need;
    r.gpu_blocks = need;
    r.state = ServingRequest::State::Running;
    r.looked_up = true;
    running_.push_back(id);
    plan_.items.push_back(IterationItem{id, cached, uint32_t(k), cached, true, cached + k == r.prefill_target});
    r.ctx = cached + uint32_t(k);
    r.computed_tokens += k;
    plan_.computed_tokens += k;
    budget -= k;
  }
}

namespace {
// A decode step, or the prefill chunk that completes a prompt, produces the request's next token.
bool produces_token(const IterationItem& it) { return !it.prefill || it.completes_prefill; }
}  // namespace

uint64_t Scheduler::finishing() const {
  uint64_t n = 0;
  for (const IterationItem& it : plan_.items)
    if (produces_token(it) && reqs_[it.req].generated + 1 >= reqs_[it.req].output_tokens) ++n;
  return n;
}

const std::vector<uint32_t>& Scheduler::complete(double now) {
  finished_.clear();
  for (const IterationItem& it : plan_.items) {
    ServingRequest& r = reqs_[it.req];
    if (!produces_token(it)) continue;
    ++r.generated;
    if (r.first_token_s < 0) r.first_token_s = now;
    if (r.generated < r.output_tokens) continue;
    r.state = ServingRequest::State::Done;
    r.finish_s = now;
    if (r.hold_kv) {
      r.held_blocks = r.gpu_blocks;
      held_blocks_ += r.gpu_blocks;
    } else {
      used_blocks_ -= r.gpu_blocks;
    }
    r.gpu_blocks = 0;
    running_.erase(std::find(running_.begin(), running_.end(), it.req));
    finished_.push_back(it.req);
  }
  return finished_;
}

}  // namespace kvtier
