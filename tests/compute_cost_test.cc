// RooflineCostModel remembers recent prices by the op fields they read (sim/cost/compute_cost.h):
// whatever it remembers, each price must be what the pure functions give for that op.
#include "sim/cost/compute_cost.h"

#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "sim/config/loaders.h"
#include "sim/replay/replay.h"
#include "sim/workload/lowering.h"

namespace sim {
namespace {

Scenario Load(const std::string& precision) {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                {{"model", "llama2-7b"},
                                 {"cluster.nodes", "1"},
                                 {"training.global_batch", "16"},
                                 {"training.precision", precision},
                                 {"training.flash_impl", "fa3"}});
  REQUIRE(s.ok());
  return *s;
}

Duration Pure(const Scenario& s, const Op& op) {
  switch (op.op_class) {
    case OpClass::kPcieCopy:
    case OpClass::kHostCompute:
    case OpClass::kNvmeIo:
      return cost::HostDuration(op, *s.cluster.node.host, s.cluster.node.gpus_per_node);
    default:
      return cost::ComputeDuration(op, s.cluster.gpu, s.training.precision, s.training.flash_impl);
  }
}

cost::RooflineCostModel Model(const Scenario& s) {
  return cost::RooflineCostModel(s.cluster.gpu, s.training.precision, s.cluster.node.host,
                                 s.cluster.node.gpus_per_node, s.training.flash_impl);
}

TEST_CASE("remembered prices are the pure function's, op by op of a step", "[cost]") {
  for (const char* precision : {"bf16", "fp8"}) {
    const Scenario s = Load(precision);
    auto p = Lower(s);
    REQUIRE(p.ok());
    const cost::RooflineCostModel model = Model(s);
    int64_t compute_ops = 0;
    for (int pass = 0; pass < 2; ++pass) {  // the second pass reads what the first remembered
      for (const Op& op : p->ops) {
        if (op.kind == OpKind::kCollective) continue;
        ++compute_ops;
        REQUIRE(model.Time(op) == Pure(s, op));
      }
    }
    CHECK(compute_ops > 1000);
  }
}

TEST_CASE("ops that differ in one priced field are priced apart", "[cost]") {
  const Scenario s = Load("fp8");
  auto p = Lower(s);
  REQUIRE(p.ok());
  Op base;
  for (const Op& op : p->ops) {
    if (op.name == "qkv" && op.pass == OpPass::kBackward) base = op;
  }
  REQUIRE(base.flops > Flops());
  REQUIRE(base.serial_bytes > Bytes());
  base.kernels = 2;  // so that KernelsOf, which reads the kind and pass, moves the price
  // Each a field ComputeDuration or HostDuration reads, moved enough to move the price.
  const std::vector<std::function<void(Op&)>> changes = {
      [](Op& o) { o.flops = o.flops * 2.0; },
      [](Op& o) { o.bytes_moved = o.bytes_moved * 1000; },
      [](Op& o) { o.serial_bytes = o.serial_bytes * 2; },
      [](Op& o) { o.inv_k = o.inv_k * 4; },
      [](Op& o) { o.waves = o.waves + 1; },
      [](Op& o) { o.kernels = static_cast<int16_t>(o.kernels + 3); },
      [](Op& o) { o.pass = OpPass::kForward; },
      [](Op& o) { o.op_class = OpClass::kAttention; },
      [](Op& o) { o.keep_16bit = !o.keep_16bit; },
      [](Op& o) { o.kind = OpKind::kCollective; },  // KernelsOf reads it
      [](Op& o) {
        o.op_class = OpClass::kPcieCopy;
        o.bytes_moved = Bytes::GiB(1);
      },
  };
  const cost::RooflineCostModel model = Model(s);
  const Duration price = Pure(s, base);
  for (size_t i = 0; i < changes.size(); ++i) {
    Op changed = base;
    changes[i](changed);
    INFO("change " << i);
    const Duration other = Pure(s, changed);
    CHECK(other != price);
    // Alternately, so that each call could read the other's remembered price.
    for (int k = 0; k < 3; ++k) {
      CHECK(model.Time(base) == price);
      CHECK(model.Time(changed) == other);
    }
  }
}

// The replay skips asking every op for its host dispatch time when the model says none takes any
// (ComputeCostModel::Dispatches): that must hold exactly when no op does, and a GPU with a
// dispatch overhead must still be host-paced.
TEST_CASE("a power-capped GPU computes at the clocks its limit leaves", "[cost]") {
  // H100 SXM5 (700 W) capped at 500 W: (5/7)^(1/3) = 0.8939 of its clocks; a GEMM's math takes
  // 1 / 0.8939 as long, an HBM-bound kernel as long as uncapped.
  const Scenario s = Load("bf16");
  GpuSpec capped = s.cluster.gpu;
  REQUIRE(capped.tdp_watts == 700.0);
  CHECK(capped.SustainedClock() == 1.0);
  capped.power_limit_watts = 500.0;
  CHECK(capped.SustainedClock() == Approx(0.893904).epsilon(1e-6));
  Op gemm;
  gemm.op_class = OpClass::kGemm;
  gemm.flops = Flops::Count(1e15);
  Op stream;
  stream.op_class = OpClass::kMemoryBound;
  stream.bytes_moved = Bytes::Count(int64_t{1} << 34);
  auto t = [&](const GpuSpec& g, const Op& op) {
    return cost::ComputeDuration(op, g, Precision::kBf16, FlashImpl::kFa2).seconds();
  };
  const double launch = s.cluster.gpu.calibration.launch_overhead.seconds();
  CHECK((t(capped, gemm) - launch) * capped.SustainedClock() ==
        Approx(t(s.cluster.gpu, gemm) - launch).epsilon(1e-9));
  CHECK(t(capped, stream) == t(s.cluster.gpu, stream));
}

TEST_CASE("the roofline skips host dispatch only where no op takes any", "[cost]") {
  Scenario s = Load("bf16");
  auto p = Lower(s);
  REQUIRE(p.ok());
  REQUIRE(s.cluster.gpu.calibration.dispatch_overhead == Duration::Zero());
  int64_t dispatched = 0;
  {
    const cost::RooflineCostModel model = Model(s);
    CHECK_FALSE(model.Dispatches());
    for (const Op& op : p->ops) dispatched += model.Dispatch(op) > Duration::Zero();
    CHECK(dispatched == 0);
  }
  const auto free = replay::Simulate(s, {});
  REQUIRE(free.ok());

  s.cluster.gpu.calibration.dispatch_overhead = Duration::Milliseconds(1);
  const cost::RooflineCostModel model = Model(s);
  CHECK(model.Dispatches());
  Duration host;  // the one stage's host issues every op in turn
  dispatched = 0;
  for (const Op& op : p->ops) {
    host += model.Dispatch(op);
    dispatched += model.Dispatch(op) > Duration::Zero();
  }
  CHECK(dispatched == static_cast<int64_t>(p->ops.size()));  // every op launches a kernel
  replay::ReplayOptions unfolded;
  unfolded.fold = false;
  const auto paced = replay::Simulate(s, unfolded);
  REQUIRE(paced.ok());
  CHECK(host > free->step);  // so that pacing shows
  CHECK(paced->step >= host);
}

}  // namespace
}  // namespace sim
