#pragma once
// The one parser for dimensioned strings in files and on the command line.
//
// Grammar: NUMBER [space] UNIT, NUMBER in decimal or exponent form ("80", "2.5", "1e-6").
//   bytes      B, kB, MB, GB, TB, PB (1e3 steps) and KiB, MiB, GiB, TiB (1024 steps)
//   bandwidth  B/s kB/s MB/s GB/s TB/s GiB/s (bytes) and b/s kb/s Mb/s Gb/s Tb/s (bits; "Gbps" too)
//   FLOP rate  FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s
//   time       ps, ns, us (or µs), ms, s, min, h
//   power      W, kW
// A bare number where a unit belongs, an unknown unit, or a unit of the wrong dimension is an
// InvalidArgument naming the expected units. Bits and bytes are case-distinct: "Gb/s" is
// gigabits, "GB/s" gigabytes.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/base/units.h"

namespace sim {

absl::StatusOr<Bytes> ParseBytes(absl::string_view text);
absl::StatusOr<Bandwidth> ParseBandwidth(absl::string_view text);
absl::StatusOr<FlopRate> ParseFlopRate(absl::string_view text);
absl::StatusOr<Duration> ParseDuration(absl::string_view text);
// A power in watts.
absl::StatusOr<double> ParseWatts(absl::string_view text);

// A plain count with an optional suffix: decimal k/K, M, B/G, T ("70e9", "7B", "2T" = 2e12,
// "500M", "8k"), or binary Ki, Mi, Gi, Ti ("4Mi" = 4,194,304 = 1,024 sequences of 4,096). Used
// for parameter, token and batch counts on the command line.
absl::StatusOr<double> ParseCount(absl::string_view text);

// A memory margin kept free below a GPU's usable memory: a share of it ("5%") or bytes
// ("2 GiB"). The margin is `fraction` x usable + `bytes`.
struct MemoryMargin {
  double fraction = 0;
  Bytes bytes;
  Bytes Of(Bytes usable) const {
    return Bytes::Round(fraction * static_cast<double>(usable.count())) + bytes;
  }
  bool none() const { return fraction == 0 && bytes == Bytes(); }
};
// "P%" with 0 <= P < 100, or bytes as ParseBytes reads them.
absl::StatusOr<MemoryMargin> ParseMemoryMargin(absl::string_view text);
// "5%" or "2.00 GiB", as ParseMemoryMargin reads it back.
std::string MemoryMarginText(const MemoryMargin& m);

}  // namespace sim
