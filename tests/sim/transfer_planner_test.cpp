// The transfer planner on its own: a layer's batches built directly, without
// an engine around them (the platform needs SimGrid, so each case runs in a
// child process; nothing is simulated).
#include <catch2/catch.hpp>

#include "kv_rig.h"
#include "sim/core/timeline.h"
#include "sim/platform/transfer_planner.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// Tiers GPU, DRAM and SSD (endpoints 0, 1, 2; the GPU is endpoint 3 too).
// `body` gets the planner and returns what the case reports.
json with_planner(const std::function<json(TransferPlanner&)>& body) {
  return in_child([&] {
    EngineSetup s;
    one_sequence(s, gpu_dram_ssd(1, 1), 2, 1024);
    EngineCounters c;
    // The store fills in the tiers and their codecs the planner reads; its
    // own moves are not used here.
    class NoSink final : public MoveSink {
     public:
      NoSink() : MoveSink(none_done_) {}
      JobId add(size_t, size_t, uint32_t, double, JobId) override { return kNoJob; }
      JobId add_prefetch(size_t, uint32_t, double, JobId) override { return kNoJob; }
      JobId add_run(size_t, size_t, uint32_t, double, uint32_t, const JobId*, size_t) override { return kNoJob; }

     private:
      std::vector<uint8_t> none_done_{1};
    } none;
    std::unique_ptr<KvStore> kv = start_store(s, c, none, json::object());
    start_simgrid();
    Platform platform(s.hw, *s.topo);
    JobBoard board;
    Timeline timeline;
    TransferPlanner tp(s, c, platform, board, timeline);
    return body(tp);
  });
}

}  // namespace

TEST_CASE("transfer planner: two open batches that would wait for each other are an internal error") {
  json m = with_planner([](TransferPlanner& tp) {
    json out;
    // Layer 1: a block written from DRAM to the SSD, and another read up from
    // the SSD into DRAM once that write is done.
    const JobId down = tp.add(1, 2, 1, kBlock, kNoJob);
    const JobId up = tp.add(2, 1, 1, kBlock, down);
    // Waits that close no cycle are taken: a job outside the batches, and
    // the write waiting for a batch that does not wait for it.
    const JobId into_gpu = tp.add(1, 3, 1, kBlock, kNoJob);
    tp.depend(1, 2, into_gpu);
    out["unrelated"] = "ok";
    // The write waiting for the read: as a block's move (add) and as a whole
    // batch's (depend).
    try {
      tp.add(1, 2, 1, kBlock, up);
      out["add"] = "no error";
    } catch (const std::logic_error& e) {
      out["add"] = e.what();
    }
    try {
      tp.depend(1, 2, up);
      out["depend"] = "no error";
    } catch (const std::logic_error& e) {
      out["depend"] = e.what();
    }
    // Predicted blocks read up from DRAM while the read from the SSD waits for them.
    const JobId predicted = tp.add_prefetch(1, 1, kBlock, kNoJob);
    tp.add(2, 1, 1, kBlock, predicted);
    try {
      tp.depend_prefetch(1, up);
      out["prefetch"] = "no error";
    } catch (const std::logic_error& e) {
      out["prefetch"] = e.what();
    }
    return out;
  });
  INFO(m.dump());
  CHECK(m.value("unrelated", "") == "ok");
  for (const char* k : {"add", "depend"}) {
    const std::string what = m.value(k, "");
    CHECK_THAT(what, Catch::Contains("dram->ssd (endpoints 1->2) of layer 1"));
    CHECK_THAT(what, Catch::Contains("ssd->dram (endpoints 2->1) of layer 1"));
    CHECK_THAT(what, Catch::Contains("cycle"));
  }
  const std::string what = m.value("prefetch", "");
  CHECK_THAT(what, Catch::Contains("dram->gpu (endpoints 1->0, predicted blocks) of layer 1"));
  CHECK_THAT(what, Catch::Contains("ssd->dram (endpoints 2->1) of layer 1"));
}
