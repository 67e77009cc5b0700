// Request routing over a cluster's model instances (replicas, or a
// disaggregated cluster's prefill instances): which instance a request goes
// to when it arrives. A router sees each instance's load and, if it asks for
// it, how much of the request's prompt each instance's prefix cache holds;
// the cluster (sim/cluster/) implements the view. One file per router under
// policies/routing/, registered by name.
#pragma once

#include <cstdint>
#include <vector>

#include "models/registry.h"

namespace kvtier {

// One instance as a router sees it when a request arrives.
struct InstanceLoad {
  uint64_t outstanding_tokens = 0;  // prompt and output tokens of its unfinished requests
  uint64_t requests = 0;            // its unfinished requests
  // The arriving prompt's tokens its prefix cache holds; with a KV pool,
  // those held on its own node (reads_prefix() only).
  uint32_t cached_tokens = 0;
  // What the arriving request would wait for there (reads_estimates() only):
  // the prefills queued ahead of it, and its own prefill with its cached
  // prefix loaded layer by layer beside the computation, in seconds as the
  // instance's kernel and the routes from where each cached block lies
  // would take them alone.
  double queue_s = 0, service_s = 0;
};

struct RoutedRequest {
  uint32_t id = 0;
  uint32_t input_tokens = 0, output_tokens = 0;
};

class RouterPolicy {
 public:
  virtual ~RouterPolicy() = default;
  // The instance (an index into `loads`, never empty) `r` goes to.
  virtual uint32_t route(const RoutedRequest& r, const std::vector<InstanceLoad>& loads) = 0;
  // True: the cluster fills InstanceLoad::cached_tokens (a prefix lookup per
  // instance per request, so only routers that read it ask).
  virtual bool reads_prefix() const { return false; }
  // True: the cluster fills InstanceLoad::queue_s and service_s (an
  // estimate per instance per request, so only routers that read it ask).
  virtual bool reads_estimates() const { return false; }
};
KVTIER_REGISTRY_FAMILY(RouterPolicy, "router")

}  // namespace kvtier
