// A registry per component family (device kinds, each policy family), after
// Ramulator 2.0 and Vidur: an implementation registers itself by name with one
// macro line in its own .cpp, configs pick implementations by name, and
// `kvtier list` walks the registries. No switch over names anywhere.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

template <class Base>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string doc;
    ParamList params;
    std::function<std::unique_ptr<Base>(const json& resolved_params)> make;
  };

  static Registry& instance() {
    static Registry r;
    return r;
  }

  // A second implementation under a taken name is kept out and recorded:
  // `kvtier` refuses to start while duplicates() is not empty, rather than
  // letting static initialisation order pick one.
  bool add(Entry e) {
    std::string n = e.name;
    if (entries_.count(n)) {
      duplicates_.push_back(n);
      return false;
    }
    entries_[n] = std::move(e);
    return true;
  }
  const std::vector<std::string>& duplicates() const { return duplicates_; }

  // Throws ConfigError naming `where`, the nearest known name and all of them.
  const Entry& find(const std::string& name, const std::string& where) const {
    auto it = entries_.find(name);
    if (it != entries_.end()) return it->second;
    std::vector<std::string> names;
    for (const auto& kv : entries_) names.push_back(kv.first);
    const std::string hint = nearest(name, names);
    std::string msg = where + ": unknown " + family() + " '" + name + "'" +
                      (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; known:";
    for (const auto& n : names) msg += " " + n;
    throw ConfigError(msg);
  }

  // A key of `cfg` that `e` does not take but other implementations do:
  // the mistake is the implementation chosen, not the key's spelling.
  void check_foreign_params(const json& cfg, const Entry& e, const std::string& where) const {
    for (auto k = cfg.begin(); k != cfg.end(); ++k) {
      if (k.key() == "name" || is_annotation_key(k.key()) || takes(e, k.key())) continue;
      std::string owners;
      for (const auto& kv : entries_)
        if (takes(kv.second, k.key())) owners += (owners.empty() ? "'" : ", '") + kv.first + "'";
      if (owners.empty()) continue;  // unknown everywhere: resolve_params suggests a spelling
      throw ConfigError(where + "." + k.key() + ": " + family() + " '" + e.name + "' takes no " + k.key() +
                        "; it is a parameter of " + owners + " (set " + where + ".name to one of them, or remove it)");
    }
  }

  bool has(const std::string& name) const { return entries_.count(name) != 0; }

  // Validates `cfg` ({"name": ..., params...}) at `where`, fills defaults in
  // place and builds the implementation.
  std::unique_ptr<Base> create(json& cfg, const std::string& where) const {
    if (cfg.is_string()) cfg = json{{"name", cfg.get<std::string>()}};
    if (!cfg.is_object() || !cfg.contains("name") || !cfg["name"].is_string())
      throw ConfigError(where + ": expected {\"name\": \"<" + family() + ">\", ...parameters}");
    const Entry& e = find(cfg["name"].get<std::string>(), where + ".name");
    check_foreign_params(cfg, e, where);
    resolve_params(cfg, e.params, where, {"name"});
    return e.make(cfg);
  }

  const std::map<std::string, Entry>& entries() const { return entries_; }

  // Human name of the family for messages ("eviction policy"); set by
  // KVTIER_REGISTRY_FAMILY in the interface's header.
  static std::string family();

 private:
  static bool takes(const Entry& e, const std::string& key) {
    for (const ParamSpec& p : e.params)
      if (p.name == key) return true;
    return false;
  }

  std::map<std::string, Entry> entries_;
  std::vector<std::string> duplicates_;
};

// "two eviction policies are registered as 'lru'" for every duplicate name
// in the registries of Bases (empty when there is none).
template <class... Bases>
std::string registry_duplicates() {
  std::string msg;
  auto one = [&msg](const std::string& family, const std::vector<std::string>& names) {
    for (const auto& n : names) msg += (msg.empty() ? "" : "; ") + ("two " + family + " implementations are registered as '" + n + "'");
  };
  (one(Registry<Bases>::family(), Registry<Bases>::instance().duplicates()), ...);
  return msg;
}

#define KVTIER_REGISTRY_FAMILY(Base, text) \
  template <>                              \
  inline std::string Registry<Base>::family() { return text; }

#define KVTIER_CONCAT2(a, b) a##b
#define KVTIER_CONCAT(a, b) KVTIER_CONCAT2(a, b)

// KVTIER_REGISTER(EvictionPolicy, LruEviction, "lru", "least recently used");
// Class must have `static ParamList params()` and a constructor from const json&.
#define KVTIER_REGISTER(Base, Class, NAME, DOC)                                                 \
  static const bool KVTIER_CONCAT(kvtier_registered_, __COUNTER__) =                               \
      ::kvtier::Registry<Base>::instance().add({NAME, DOC, Class::params(), [](const ::kvtier::json& p) { \
                                                  return std::unique_ptr<Base>(new Class(p));   \
                                                }})

}  // namespace kvtier
