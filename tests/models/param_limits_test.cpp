#include <catch2/catch.hpp>

#include "models/param.h"

using namespace kvtier;

namespace {
std::string error_of(json obj, const ParamList& specs) {
  try {
    resolve_params(obj, specs, "w");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("integers: exact, never a float-to-int cast, capped", "[param]") {
  const ParamList specs{integer("n", 1, "n", 1, 4096), integer("u", 0, "no maximum"),
                        integer("seed", 1, "seed", 0, 18446744073709551615.0)};
  CHECK(error_of({{"n", 2.5}}, specs) == "w.n: expected an integer, got 2.5");
  CHECK(error_of({{"n", 1e30}}, specs).find("w.n: 1e+30 is out of range") == 0);
  CHECK(error_of({{"n", 4097}}, specs).find("<= 4096") != std::string::npos);
  CHECK(error_of({{"u", 4294967296ull}}, specs).find("<= 2147483647") != std::string::npos);
  CHECK(error_of({{"seed", -1}}, specs).find("w.seed: -1 is out of range") == 0);
  CHECK(error_of({{"seed", 18446744073709551616.0}}, specs).find("out of range") != std::string::npos);
  json ok{{"n", 4.0}, {"seed", 18446744073709551615ull}};
  resolve_params(ok, specs, "w");
  CHECK(ok["n"].is_number_integer());
  CHECK(get_int(ok, "n") == 4);
  CHECK(ok["seed"].get<uint64_t>() == 18446744073709551615ull);
  CHECK_THROWS_AS(get_int(json{{"x", 1e30}}, "x"), ConfigError);
  CHECK_THROWS_AS(get_int(json{{"x", 0.5}}, "x"), ConfigError);
  CHECK_THROWS_AS(get_num(json{{"x", "a"}}, "x"), ConfigError);
}

TEST_CASE("numbers: positive at least 1e-12, time parameters capped", "[param]") {
  const ParamList specs{positive("rate_GBps", 1.0, "rate"), num("latency_us", 1.0, "latency", 0)};
  CHECK(error_of({{"rate_GBps", 1e-300}}, specs).find("> 0 (at least 1e-12)") != std::string::npos);
  CHECK(error_of({{"latency_us", 1e305}}, specs).find("<= 1000000000") != std::string::npos);
  CHECK(error_of({{"rate_GBps", 1e-12}, {"latency_us", 1e9}}, specs).empty());
}

TEST_CASE("JSON text: depth, duplicate keys and overflowing numbers are errors", "[param]") {
  json out;
  size_t byte = 0;
  bool syntax = false;
  CHECK(parse_json_limited(std::string(300, '[') + std::string(300, ']'), out, byte, syntax).find("nested more than 256") == 0);
  CHECK(parse_json_limited(std::string(256, '[') + std::string(256, ']'), out, byte, syntax).empty());
  CHECK(parse_json_limited(R"({"a": {"b": 1, "b": 2}})", out, byte, syntax) == "key \"b\" appears twice in object a");
  CHECK(parse_json_limited(R"({"a": [{"b": 1}, {"c": 1, "c": 1}]})", out, byte, syntax) ==
        "key \"c\" appears twice in object a[1]");
  CHECK(parse_json_limited(R"({"a": 1, "b": {"a": 2}})", out, byte, syntax).empty());
  // Where a limit is broken: just past the repeated key, just past the bracket one level too deep.
  CHECK(!parse_json_limited("{\"a\": 1,\n \"a\": 2}", out, byte, syntax).empty());
  CHECK((byte == 5 + 8 && !syntax));
  CHECK(!parse_json_limited(std::string(257, '['), out, byte, syntax).empty());
  CHECK(byte == 257);
  CHECK_THROWS_WITH(parse_json_text("{\"a\": 1,\n \"a\": 2}", "f.json"),
                    Catch::Contains("f.json:2:4: invalid JSON: key \"a\" appears twice"));
  CHECK(parse_json_limited("{\"x\":\n 1e400}", out, byte, syntax).find("number 1e400 does not fit a double") == 0);
  CHECK(!syntax);
  CHECK(parse_json_limited("{", out, byte, syntax).find("syntax error") == 0);
  CHECK(syntax);
  CHECK_THROWS_WITH(parse_json_text("{\"x\":\n 1e400}", "f.json"), Catch::StartsWith("f.json:2:2: invalid JSON"));
}

TEST_CASE("values in messages are cut short and never recurse deeply", "[param]") {
  json deep = json::array();
  json* at = &deep;
  for (int i = 0; i < 100000; ++i) {
    at->push_back(json::array());
    at = &(*at)[0];
  }
  CHECK(brief_dump(deep) == "[[[[[...]]]]]");
  CHECK(brief_dump(json(std::string(1 << 20, 'x'))).size() <= 84);
  CHECK(brief_dump(json{{"a", 1}}) == "{\"a\":1}");
}
