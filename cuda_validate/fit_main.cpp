// kvtier_fit_calibration: measurement JSON (from kvtier_calibrate) ->
// calibration file (models/calibration.h). All the fitting is in
// models/calibration_fit.cpp; this is the command line around it. Built with
// or without CUDA. Exit codes: 0 written, 2 bad input (one line on stderr).
#include <CLI/CLI.hpp>
#include <iostream>

#include "models/calibration.h"
#include "models/calibration_fit.h"
#include "models/calibration_host.h"
#include "models/hardware.h"

using namespace kvtier;

int main(int argc, char** argv) {
  CLI::App app{"kvtier_fit_calibration: fit a calibration file (link bandwidth and latency curves, the GPU's "
               "attention_us) to a kvtier_calibrate measurement; see docs/calibration.md"};
  std::string in, out, hardware, h2d;
  FitOptions opt;
  app.add_option("measurement", in, "measurement JSON written by kvtier_calibrate")->required();
  app.add_option("--out", out, "calibration file to write (atomically)")->required();
  app.add_option("--gpu", opt.gpu, "hardware device name that gets attention_us (\"\" = none)")->capture_default_str();
  app.add_option("--link", opt.link, "hardware link name that gets the host<->device curves (\"\" = none)")
      ->capture_default_str();
  app.add_option("--host-memory", opt.host_memory, "copy probes to fit the link to")
      ->capture_default_str()->check(CLI::IsMember({"pinned", "pageable"}));
  app.add_option("--h2d", h2d, "which direction of the link is host -> GPU (default: forward, or from --hardware)")
      ->check(CLI::IsMember({"forward", "backward"}));
  app.add_option("--hardware", hardware,
                 "hardware description: take the direction from the link's ends, and check that the result merges "
                 "into it and parses");
  app.add_option("--name", opt.name, "calibration name (default: measured_<device>)");
  bool host = false;
  std::string hardware_out;
  app.add_flag("--host", host,
               "the measurement is a host one (kvtier_host_probe): fit every path piecewise-linearly, the CPU "
               "attention curve and the disk's NVMe parameters");
  app.add_option("--hardware-out", hardware_out,
                 "with --host: also write a hardware description of the measured machine that names --out as its "
                 "calibration (e.g. configs/hardware/host_<name>.json)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (!hardware_out.empty() && !host) {
    std::cerr << "kvtier_fit_calibration: error: --hardware-out needs --host\n";
    return 2;
  }
  if (host) {
    try {
      HostFitOptions ho;
      ho.measurement_file = in;
      std::vector<std::string> summary;
      const json m = read_json_file(in);
      json cal = fit_host_calibration(m, ho, &summary);
      json hw;
      if (!hardware_out.empty()) {
        hw = host_hardware(m, out, ho);
        json merged = hw;
        merged["calibration"] = "";
        merge_calibration(merged, cal, out);
        parse_hardware(merged, hardware_out);
      }
      write_json_file(out, cal);
      if (!hardware_out.empty()) write_json_file(hardware_out, hw);
      for (const auto& s : summary) std::cout << "kvtier_fit_calibration: " << s << "\n";
      std::cout << "kvtier_fit_calibration: wrote " << out << (hardware_out.empty() ? "" : " and " + hardware_out) << "\n";
    } catch (const std::exception& e) {
      std::cerr << "kvtier_fit_calibration: error: " << e.what() << "\n";
      return 2;
    }
    return 0;
  }
  try {
    opt.measurement_file = in;
    json hw;
    if (!hardware.empty()) {
      hw = load_calibration_file(hardware, hardware);  // a JSON file, found from the source tree too
      if (!opt.link.empty()) {
        const bool fwd = link_h2d_is_forward(hw, opt.link, opt.gpu.empty() ? hw.value("gpu", "gpu") : opt.gpu, hardware);
        if (!h2d.empty() && (h2d == "forward") != fwd)
          throw ConfigError("--h2d " + h2d + ": " + hardware + " says host -> GPU is " +
                            (fwd ? "forward" : "backward") + " on link '" + opt.link + "'");
        opt.h2d_is_forward = fwd;
      }
    } else if (!h2d.empty()) {
      opt.h2d_is_forward = h2d == "forward";
    }
    std::vector<std::string> summary;
    json cal = fit_calibration(read_json_file(in), opt, &summary);
    if (!hardware.empty()) {
      json merged = hw;
      merged["calibration"] = "";
      merge_calibration(merged, cal, out);
      parse_hardware(merged, hardware);
    }
    write_json_file(out, cal);
    for (const auto& s : summary) std::cout << "kvtier_fit_calibration: " << s << "\n";
    std::cout << "kvtier_fit_calibration: wrote " << out << "\n";
  } catch (const ConfigError& e) {
    std::cerr << "kvtier_fit_calibration: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvtier_fit_calibration: error: " << in << ": " << e.what() << "\n";
    return 2;
  }
  return 0;
}
