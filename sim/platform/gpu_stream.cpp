#include "sim/platform/gpu_stream.h"

#include "sim/core/event_budget.h"
#include "sim/platform/platform.h"

namespace kvtier {

GpuStream::GpuStream(Platform& platform, size_t gpu_dev, EngineCounters& c, Timeline& timeline, uint32_t track)
    : host_(platform.host(gpu_dev)), platform_(platform), gpu_dev_(gpu_dev), c_(c), timeline_(timeline), track_(track) {}

GpuStream::Span GpuStream::run(double seconds, bool place) {
  count_event();  // the run's work, held to --max-events
  Span k;
  k.t0 = sg4::Engine::get_clock();
  sg4::ExecPtr e = sg4::this_actor::exec_init(seconds * host_->get_speed());
  e->set_host(host_);
  e->start();
  e->wait();
  k.t1 = sg4::Engine::get_clock();
  c_.gpu_busy_s += k.t1 - k.t0;
  if (place) place_work(seconds, k.t0, k.t1);
  return k;
}

void GpuStream::place_work(double seconds, double t0, double t1) {
  platform_.add_work(gpu_dev_, seconds, t0, t1);
  for (size_t g : mirrors_) platform_.add_work(g, seconds, t0, t1);
}

void GpuStream::mirror_to(std::vector<size_t> gpus, const std::vector<std::string>& names) {
  mirrors_ = std::move(gpus);
  mirror_tracks_.clear();
  for (const std::string& n : names) mirror_tracks_.push_back(timeline_.track(Timeline::Streams, n + " compute"));
}

void GpuStream::slice(const std::string& name, const Span& k, const nlohmann::json& args) {
  timeline_.slice(track_, name, k.t0, k.t1, args);
  for (uint32_t t : mirror_tracks_) timeline_.slice(t, name, k.t0, k.t1, args);
}

}  // namespace kvtier
