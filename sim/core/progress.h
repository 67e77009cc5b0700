// Progress of a long run on the terminal: one line on stderr ("kvtier:
// decode 45% (450 of 1000 steps), 12 s left"), rewritten in place at most
// twice a second and cleared when the work ends. Shown only where the
// command line turned it on (stderr a terminal, no -q), so results, logs
// and pipes never see it, and a run's output is the same with and without.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kvtier {

class Progress {
 public:
  // Whether progress lines are shown (the command line decides, once).
  static void enable(bool on);
  static bool enabled();

  // `what` is done when `total` units (`unit`, plural) are.
  Progress(std::string what, double total, std::string unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // `done` units so far; cheap enough to call per unit of work at a
  // thousand units a second (the clock is read, the line written rarely).
  void update(double done);
  // Clears the line (the destructor does too): call it before printing
  // anything else while the Progress is still alive.
  void finish();

 private:
  void draw(double done, double elapsed_s);
  std::string what_, unit_;
  double total_;
  std::chrono::steady_clock::time_point start_, next_;
  bool drawn_ = false;
};

}  // namespace kvtier
