// Calibrated curves in place of datasheet constants. A curve can sit inline in
// a device's or link's JSON object under "curves", or in a calibration file
// (written by cuda_validate/ or by hand from a paper's measurements) that the
// hardware description names with "calibration": the file's curves are merged
// into the objects they name, and an inline curve wins over the file's.
//
// Calibration file format (docs/hardware.md has the full list of curve names):
//   {"source": "...",
//    "devices": {"<device>": {"read_GBps": [[bytes, GB/s], ...], ...}},
//    "links":   {"<link>":   {"forward_GBps": ..., "backward_GBps": ..., "latency_us": ...}}}
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/curve.h"
#include "models/param.h"

namespace kvtier {

using CurveSet = std::map<std::string, Curve>;

// The "curves" parameter of a device kind or link, listing the curve names it
// understands; use it in params() so `kvtier list` shows them.
ParamSpec curves_param(const std::vector<std::string>& names);

// Parses obj["curves"] (an object: curve name -> curve). A name not in
// `allowed` is a ConfigError at `where`.curves.<name>; device constructors
// pass where = "" and parse_hardware prefixes the device's path. Curves whose name ends
// in _GBps, _us or _s must be positive.
CurveSet parse_curve_set(const json& obj, const std::vector<std::string>& allowed, const std::string& where);

// Reads a calibration file; a relative path not found from the current
// directory is tried against the source tree (KVTIER_SOURCE_DIR).
json load_calibration_file(const std::string& path, const std::string& where);

// Merges a calibration file's curves into the hardware JSON (in place, before
// validation). Names of devices or links absent from `hw` are errors at the
// file's JSON path, so a stale calibration file does not silently do nothing.
//
// A calibration that names the device it was measured on ("device": "NVIDIA
// H200") is checked against the hardware: when its model words appear
// nowhere in the hardware's name, description or device sources, a warning
// goes to stderr (the curves of one device applied to another).
void merge_calibration(json& hw, const json& calibration, const std::string& file_where);

// The calibration's "device" when the hardware does not mention it, else "".
std::string calibration_device_mismatch(const json& hw, const json& calibration);

}  // namespace kvtier
