// HillInfer's APP, adaptive prefetch pipeline (arXiv 2602.18750; seed 000).
// Selection: the same history top-k as "topk" (budget, sinks, window).
// Scoring split: the keys of the cold blocks are scored partly on the host
// CPU (M_c bytes) and partly on the SmartSSD's FPGA (M_s = M - M_c), so that
// both finish together:
//   T_cpu = M_c/f_c + alpha*M_c/B_c  ~=  M_s/f_s + alpha*M_s/B_s = T_fpga,
//   subject to M_c <= M_0 (host memory budget for keys),
// with f_c, f_s the scoring throughputs, B_c, B_s the bandwidths of the paths
// the kept fraction alpha travels (PCIe to the host; the SmartSSD's link).
// Writing a_c = 1/f_c + alpha/B_c and a_s = 1/f_s + alpha/B_s, the closed
// form is beta = M_c/M = a_s / (a_c + a_s), then M_c = min(beta*M, M_0).
// Modes: closed_form (that), fixed (beta from config, still capped by M_0),
// rebalance (start from the closed form, then after each step move beta a
// `gain` fraction towards the value that would have equalised the measured
// per-byte costs t_cpu/M_c and t_fpga/M_s that the engine reports).
//
// Units: the formula is in bytes of keys as scored (INT8/INT4 in HillInfer);
// alpha*M is the kept share on the same byte basis. If the engine transfers
// FP16 K+V for the kept tokens, fold the byte ratio into alpha.
#include <algorithm>

#include "policies/evaluation/topk.h"
#include "policies/policy.h"

namespace kvtier {

class AppSplit : public ScoringSplit {
 public:
  enum class Mode { ClosedForm, Fixed, Rebalance };
  // `bits`: the precision keys are scored in. plan() takes the keys' FP16
  // bytes (what the engine stores); scoring reads bits/16 of them, and the
  // kept alpha fraction travels on as FP16 K and V, 32/bits times the bytes
  // scored. bits = 16 is the plain formula of the paper.
  AppSplit(Mode mode, double beta, double alpha, double f_c, double f_s, double b_c, double b_s, double m0, double gain,
           double bits = 16)
      : mode_(mode), alpha_(alpha), f_c_(f_c), f_s_(f_s), b_c_(b_c), b_s_(b_s), m0_(m0), gain_(gain), scale_(bits / 16.0) {
    const double kv_per_scored = bits < 16 ? 32.0 / bits : 1.0;
    a_c_ = 1.0 / f_c_ + alpha_ * kv_per_scored / b_c_;
    a_s_ = 1.0 / f_s_ + alpha_ * kv_per_scored / b_s_;
    beta_ = mode_ == Mode::Fixed ? beta : a_s_ / (a_c_ + a_s_);
  }
  ScoringPlan plan(double fp16_key_bytes) override {
    const double bytes = fp16_key_bytes * scale_;
    ScoringPlan p;
    double mc = beta_ * bytes;
    if (m0_ > 0 && mc > m0_) mc = m0_;
    p.bytes_cpu = mc;
    p.bytes_fpga = bytes - mc;
    p.t_cpu = p.bytes_cpu * a_c_;
    p.t_fpga = p.bytes_fpga * a_s_;
    p.beta = bytes > 0 ? mc / bytes : beta_;
    last_ = p;
    return p;
  }
  void report(double t_cpu, double t_fpga) override {
    if (mode_ != Mode::Rebalance) return;
    double ac = last_.bytes_cpu > 0 && t_cpu > 0 ? t_cpu / last_.bytes_cpu : a_c_;
    double as = last_.bytes_fpga > 0 && t_fpga > 0 ? t_fpga / last_.bytes_fpga : a_s_;
    double target = as / (ac + as);
    beta_ = std::min(1.0, std::max(0.0, beta_ + gain_ * (target - beta_)));
  }
  double beta() const override { return beta_; }

 private:
  Mode mode_;
  double alpha_, f_c_, f_s_, b_c_, b_s_, m0_, gain_;
  double scale_ = 1.0;
  double a_c_ = 0, a_s_ = 0, beta_ = 0.5;
  ScoringPlan last_;
};

class AppEvaluation : public TopkEvaluation {
 public:
  static ParamList params() {
    ParamList p = TopkEvaluation::params();
    p.push_back(str("split", "closed_form",
                    "how beta = M_c/M is chosen: closed_form (equal modelled times), fixed (the beta parameter), "
                    "rebalance (closed form, then adjusted each step from measured times)",
                    {"closed_form", "fixed", "rebalance"}));
    p.push_back(num("beta", 0.5, "split fixed: fraction of the key bytes scored on the CPU", 0.0, 1.0));
    p.push_back(num("alpha", 0.2, "fraction of scored tokens kept and sent on (APP's alpha; seed: usually 20%)", 0.0, 1.0));
    p.push_back(positive("cpu_score_GBps", 20.0, "f_c: CPU scoring throughput over key bytes, GB/s (profile offline)"));
    p.push_back(positive("fpga_score_GBps", 2.0,
                         "f_s: SmartSSD FPGA scoring throughput over key bytes, GB/s (bounded by its 2.36 GB/s "
                         "internal SSD read)"));
    p.push_back(positive("cpu_path_GBps", 25.0, "B_c: effective bandwidth of the host path (PCIe Gen4 x16), GB/s"));
    p.push_back(positive("fpga_path_GBps", 3.5, "B_s: effective bandwidth of the SmartSSD's link (PCIe Gen3 x4), GB/s"));
    p.push_back(num("host_budget_GB", 0.0, "M_0: most key bytes scored on the host per step, GB; 0 = no limit", 0.0));
    p.push_back(integer("score_bits", 8, "precision keys are scored in (HillInfer: INT8/INT4); 16 = FP16", 4, 16));
    p.push_back(num("gain", 0.5, "split rebalance: fraction of the way beta moves towards the measured optimum per step", 0.0, 1.0));
    return p;
  }
  explicit AppEvaluation(const json& p)
      : TopkEvaluation(p),
        split_(mode(p.at("split").get<std::string>()), get_num(p, "beta"), get_num(p, "alpha"),
               get_num(p, "cpu_score_GBps") * 1e9, get_num(p, "fpga_score_GBps") * 1e9, get_num(p, "cpu_path_GBps") * 1e9,
               get_num(p, "fpga_path_GBps") * 1e9, get_num(p, "host_budget_GB") * 1e9, get_num(p, "gain"),
               double(get_int(p, "score_bits"))) {}
  ScoringSplit* scoring() override { return &split_; }

 private:
  static AppSplit::Mode mode(const std::string& s) {
    if (s == "fixed") return AppSplit::Mode::Fixed;
    if (s == "rebalance") return AppSplit::Mode::Rebalance;
    return AppSplit::Mode::ClosedForm;
  }
  AppSplit split_;
};
KVTIER_REGISTER(EvaluationPolicy, AppEvaluation, "app",
                "HillInfer APP: history top-k, with key scoring split between CPU and SmartSSD FPGA (beta)");

}  // namespace kvtier
