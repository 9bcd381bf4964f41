// docs/model.md "Model states": every number of the static ledger, derived here from the per-kind
// bytes.
#include "sim/workload/static_ledger.h"

#include <catch2/catch.hpp>

namespace sim {
namespace {

constexpr int64_t kGB = 1'000'000'000;

BytesPerParam AdamBf16() {
  return StateBytesPerParam(Framework::kDeepSpeed, OptimizerKind::kAdamW, Precision::kBf16);
}

int64_t ZeroBytes(int stage, int64_t params, int64_t n) {
  return PerGpuStateBytes(AdamBf16(), Framework::kDeepSpeed, stage, params, n)->count();
}

TEST_CASE("bytes per parameter by optimizer and precision (SPEC 3.1 table)", "[ledger]") {
  const BytesPerParam adam = AdamBf16();
  CHECK(adam.weights.bytes_per_param == 2);
  CHECK(adam.gradients.bytes_per_param == 2);
  CHECK(adam.master_weights.bytes_per_param == 4);
  CHECK(adam.optimizer_m.bytes_per_param + adam.optimizer_v.bytes_per_param == 8);
  CHECK(adam.total() == 2 + 2 + 4 + 4 + 4);
  // The optimizer state is 75% of the 16 bytes.
  CHECK(adam.optimizer_state() * 4 == adam.total() * 3);
  CHECK(StateBytesPerParam(Framework::kDeepSpeed, OptimizerKind::kSgd, Precision::kBf16).total() ==
        2 + 2 + 4 + 4);
  CHECK(StateBytesPerParam(Framework::kDeepSpeed, OptimizerKind::kAdam8bit, Precision::kBf16)
            .total() == 2 + 2 + 4 + 1 + 1);
  CHECK(StateBytesPerParam(Framework::kDeepSpeed, OptimizerKind::kAdamW, Precision::kFp8).total() ==
        1 + 2 + 12);
}

TEST_CASE("70e9 parameters at N = 8 under ZeRO 0-3", "[ledger]") {
  const int64_t p = 70 * kGB, n = 8;
  CHECK(p * 16 == 1120 * kGB);  // 1.12 TB
  CHECK(ZeroBytes(0, p, n) == p * 16);
  CHECK(ZeroBytes(1, p, n) == p * 4 + p * 12 / n);  // 385 GB
  CHECK(ZeroBytes(1, p, n) == 385 * kGB);
  CHECK(ZeroBytes(2, p, n) == p * 2 + p * 14 / n);  // 262.5 GB
  CHECK(ZeroBytes(2, p, n) == 262'500'000'000);
  CHECK(ZeroBytes(3, p, n) == p * 16 / n);  // 140 GB
  CHECK(ZeroBytes(3, p, n) == 140 * kGB);
}

TEST_CASE("ZeRO-1 and ZeRO-2 never fit 70e9 parameters on 80 GB, whatever N", "[ledger]") {
  const int64_t p = 70 * kGB;
  const int64_t capacity = int64_t{80} << 30;
  for (int64_t n : {8, 16, 64, 1024, 1 << 20}) {
    CHECK(ZeroBytes(1, p, n) > capacity);
    CHECK(ZeroBytes(2, p, n) > capacity);
    // The floor is the replicated bf16 weights: 2P = 140 GB.
    CHECK(ZeroBytes(2, p, n) > 2 * p);
  }
  CHECK(ZeroBytes(3, p, 16) == 16 * p / 16);  // 70 GB
  CHECK(ZeroBytes(3, p, 16) == 70 * kGB);
  CHECK(ZeroBytes(3, p, 32) == 35 * kGB);
}

TEST_CASE("the seeds' smaller models", "[ledger]") {
  // 7e9 under ZeRO-1 at N = 8: 14 + 14 + 10.5 = 38.5 GB.
  CHECK(ZeroBytes(1, 7 * kGB, 8) == 7 * kGB * 2 + 7 * kGB * 2 + 7 * kGB * 12 / 8);
  CHECK(ZeroBytes(1, 7 * kGB, 8) == 38'500'000'000);
  // 13e9 under ZeRO-2 at N = 8: 26 + 22.75 = 48.75 GB.
  CHECK(ZeroBytes(2, 13 * kGB, 8) == 13 * kGB * 2 + 13 * kGB * 14 / 8);
  CHECK(ZeroBytes(2, 13 * kGB, 8) == 48'750'000'000);
  // 33e9 under ZeRO-2 at N = 8: 123.75 GB, above 80 GB; under ZeRO-3, 66 GB.
  CHECK(ZeroBytes(2, 33 * kGB, 8) == 123'750'000'000);
  CHECK(ZeroBytes(2, 33 * kGB, 8) > (int64_t{80} << 30));
  CHECK(ZeroBytes(3, 33 * kGB, 8) == 66 * kGB);
}

TEST_CASE("shards are padded to a multiple of N", "[ledger]") {
  // 10 parameters over 3 GPUs: each holds ceil(10/3) = 4 of the sharded ones.
  CHECK(ZeroBytes(3, 10, 3) == 16 * 4);
}

TEST_CASE("framework presets hold different states", "[ledger]") {
  const int64_t p = 70 * kGB, n = 8;
  const auto fsdp = StateBytesPerParam(Framework::kFsdp, OptimizerKind::kAdamW, Precision::kBf16);
  // FULL_SHARD: fp32 sharded parameter (the master), fp32 sharded gradient, Adam m and v.
  CHECK(PerGpuStateBytes(fsdp, Framework::kFsdp, 3, p, n)->count() == (4 + 4 + 8) * p / n);
  // SHARD_GRAD_OP keeps the bf16 parameters unsharded from forward to backward.
  CHECK(PerGpuStateBytes(fsdp, Framework::kFsdp, 2, p, n)->count() == 2 * p + 16 * p / n);
  CHECK_FALSE(PerGpuStateBytes(fsdp, Framework::kFsdp, 1, p, n).has_value());
  const auto meg =
      StateBytesPerParam(Framework::kMegatron, OptimizerKind::kAdamW, Precision::kBf16);
  CHECK(meg.total() == 18);
  // Distributed optimizer: 6 + 12/N bytes per parameter.
  CHECK(PerGpuStateBytes(meg, Framework::kMegatron, 1, p, n)->count() == 6 * p + 12 * p / n);
  CHECK(PerGpuStateBytes(meg, Framework::kMegatron, 0, p, n)->count() == 18 * p);
  // fp16 training keeps main_grad in fp16 (Megatron forces fp32 accumulation for bf16 only).
  const auto meg16 =
      StateBytesPerParam(Framework::kMegatron, OptimizerKind::kAdamW, Precision::kFp16);
  CHECK(meg16.gradients.bytes_per_param == 2);
  CHECK(meg16.total() == 16);
}

}  // namespace
}  // namespace sim
