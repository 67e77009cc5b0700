// A registry refuses a second implementation under a taken name and reports
// it, so `kvtier` can refuse to start instead of silently keeping one.
#include <catch2/catch.hpp>

#include "models/registry.h"

namespace kvtier {
namespace {

struct Thing {
  virtual ~Thing() = default;
  virtual int id() const = 0;
};
template <int N>
struct ThingN : Thing {
  explicit ThingN(const json&) {}
  static ParamList params() { return {}; }
  int id() const override { return N; }
};

}  // namespace

KVTIER_REGISTRY_FAMILY(Thing, "test thing")

TEST_CASE("registering two implementations under one name is reported, the first is kept") {
  auto& r = Registry<Thing>::instance();
  auto make1 = [](const json& p) { return std::unique_ptr<Thing>(new ThingN<1>(p)); };
  auto make2 = [](const json& p) { return std::unique_ptr<Thing>(new ThingN<2>(p)); };
  CHECK(registry_duplicates<Thing>().empty());
  CHECK(r.add({"same", "first", ThingN<1>::params(), make1}));
  CHECK_FALSE(r.add({"same", "second", ThingN<2>::params(), make2}));
  REQUIRE(r.duplicates() == std::vector<std::string>{"same"});
  CHECK(registry_duplicates<Thing>() == "two test thing implementations are registered as 'same'");
  json cfg{{"name", "same"}};
  CHECK(r.create(cfg, "thing")->id() == 1);
  CHECK(r.find("same", "thing").doc == "first");
}

}  // namespace kvtier
