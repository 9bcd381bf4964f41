#include "sim/spec/scenario.h"

namespace sim {

absl::string_view Name(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

absl::string_view Name(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::kAdamW:
      return "adamw";
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam8bit:
      return "adam8bit";
  }
  return "?";
}

absl::string_view Name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

absl::string_view Name(AttentionKernel a) {
  return a == AttentionKernel::kFlash ? "flash" : "eager";
}

absl::string_view Name(Framework f) {
  switch (f) {
    case Framework::kDeepSpeed:
      return "deepspeed";
    case Framework::kFsdp:
      return "fsdp";
    case Framework::kMegatron:
      return "megatron";
  }
  return "?";
}

absl::string_view Name(FsdpSharding s) {
  switch (s) {
    case FsdpSharding::kNoShard:
      return "no_shard";
    case FsdpSharding::kShardGradOp:
      return "shard_grad_op";
    case FsdpSharding::kFullShard:
      return "full_shard";
    case FsdpSharding::kHybridShard:
      return "hybrid_shard";
  }
  return "?";
}

absl::string_view Name(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing:
      return "ring";
    case CollectiveAlgorithm::kTree:
      return "tree";
    case CollectiveAlgorithm::kHierarchical:
      return "hierarchical";
    case CollectiveAlgorithm::kNvls:
      return "nvls";
    case CollectiveAlgorithm::kNvlsTree:
      return "nvls_tree";
    case CollectiveAlgorithm::kAuto:
      return "auto";
  }
  return "?";
}

absl::string_view Name(PipelineSchedule p) {
  switch (p) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

absl::string_view Name(ParallelDim d) {
  switch (d) {
    case ParallelDim::kTp:
      return "tp";
    case ParallelDim::kCp:
      return "cp";
    case ParallelDim::kDp:
      return "dp";
    case ParallelDim::kPp:
      return "pp";
  }
  return "?";
}

absl::string_view Name(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kFp8:
      return "fp8";
  }
  return "?";
}

}  // namespace sim
