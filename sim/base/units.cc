#include "sim/base/units.h"

#include <cmath>
#include <cstdlib>

#include "sim/base/check.h"

namespace sim {

namespace {

// Round half away from zero (as std::llround, without its libm call on the replay's hot path).
int64_t RoundHalfAway(double x) {
  SIM_CHECK(x > -0x1p63 && x < 0x1p63, "a quantity beyond int64 (inputs are bounded before this)");
  return x >= 0 ? static_cast<int64_t>(x + 0.5) : -static_cast<int64_t>(-x + 0.5);
}

}  // namespace

Bytes Bytes::Round(double bytes) { return Bytes(RoundHalfAway(bytes)); }

void Duration::OutOfRange(double s) {
  SIM_CHECK(std::isfinite(s), "non-finite duration");
  RoundHalfAway(s * 1e12);  // fails its check
  std::abort();
}

Duration operator/(Bytes bytes, Bandwidth bw) {
  SIM_CHECK(bw.bytes_per_s() > 0, "bandwidth must be positive");
  return Duration::FromSeconds(static_cast<double>(bytes.count()) / bw.bytes_per_s());
}

Bandwidth operator/(Bytes bytes, Duration d) {
  SIM_CHECK(d > Duration::Zero(), "duration must be positive");
  return Bandwidth::BytesPerSecond(static_cast<double>(bytes.count()) / d.seconds());
}

Duration operator/(Flops work, FlopRate rate) {
  SIM_CHECK(rate.per_second() > 0, "FLOP rate must be positive");
  return Duration::FromSeconds(work.count() / rate.per_second());
}

}  // namespace sim
