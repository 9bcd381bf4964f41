#pragma once
// One table per enum: the names files and the command line use for its values. Parsing
// (EnumFromName), printing (Name / EnumName), the list of valid names in errors and "did you
// mean" (EnumNameList) all read the same table, so a value is named in exactly one place.

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/spec/hardware.h"
#include "sim/spec/model.h"
#include "sim/spec/scenario.h"
#include "sim/spec/validation_case.h"

namespace sim {

template <class E>
struct EnumNames;  // specialised below: `kNames`, every value with its name, in enum order

template <class E, size_t N>
using NameTable = std::array<std::pair<E, absl::string_view>, N>;

template <>
struct EnumNames<Precision> {
  static constexpr NameTable<Precision, 3> kNames{
      {{Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}, {Precision::kFp8, "fp8"}}};
};
template <>
struct EnumNames<OptimizerKind> {
  static constexpr NameTable<OptimizerKind, 4> kNames{
      {{OptimizerKind::kAdamW, "adamw"},
       {OptimizerKind::kSgd, "sgd"},
       {OptimizerKind::kAdam8bit, "adam8bit"},
       {OptimizerKind::kAdam8bitPaged, "adam8bit_paged"}}};
};
template <>
struct EnumNames<OptimizerImpl> {
  static constexpr NameTable<OptimizerImpl, 3> kNames{{{OptimizerImpl::kForeach, "foreach"},
                                                       {OptimizerImpl::kLoop, "loop"},
                                                       {OptimizerImpl::kFused, "fused"}}};
};
template <>
struct EnumNames<FinetuneMethod> {
  static constexpr NameTable<FinetuneMethod, 3> kNames{{{FinetuneMethod::kFull, "full"},
                                                        {FinetuneMethod::kLora, "lora"},
                                                        {FinetuneMethod::kQlora, "qlora"}}};
};
template <>
struct EnumNames<LoraTarget> {
  static constexpr NameTable<LoraTarget, 7> kNames{{{LoraTarget::kQ, "q"},
                                                    {LoraTarget::kK, "k"},
                                                    {LoraTarget::kV, "v"},
                                                    {LoraTarget::kO, "o"},
                                                    {LoraTarget::kGate, "gate"},
                                                    {LoraTarget::kUp, "up"},
                                                    {LoraTarget::kDown, "down"}}};
};
template <>
struct EnumNames<OffloadTarget> {
  static constexpr NameTable<OffloadTarget, 3> kNames{{{OffloadTarget::kNone, "none"},
                                                       {OffloadTarget::kCpu, "cpu"},
                                                       {OffloadTarget::kNvme, "nvme"}}};
};
template <>
struct EnumNames<Recompute> {
  static constexpr NameTable<Recompute, 4> kNames{{{Recompute::kNone, "none"},
                                                   {Recompute::kSelective, "selective"},
                                                   {Recompute::kFull, "full"},
                                                   {Recompute::kOp, "op"}}};
};
template <>
struct EnumNames<RoutingDistribution> {
  static constexpr NameTable<RoutingDistribution, 2> kNames{
      {{RoutingDistribution::kBalanced, "balanced"}, {RoutingDistribution::kZipf, "zipf"}}};
};
template <>
struct EnumNames<SpeedDistribution> {
  static constexpr NameTable<SpeedDistribution, 2> kNames{
      {{SpeedDistribution::kNormal, "normal"}, {SpeedDistribution::kLognormal, "lognormal"}}};
};
template <>
struct EnumNames<RecomputeMethod> {
  static constexpr NameTable<RecomputeMethod, 2> kNames{
      {{RecomputeMethod::kUniform, "uniform"}, {RecomputeMethod::kBlock, "block"}}};
};
template <>
struct EnumNames<RecomputeModule> {
  static constexpr NameTable<RecomputeModule, kNumRecomputeModules> kNames{
      {{RecomputeModule::kCoreAttn, "core_attn"},
       {RecomputeModule::kLayerNorm, "layernorm"},
       {RecomputeModule::kMlp, "mlp"},
       {RecomputeModule::kMoe, "moe"},
       {RecomputeModule::kMoeAct, "moe_act"},
       {RecomputeModule::kSharedExperts, "shared_experts"}}};
};
template <>
struct EnumNames<LossKernel> {
  static constexpr NameTable<LossKernel, 8> kNames{
      {{LossKernel::kEager, "eager"},
       {LossKernel::kEager16, "eager_16bit"},
       {LossKernel::kVocabParallel, "vocab_parallel"},
       {LossKernel::kFused, "fused"},
       {LossKernel::kCompiled, "compiled"},
       {LossKernel::kChunked, "chunked"},
       {LossKernel::kChunkedCompiled, "chunked_compiled"},
       {LossKernel::kFlashAttn, "flash_attn"}}};
};
template <>
struct EnumNames<AttentionKernel> {
  static constexpr NameTable<AttentionKernel, 2> kNames{
      {{AttentionKernel::kFlash, "flash"}, {AttentionKernel::kEager, "eager"}}};
};
template <>
struct EnumNames<FlashImpl> {
  static constexpr NameTable<FlashImpl, 3> kNames{
      {{FlashImpl::kFa2, "fa2"}, {FlashImpl::kFa3, "fa3"}, {FlashImpl::kTriton, "triton"}}};
};
template <>
struct EnumNames<NcclRelease> {
  static constexpr NameTable<NcclRelease, 2> kNames{
      {{NcclRelease::k2_27, "2.27"}, {NcclRelease::k2_28, "2.28"}}};
};
template <>
struct EnumNames<KernelFusion> {
  static constexpr NameTable<KernelFusion, 2> kNames{
      {{KernelFusion::kFused, "fused"}, {KernelFusion::kEager, "eager"}}};
};
template <>
struct EnumNames<Framework> {
  static constexpr NameTable<Framework, 5> kNames{{{Framework::kDeepSpeed, "deepspeed"},
                                                   {Framework::kFsdp, "fsdp"},
                                                   {Framework::kMegatron, "megatron"},
                                                   {Framework::kDdp, "ddp"},
                                                   {Framework::kTorchtune, "torchtune"}}};
};
template <>
struct EnumNames<FsdpSharding> {
  static constexpr NameTable<FsdpSharding, 4> kNames{
      {{FsdpSharding::kNoShard, "no_shard"},
       {FsdpSharding::kShardGradOp, "shard_grad_op"},
       {FsdpSharding::kFullShard, "full_shard"},
       {FsdpSharding::kHybridShard, "hybrid_shard"}}};
};
template <>
struct EnumNames<CollectiveAlgorithm> {
  static constexpr NameTable<CollectiveAlgorithm, 7> kNames{
      {{CollectiveAlgorithm::kRing, "ring"},
       {CollectiveAlgorithm::kTree, "tree"},
       {CollectiveAlgorithm::kHierarchical, "hierarchical"},
       {CollectiveAlgorithm::kNvls, "nvls"},
       {CollectiveAlgorithm::kNvlsTree, "nvls_tree"},
       {CollectiveAlgorithm::kCollnet, "collnet"},
       {CollectiveAlgorithm::kAuto, "auto"}}};
};
template <>
struct EnumNames<Fp8Recipe> {
  static constexpr NameTable<Fp8Recipe, 4> kNames{{{Fp8Recipe::kDelayed, "delayed"},
                                                   {Fp8Recipe::kTensorwise, "tensorwise"},
                                                   {Fp8Recipe::kBlockwise, "blockwise"},
                                                   {Fp8Recipe::kMxfp8, "mxfp8"}}};
};
template <>
struct EnumNames<CpKind> {
  static constexpr NameTable<CpKind, 3> kNames{
      {{CpKind::kAllGather, "allgather"}, {CpKind::kUlysses, "ulysses"}, {CpKind::kRing, "ring"}}};
};
template <>
struct EnumNames<PipelineSchedule> {
  static constexpr NameTable<PipelineSchedule, 3> kNames{
      {{PipelineSchedule::kGpipe, "gpipe"},
       {PipelineSchedule::k1F1B, "1f1b"},
       {PipelineSchedule::kInterleaved, "interleaved"}}};
};
template <>
struct EnumNames<ParallelDim> {
  static constexpr NameTable<ParallelDim, 4> kNames{{{ParallelDim::kTp, "tp"},
                                                     {ParallelDim::kCp, "cp"},
                                                     {ParallelDim::kDp, "dp"},
                                                     {ParallelDim::kPp, "pp"}}};
};
template <>
struct EnumNames<KernelLibrary> {
  static constexpr NameTable<KernelLibrary, 2> kNames{
      {{KernelLibrary::kPyTorch, "pytorch"},
       {KernelLibrary::kTransformerEngine, "transformer_engine"}}};
};

template <>
struct EnumNames<Dtype> {
  static constexpr NameTable<Dtype, 5> kNames{{{Dtype::kFp32, "fp32"},
                                               {Dtype::kTf32, "tf32"},
                                               {Dtype::kBf16, "bf16"},
                                               {Dtype::kFp16, "fp16"},
                                               {Dtype::kFp8, "fp8"}}};
};
template <>
struct EnumNames<MlpKind> {
  static constexpr NameTable<MlpKind, 2> kNames{
      {{MlpKind::kGelu, "gelu"}, {MlpKind::kSwiglu, "swiglu"}}};
};
template <>
struct EnumNames<RouterKind> {
  static constexpr NameTable<RouterKind, 2> kNames{
      {{RouterKind::kSoftmax, "softmax"}, {RouterKind::kSigmoid, "sigmoid"}}};
};
template <>
struct EnumNames<NormKind> {
  static constexpr NameTable<NormKind, 2> kNames{
      {{NormKind::kLayerNorm, "layernorm"}, {NormKind::kRmsNorm, "rmsnorm"}}};
};
template <>
struct EnumNames<PositionKind> {
  static constexpr NameTable<PositionKind, 3> kNames{{{PositionKind::kLearned, "learned"},
                                                      {PositionKind::kRope, "rope"},
                                                      {PositionKind::kAlibi, "alibi"}}};
};
template <>
struct EnumNames<FlopConvention> {
  static constexpr NameTable<FlopConvention, 5> kNames{
      {{FlopConvention::kStepsim, "stepsim"},
       {FlopConvention::kMegatronHw, "megatron-hw"},
       {FlopConvention::kKorthikanti, "korthikanti"},
       {FlopConvention::kMosaicml, "mosaicml"},
       {FlopConvention::kTorchtitan, "torchtitan"}}};
};
template <>
struct EnumNames<MemoryConvention> {
  static constexpr NameTable<MemoryConvention, 3> kNames{
      {{MemoryConvention::kAllocated, "allocated"},
       {MemoryConvention::kReserved, "reserved"},
       {MemoryConvention::kActive, "active"}}};
};

template <class E>
absl::string_view EnumName(E e) {
  for (const auto& [value, name] : EnumNames<E>::kNames) {
    if (value == e) return name;
  }
  return "?";
}

// The value named `name` (exactly, as files write it); none for an unknown name.
template <class E>
std::optional<E> EnumFromName(absl::string_view name) {
  for (const auto& [value, n] : EnumNames<E>::kNames) {
    if (n == name) return value;
  }
  return std::nullopt;
}

// Every valid name, in enum order (for errors and "did you mean").
template <class E>
std::vector<std::string> EnumNameList() {
  std::vector<std::string> out;
  for (const auto& [value, name] : EnumNames<E>::kNames) out.emplace_back(name);
  return out;
}

}  // namespace sim
