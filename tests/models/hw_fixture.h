// Small helpers for model tests: build a device or a hardware description
// from inline JSON, the way parse_hardware would.
#pragma once

#include <memory>
#include <string>

#include "models/device.h"
#include "models/hardware.h"

namespace kvtier::test {

// A device of `kind` from its parameters, validated as parse_hardware does.
inline std::unique_ptr<DeviceModel> make_device(const std::string& kind, json params) {
  json hw = {{"devices", {{"d", params}}}, {"links", json::object()}, {"tiers", json::array()}};
  hw["devices"]["d"]["kind"] = kind;
  const auto& e = Registry<DeviceModel>::instance().find(kind, "test");
  json& dev = hw["devices"]["d"];
  resolve_params(dev, e.params, "hardware.devices.d", {"kind"});
  return e.make(dev);
}

// Parses and returns the error message, or "" if it parsed.
inline std::string hardware_error(json hw) {
  try {
    parse_hardware(hw, "hardware");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// GPU + root + one device of `kind` on a link given by `link` (ends filled in).
inline json one_tier_hw(const std::string& kind, json params, json link) {
  params["kind"] = kind;
  link["ends"] = {"root", "dev"};
  return json{{"devices",
               {{"gpu", {{"kind", "gpu"}, {"capacity_GB", 24}, {"memory_GBps", 1000}, {"fp16_TFLOPS", 100}}},
                {"root", {{"kind", "switch"}}},
                {"dev", params}}},
              {"links",
               {{"pcie_gpu", {{"ends", {"root", "gpu"}}, {"pcie", "gen4x16"}}}, {"up", link}}},
              {"tiers", {"gpu", "dev"}}};
}

}  // namespace kvtier::test
