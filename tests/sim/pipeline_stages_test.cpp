// Pipeline stages (sim/platform/pipeline_stages.h): vLLM's split of layers
// over stages; a hand-over between stages on an idle HGX node takes its route's
// latency + bytes / bottleneck; micro-batches of equal stage times overlap
// into a filled pipeline, each stage busy but for its hand-overs.
#include <catch2/catch.hpp>

#include <fstream>

#include "sim/platform/pipeline_stages.h"
#include "sim/platform/platform.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("stages split layers as vLLM does: the remainder just before the last stage", "[pipeline]") {
  REQUIRE(stage_layers(32, 4) == std::vector<uint32_t>{8, 8, 8, 8});
  REQUIRE(stage_layers(7, 3) == std::vector<uint32_t>{2, 3, 2});
  REQUIRE(stage_layers(32, 3) == std::vector<uint32_t>{11, 11, 10});
  REQUIRE(stage_layers(43, 10) == std::vector<uint32_t>{4, 4, 4, 4, 4, 4, 5, 5, 5, 4});
  REQUIRE(stage_layers(80, 1) == std::vector<uint32_t>{80});
}

namespace {

// `batches` micro-batches, each from its own actor, through `stages` stages
// of one GPU each (gpu0, gpu1, ...) computing `compute_s` per stage and
// handing `tokens` tokens of `bytes_per_token` on: when the last ends, the
// stages' busy time, the bubble and one hand-over's route.
json run_pipeline(int stages, int batches, int rounds, double compute_s, double tokens, double bytes_per_token,
                  double buffer_bytes = 0) {
  return in_child([&] {
    std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/hardware/hgx_h100x8.json");
    json hwc = json::parse(f);
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    Timeline tl;
    std::vector<PipelineStages::Stage> plan;
    for (int s = 0; s < stages; ++s)
      plan.push_back({{static_cast<size_t>(h.device_index("gpu" + std::to_string(s)))}, {"gpu" + std::to_string(s)}, 1});
    PipelineStages ps(p, tl, plan, bytes_per_token, buffer_bytes);
    for (int b = 0; b < batches; ++b)
      sg4::Actor::create("batch", p.controller(), [&] {
        for (int r = 0; r < rounds; ++r) {
          ps.begin_batch();
          ps.enter(0);
          for (int s = 0; s < stages; ++s) {
            ps.gpu(static_cast<size_t>(s)).run(compute_s);
            if (s + 1 < stages && ps.buffered(tokens)) {
              // Into the next stage's buffer, then wait for that stage holding nothing.
              ps.send_buffered(static_cast<size_t>(s), tokens);
              ps.leave(static_cast<size_t>(s));
              ps.enter(static_cast<size_t>(s + 1));
              ps.taken(static_cast<size_t>(s));
              continue;
            }
            if (s + 1 < stages) {
              ps.enter(static_cast<size_t>(s + 1));
              ps.send(static_cast<size_t>(s), tokens);
            }
            ps.leave(static_cast<size_t>(s));
          }
          ps.end_batch();
        }
      });
    sg4::Engine::get_instance()->run();
    const double end = sg4::Engine::get_clock();
    const PlatformRoute& r = p.route(plan[0].gpus[0], plan[1].gpus[0]);
    return json{{"end_s", end},
                {"busy0_s", ps.busy_s(0)},
                {"bubble", ps.bubble_fraction(end)},
                {"latency_s", r.latency_s},
                {"bw", r.bottleneck_Bps},
                {"activation_bytes", ps.activation_bytes()}};
  });
}

}  // namespace

TEST_CASE("one micro-batch takes every stage's compute and each hand-over's latency + bytes / bandwidth", "[pipeline]") {
  const double t = 1e-3, tokens = 4096, per_token = 16384;
  for (int P : {2, 4}) {
    CAPTURE(P);
    json m = run_pipeline(P, 1, 3, t, tokens, per_token);
    REQUIRE(m.contains("end_s"));
    const double a = m["latency_s"].get<double>() + tokens * per_token / m["bw"].get<double>();
    REQUIRE(m["latency_s"].get<double>() == Approx(1e-6));  // GPU -> NVSwitch -> GPU
    REQUIRE(m["bw"].get<double>() == Approx(450e9));
    REQUIRE(m["end_s"].get<double>() == Approx(3 * (P * t + (P - 1) * a)).epsilon(1e-12));
    REQUIRE(m["activation_bytes"].get<double>() == 3 * (P - 1) * tokens * per_token);
    // A lone micro-batch leaves each stage idle but for its own compute.
    REQUIRE(m["bubble"].get<double>() == Approx(1 - t / (P * t + (P - 1) * a)).epsilon(1e-12));
  }
}

