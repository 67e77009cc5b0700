#include "sim/platform/collective.h"

#include <algorithm>
#include <limits>

#include "models/collective.h"
#include "models/param.h"

namespace kvtier {

namespace {

void check_ranks(const Platform& p, const std::vector<size_t>& gpus) {
  if (gpus.empty()) throw ConfigError("collective: no ranks");
  for (size_t g : gpus)
    if (g >= p.work_s().size() || !p.host(g))
      throw ConfigError("collective: device " + std::to_string(g) + " is not a device that sends and receives");
  std::vector<size_t> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw ConfigError("collective: a device is listed twice among the ranks");
}

// Rank i to rank i+1 with `bytes` each; the largest hop latency.
double ring_flows(const Platform& p, const std::vector<size_t>& gpus, double bytes, CollectivePlan& plan) {
  double alpha = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const size_t a = gpus[i], b = gpus[(i + 1) % gpus.size()];
    plan.flows.push_back(CollectiveFlow{a, b, bytes});
    alpha = std::max(alpha, p.route(a, b).latency_s);
  }
  return alpha;
}

}  // namespace

CollectivePlan allreduce_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo) {
  check_ranks(p, gpus);
  CollectivePlan plan;
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return plan;
  if (algo == CollectiveAlgorithm::Ring) {
    const double alpha = ring_flows(p, gpus, allreduce_bytes_per_rank(n, bytes), plan);
    plan.extra_latency_s = (2.0 * (n - 1) - 1) * alpha;
    return plan;
  }
  double alpha = 0;
  for (size_t a : gpus)
    for (size_t b : gpus)
      if (a != b) {
        plan.flows.push_back(CollectiveFlow{a, b, 2.0 * bytes / n});
        alpha = std::max(alpha, p.route(a, b).latency_s);
      }
  plan.extra_latency_s = alpha;
  return plan;
}

CollectivePlan allreduce_repeated_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes,
                                       CollectiveAlgorithm algo, size_t count) {
  if (count <= 1) return allreduce_plan(p, gpus, bytes, algo);
  const CollectivePlan one = allreduce_plan(p, gpus, bytes, algo);
  if (one.flows.empty()) return one;
  // One all-reduce's latency: its flows' first step (the largest route
  // latency among them) and the steps slept after.
  double first = 0;
  for (const CollectiveFlow& f : one.flows) first = std::max(first, p.route(f.from, f.to).latency_s);
  CollectivePlan plan = allreduce_plan(p, gpus, bytes * static_cast<double>(count), algo);
  plan.extra_latency_s += static_cast<double>(count - 1) * (first + one.extra_latency_s);
  return plan;
}

CollectivePlan allgather_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes) {
  check_ranks(p, gpus);
  CollectivePlan plan;
  const int n = static_cast<int>(gpus.size());
  if (n < 2) return plan;
  const double alpha = ring_flows(p, gpus, double(n - 1) / n * bytes, plan);
  plan.extra_latency_s = double(n - 2) * alpha;
  return plan;
}

namespace {

}  // namespace

// What each of the plan's flows takes when nothing else crosses its links,
// as SimGrid's CM02 model with the platform's factors gives it (SimGrid
// moves whole bytes); empty where that cannot be said without solving the
// sharing. Flows that share no link take what each takes by itself. Flows
// that share links do when they share them symmetrically: the same bytes and
// latency, no size-dependent factor, and the same fair share min over their
// links of bandwidth / flows crossing it (an NVSwitch all-reduce: n-1 flows
// on every rank's link each way): that share is then the max-min solution,
// and they all end together.
std::vector<double> alone_durations(const Platform& p, const CollectivePlan& plan) {
  std::vector<double> out;
  if (plan.flows.empty()) return out;
  std::vector<uint32_t> crossings;
  for (const CollectiveFlow& f : plan.flows) {
    const std::vector<uint32_t>& r = p.route(f.from, f.to).stats;
    crossings.insert(crossings.end(), r.begin(), r.end());
  }
  std::sort(crossings.begin(), crossings.end());
  const bool shared = std::adjacent_find(crossings.begin(), crossings.end()) != crossings.end();
  auto flows_on = [&](uint32_t s) {
    auto [lo, hi] = std::equal_range(crossings.begin(), crossings.end(), s);
    return static_cast<double>(hi - lo);
  };
  const double bytes0 = static_cast<double>(static_cast<uint64_t>(plan.flows[0].bytes));
  const double lat0 = p.route(plan.flows[0].from, plan.flows[0].to).latency_s;
  double share0 = -1;
  for (const CollectiveFlow& f : plan.flows) {
    const PlatformRoute& r = p.route(f.from, f.to);
    const double bytes = static_cast<double>(static_cast<uint64_t>(f.bytes));
    const double lf = p.latency_factor(f.from, f.to, bytes), bf = p.bandwidth_factor(f.from, f.to, bytes);
    if (!shared) {
      out.push_back(r.latency_s * lf + bytes / (r.bottleneck_Bps * bf));
      continue;
    }
    if (bytes != bytes0 || r.latency_s != lat0 || lf != 1.0 || bf != 1.0) return {};
    double share = std::numeric_limits<double>::infinity();
    for (uint32_t s : r.stats) share = std::min(share, p.stats()[s].bandwidth_Bps / flows_on(s));
    if (share0 >= 0 && share != share0) return {};
    share0 = share;
    out.push_back(r.latency_s + bytes / share);
  }
  return out;
}

