#include <catch2/catch.hpp>

#include <sstream>

#include "traces/line_reader.h"

using namespace kvtier;

TEST_CASE("bounded line reader: lines at chunk boundaries, no final newline, too long", "[traces]") {
  const size_t chunk = 1 << 16;
  for (size_t len : {size_t(0), size_t(1), chunk - 2, chunk - 1, chunk, chunk + 1, 3 * chunk + 7}) {
    std::string a(len, 'a'), b(len / 2 + 1, 'b');
    std::istringstream in(a + "\n" + b + "\n" + "last");
    std::string line;
    REQUIRE(read_line_limited(in, line) == LineRead::Ok);
    CHECK(line == a);
    REQUIRE(read_line_limited(in, line) == LineRead::Ok);
    CHECK(line == b);
    REQUIRE(read_line_limited(in, line) == LineRead::Ok);
    CHECK(line == "last");
    CHECK(read_line_limited(in, line) == LineRead::End);
    CHECK(read_line_limited(in, line) == LineRead::End);
  }
  std::istringstream empty("");
  std::string line;
  CHECK(read_line_limited(empty, line) == LineRead::End);
  std::istringstream ends("x\n");
  REQUIRE(read_line_limited(ends, line) == LineRead::Ok);
  CHECK(line == "x");
  CHECK(read_line_limited(ends, line) == LineRead::End);
  std::istringstream big(std::string(200000, 'z') + "\nshort\n");
  CHECK(read_line_limited(big, line, 100000) == LineRead::TooLong);
  std::istringstream fits(std::string(100000, 'z') + "\n");
  REQUIRE(read_line_limited(fits, line, 100000) == LineRead::Ok);
  CHECK(line.size() == 100000);
}
