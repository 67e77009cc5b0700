#include "sim/platform/streams.h"

namespace kvtier {

JobBoard::JobBoard() : done_(1, 1), dur_(1, 0.0), left_(1, 1), mutex_(sg4::Mutex::create()), cv_(sg4::ConditionVariable::create()) {}

JobId JobBoard::create() {
  done_.push_back(0);
  dur_.push_back(0.0);
  left_.push_back(1);
  return static_cast<JobId>(done_.size() - 1);
}

void JobBoard::finish(JobId j, double duration_s) {
  if (left_[j] > 1) {
    --left_[j];
    return;
  }
  done_[j] = 1;
  dur_[j] = duration_s;
  cv_->notify_all();
}

// Locks here are taken and released by hand, never through std::unique_lock.
// Actor::kill_all() (the engine's exit path on an error) ends each actor by
// throwing ForcefulKillException from its next simcall. A unique_lock unlocks
// in its destructor, and that unlock is a simcall of the dying actor: the
// exception would leave a destructor (noexcept) and std::terminate the run
// instead of letting it report the error. By hand, the exception leaves from
// lock(), wait() or unlock() and unwinds the actor's stack normally.
void JobBoard::wait(JobId j) {
  if (done(j)) return;
  mutex_->lock();
  while (!done(j)) cv_->wait(mutex_);
  mutex_->unlock();
}

void JobBoard::wait_until(const std::function<bool()>& ready) {
  if (ready()) return;
  mutex_->lock();
  while (!ready()) cv_->wait(mutex_);
  mutex_->unlock();
}

Stream::Stream(std::string name, Platform& platform, JobBoard& board, Timeline& timeline)
    : name_(std::move(name)),
      platform_(platform),
      board_(board),
      timeline_(timeline),
      mutex_(sg4::Mutex::create()),
      cv_(sg4::ConditionVariable::create()) {
  track_ = timeline_.track(Timeline::Streams, name_);
}

namespace {
std::function<void(const TransferJob&)>& observer() {
  static std::function<void(const TransferJob&)> f;
  return f;
}
}  // namespace

void Stream::observe(std::function<void(const TransferJob&)> f) { observer() = std::move(f); }

void Stream::submit(TransferJob job) {
  if (observer()) observer()(job);
  queue_.push_back(std::move(job));
  cv_->notify_one();
}

void Stream::start() {
  sg4::Actor::create(name_, platform_.controller(), [this] { run(); });
}

void Stream::stop() {
  stopping_ = true;
  cv_->notify_one();
}

// "transfer dram->gpu L3" : what moves, between which devices, for which layer.
std::string Stream::slice_name(const TransferJob& job) const {
  std::string n = job.label;
  if (job.exec_on >= 0)
    n += " on " + platform_.host(static_cast<size_t>(job.exec_on))->get_name();
  else
    n += " " + platform_.host(platform_.device_of_end(job.from))->get_name() + "->" +
         platform_.host(platform_.device_of_end(job.to))->get_name();
  if (job.layer >= 0) n += " L" + std::to_string(job.layer);
  return n;
}

json Stream::slice_args(const TransferJob& job) const {
  json a = json::object();
  if (job.exec_on >= 0) {
    a["device"] = platform_.host(static_cast<size_t>(job.exec_on))->get_name();
  } else {
    a["from"] = platform_.host(platform_.device_of_end(job.from))->get_name();
    a["to"] = platform_.host(platform_.device_of_end(job.to))->get_name();
    a["bytes"] = job.bytes;
  }
  a["stream"] = name_;
  if (job.step >= 0) a["step"] = job.step;
  if (job.layer >= 0) a["layer"] = job.layer;
  return a;
}

void Stream::run() {
  auto& stats = platform_.stats();
  while (true) {
    mutex_->lock();  // by hand: see JobBoard::wait
    while (queue_.empty() && !stopping_) cv_->wait(mutex_);
    mutex_->unlock();
    if (queue_.empty()) return;
    TransferJob job = std::move(queue_.front());
    queue_.pop_front();
    for (JobId d : job.deps) board_.wait(d);
    const double t0 = sg4::Engine::get_clock();
    if (job.exec_on >= 0) {
      sg4::Host* h = platform_.host(static_cast<size_t>(job.exec_on));
      // The host's speed is all its cores; a job on fewer threads holds at
      // most its cores' share of it, whatever else runs there.
      const double cores = platform_.cores(static_cast<size_t>(job.exec_on));
      const double threads = job.threads > 0 ? double(job.threads) : cores;
      const double per_core = h->get_speed() / cores;
      sg4::ExecPtr e = sg4::this_actor::exec_init(job.seconds * threads * per_core);
      if (threads < cores) e->set_bound(threads * per_core);
      e->set_host(h);
      e->start();
      e->wait();
      const double t1 = sg4::Engine::get_clock();
      platform_.add_work(static_cast<size_t>(job.exec_on), job.seconds * threads / cores, t0, t1);
      if (timeline_.enabled()) timeline_.slice(track_, slice_name(job), t0, t1, slice_args(job));
      board_.finish(job.id, t1 - t0);
      continue;
    }
    // The routes the bytes cross: every rank's where the copy is folded.
    const PlatformRoute* one = &platform_.route(job.from, job.to);
    const PlatformRoute* const* routes = job.fold ? job.fold->ranks.data() : &one;
    const size_t n_routes = job.fold ? job.fold->ranks.size() : 1;
    for (size_t k = 0; k < n_routes; ++k)
      for (uint32_t s : routes[k]->stats) {
        LinkStat& st = stats[s];
        if (st.active++ == 0) st.busy_since = t0;
        st.bytes += job.bytes;
      }
    // Keep the CommPtr: the raw pointer start() returns dies with the temporary.
    sg4::ExecPtr relay;
    if (job.relay_Bps > 0) {
      sg4::Host* h = platform_.host(platform_.device_of_end(job.to));
      relay = sg4::this_actor::exec_init(job.bytes / job.relay_Bps * h->get_speed());
      relay->set_host(h);
      relay->start();
    }
    // SimGrid evaluates the transfer's factors when the start is handled, so
    // the request size goes with the route. A stream runs one transfer at a
    // time, and the only jobs that set a size (the FPGA's key reads) go
    // SmartSSD -> FPGA, a pair no other stream uses.
    platform_.set_route_request_bytes(job.from, job.to, job.request_bytes);
    sg4::CommPtr c = sg4::Comm::sendto_async(job.fold ? job.fold->src : platform_.host(job.from),
                                             job.fold ? job.fold->dst : platform_.host(job.to),
                                             static_cast<uint64_t>(job.bytes));
    c->wait();
    if (relay) relay->wait();
    const double t1 = sg4::Engine::get_clock();
    for (size_t k = 0; k < n_routes; ++k) {
      for (uint32_t s : routes[k]->stats) {
        LinkStat& st = stats[s];
        if (--st.active == 0) st.busy_s += t1 - st.busy_since;
      }
      platform_.transferred(*routes[k], job.bytes, t0, t1);
    }
    if (timeline_.enabled()) {
      const std::string name = slice_name(job);
      const json args = slice_args(job);
      timeline_.slice(track_, name, t0, t1, args);
      for (size_t k = 0; k < n_routes; ++k)
        for (uint32_t s : routes[k]->stats) timeline_.transfer(stats[s].track, name, t0, t1, job.bytes, args);
    }
    board_.finish(job.id, t1 - t0);
  }
}

}  // namespace kvtier