double idle_duration_s(const Platform& p, const CollectivePlan& plan) {
  if (plan.flows.empty()) return 0.0;
  std::vector<double> each = alone_durations(p, plan);
  if (each.empty())
    for (const CollectiveFlow& f : plan.flows) {
      const PlatformRoute& r = p.route(f.from, f.to);
      const double bytes = static_cast<double>(static_cast<uint64_t>(f.bytes));
      each.push_back(r.latency_s * p.latency_factor(f.from, f.to, bytes) +
                     bytes / (r.bottleneck_Bps * p.bandwidth_factor(f.from, f.to, bytes)));
    }
  return *std::max_element(each.begin(), each.end()) + plan.extra_latency_s;
}

std::vector<uint32_t> collective_links(const Platform& p, const CollectivePlan& plan) {
  std::vector<uint32_t> links;
  for (const CollectiveFlow& f : plan.flows) {
    const std::vector<uint32_t>& r = p.route(f.from, f.to).stats;
    links.insert(links.end(), r.begin(), r.end());
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

CollectiveRun collective_start(Platform& p, CollectivePlan plan, bool alone) {
  CollectiveRun run;
  run.platform_ = &p;
  run.t0_ = sg4::Engine::get_clock();
  if (alone) run.alone_s_ = alone_durations(p, plan);
  alone = !run.alone_s_.empty();
  auto& stats = p.stats();
  for (const CollectiveFlow& f : plan.flows) {
    for (uint32_t s : p.route(f.from, f.to).stats) {
      LinkStat& st = stats[s];
      if (st.active++ == 0) st.busy_since = run.t0_;
      st.bytes += f.bytes;
    }
    if (!alone) run.comms_.push_back(sg4::Comm::sendto_async(p.host(f.from), p.host(f.to), static_cast<uint64_t>(f.bytes)));
  }
  run.plan_ = std::move(plan);
  return run;
}

double CollectiveRun::wait() {
  if (!platform_) return 0.0;
  auto& stats = platform_->stats();
  // Each flow waited for in turn (wait_any over K flows costs O(K) a call:
  // an 8-rank switch all-reduce's 56 flows made it most of a run). Its links
  // stay busy until the collective ends, latency steps included: those steps
  // are the algorithm's later exchanges on the same links (a ring's 2(n-1)
  // steps, or the all-reduces of a repeated plan after the first, whose
  // bytes ride on the first's flows), so a link is as busy whether a layer's
  // all-reduces run one by one or as one repeated plan.
  std::vector<std::pair<double, size_t>> ends;
  ends.reserve(plan_.flows.size());
  for (size_t i = 0; i < comms_.size(); ++i) {
    comms_[i]->wait();
    ends.emplace_back(comms_[i]->get_finish_time(), i);
  }
  if (!alone_s_.empty()) {
    const double longest = *std::max_element(alone_s_.begin(), alone_s_.end());
    sg4::this_actor::sleep_for(longest);
    for (size_t i = 0; i < alone_s_.size(); ++i) ends.emplace_back(alone_s_[i] == longest ? sg4::Engine::get_clock() : t0_ + alone_s_[i], i);
    alone_s_.clear();
  }
  std::sort(ends.begin(), ends.end());
  for (const auto& [t1, i] : ends) {
    const CollectiveFlow& f = plan_.flows[i];
    platform_->transferred(platform_->route(f.from, f.to), f.bytes, t0_, t1);
  }
  comms_.clear();
  if (plan_.extra_latency_s > 0) sg4::this_actor::sleep_for(plan_.extra_latency_s);
  const double end = sg4::Engine::get_clock();
  for (const CollectiveFlow& f : plan_.flows)
    for (uint32_t s : platform_->route(f.from, f.to).stats) {
      LinkStat& st = stats[s];
      if (--st.active == 0) st.busy_s += end - st.busy_since;
    }
  platform_ = nullptr;
  return sg4::Engine::get_clock() - t0_;
}

CollectiveRun allreduce_start(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo) {
  return collective_start(p, allreduce_plan(p, gpus, bytes, algo));
}

double allreduce(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo) {
  return allreduce_start(p, gpus, bytes, algo).wait();
}

double allreduce_repeated(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo,
                          size_t count, bool alone) {
  return collective_start(p, allreduce_repeated_plan(p, gpus, bytes, algo, count), alone).wait();
}

}  // namespace kvtier
