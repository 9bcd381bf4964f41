#include "sim/workload/gemm_waves.h"

namespace sim {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

double GemmWaveFactor(int64_t m, int64_t n, int64_t groups, int64_t sms) {
  if (sms <= 0 || m <= 0 || n <= 0 || groups <= 0) return 1.0;
  const int64_t tiles = CeilDiv(m, kGemmTile) * CeilDiv(n, kGemmTile) * groups;
  const double waves = static_cast<double>(CeilDiv(tiles, sms));
  return waves * static_cast<double>(sms) * static_cast<double>(kGemmTile * kGemmTile) /
         (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(groups));
}

double LinearWaveFactor(int64_t rows, int64_t inner, int64_t cols, int64_t groups, bool backward,
                        bool frozen, int64_t sms) {
  if (!backward) return GemmWaveFactor(rows, cols, groups, sms);
  const double input_grad = GemmWaveFactor(rows, inner, groups, sms);
  if (frozen) return input_grad;
  return 0.5 * input_grad + 0.5 * GemmWaveFactor(inner, cols, groups, sms);
}

}  // namespace sim
