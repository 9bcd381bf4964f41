#include "sim/workload/program_builder.h"

#include <algorithm>

#include "sim/base/check.h"

namespace sim {

ProgramBuilder::ProgramBuilder(OpProgram& program, int32_t stages)
    : program_(&program), st_(static_cast<size_t>(stages)) {}

int32_t ProgramBuilder::Add(const Op& op, absl::Span<const int32_t> deps,
                            absl::Span<const MemAction> mem) {
  OpProgram& p = *program_;
  const auto id = static_cast<int32_t>(p.ops.size());
  // The op is copied into the program first and its ranges set there: setting them on the
  // argument and copying it after stalled on every op (16-byte loads of fields just written by
  // narrower stores; a quarter of the lowering's cycles in perf).
  Op& o = p.ops.emplace_back(op);
  o.micro_batch = mb_;
  o.stage = static_cast<int16_t>(stage_);
  o.deps_begin = static_cast<int32_t>(p.deps.size());
  p.deps.insert(p.deps.end(), deps.begin(), deps.end());
  if (o.stream == StreamKind::kCompute && o.kind == OpKind::kCompute) {
    // A compute op waits for the overlapped TP/CP collectives of the op before it, and hands
    // on those that run beside it.
    StageState& st = st_[stage_];
    p.deps.insert(p.deps.end(), st.wait.begin(), st.wait.end());
    st.wait.swap(st.overlapped);
    st.overlapped.clear();
  }
  o.deps_end = static_cast<int32_t>(p.deps.size());
  // The actions by MemWhen, each group in the order given, zero-byte ones dropped: one pass
  // when they come in that order already (most ops), a stable pass per MemWhen otherwise.
  o.mem_begin = static_cast<int32_t>(p.mem.size());
  const bool ordered =
      std::is_sorted(mem.begin(), mem.end(),
                     [](const MemAction& a, const MemAction& b) { return a.when < b.when; });
  if (ordered) {
    o.mem_start = o.mem_finish = -1;
    for (const MemAction& a : mem) {
      if (a.when >= MemWhen::kStart && o.mem_start < 0)
        o.mem_start = static_cast<int32_t>(p.mem.size());
      if (a.when == MemWhen::kEnd && o.mem_finish < 0)
        o.mem_finish = static_cast<int32_t>(p.mem.size());
      if (a.bytes != Bytes()) p.mem.push_back(a);
    }
    if (o.mem_start < 0) o.mem_start = static_cast<int32_t>(p.mem.size());
    if (o.mem_finish < 0) o.mem_finish = static_cast<int32_t>(p.mem.size());
  } else {
    for (MemWhen when : {MemWhen::kIssue, MemWhen::kStart, MemWhen::kEnd}) {
      if (when == MemWhen::kStart) o.mem_start = static_cast<int32_t>(p.mem.size());
      if (when == MemWhen::kEnd) o.mem_finish = static_cast<int32_t>(p.mem.size());
      for (const MemAction& a : mem) {
        if (a.when == when && a.bytes != Bytes()) p.mem.push_back(a);
      }
    }
  }
  o.mem_end = static_cast<int32_t>(p.mem.size());
  if (o.stream == StreamKind::kCompute) st_[stage_].last_compute = id;
  return id;
}

void ProgramBuilder::AddMemToLast(MemAction a) {
  OpProgram& p = *program_;
  // End actions come last in an op's range, so appending keeps the range ordered.
  SIM_CHECK(!p.ops.empty() && p.ops.back().mem_end == static_cast<int32_t>(p.mem.size()) &&
                a.when == MemWhen::kEnd,
            "only end-of-op actions may be appended, and only to the newest op");
  if (a.bytes == Bytes()) return;
  p.mem.push_back(a);
  p.ops.back().mem_end++;
}

Op ProgramBuilder::Collective(absl::string_view name, CollectiveKind kind, Bytes tensor,
                              CommGroup group, std::optional<int32_t> g) {
  Op op;
  op.name = name;
  op.kind = OpKind::kCollective;
  op.pass = pass_;
  op.stream = StreamKind::kComm;
  op.group = g;
  op.collective = static_cast<int32_t>(program_->collectives.size());
  program_->collectives.push_back({kind, tensor, group, 1});
  return op;
}

ProgramBuilder::DepList ProgramBuilder::AnchorDeps() const {
  DepList deps;
  if (const auto& last = st_[stage_].last_compute) deps.push_back(*last);
  return deps;
}

}  // namespace sim
