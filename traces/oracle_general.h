// libCacheSim's oracleGeneral binary trace: one 24-byte little-endian record
// per reference, {uint32 timestamp (s), uint64 object id, uint32 object size,
// int64 virtual time (reference index) of the next reference to the same
// object, -1 if none}. Exporting a block stream in it lets libCacheSim, or
// any tool that reads it, replay exactly the block references kvtier replays.
#pragma once

#include <string>

#include "traces/request_trace.h"

namespace kvtier {

constexpr size_t kOracleGeneralRecordBytes = 24;

struct OracleGeneralOptions {
  uint32_t object_size = 1;  // bytes per block in the records (1: count blocks)
  uint32_t repeat = 1;       // the stream played this many times back to back, same ids
  bool dense_ids = false;    // true: object ids are the dense indices 0..n-1, false: the trace's own ids
};

// Writes `s` to `path` atomically (a temporary file renamed into place, so
// nothing is left on failure). Timestamps are each request's arrival in whole
// seconds; repetition r is shifted by r x (last arrival + 1 s). Returns the
// number of records written. Throws ConfigError when the file cannot be
// written.
uint64_t write_oracle_general(const std::string& path, const BlockStream& s, const OracleGeneralOptions& opt);

}  // namespace kvtier
