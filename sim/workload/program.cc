#include "sim/workload/program.h"

#include "absl/strings/str_cat.h"

namespace sim {

Bytes BytesSentPerGpu(CollectiveKind kind, Bytes tensor, int64_t group_size) {
  if (group_size <= 1) return Bytes();
  const int64_t n = group_size;
  switch (kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return tensor * (n - 1) / n;
    case CollectiveKind::kAllReduce:
      return tensor * (2 * (n - 1)) / n;
    case CollectiveKind::kSendRecv:
      return tensor;  // the sender's; docs/model.md "The report" send_recv
    case CollectiveKind::kNone:
      return Bytes();
  }
  return Bytes();
}

absl::string_view Name(OpPass p) {
  switch (p) {
    case OpPass::kForward:
      return "fwd";
    case OpPass::kRecompute:
      return "recompute";
    case OpPass::kBackward:
      return "bwd";
    case OpPass::kStep:
      return "step";
  }
  return "?";
}

absl::string_view Name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kNone:
      return "none";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kSendRecv:
      return "send_recv";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

std::string OpLabel(const Op& op, int32_t layers) {
  std::string where;
  if (!op.group) {
    where = "step";
  } else if (*op.group == 0) {
    where = "embedding";
  } else if (*op.group == layers + 1) {
    where = "head";
  } else {
    where = absl::StrCat("L", *op.group - 1);
  }
  if (op.kind == OpKind::kCollective) {
    return absl::StrCat("mb", op.micro_batch, " ", where, " ", op.name);
  }
  if (op.pass == OpPass::kStep) return std::string(op.name);
  return absl::StrCat("mb", op.micro_batch, " ", where, " ", Name(op.pass), " ", op.name);
}

}  // namespace sim
