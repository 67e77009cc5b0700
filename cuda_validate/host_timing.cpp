// Statistics and timing shared by the host probes.
#include <algorithm>
#include <atomic>
#include <thread>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  auto rank = [&](double p) { return v[std::min(n - 1, static_cast<size_t>(p * static_cast<double>(n - 1) + 0.5))]; };
  s.p10 = rank(0.1);
  s.p90 = rank(0.9);
  return s;
}

json sample(double bytes, const std::vector<double>& times_us) {
  const Spread s = spread(times_us);
  return json{{"bytes", bytes}, {"median_us", s.median}, {"p10_us", s.p10}, {"p90_us", s.p90}, {"times_us", times_us}};
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double timed_parallel(int threads, const std::function<void(int)>& fn) {
  if (threads <= 1) {
    const double t0 = now_s();
    fn(0);
    return (now_s() - t0) * 1e6;
  }
  // Everyone starts at once; the time is from the common start to the last finish.
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> end(threads, 0.0);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(i);
      end[i] = now_s();
    });
  while (ready.load() < threads) std::this_thread::yield();
  const double t0 = now_s();
  go.store(true, std::memory_order_release);
  for (auto& t : pool) t.join();
  return (*std::max_element(end.begin(), end.end()) - t0) * 1e6;
}

std::vector<size_t> geometric(size_t lo, size_t hi, size_t factor) {
  std::vector<size_t> v;
  for (size_t s = lo; s <= hi && s > 0; s *= factor) v.push_back(s);
  return v;
}

}  // namespace kvtier::host
