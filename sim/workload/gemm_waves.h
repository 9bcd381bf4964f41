#pragma once
// Tile and wave quantisation of a GEMM on a GPU (NVIDIA, "Matrix Multiplication Background
// User's Guide", §"Dimension Quantization Effects"): a kernel computes its M x N output in
// tiles, one thread block per tile, and the GPU runs them in waves of one tile per SM. A partial
// tile costs a whole one, and a partial last wave a whole wave, so a GEMM takes
//   ceil(tiles / SMs) waves,  tiles = ceil(M / 128) x ceil(N / 128) (x groups, grouped GEMMs),
// and its time relative to its FLOPs alone at full occupancy is
//   waves x SMs x 128 x 128 / (M x N x groups)  (>= 1).
// The 128 x 128 output tile is CUTLASS's default for 16-bit tensor-core GEMMs on Ampere and
// Hopper (the same tile as GpuCalibration::gemm_k_overhead's estimate); cuBLAS's heuristics
// choose among several tiles per shape, so this is the quantisation of a typical tile, not of
// the one each call picks. The efficiency the calibration fits is then that of full waves.

#include <cstdint>

namespace sim {

inline constexpr int64_t kGemmTile = 128;

// One GEMM of M x N output (`groups` of them in one grouped kernel) on `sms` SMs; 1 when sms
// is 0 (unknown).
double GemmWaveFactor(int64_t m, int64_t n, int64_t groups, int64_t sms);

// An op's factor (Op::waves) for a linear layer's (rows x inner) . (inner x cols) GEMM, each of
// `groups` experts: the forward (and recompute) computes rows x cols; the backward's input
// gradient rows x inner and its weight gradient inner x cols per group, each half of its FLOPs
// (only the input gradient for a frozen weight).
double LinearWaveFactor(int64_t rows, int64_t inner, int64_t cols, int64_t groups, bool backward,
                        bool frozen, int64_t sms);

}  // namespace sim
