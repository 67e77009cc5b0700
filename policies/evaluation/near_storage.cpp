// Near-storage exact attention (InstInfer, HPCA 2025; the design HillInfer,
// arXiv 2602.18750, argues against: "compute-intensive exact attention on a
// single, weak" computational storage drive). Attention is exact: every block
// is used. The blocks on the SmartSSD never cross PCIe: its FPGA reads their
// K and V (from NAND, or with kv_copy "fpga_dram" from its DDR4 as far as
// they fit), computes their part of attention with the full-attention kernel
// (models/fpga_ku15p.h: 89% LUT / 78% DSP at 200 MHz) and returns the
// partial output; the GPU attends the rest and merges the two. The engine
// simulates the drive's side (sim/engine/layer_pipeline.cpp); this policy says
// that it happens, which kernel the system loads into the FPGA (a bitstream
// is the system's choice, not the hardware's: the same SmartSSD runs
// HillInfer's scoring kernel or this one) and where the drive's KV is read
// from. The kernel is checked to fit the KU15P with the utilisation model
// anchored on HillInfer's full-attention design (89% LUT / 78% DSP at 200
// MHz, read as 128 INT8 lanes, i.e. 64 FP16 lanes); it reads the KV as
// stored (FP16), one multiply-accumulate per element of K and of V.
#include "models/fpga_ku15p.h"
#include "policies/policy.h"

namespace kvtier {

class NearStorageSplit : public ScoringSplit {
 public:
  NearStorageSplit(bool kv_in_fpga_memory, double attention_Bps)
      : kv_in_fpga_memory_(kv_in_fpga_memory), attention_Bps_(attention_Bps) {}
  void configure(const ScoringRates&) override {}
  ScoringPlan plan(double, double) override { return {}; }
  void report(double, double) override {}
  double beta() const override { return 0.0; }
  int bits() const override { return 16; }  // the FP16 KV itself
  bool scores_at(uint32_t) const override { return true; }
  bool key_copy_in_fpga_memory() const override { return kv_in_fpga_memory_; }
  bool attends_in_storage() const override { return true; }
  double attention_Bps() const override { return attention_Bps_; }

 private:
  bool kv_in_fpga_memory_;
  double attention_Bps_;
};

class NearStorageAttention : public EvaluationPolicy {
 public:
  static ParamList params() {
    return {str("kv_copy", "nand",
                "where the FPGA reads the SmartSSD's FP16 K and V: nand (off the drive's NAND at every step) or "
                "fpga_dram (a copy in the FPGA's DDR4 as far as it fits, kept current with the drive's writes; the "
                "rest from NAND)",
                {"nand", "fpga_dram"}),
            integer("lanes", 64, "FP16 multiply-accumulates per cycle of the FPGA's attention kernel", 1, 65536),
            positive("clock_MHz", 200.0,
                     "its clock (HillInfer's full-attention design closed timing at 200 MHz; not above)")};
  }
  explicit NearStorageAttention(const json& p)
      : split_(p.at("kv_copy").get<std::string>() == "fpga_dram", rate(p)) {}
  void select(const SelectInput& in, const BlockTable&, std::vector<uint32_t>& out) override {
    for (uint32_t i = 0; i < in.n_blocks; ++i) out.push_back(i);
  }
  ScoringSplit* scoring() override { return &split_; }
  bool reads_attention() const override { return false; }

 private:
  static double rate(const json& p) {
    ScoringKernel k{ScoringKernelKind::FullAttention, static_cast<int>(get_int(p, "lanes")), 16,
                    get_num(p, "clock_MHz")};
    check_kernel_fits(k, 1.0, "policies.evaluation");
    return fpga_scoring_Bps(k, k.clock_MHz);
  }
  NearStorageSplit split_;
};
KVTIER_REGISTER(EvaluationPolicy, NearStorageAttention, "near_storage",
                "near-storage exact attention (InstInfer): the SmartSSD's FPGA attends the drive's blocks in place, "
                "only partial outputs cross PCIe");

}  // namespace kvtier
