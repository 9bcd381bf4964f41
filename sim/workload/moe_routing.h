#pragma once
// Tokens per expert under a routing distribution (training.routing), and what it does to the
// busiest expert-parallel rank.
//
// With E experts over an EP group of e ranks (E/e experts each, in order after a shuffle), the
// group's T·k·e token copies per micro-batch split over the experts in shares p_i; rank r
// receives e·T·k·Σ_{i on r} p_i of them. Balanced routing gives every rank T·k; a skewed one
// gives the rank holding the popular experts more, and the all-to-all and the expert GEMMs wait
// for it: the step is paced by the busiest rank. stepsim replays that rank (its expert GEMM rows,
// activations and all-to-all buffers scale by its load), which is where the peak and the time
// are.
//
//   zipf   p_i ∝ 1 / i^skew, i = 1..E by popularity (skew 0 is balanced); which rank holds which
//          popularity rank is a Fisher-Yates shuffle of the experts driven by std::mt19937_64
//          seeded with `seed` (its output sequence is fixed by the C++ standard; the index is
//          drawn by rejection so that it is exact): the same seed gives the same placement on
//          every platform. A token sends at most one copy to an expert, so no expert's share
//          exceeds 1/k: larger Zipf shares are clamped there and the excess spread over the
//          others in proportion.

#include <cstdint>
#include <vector>

#include "sim/spec/model.h"
#include "sim/spec/scenario.h"

namespace sim {

// Each expert's share of the routed token copies (sums to 1), in expert-id order.
std::vector<double> ExpertShares(const MoeSpec& moe, const RoutingSpec& routing);
// The busiest EP rank's token copies over the balanced T·k: >= 1 when dropless (1 for balanced
// routing or ep = 1, where one GPU holds every expert); with a capacity factor cf each expert
// computes at most cf/E of the copies (exactly cf/E when padded), so the load is at most cf.
double BusiestRankLoad(const MoeSpec& moe, int64_t ep, const RoutingSpec& routing);
// The share of token copies dropped at the experts' capacity (0 when dropless).
double DroppedShare(const MoeSpec& moe, const RoutingSpec& routing);

}  // namespace sim
