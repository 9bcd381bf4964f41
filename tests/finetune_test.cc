// Fine-tuning and offload (sim/workload/finetune.h, sim/workload/sharding.h PersistentStates,
// sim/cost/compute_cost.h HostDuration) against hand-worked values.
#include "sim/workload/finetune.h"

#include <catch2/catch.hpp>

#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/replay/replay.h"
#include "sim/report/run_summary.h"
#include "sim/workload/lowering.h"
#include "sim/workload/params.h"
#include "sim/workload/sharding.h"

namespace sim {
namespace {

// Llama-2-7B on one DGX A100 80GB, DeepSpeed, full recompute (the check's scenario).
Scenario Load(std::vector<config::Override> overrides) {
  overrides.insert(overrides.begin(), {{"model", "llama2-7b"},
                                       {"cluster.node", "dgx-a100-80gb"},
                                       {"cluster.nodes", "1"},
                                       {"training.seq_len", "4096"},
                                       {"training.global_batch", "8"},
                                       {"training.recompute", "full"},
                                       {"parallel.framework", "deepspeed"},
                                       {"parallel.zero", "0"}});
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", overrides);
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

report::RunSummary Run(const Scenario& s) {
  auto r = replay::Simulate(s, {});
  REQUIRE(r.ok());
  return report::Summarize(s, *r);
}

std::vector<config::Override> Lora(const std::string& targets, const std::string& rank = "16") {
  return {{"training.finetune.method", "lora"},
          {"training.finetune.rank", rank},
          {"training.finetune.targets", targets}};
}

TEST_CASE("LoRA adapters are counted from rank and targets", "[finetune]") {
  // Llama-2-7B: h = 4096, f = 11008, no GQA. r (in + out) per targeted projection.
  const int64_t h = 4096, f = 11008, r = 16, layers = 32;
  const Scenario qkvo = Load(Lora("q,k,v,o"));
  CHECK(AdapterParamsPerLayer(qkvo) == 4 * r * (h + h));
  const Scenario all = Load(Lora("q,k,v,o,gate,up,down"));
  CHECK(AdapterParamsPerLayer(all) == 4 * r * (h + h) + 3 * r * (h + f));
  // Trainable parameters: the adapters of every layer, nothing outside the layers.
  int64_t trained = 0;
  for (int64_t p : GroupTrainable(qkvo)) trained += p;
  CHECK(trained == layers * 4 * r * 2 * h);
  CHECK(GroupTrainable(qkvo).front() == 0);
  CHECK(GroupTrainable(qkvo).back() == 0);
  // Under TP 2 a column-parallel projection shards B, a row-parallel one A.
  const Scenario tp2 = Load({{"parallel.tp", "2"},
                             {"training.finetune.method", "lora"},
                             {"training.finetune.rank", "16"},
                             {"training.finetune.targets", "q,o"}});
  CHECK(AdapterParamsPerLayer(tp2) == (r * h + r * h / 2) + (r * h / 2 + r * h));
}

TEST_CASE("LoRA keeps gradients and optimizer states for the adapters only", "[finetune]") {
  const Scenario full = Load({});
  const Scenario lora = Load(Lora("q,k,v,o"));
  const int64_t adapters = 32 * 4 * 16 * 2 * 4096;
  const StateSplit f = PersistentStates(full), l = PersistentStates(lora);
  // DeepSpeed bf16: gradients 2 B, fp32 master + AdamW moments 12 B, per adapter parameter.
  CHECK(l.gradients == Bytes::Count(2 * adapters));
  CHECK(l.optimizer == Bytes::Count(12 * adapters));
  CHECK(l.adapters == Bytes::Count(2 * adapters));
  // The frozen base keeps its 16-bit weights, nothing else.
  CHECK(l.weights == f.weights);
  CHECK(l.weights == Bytes::Count(2 * CountParameters(full.model).total));
  // torchtune: bf16 moments, no master: 2 + 4 B per adapter parameter.
  const Scenario tt = Load({{"parallel.framework", "torchtune"},
                            {"training.finetune.method", "lora"},
                            {"training.finetune.rank", "16"},
                            {"training.finetune.targets", "q,k,v,o"}});
  CHECK(PersistentStates(tt).gradients == Bytes::Count(2 * adapters));
  CHECK(PersistentStates(tt).optimizer == Bytes::Count(4 * adapters));
}

TEST_CASE("a frozen projection's backward computes the input gradient only", "[finetune]") {
  const Scenario full = Load({});
  const Scenario lora = Load(Lora("q,v"));
  auto fp = Lower(full), lp = Lower(lora);
  REQUIRE(fp.ok());
  REQUIRE(lp.ok());
  auto flops = [](const OpProgram& p, absl::string_view name, OpPass pass) {
    for (const Op& op : p.ops) {
      if (op.name == name && op.pass == pass && op.group == 1) return op.flops.count();
    }
    return -1.0;
  };
  const double qkv = flops(*fp, "qkv", OpPass::kForward);
  // T = 4096 tokens; q and v adapters: 2·T·r·(h + out) each (out = h for q and v, no GQA).
  const double adapter = 2.0 * 4096 * 16 * (4096 + 4096) * 2;
  CHECK(flops(*fp, "qkv", OpPass::kBackward) == Approx(2 * qkv));
  CHECK(flops(*lp, "qkv", OpPass::kForward) == Approx(qkv + adapter));
  CHECK(flops(*lp, "qkv", OpPass::kBackward) == Approx(qkv + 2 * adapter));
  // out_proj carries no adapter: one GEMM backward, and its input is not saved for it.
  const double proj = flops(*fp, "out_proj", OpPass::kForward);
  CHECK(flops(*lp, "out_proj", OpPass::kBackward) == Approx(proj));
}

TEST_CASE("QLoRA stores NF4 with double-quantised scales", "[finetune]") {
  // 64 weights per int8 scale, 256 scales per fp32 scale.
  CHECK(Nf4Bytes(64 * 256) == Bytes::Count(64 * 256 / 2 + 256 + 4));
  const Scenario q = Load({{"training.finetune.method", "qlora"}});
  const ParameterCount c = CountParameters(q.model);
  const int64_t linears = (c.attention_per_layer + c.mlp_per_layer) * q.model.layers;
  const Bytes base = PersistentStates(q).weights;
  // Projections in NF4, embedding, head and norms in 16 bits.
  CHECK(base == Nf4Bytes(c.attention_per_layer + c.mlp_per_layer) * q.model.layers +
                    Bytes::Count(2 * (c.total - linears)));
  CHECK(base.gb() < 0.35 * PersistentStates(Load({})).weights.gb());
}

TEST_CASE("offloading the optimizer moves its states to the host and prices PCIe", "[offload]") {
  const Scenario on = Load({{"parallel.zero", "2"}, {"parallel.offload.optimizer", "cpu"}});
  const Scenario off = Load({{"parallel.zero", "2"}});
  const StateSplit so = PersistentStates(on), sf = PersistentStates(off);
  CHECK(so.optimizer == Bytes());
  // ZeRO-Offload at stage 2: the GPU keeps the 16-bit parameters only; the host the fp32
  // master, moments and gradient partition (16 B per parameter of the shard).
  CHECK(so.gradients == Bytes());
  const int64_t shard = (StageParameters(on)[0] + 7) / 8;
  CHECK(so.host == Bytes::Count(16 * shard));
  const report::RunSummary ron = Run(on), roff = Run(off);
  CHECK((roff.peak - ron.peak).count() >= sf.optimizer.count());
  CHECK(ron.host_peak == so.host * 8);
  CHECK(ron.step > roff.step);
  // Each copy is bytes over the GPU's PCIe link: Gen4 x16 = 31.5 GB/s, 80 % reached, shared
  // by the two GPUs behind one DGX A100 PCIe switch.
  const HostSpec host = *on.cluster.node.host;
  CHECK(host.PcieLink().gbps_bytes() == Approx(16.0 * 128.0 / 130.0 * 16.0 / 8.0));
  Op copy;
  copy.op_class = OpClass::kPcieCopy;
  copy.bytes_moved = Bytes::Count(2 * shard);
  const double link = 16.0 * 128.0 / 130.0 * 16.0 / 8.0 * 1e9 * cost::kPcieEfficiency / 2;
  CHECK(cost::HostDuration(copy, host, 8).seconds() == Approx(2.0 * shard / link));
  // The host update: 30 B of DRAM traffic per parameter at half of 409.6 GB/s, an eighth each.
  Op adam;
  adam.op_class = OpClass::kHostCompute;
  adam.bytes_moved = Bytes::Count(30 * shard);
  CHECK(cost::HostDuration(adam, host, 8).seconds() ==
        Approx(30.0 * shard / (409.6e9 * cost::kHostMemoryEfficiency / 8)));
  CHECK(ron.times.pcie.seconds() > 0);
}

TEST_CASE("NVMe offload keeps the states on the node's drives and prices their I/O", "[offload]") {
  const Scenario nvme = Load({{"parallel.zero", "3"},
                              {"parallel.offload.optimizer", "nvme"},
                              {"parallel.offload.params", "nvme"}});
  const Scenario cpu = Load({{"parallel.zero", "3"}, {"parallel.offload.optimizer", "cpu"}});
  const StateSplit sn = PersistentStates(nvme), sc = PersistentStates(cpu);
  const int64_t shard = (StageParameters(nvme)[0] + 7) / 8;
  // ZeRO-Infinity: master and moments (12 B) and the 16-bit shard (2 B) on NVMe; the fp32
  // gradient partition (4 B) in host memory.
  CHECK(sn.nvme == Bytes::Count(14 * shard));
  CHECK(sn.host == Bytes::Count(4 * shard));
  CHECK(sn.weights == Bytes());
  CHECK(sc.host == Bytes::Count(16 * shard));
  const report::RunSummary rn = Run(nvme), rc = Run(cpu);
  CHECK(rn.nvme == sn.nvme * 8);
  // Reading parameter shards from NVMe is offload I/O, not compute: the kernels' own time is
  // the same. Compared without the overlap cost (overlap_slowdown 1), since what collectives
  // beside the kernels stretch them by moves with the gathers' timing.
  auto unstretched = [](Scenario s) {
    s.cluster.gpu.calibration.overlap_slowdown = 1.0;
    return s;
  };
  CHECK(Run(unstretched(nvme)).times.compute.seconds() ==
        Approx(Run(unstretched(cpu)).times.compute.seconds()).epsilon(1e-9));
  // Reading and writing 12 B/param of states at 30.4 GB/s shared by 8 GPUs, beside the update.
  CHECK(rn.times.optimizer.seconds() - rc.times.optimizer.seconds() >
        2.0 * 12.0 * static_cast<double>(shard) / (30.4e9 / 8) * 0.99);
}

TEST_CASE("activation offload moves the checkpoints to host memory", "[offload]") {
  const Scenario off = Load({{"parallel.framework", "torchtune"},
                             {"training.global_batch", "1"},
                             {"cluster.gpus_per_node", "1"}});
  const Scenario on = Load({{"parallel.framework", "torchtune"},
                            {"training.global_batch", "1"},
                            {"cluster.gpus_per_node", "1"},
                            {"parallel.offload.activations", "cpu"}});
  const report::RunSummary roff = Run(off), ron = Run(on);
  // Full recompute keeps each layer's input, 2·T·h bytes: all 32 are on the host after the
  // forward.
  const Bytes checkpoint = Bytes::Count(2 * 4096 * 4096);
  CHECK(ron.host_peak == checkpoint * 32);
  // On the GPU the activations' high-water mark drops by the checkpoints that are away (the
  // layer being recomputed and the one prefetched are back); the step's peak here is at the end
  // of the backward, where the gradients have all arrived, and does not move.
  const int act = static_cast<int>(MemCategory::kActivations);
  CHECK(roff.category_peaks[act] - ron.category_peaks[act] >= checkpoint * 30);
  CHECK(ron.reserved_peak <= roff.reserved_peak);
  CHECK(ron.times.pcie.seconds() > 0);
}

TEST_CASE("torchtune gradients exist only from the backward to the step", "[finetune]") {
  const Scenario tt = Load({{"parallel.framework", "torchtune"}});
  auto p = Lower(tt);
  REQUIRE(p.ok());
  for (const MemAction& a : p->persistent[0]) {
    if (a.category == MemCategory::kGradients) CHECK(a.bytes == Bytes());
  }
  CHECK(PersistentStates(tt).lazy_gradients);
  // With the optimizer in the backward, one update per group frees that group's gradients.
  const Scenario bwd = Load({{"parallel.framework", "torchtune"},
                             {"training.global_batch", "1"},
                             {"cluster.gpus_per_node", "1"},
                             {"training.optimizer_in_backward", "true"}});
  auto pb = Lower(bwd);
  REQUIRE(pb.ok());
  int updates = 0;
  for (const Op& op : pb->ops) updates += op.name == "optimizer";
  CHECK(updates == bwd.model.layers + 2);
  CHECK(Run(bwd).peak < Run(Load({{"parallel.framework", "torchtune"},
                                  {"training.global_batch", "1"},
                                  {"cluster.gpus_per_node", "1"}}))
                            .peak);
}

}  // namespace
}  // namespace sim
