#pragma once
// Rank placement: which GPU holds which (TP, CP, DP, PP) coordinate, and the communication group
// of each parallel dimension.
//
// Ranks are laid out in the scenario's rank order, innermost first (Megatron-LM's
// --rank-order, default tp-cp-dp-pp): global rank = Σ coordinate(d) · stride(d), where the
// stride of a dimension is the product of the sizes of the dimensions inside it. Launchers fill
// a node with consecutive ranks, so with TP innermost and tp ≤ GPUs per node every TP group sits
// inside one NVLink domain. A dimension's groups in the block of its inner dimensions run at
// the same time (the 8 DP rings of a TP8 node all cross the fabric together): its CommGroup
// carries them as `copies` at offset 1, so that they share links.

#include <array>
#include <cstdint>

#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim {

class Placement {
 public:
  explicit Placement(const Scenario& s);

  int64_t Size(ParallelDim d) const { return size_[static_cast<int>(d)]; }
  int64_t Stride(ParallelDim d) const { return stride_[static_cast<int>(d)]; }

  // The group of dimension d that contains GPU 0, with the concurrent groups of its block.
  CommGroup Group(ParallelDim d) const;
  // Gradients are reduced over DP × CP (CP ranks hold the same parameters, Megatron-LM's
  // data-parallel-with-CP group) when the two are adjacent in the rank order; otherwise over DP.
  CommGroup GradientGroup() const;
  // The expert groups of an MoE model (ParallelSpec::ep), as Megatron-Core folds them
  // (parallel_state.py's expert rank generator, order tp-ep-dp-pp): the tp·cp·dp GPUs below
  // PP re-read as expert TP (etp consecutive GPUs) × EP (stride etp) × expert DP (stride
  // etp·ep), each with the concurrent groups of the block below it. With etp = tp and cp = 1
  // the EP group is `ep` consecutive DP ranks. The loader admits EP in rank order tp-cp-dp-pp.
  CommGroup ExpertTpGroup(int64_t etp) const { return Make(etp, 1); }
  CommGroup ExpertGroup(int64_t etp, int64_t ep) const { return Make(ep, etp); }
  CommGroup ExpertDataGroup(int64_t etp, int64_t ep) const {
    return Make(Stride(ParallelDim::kPp) / (etp * ep), etp * ep);
  }
  // Point-to-point between neighbouring pipeline stages: member 0 on stage 0, member 1 on
  // stage 1, one copy per GPU of the stage (every TP/CP/DP rank sends its own shard at once).
  CommGroup StageNeighbours() const;
  // The GPU of stage `stage` with every other coordinate 0.
  int64_t GpuOfStage(int64_t stage) const { return stage * Stride(ParallelDim::kPp); }

 private:
  CommGroup Make(int64_t size, int64_t stride) const;

  std::array<int64_t, 4> size_{};    // indexed by ParallelDim
  std::array<int64_t, 4> stride_{};  // indexed by ParallelDim
  std::array<ParallelDim, 4> order_{};
  int64_t gpus_per_node_ = 1;
};

}  // namespace sim
