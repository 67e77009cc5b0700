// GPU time for one decode or prefill layer, the roofline way: the weight
// GEMMs cost the larger of their FLOPs over tensor throughput and their
// weight bytes over memory bandwidth (decode at small batch reads every weight
// once per step and is memory-bound; prefill is compute-bound), and attention
// is memory-bound over the KV it reads (DeviceModel::attention_s).
#pragma once

#include "models/device.h"
#include "models/llm.h"

namespace kvtier {

// Weight GEMMs of one layer for `tokens` tokens in flight (the batch in
// decode, batch x prompt length in prefill).
double layer_weights_s(const DeviceModel& gpu, const LlmSpec& m, double tokens);
// One decode layer: weights for `batch` sequences plus attention over
// `kv_bytes` of KV (summed over the batch).
double decode_layer_s(const DeviceModel& gpu, const LlmSpec& m, int batch, double kv_bytes);
// One prefill layer over `prompt_tokens` per sequence: weight GEMMs plus the
// quadratic attention score FLOPs (4 x tokens^2 x model_dim per sequence,
// causal halves it).
double prefill_layer_s(const DeviceModel& gpu, const LlmSpec& m, int batch, double prompt_tokens);

}  // namespace kvtier
