#pragma once
// What a byte of GPU memory holds. The replay's ledger keeps one running total per category; the
// report's peak breakdown (docs/model.md "The report" peak_breakdown_bytes) uses these names in
// this order.

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace sim {

enum class MemCategory : uint8_t {
  kWeights,         // persistent compute-dtype parameters (or the fsdp fp32 shard: optimizer)
  kGradients,       // persistent gradient buffers and per-layer gradients until reduced
  kOptimizer,       // fp32 master weights and optimizer moments
  kActivations,     // tensors saved for backward, recomputed working sets, activation grads
  kGatheredParams,  // ZeRO-3 / FSDP all-gathered full parameters of a layer
  kCommBuffers,     // reduction buckets and collective staging buffers
  kLogits,          // LM-head logits (16-bit and fp32) and their gradient
  kWorkspace,       // kernel workspaces (cuBLAS, attention) while an op runs
  kReserved,        // CUDA context and library reserve (runtime.reserved)
};

inline constexpr int kNumMemCategories = 9;

inline constexpr std::array<absl::string_view, kNumMemCategories> kMemCategoryNames = {
    "weights",      "gradients", "optimizer", "activations", "gathered_params",
    "comm_buffers", "logits",    "workspace", "reserved"};

inline absl::string_view Name(MemCategory c) { return kMemCategoryNames[static_cast<int>(c)]; }

}  // namespace sim
