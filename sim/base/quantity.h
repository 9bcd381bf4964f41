#pragma once
// The one parser for dimensioned strings in files and on the command line.
//
// Grammar: NUMBER [space] UNIT, NUMBER in decimal or exponent form ("80", "2.5", "1e-6").
//   bytes      B, kB, MB, GB, TB, PB (1e3 steps) and KiB, MiB, GiB, TiB (1024 steps)
//   bandwidth  B/s kB/s MB/s GB/s TB/s GiB/s (bytes) and b/s kb/s Mb/s Gb/s Tb/s (bits; "Gbps" too)
//   FLOP rate  FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s
//   time       ps, ns, us (or µs), ms, s
//   power      W, kW
// A bare number where a unit belongs, an unknown unit, or a unit of the wrong dimension is an
// InvalidArgument naming the expected units. Bits and bytes are case-distinct: "Gb/s" is
// gigabits, "GB/s" gigabytes.

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

// A plain count with an optional SI suffix: "70e9", "7B" (billions), "2T" (trillions), "500M",
// "8k". Used for parameter and token counts on the command line.
absl::StatusOr<double> ParseCount(absl::string_view text);
// A count of tokens per optimizer step, whose suffixes are binary as batch sizes are quoted
// ("4M tokens" = 1,024 sequences of 4,096 = 4,194,304): K 2^10, M 2^20, G 2^30, T 2^40.
absl::StatusOr<double> ParseBatchTokens(absl::string_view text);

}  // namespace sim