TEST_CASE("micro-batches of equal stages keep every stage busy but for the hand-overs", "[pipeline]") {
  // A hand-over holds both stages (a rendezvous), so a stage is busy t with
  // a micro-batch's kernels, a receiving it and a sending it on. Two stages:
  // stage 0 takes micro-batch after micro-batch for t + a each, and the last
  // one's t on stage 1 ends the run.
  const double t = 1e-3, tokens = 64, per_token = 16384;
  const int R = 50;
  json two = run_pipeline(2, 2, R, t, tokens, per_token);
  REQUIRE(two.contains("end_s"));
  const double a = two["latency_s"].get<double>() + tokens * per_token / two["bw"].get<double>();
  REQUIRE(two["end_s"].get<double>() == Approx(2 * R * (t + a) + t).epsilon(1e-9));
  REQUIRE(two["busy0_s"].get<double>() == Approx(2 * R * t).epsilon(1e-12));
  // Four stages: the middle ones, t + 2a a micro-batch, set the pace; the
  // pipeline's fill and drain add at most one round.
  const int P = 4;
  json four = run_pipeline(P, P, R, t, tokens, per_token);
  REQUIRE(four.contains("end_s"));
  const double end = four["end_s"].get<double>();
  REQUIRE(end >= P * R * (t + 2 * a));
  REQUIRE(end <= (P * R + P) * (t + 2 * a));
  // The throughput: P R micro-batches in that time, within 3% of one per t
  // (the slowest stage's kernels' rate): R / (R + 1) x t / (t + 2a) by the
  // bound above, 2a being 0.7% of t here.
  REQUIRE(P * R * t / end > 0.97);
}

TEST_CASE("hand-overs that fit NCCL's buffer free the sending stage without waiting for the next", "[pipeline]") {
  // Four stages, a hand-over a of 4 MiB (the buffer's size) against t of
  // compute. As a rendezvous a middle stage is busy t + 2a a micro-batch (it
  // receives and sends); buffered it is busy t + a (the send into the next
  // stage's buffer holds it, the receive does not), so the pipeline runs at
  // t + a a micro-batch, its fill and drain adding at most one round.
  const double t = 20e-6, tokens = 256, per_token = 16384, buffer = 4 * 1048576.0;
  const int P = 4, R = 50;
  json rendezvous = run_pipeline(P, P, R, t, tokens, per_token);
  json buffered = run_pipeline(P, P, R, t, tokens, per_token, buffer);
  REQUIRE(buffered.contains("end_s"));
  const double a = buffered["latency_s"].get<double>() + tokens * per_token / buffered["bw"].get<double>();
  const double end = buffered["end_s"].get<double>();
  REQUIRE(end >= P * R * (t + a) * (1 - 1e-12));
  REQUIRE(end <= (P * R + P) * (t + a));
  REQUIRE(rendezvous["end_s"].get<double>() >= P * R * (t + 2 * a) * (1 - 1e-12));
  REQUIRE(buffered["activation_bytes"].get<double>() == rendezvous["activation_bytes"].get<double>());
  // One byte over the buffer: every hand-over a rendezvous again.
  json over = run_pipeline(P, P, R, t, tokens, per_token, buffer - 1);
  REQUIRE(over["end_s"].get<double>() == rendezvous["end_s"].get<double>());
  // One micro-batch alone: the same times either way (nothing to overlap).
  REQUIRE(run_pipeline(P, 1, 3, t, tokens, per_token, buffer)["end_s"].get<double>() ==
          Approx(run_pipeline(P, 1, 3, t, tokens, per_token)["end_s"].get<double>()).epsilon(1e-12));
}
