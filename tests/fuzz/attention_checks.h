// The checks both attention-trace targets apply to whatever a reader accepts.
#pragma once

#include <cmath>

#include "tests/fuzz/fuzz_input.h"
#include "traces/attention_trace.h"

namespace kvtier_fuzz {

// Bounds the loops over the header's shape (a header can promise 2^31 layers).
constexpr uint32_t kProbe = 64;

// Reads every record, checking it against the header, as the engine would use it.
inline void read_all(kvtier::AttentionFileSource& src) {
  using namespace kvtier;
  const AttentionHeader& h = src.header();
  for (uint32_t l = 0; l < h.layers && l < kProbe; ++l)
    for (uint32_t s = 0; s < h.sequences && s < kProbe; ++s)
      if (const std::vector<float>* p = src.prompt(s, l))
        for (float m : *p)
          if (!std::isfinite(m) || m < 0) finding("a prompt mass that is not finite and >= 0");
  AttentionRecord rec;
  uint64_t n = 0;
  while (src.next(rec)) {
    ++n;
    if (rec.step >= h.steps || rec.layer >= h.layers) finding("a record outside the header's shape");
    if (rec.blocks.size() != rec.mass.size()) finding("blocks and masses of different lengths");
    const uint32_t exist = h.blocks_at(rec.step);
    for (size_t i = 0; i < rec.blocks.size(); ++i) {
      if (rec.blocks[i] >= exist) finding("a block that does not exist at its step");
      if (!std::isfinite(rec.mass[i]) || rec.mass[i] < 0) finding("a mass that is not finite and >= 0");
    }
    if (src.head_groups() > 1 && src.group_mass().size() != size_t(src.head_groups()) * rec.blocks.size())
      finding("head-group masses of the wrong length");
  }
  if (n != src.record_count()) finding("the reader ended before the records the header promises");
}

}  // namespace kvtier_fuzz
