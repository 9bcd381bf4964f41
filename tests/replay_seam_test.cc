// The seam between lowering and replay: a three-op program written by hand, replayed with cost
// models written by hand, so that every number below follows from the program alone.

#include <catch2/catch.hpp>

#include "sim/replay/replay.h"

namespace sim::replay {
namespace {

// Compute ops take 1 s per GFLOP; no slowdown beside collectives.
struct FixedCompute final : cost::ComputeCostModel {
  Duration Time(const Op& op) const override {
    return Duration::FromSeconds(op.flops.count() / 1e9);
  }
  double OverlapSlowdown() const override { return 1.0; }
};

// The same, with the host taking `dispatch` to issue each kernel.
struct HostPacedCompute final : cost::ComputeCostModel {
  explicit HostPacedCompute(Duration d) : dispatch(d) {}
  Duration Time(const Op& op) const override {
    return Duration::FromSeconds(op.flops.count() / 1e9);
  }
  double OverlapSlowdown() const override { return 1.0; }
  Duration Dispatch(const Op& op) const override { return dispatch * cost::KernelsOf(op); }
  Duration dispatch;
};

// 1 s per GFLOP alone; half the rate while a collective runs beside it.
struct HalvedBesideComm final : cost::ComputeCostModel {
  Duration Time(const Op& op) const override {
    return Duration::FromSeconds(op.flops.count() / 1e9);
  }
  double OverlapSlowdown() const override { return 2.0; }
};

// Every collective takes 5 s on a ring.
struct FixedComm final : cost::CollectiveCostModel {
  const cost::PricedCollective& Price(CollectiveKind, Bytes, CommGroup, int32_t) const override {
    static const cost::PricedCollective p = [] {
      cost::PricedCollective q;
      q.time = Duration::FromSeconds(5);
      q.busiest_link = "link";
      q.busiest_load = 1;
      return q;
    }();
    return p;
  }
};

OpProgram ThreeOps();

TEST_CASE("replay of a hand-written program: compute, an exposed collective, compute", "[replay]") {
  const OpProgram p = ThreeOps();
  const ReplayResult r = Replay(p, FixedCompute(), FixedComm(), Bytes::Count(1000), {});
  // 2 s, then 5 s the compute stream waits for, then 3 s.
  CHECK(r.step == Duration::FromSeconds(2 + 5 + 3));
  CHECK(r.times.compute == Duration::FromSeconds(2 + 3));
  CHECK(r.times.exposed_comm == Duration::FromSeconds(5));
  CHECK(r.times.comm == Duration::FromSeconds(5));
  // Persistent 100 B plus the 10 B kept from the start of a to the end of c.
  CHECK(r.ledgers[0].peak() == Bytes::Count(110));
  CHECK(r.ledgers[0].Transient() == Bytes());
  // FLOPs: a forward and a backward op count as model work; the all-reduce sends 2·8·3/4 B.
  CHECK(r.model_flops.count() == 5e9);
  CHECK(r.comm_bytes_sent[static_cast<int>(CollectiveKind::kAllReduce)] == Bytes::Count(12));
}

TEST_CASE("the host's launches pace the ops only when they are slower than the GPU", "[replay]") {
  const OpProgram p = ThreeOps();
  // 1 s per kernel: a is issued at 1 s, b at 2 s, c (a backward: two kernels) at 4 s. The GPU
  // starts a at 1 s, ends it at 3 s; b runs 3-8 s; c, issued long before, runs 8-11 s.
  const ReplayResult slow =
      Replay(p, HostPacedCompute(Duration::FromSeconds(1)), FixedComm(), Bytes::Count(1000), {});
  CHECK(slow.step == Duration::FromSeconds(1 + 2 + 5 + 3));
  // 4 s per kernel: a runs 4-6 s, b waits for its launch at 8 s and runs to 13 s, c is issued
  // at 4 + 4 + 8 = 16 s and runs to 19 s: the host paces the step.
  const ReplayResult slower =
      Replay(p, HostPacedCompute(Duration::FromSeconds(4)), FixedComm(), Bytes::Count(1000), {});
  CHECK(slower.step == Duration::FromSeconds(16 + 3));
}

TEST_CASE("a kernel slows only while a collective runs beside it", "[replay]") {
  // y, 6 s of compute alone, starts at 0. A 2 s host-side copy on another stream, then a 5 s
  // all-reduce after it: the collective runs from 2 to 7 s. y does 2 s of its work by 2 s,
  // 2.5 s more at half rate by 7 s, and the last 1.5 s alone: it ends at 8.5 s, 2.5 s later
  // than alone (a kernel stretched whole because a collective ran when it started, or not at
  // all because none did, would end at 12 or 6 s).
  OpProgram p;
  p.stages = 1;
  p.stage_gpu = {0};
  p.persistent = {{}};
  p.stage_states = {StateSplit{}};
  Op y;
  y.name = "y";
  y.flops = Flops::Count(6e9);
  Op copy;
  copy.name = "copy";
  copy.stream = StreamKind::kPcie;
  copy.flops = Flops::Count(2e9);
  Op reduce;
  reduce.name = "reduce";
  reduce.kind = OpKind::kCollective;
  reduce.stream = StreamKind::kComm;
  reduce.collective = 0;
  reduce.deps_begin = 0;
  reduce.deps_end = 1;
  p.deps.push_back(1);
  p.collectives.push_back({CollectiveKind::kAllReduce, Bytes::Count(8), CommGroup{4}, 1});
  p.ops = {y, copy, reduce};
  const ReplayResult r = Replay(p, HalvedBesideComm(), FixedComm(), Bytes::Count(1000), {});
  CHECK(r.step == Duration::FromSeconds(8.5));
  CHECK(r.times.compute == Duration::FromSeconds(8.5));
  CHECK(r.times.overlap_stretch == Duration::FromSeconds(2.5));
}

OpProgram ThreeOps() {
  OpProgram p;
  p.stages = 1;
  p.stage_gpu = {0};
  p.persistent = {{{MemWhen::kIssue, MemCategory::kWeights, Bytes::Count(100)}}};
  StateSplit states;
  states.weights = Bytes::Count(100);
  p.stage_states = {states};
  // 0: forward GEMM of 2 GFLOP that keeps 10 B of activations.
  Op a;
  a.name = "a";
  a.flops = Flops::Count(2e9);
  a.mem_begin = a.mem_start = 0;
  a.mem_finish = a.mem_end = 1;
  p.mem.push_back({MemWhen::kStart, MemCategory::kActivations, Bytes::Count(10)});
  // 1: an all-reduce of 8 B over 4 GPUs after it, on the communication stream.
  Op b;
  b.name = "b";
  b.kind = OpKind::kCollective;
  b.stream = StreamKind::kComm;
  b.collective = 0;
  b.deps_begin = 0;
  b.deps_end = 1;
  p.deps.push_back(0);
  b.mem_begin = b.mem_start = b.mem_finish = b.mem_end = 1;
  p.collectives.push_back({CollectiveKind::kAllReduce, Bytes::Count(8), CommGroup{4}, 1});
  // 2: a backward op of 3 GFLOP waiting for it, which frees the activations when it ends.
  Op c;
  c.name = "c";
  c.pass = OpPass::kBackward;
  c.flops = Flops::Count(3e9);
  c.deps_begin = 1;
  c.deps_end = 2;
  p.deps.push_back(1);
  c.mem_begin = c.mem_start = c.mem_finish = 1;
  c.mem_end = 2;
  p.mem.push_back({MemWhen::kEnd, MemCategory::kActivations, Bytes::Count(-10)});
  p.ops = {a, b, c};
  return p;
}

}  // namespace
}  // namespace sim::replay
