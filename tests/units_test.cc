#include "sim/base/units.h"

#include <catch2/catch.hpp>

#include "sim/base/quantity.h"

namespace sim {
namespace {

TEST_CASE("byte sizes with decimal and binary prefixes", "[units]") {
  CHECK(ParseBytes("80 GiB")->count() == int64_t{80} * 1024 * 1024 * 1024);
  CHECK(ParseBytes("80GB")->count() == int64_t{80} * 1000 * 1000 * 1000);
  CHECK(ParseBytes("25 MB")->count() == 25'000'000);
  CHECK(ParseBytes("1.5 KiB")->count() == 1536);
  CHECK(ParseBytes("512 B")->count() == 512);
  CHECK(ParseBytes("1e3 B")->count() == 1000);
}

TEST_CASE("bandwidth keeps bits and bytes apart", "[units]") {
  CHECK(ParseBandwidth("2039 GB/s")->bytes_per_s() == 2039e9);
  CHECK(ParseBandwidth("400 Gb/s")->bytes_per_s() == 400e9 / 8);
  CHECK(ParseBandwidth("400 Gbps")->bytes_per_s() == 400e9 / 8);
  CHECK(ParseBandwidth("1 GiB/s")->bytes_per_s() == 1073741824.0);
}

TEST_CASE("durations saturate at the clock's ends instead of wrapping", "[units]") {
  const Duration max = Duration::Picoseconds(INT64_MAX), min = Duration::Picoseconds(INT64_MIN);
  const Duration day = Duration::FromSeconds(86400);
  CHECK(max + day == max);
  CHECK(min - day == min);
  CHECK(day - min == max);
  CHECK(day * (INT64_MAX / 1000) == max);
  CHECK(day * -(INT64_MAX / 1000) == min);
  Duration sum = day;
  for (int i = 0; i < 200; ++i) sum += day * 1000;  // 200,000 days: past the clock, not negative
  CHECK(sum == max);
  CHECK(Duration::FromSeconds(1e300) == max);
  CHECK(Duration::FromSeconds(-1e300) == min);
  CHECK((day + day).picoseconds() == 2 * day.picoseconds());
}

TEST_CASE("a bandwidth or FLOP rate too slow to price is refused where it is read", "[units]") {
  // Below 1 MB/s or 1 GFLOP/s one op of a real model would outlast the replay's clock.
  CHECK(ParseBandwidth("1 MB/s")->bytes_per_s() == 1e6);
  CHECK(ParseBandwidth("0 Gb/s")->bytes_per_s() == 0);  // "none" (a node without NICs)
  CHECK(ParseBandwidth("3 B/s").status().message() ==
        "bandwidth '3 B/s' is below the 1 MB/s stepsim prices (0 means none)");
  CHECK(!ParseBandwidth("0.5 MB/s").ok());
  CHECK(ParseFlopRate("1 GFLOP/s")->per_second() == 1e9);
  CHECK(ParseFlopRate("10 FLOP/s").status().message() ==
        "FLOP rate '10 FLOP/s' is below the 1 GFLOP/s stepsim prices (0 means none)");
}

TEST_CASE("FLOP rates and durations", "[units]") {
  CHECK(ParseFlopRate("312 TFLOP/s")->per_second() == 312e12);
  CHECK(ParseFlopRate("2.25 PFLOP/s")->per_second() == 2.25e15);
  CHECK(ParseDuration("5 us")->picoseconds() == 5'000'000);
  CHECK(ParseDuration("1.5 ms")->picoseconds() == 1'500'000'000);
  CHECK(ParseDuration("2 ns")->picoseconds() == 2000);
  CHECK(ParseDuration("3 s")->picoseconds() == 3'000'000'000'000);
}

TEST_CASE("powers in watts", "[units]") {
  CHECK(*ParseWatts("500 W") == 500.0);
  CHECK(*ParseWatts("1.2 kW") == 1200.0);
  CHECK(ParseWatts("500").status().message() == "'500' has no unit; expected one of W, kW");
  CHECK_FALSE(ParseWatts("500 MW").ok());
}

TEST_CASE("bare numbers, unknown units and wrong dimensions are rejected", "[units]") {
  CHECK(ParseBytes("1024").status().message() ==
        "'1024' has no unit; expected one of B, kB, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB");
  CHECK(ParseBytes("80 GiBs").status().message() ==
        "unknown size unit 'GiBs' in '80 GiBs'; expected one of B, kB, KB, MB, GB, TB, PB, KiB, "
        "MiB, GiB, TiB");
  CHECK_FALSE(ParseBandwidth("400 GB").ok());
  CHECK_FALSE(ParseFlopRate("312 TFLOPS").ok());
  CHECK_FALSE(ParseDuration("5").ok());
  CHECK_FALSE(ParseBytes("GiB").ok());
  CHECK_FALSE(ParseBytes("").ok());
  CHECK_FALSE(ParseBytes("-1 GB").ok());
}

TEST_CASE("counts with SI suffixes", "[units]") {
  CHECK(*ParseCount("70e9") == 70e9);
  CHECK(*ParseCount("7B") == 7e9);
  CHECK(*ParseCount("2T") == 2e12);
  CHECK(*ParseCount("500M") == 500e6);
  CHECK_FALSE(ParseCount("seven").ok());
}

TEST_CASE("physical arithmetic rounds to the nearest picosecond", "[units]") {
  // 1 GB over 400 Gb/s (50 GB/s) is 20 ms.
  CHECK((Bytes::GB(1) / Bandwidth::Gbps(400)).picoseconds() == 20'000'000'000);
  // 1e12 FLOPs at 312 TFLOP/s = 3.2051282051... ms, rounded half away from zero to ps.
  const Duration d = Flops::Count(1e12) / FlopRate::TFLOPs(312);
  CHECK(d.picoseconds() == 3'205'128'205);
  // 0.4 ps rounds to 0, 0.5 ps to 1: never a truncation of a larger value.
  CHECK(Duration::FromSeconds(0.6e-12).picoseconds() == 1);
  CHECK(Duration::FromSeconds(1.4e-12).picoseconds() == 1);
}

}  // namespace
}  // namespace sim
