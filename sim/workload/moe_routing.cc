#include "sim/workload/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace sim {

namespace {

// A uniform index in [0, n) from the engine by rejection (no modulo bias, no library
// distribution whose algorithm the standard leaves open).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

}  // namespace

std::vector<double> ExpertShares(const MoeSpec& moe, const RoutingSpec& routing) {
  const int64_t n = moe.experts;
  std::vector<double> shares(static_cast<size_t>(n), 1.0 / static_cast<double>(n));
  if (routing.distribution == RoutingDistribution::kBalanced || routing.skew == 0) return shares;
  // Popularity rank of each expert: a seeded Fisher-Yates shuffle of 0..n-1.
  std::vector<int64_t> rank(static_cast<size_t>(n));
  std::iota(rank.begin(), rank.end(), 0);
  std::mt19937_64 rng(static_cast<uint64_t>(routing.seed));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(rank[i], rank[UniformBelow(rng, static_cast<uint64_t>(i + 1))]);
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    shares[i] = std::pow(static_cast<double>(rank[i] + 1), -routing.skew);
    sum += shares[i];
  }
  for (double& s : shares) s /= sum;
  // A token sends at most one copy to an expert: no expert receives more than 1/k of the copies.
  // Shares above the cap are clamped and the excess spread over the others in proportion, until
  // none exceeds it (water-filling; at most E rounds).
  const double cap = 1.0 / static_cast<double>(moe.top_k);
  std::vector<bool> clamped(shares.size(), false);
  for (int64_t round = 0; round < n; ++round) {
    double excess = 0, free_sum = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (!clamped[i] && shares[i] > cap) {
        excess += shares[i] - cap;
        shares[i] = cap;
        clamped[i] = true;
      }
      if (!clamped[i]) free_sum += shares[i];
    }
    if (excess == 0 || free_sum == 0) break;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (!clamped[i]) shares[i] += excess * shares[i] / free_sum;
    }
  }
  return shares;
}

double DroppedShare(const MoeSpec& moe, const RoutingSpec& routing) {
  if (!routing.capacity_factor) return 0;
  const double cap = *routing.capacity_factor / static_cast<double>(moe.experts);
  double dropped = 0;
  for (double share : ExpertShares(moe, routing)) dropped += std::max(0.0, share - cap);
  return dropped;
}

double BusiestRankLoad(const MoeSpec& moe, int64_t ep, const RoutingSpec& routing) {
  // Padded: every expert computes exactly its capacity, on every rank.
  if (routing.capacity_factor && routing.pad_to_capacity) return *routing.capacity_factor;
  const bool balanced = routing.distribution == RoutingDistribution::kBalanced || routing.skew == 0;
  // Equal shares under their capacity, or one GPU with every expert and nothing dropped: the
  // balanced load, exactly.
  if ((balanced && (!routing.capacity_factor || *routing.capacity_factor >= 1)) ||
      (ep <= 1 && !routing.capacity_factor)) {
    return 1.0;
  }
  std::vector<double> shares = ExpertShares(moe, routing);
  if (routing.capacity_factor) {
    const double cap = *routing.capacity_factor / static_cast<double>(moe.experts);
    for (double& share : shares) share = std::min(share, cap);
  }
  if (ep <= 1) {
    // One GPU holds every expert: it computes what was not dropped.
    double kept = 0;
    for (double share : shares) kept += share;
    return kept;
  }
  const int64_t per_rank = moe.experts / ep;
  double busiest = 0;
  for (int64_t r = 0; r < ep; ++r) {
    double load = 0;
    for (int64_t i = r * per_rank; i < (r + 1) * per_rank; ++i) load += shares[i];
    busiest = std::max(busiest, load);
  }
  const double load = busiest * static_cast<double>(ep);
  return routing.capacity_factor ? load : std::max(1.0, load);
}

}  // namespace sim
