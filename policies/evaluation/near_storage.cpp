// Near-storage exact attention (InstInfer, HPCA 2025; the design HillInfer,
// arXiv 2602.18750, argues against: "compute-intensive exact attention on a
// single, weak" computational storage drive). Attention is exact: every block
// is used. The blocks on the SmartSSD never cross PCIe: its FPGA reads their
// K and V (from NAND, or with kv_copy "fpga_dram" from its DDR4 as far as
// they fit), computes their part of attention with the full-attention kernel
// (models/fpga_ku15p.h: 89% LUT / 78% DSP at 200 MHz) and returns the
// partial output; the GPU attends the rest and merges the two. The engine
// simulates the drive's side (sim/layer_pipeline.cpp); this policy only says
// that it happens and where the drive's KV is read from.
#include "policies/policy.h"

namespace kvtier {

class NearStorageSplit : public ScoringSplit {
 public:
  explicit NearStorageSplit(bool kv_in_fpga_memory) : kv_in_fpga_memory_(kv_in_fpga_memory) {}
  void configure(const ScoringRates&) override {}
  ScoringPlan plan(double, double) override { return {}; }
  void report(double, double) override {}
  double beta() const override { return 0.0; }
  int bits() const override { return 16; }  // the FP16 KV itself
  bool scores_at(uint32_t) const override { return true; }
  bool key_copy_in_fpga_memory() const override { return kv_in_fpga_memory_; }
  bool attends_in_storage() const override { return true; }

 private:
  bool kv_in_fpga_memory_;
};

class NearStorageAttention : public EvaluationPolicy {
 public:
  static ParamList params() {
    return {str("kv_copy", "nand",
                "where the FPGA reads the SmartSSD's FP16 K and V: nand (off the drive's NAND at every step) or "
                "fpga_dram (a copy in the FPGA's DDR4 as far as it fits, kept current with the drive's writes; the "
                "rest from NAND)",
                {"nand", "fpga_dram"})};
  }
  explicit NearStorageAttention(const json& p) : split_(p.at("kv_copy").get<std::string>() == "fpga_dram") {}
  void select(const SelectInput& in, const BlockTable&, std::vector<uint32_t>& out) override {
    for (uint32_t i = 0; i < in.n_blocks; ++i) out.push_back(i);
  }
  ScoringSplit* scoring() override { return &split_; }
  bool reads_attention() const override { return false; }

 private:
  NearStorageSplit split_;
};
KVTIER_REGISTER(EvaluationPolicy, NearStorageAttention, "near_storage",
                "near-storage exact attention (InstInfer): the SmartSSD's FPGA attends the drive's blocks in place, "
                "only partial outputs cross PCIe");

}  // namespace kvtier
