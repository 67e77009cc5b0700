#include "sim/platform/pipeline_stages.h"

#include <algorithm>
#include <stdexcept>

#include <simgrid/s4u/Semaphore.hpp>

#include "sim/platform/collective.h"
#include "sim/platform/platform.h"

namespace kvtier {

std::vector<uint32_t> stage_layers(uint32_t layers, uint32_t stages) {
  std::vector<uint32_t> out(stages, layers / stages);
  for (uint32_t i = 2; i < layers % stages + 2; ++i) ++out[stages - i];
  return out;
}

PipelineStages::PipelineStages(Platform& platform, Timeline& timeline, std::vector<Stage> stages,
                               double activation_bytes_per_token, double buffer_bytes)
    : platform_(platform), stages_(std::move(stages)), bytes_per_token_(activation_bytes_per_token),
      buffer_bytes_(buffer_bytes) {
  if (stages_.empty()) throw std::logic_error("a pipeline needs a stage");
  counters_.resize(stages_.size());
  for (size_t s = 0; s < stages_.size(); ++s) {
    const std::vector<size_t>& g = stages_[s].gpus;
    gpus_.push_back(std::make_unique<GpuStream>(platform, g[0], counters_[s], timeline,
                                                timeline.track(Timeline::Streams, stages_[s].names[0] + " compute")));
    if (g.size() > 1)
      gpus_.back()->mirror_to(std::vector<size_t>(g.begin() + 1, g.end()),
                              std::vector<std::string>(stages_[s].names.begin() + 1, stages_[s].names.end()));
    busy_.push_back(sg4::Mutex::create());
    if (s + 1 < stages_.size()) buffers_.push_back(sg4::Semaphore::create(1));
  }
}

PipelineStages::~PipelineStages() = default;

void PipelineStages::begin_batch() {
  if (in_flight_++ == 0) active_since_ = sg4::Engine::get_clock();
  ++batches_;
}

void PipelineStages::end_batch() {
  if (--in_flight_ == 0) active_s_ += sg4::Engine::get_clock() - active_since_;
}

// SimGrid hands a released mutex to the actor that has waited longest, so
// micro-batches take a stage in the order they reached it.
void PipelineStages::enter(size_t s) { busy_[s]->lock(); }

void PipelineStages::leave(size_t s) { busy_[s]->unlock(); }

// Rank r of one stage to rank r of the next, each its slice (stages of one
// instance have as many ranks each).
CollectivePlan PipelineStages::send_plan(size_t s, double tokens) const {
  const std::vector<size_t>& from = stages_[s].gpus;
  const std::vector<size_t>& to = stages_[s + 1].gpus;
  const double bytes = tokens * bytes_per_token_;
  CollectivePlan plan;
  for (size_t r = 0; r < from.size(); ++r)
    plan.flows.push_back(CollectiveFlow{from[r], to[r], bytes / static_cast<double>(from.size())});
  return plan;
}

CollectivePlan PipelineStages::receive_plan(size_t s, double tokens) const {
  const std::vector<size_t>& g = stages_[s].gpus;
  if (g.size() < 2) return {};
  return allgather_plan(platform_, g, tokens * bytes_per_token_);
}

double PipelineStages::send(size_t s, double tokens) {
  CollectivePlan plan = send_plan(s, tokens);
  for (const CollectiveFlow& f : plan.flows) activation_bytes_ += f.bytes;
  const double t = collective_start(platform_, std::move(plan)).wait();
  activation_s_ += t;
  return t;
}

bool PipelineStages::buffered(double tokens) const {
  return buffer_bytes_ > 0 && tokens * bytes_per_token_ / static_cast<double>(stages_[0].gpus.size()) <= buffer_bytes_;
}

double PipelineStages::send_buffered(size_t s, double tokens) {
  buffers_[s]->acquire();
  return send(s, tokens);
}

void PipelineStages::taken(size_t s) { buffers_[s]->release(); }

double PipelineStages::receive(size_t s, double tokens) {
  CollectivePlan plan = receive_plan(s, tokens);
  if (plan.flows.empty()) return 0.0;
  for (const CollectiveFlow& f : plan.flows) activation_bytes_ += f.bytes;
  const double t = collective_start(platform_, std::move(plan)).wait();
  activation_s_ += t;
  return t;
}

double PipelineStages::handovers_idle_s(double tokens) const {
  double t = 0;
  for (size_t s = 0; s + 1 < stages_.size(); ++s)
    t += idle_duration_s(platform_, send_plan(s, tokens)) + idle_duration_s(platform_, receive_plan(s + 1, tokens));
  return t;
}

double PipelineStages::active_s(double end) const {
  return active_s_ + (in_flight_ > 0 ? end - active_since_ : 0.0);
}

double PipelineStages::bubble_fraction(double end) const {
  const double active = active_s(end);
  if (active <= 0) return 0.0;
  double busy = 0;
  for (size_t s = 0; s < stages_.size(); ++s) busy += busy_s(s);
  return std::max(0.0, 1.0 - busy / (static_cast<double>(stages_.size()) * active));
}

}  // namespace kvtier
