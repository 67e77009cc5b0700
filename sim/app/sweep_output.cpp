#include "sim/app/sweep_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "models/param.h"
#include "sim/app/process.h"
#include "sim/core/result.h"

namespace kvtier {

namespace fs = std::filesystem;

nlohmann::json manifest_head(const std::string& sweep_file, const std::string& sweep_name, const std::string& started_utc,
                             double wall_s) {
  nlohmann::json m = build_provenance();
  m["sweep_file"] = sweep_file;
  m["sweep_name"] = sweep_name;
  m["host"] = host_name();
  m["started_utc"] = started_utc;
  m["wall_s"] = wall_s;
  return m;
}

std::string with_extension(const std::string& jsonl, const std::string& ext) {
  const std::string suffix = ".jsonl";
  if (jsonl.size() > suffix.size() && jsonl.compare(jsonl.size() - suffix.size(), suffix.size(), suffix) == 0)
    return jsonl.substr(0, jsonl.size() - suffix.size()) + ext;
  return jsonl + ext;
}

OutputPaths output_paths(const std::string& out, const std::string& sweep_name, unsigned shard, unsigned shards) {
  OutputPaths p;
  p.jsonl = out;
  if (p.jsonl.empty())
    p.jsonl = (fs::path("out") / sweep_name /
               (shards > 1 ? "sweep." + std::to_string(shard) + "-of-" + std::to_string(shards) + ".jsonl"
                           : std::string("sweep.jsonl")))
                  .string();
  p.csv = with_extension(p.jsonl, ".csv");
  p.manifest = with_extension(p.jsonl, ".manifest.json");
  return p;
}

std::set<std::string> done_keys(const std::string& out, bool cut, bool quiet) {
  std::set<std::string> keys;
  std::error_code ec;
  if (!fs::exists(out, ec)) return keys;
  std::ifstream in(out, std::ios::binary);
  if (!in) throw ConfigError(out + ": cannot open");
  std::string line;
  uint64_t whole = 0;  // bytes in complete lines
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (in.eof()) break;  // no newline after it: an unfinished last line
    whole += line.size() + 1;
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("key") || !j["key"].is_string())
      throw ConfigError(out + ":" + std::to_string(n) + ": not a sweep result line (expected a JSON object with \"key\")");
    keys.insert(j["key"].get<std::string>());
  }
  if (cut && whole < fs::file_size(out, ec) && !ec) {
    fs::resize_file(out, whole, ec);
    if (ec) throw ConfigError(out + ": cannot cut off its unfinished last line: " + ec.message());
    if (!quiet) std::cerr << "kvtier: warning: " << out << ": dropped an unfinished last line (an interrupted write)\n";
  }
  return keys;
}

LineAppender::LineAppender(const std::string& path) : path_(path) {
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) throw ConfigError(p.parent_path().string() + ": cannot create directory: " + ec.message());
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw ConfigError(path + ": cannot open for appending: " + strerror(errno));
}

LineAppender::~LineAppender() {
  if (fd_ >= 0) ::close(fd_);
}

void LineAppender::append(const std::string& line) {
  struct stat st;
  off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size())) {
    int err = n < 0 ? errno : ENOSPC;
    if (n > 0 && before >= 0 && ::ftruncate(fd_, before) != 0) {
    }
    throw WriteFailed(path_ + ": write failed: " + strerror(err));
  }
}

namespace {

// Scalars of a nested object as "a.b.c" -> value.
void flatten(const json& v, const std::string& prefix, std::map<std::string, json>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) flatten(v[i], prefix + "." + std::to_string(i), out);
  } else {
    out[prefix] = v;
  }
}

std::string csv_cell(const json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) {
    s = v.get<std::string>();
  } else {  // numbers in the shortest form that reads back exactly
    s = v.dump();
  }
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string sweep_csv(const std::string& jsonl_path) {
  struct Row {
    size_t index;
    std::string key;
    std::map<std::string, json> o, m;
  };
  std::vector<Row> rows;
  std::set<std::string> ocols, mcols;
  std::ifstream in(jsonl_path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    Row r;
    r.index = j.value("index", size_t(0));
    r.key = j.value("key", std::string());
    if (j.contains("overrides") && j["overrides"].is_object())
      for (auto it = j["overrides"].begin(); it != j["overrides"].end(); ++it) r.o[it.key()] = it.value();
    if (j.contains("result") && j["result"].is_object() && j["result"].contains("metrics"))
      flatten(j["result"]["metrics"], "", r.m);
    for (const auto& kv : r.o) ocols.insert(kv.first);
    for (const auto& kv : r.m) mcols.insert(kv.first);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.index != b.index ? a.index < b.index : a.key < b.key; });
  std::ostringstream o;
  o << "index,key";
  for (const auto& c : ocols) o << ',' << csv_cell(c);
  for (const auto& c : mcols) o << ',' << csv_cell(c);
  o << '\n';
  for (const auto& r : rows) {
    o << r.index << ',' << r.key;
    for (const auto& c : ocols) {
      auto it = r.o.find(c);
      o << ',' << (it == r.o.end() ? std::string() : csv_cell(it->second.is_structured() ? json(it->second.dump()) : it->second));
    }
    for (const auto& c : mcols) {
      auto it = r.m.find(c);
      o << ',' << (it == r.m.end() ? std::string() : csv_cell(it->second));
    }
    o << '\n';
  }
  return o.str();
}

std::string seconds_text(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %02d s", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%d h %02d min", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

}  // namespace kvtier
