// `stepsim import job` (sim/config/job_import.h): a Megatron-LM job's arguments, a DeepSpeed
// config and a torchtitan job config as scenarios, checked against the hand-written validation
// cases of the same published runs.
#include "sim/config/job_import.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "sim/base/input_file.h"
#include "sim/config/catalog.h"
#include "sim/replay/replay.h"

namespace sim {
namespace {

constexpr const char* kSc21 = STEPSIM_SOURCE_DIR "/tests/data/jobs/megatron-sc21-1.7b.args";

config::JobContext Dgx(int64_t gpus) {
  config::JobContext c;
  c.node = "dgx-a100-80gb";
  c.gpus_per_node = 8;
  c.gpus = gpus;
  return c;
}

// The scenario an import wrote, loaded as `stepsim run` would load it.
Scenario Loaded(const absl::StatusOr<config::JobImport>& job) {
  INFO((job.ok() ? job->yaml : std::string(job.status().message())));
  REQUIRE(job.ok());
  auto loader =
      config::ScenarioLoader::FromText(config::DataRoot{STEPSIM_SOURCE_DIR}, job->yaml, "x");
  REQUIRE(loader.ok());
  auto s = loader->Load({});
  INFO(s.status().message());
  REQUIRE(s.ok());
  return *s;
}

// The hand-written validation case `id` of `file` (under scenarios/validation/).
Scenario HandCase(const std::string& file, const std::string& id) {
  auto cases = config::LoadCases(config::DataRoot{STEPSIM_SOURCE_DIR},
                                 STEPSIM_SOURCE_DIR "/scenarios/validation/" + file);
  REQUIRE(cases.ok());
  for (const ValidationCase& c : *cases) {
    if (c.id == id) return c.scenario;
  }
  FAIL("no case " << id << " in " << file);
  return {};
}

// The replays of two scenarios: the same step, the same peak, to the picosecond and the byte.
void CheckSameReplay(const Scenario& x, const Scenario& y) {
  auto a = replay::Simulate(x, {});
  auto b = replay::Simulate(y, {});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->step == b->step);
  CHECK(a->ledgers[a->peak_rank].peak() == b->ledgers[b->peak_rank].peak());
}

TEST_CASE("Megatron-LM's SC21 arguments import as the hand-written case", "[import]") {
  // Narayanan et al. 2021 Table 1's 1.7B row, whose case in scenarios/validation/megatron.yaml
  // was written by hand from the paper and the same script.
  auto text = ReadInputFile(kSc21);
  REQUIRE(text.ok());
  auto job = config::ImportMegatronArgs(*text, "megatron-sc21-1.7b.args", Dgx(32));
  INFO((job.ok() ? job->yaml : std::string(job.status().message())));
  REQUIRE(job.ok());
  // Everything in the arguments that prices a step was mapped.
  CHECK(job->unmapped.empty());
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto loader = config::ScenarioLoader::FromText(root, job->yaml, "imported");
  REQUIRE(loader.ok());
  const Scenario h = HandCase("megatron.yaml", "narayanan21_t1_1.7B");
  // The vocabulary is the one difference: the job pads GPT-2's 50,257 tokens to 50,304 (a
  // multiple of 128 at TP 1), as Megatron-LM does; the case uses the paper's V = 51,200.
  auto imported = loader->Load({});
  REQUIRE(imported.ok());
  CHECK(imported->model.vocab == 50304);
  auto same = loader->Load({{"model.vocab", "51200"}});
  REQUIRE(same.ok());
  CHECK(same->model.layers == h.model.layers);
  CHECK(same->model.hidden == h.model.hidden);
  CHECK(same->model.heads == h.model.heads);
  CHECK(same->model.ffn_hidden == h.model.ffn_hidden);
  CHECK(same->cluster.gpus() == h.cluster.gpus());
  CHECK(same->cluster.node.name == h.cluster.node.name);
  CHECK(same->training.global_batch == h.training.global_batch);
  CHECK(same->training.micro_batch == h.training.micro_batch);
  CHECK(same->training.precision == h.training.precision);
  CHECK(same->training.recompute == h.training.recompute);
  CHECK(same->parallel.zero == h.parallel.zero);
  CheckSameReplay(*same, h);
}

TEST_CASE("job import: Megatron-Core flags, torchrun's world size, and what is not mapped",
          "[import]") {
  const std::string args =
      "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size "
      "4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
      "--ffn-hidden-size 14336 --swiglu --normalization RMSNorm --position-embedding-type rope "
      "--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 128256 "
      "--seq-length 8192 --micro-batch-size 1 --global-batch-size 64 --bf16 "
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel "
      "--use-distributed-optimizer --recompute-granularity selective --overlap-grad-reduce "
      "--attention-backend flash --lr=3e-4 --tokenizer-type HuggingFaceTokenizer";
  config::JobContext c = Dgx(0);
  c.gpus.reset();
  auto job = config::ImportMegatronArgs(args, "llama.args", c);
  const Scenario s = Loaded(job);
  CHECK(s.cluster.gpus() == 16);  // torchrun: 2 x 8
  CHECK(s.model.kv_heads == 8);
  CHECK(s.model.vocab == 128256);  // already a multiple of 128 x 2
  CHECK_FALSE(s.model.tied_embeddings);
  CHECK(s.parallel.tp == 2);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.sequence_parallel);
  CHECK(s.parallel.zero == 1);
  CHECK(s.parallel.overlap_grad_reduce);
  CHECK(s.training.recompute == Recompute::kSelective);
  CHECK(s.training.seq_len == 8192);
  // --attention-backend is read but not mapped; the learning rate and tokenizer are unpriced.
  REQUIRE(job->unmapped.size() == 1);
  CHECK(job->unmapped[0] == "--attention-backend flash");
  CHECK(absl::StrContains(job->yaml, "#   --attention-backend flash"));
  CHECK(absl::StrContains(job->yaml, "tp: 2  # --tensor-model-parallel-size 2"));

  // --fp8-recipe names stepsim's recipe (Megatron-LM's choices are stepsim's names).
  const std::string fp8 =
      absl::StrReplaceAll(args, {{"--bf16", "--bf16 --fp8-format hybrid --fp8-recipe blockwise"}});
  c.node = "dgx-h100";
  auto fp8_job = config::ImportMegatronArgs(fp8, "llama-fp8.args", c);
  const Scenario f = Loaded(fp8_job);
  CHECK(f.training.precision == Precision::kFp8);
  CHECK(f.training.fp8_recipe == Fp8Recipe::kBlockwise);
  auto bad = config::ImportMegatronArgs(
      absl::StrReplaceAll(args, {{"--bf16", "--bf16 --fp8-format hybrid --fp8-recipe nvfp4"}}),
      "bad.args", c);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("--fp8-recipe nvfp4 is not one of delayed, tensorwise, blockwise, "
                             "mxfp8"));
}

TEST_CASE("job import refuses what it cannot read, naming the flag", "[import]") {
  auto refused = [](const std::string& args, config::JobContext c) {
    auto job = config::ImportMegatronArgs(args, "bad.args", c);
    REQUIRE_FALSE(job.ok());
    return std::string(job.status().message());
  };
  const std::string arch = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --bf16 ";
  CHECK_THAT(refused(arch + "--vocab-size 100 --tensor-model-parallel-size ${TP}", Dgx(8)),
             Catch::Contains("--tensor-model-parallel-size ${TP}: an unexpanded shell variable"));
  CHECK_THAT(refused(arch + "--vocab-size 100 --num-layers many", Dgx(8)),
             Catch::Contains("--num-layers many: expected a whole number"));
  CHECK_THAT(refused(arch, Dgx(8)), Catch::Contains("add --vocab-size N"));
  config::JobContext none = Dgx(8);
  none.gpus.reset();
  CHECK_THAT(refused(arch + "--vocab-size 100", none), Catch::Contains("pass --gpus N"));
  CHECK_THAT(refused(arch + "--vocab-size 100", Dgx(12)),
             Catch::Contains("12 GPUs are not whole nodes of 8"));
  // A quoted value cannot smuggle YAML in: it is read as one word and refused as a number.
  CHECK_THAT(refused(arch + "--vocab-size 100 --hidden-dropout \"0.1\nmodel: evil\"", Dgx(8)),
             Catch::Contains("expected a probability"));
}

TEST_CASE("a DeepSpeed config imports with the launcher's world size and a model", "[import]") {
  const std::string config = R"({
    "train_batch_size": 256, "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 5e8,
      "stage3_prefetch_bucket_size": 5e7, "stage3_param_persistence_threshold": 1e6,
      "offload_optimizer": {"device": "cpu", "pin_memory": true}},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "gradient_clipping": 1.0,
    "activation_checkpointing": {"partition_activations": true}})";
  config::JobContext c = Dgx(32);
  c.model = "llama2-7b";
  auto job = config::ImportDeepSpeedConfig(config, "ds_config.json", c, 4096);
  const Scenario s = Loaded(job);
  CHECK(s.model.name == "llama2-7b");
  CHECK(s.cluster.gpus() == 32);
  CHECK(s.training.micro_batch == 2);
  CHECK(s.training.global_batch == 256);
  CHECK(s.micro_batches() == 4);  // gradient_accumulation_steps
  CHECK(s.parallel.zero == 3);
  CHECK(s.parallel.offload.optimizer == OffloadTarget::kCpu);
  // The optimizer, clipping and persistence threshold do not change a step; activation
  // partitioning is Megatron-DeepSpeed's, not priced here: listed.
  CHECK(job->unmapped == std::vector<std::string>{"activation_checkpointing"});

  auto refused = [&](const std::string& text) {
    auto r = config::ImportDeepSpeedConfig(text, "ds.json", c, std::nullopt);
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  CHECK_THAT(refused(R"({"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": true}})"),
             Catch::Contains("train_micro_batch_size_per_gpu: \"auto\" is the Hugging Face"));
  CHECK_THAT(refused(R"({"train_batch_size": 100, "train_micro_batch_size_per_gpu": 2,
                         "gradient_accumulation_steps": 4, "bf16": {"enabled": true}})"),
             Catch::Contains("train_batch_size 100 is not train_micro_batch_size_per_gpu 2 x "
                             "gradient_accumulation_steps 4 x 32 GPUs"));
  CHECK_THAT(refused(R"({"train_micro_batch_size_per_gpu": 1})"),
             Catch::Contains("fp32 training is not modelled"));
  CHECK_THAT(refused("{\"bf16\": "), Catch::Contains("ds.json:1:10: not JSON"));
  // A number beyond a double aborted the import before (nlohmann/json's out_of_range).
  CHECK_THAT(refused(R"({"train_batch_size": 1e400})"),
             Catch::Equals("ds.json:1:22: the number 1e400 is out of range"));
  CHECK_THAT(refused(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
                         "zero_optimization": {"offload_param": {"device": "disk"}}})"),
             Catch::Contains("expected none, cpu or nvme"));
}

TEST_CASE("a torchtitan job config imports as the hand-written case of its benchmark", "[import]") {
  // torchtitan's December 2024 H100 benchmark, Table 1's FSDP row (Llama 3 8B on 8 H100), whose
  // case in scenarios/validation/torchtitan.yaml was written by hand from the benchmark's text.
  auto text =
      ReadInputFile(STEPSIM_SOURCE_DIR "/tests/data/jobs/torchtitan-llama3-8b-h100-202412.toml");
  REQUIRE(text.ok());
  config::JobContext c;
  c.node = "grand-teton-h100-96gb";
  c.gpus_per_node = 8;
  c.gpus = 8;
  auto job = config::ImportTorchtitanToml(*text, "llama3_8b.toml", c);
  const Scenario imported = Loaded(job);
  CHECK(job->unmapped.empty());
  const Scenario h = HandCase("torchtitan.yaml", "torchtitan_h100_202412_t1_fsdp");
  CHECK(imported.model.name == h.model.name);
  CHECK(imported.cluster.gpus() == h.cluster.gpus());
  CHECK(imported.training.micro_batch == h.training.micro_batch);
  CHECK(imported.training.global_batch == h.training.global_batch);
  CHECK(imported.training.recompute == h.training.recompute);
  CHECK(imported.training.kernels == h.training.kernels);
  CHECK(imported.parallel.framework == h.parallel.framework);
  CHECK(imported.parallel.fsdp_version == h.parallel.fsdp_version);
  CHECK(imported.parallel.reduce_dtype == h.parallel.reduce_dtype);
  CheckSameReplay(imported, h);
}

TEST_CASE("torchtitan's [parallelism] layout, float8, compile and what is not mapped", "[import]") {
  // The 2025 layout: degrees under [parallelism], local_batch_size and global_batch_size,
  // converters, [compile]. 64 GPUs: shard 8 x tp 2 x pp 2 x cp 2; each pipeline
  // runs the local batch of 8 as micro-batches of 2; global 256 = 8 x dp 8 x 4 accumulation.
  const std::string toml = R"(
[model]
name = "llama3"
flavor = "70B"
converters = ["float8"]
[training]
local_batch_size = 8
global_batch_size = 256
seq_len = 16384
mixed_precision_reduce = "bfloat16"
steps = 10
[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = 8
tensor_parallel_degree = 2
enable_async_tensor_parallel = true
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "GPipe"
pipeline_parallel_microbatch_size = 2
context_parallel_degree = 2
[activation_checkpoint]
mode = "selective"
selective_ac_option = "3"
[optimizer]
name = "AdamW"
implementation = "foreach"
early_step_in_backward = false
[compile]
enable = true
[float8]
enable_fsdp_float8_all_gather = true
[job]
dump_folder = "./outputs"
)";
  config::JobContext c;
  c.node = "dgx-h100";
  c.gpus_per_node = 8;  // no --gpus: the degrees multiply to the world size
  auto job = config::ImportTorchtitanToml(toml, "job.toml", c);
  const Scenario s = Loaded(job);
  CHECK(s.model.name == "llama3-70b");
  CHECK(s.cluster.gpus() == 64);
  CHECK(s.training.seq_len == 16384);
  CHECK(s.training.micro_batch == 2);
  CHECK(s.training.global_batch == 256);
  CHECK(s.training.precision == Precision::kFp8);
  CHECK(s.training.kernel_library == KernelLibrary::kPyTorch);
  CHECK(s.training.fp8_recipe == Fp8Recipe::kTensorwise);  // torchao's default
  CHECK(s.training.kernels == KernelFusion::kFused);
  CHECK(s.training.recompute == Recompute::kFull);
  CHECK(s.training.recompute_every == 3);
  CHECK(s.training.optimizer_impl == OptimizerImpl::kForeach);
  CHECK(s.parallel.framework == Framework::kFsdp);
  CHECK(s.parallel.sharding == FsdpSharding::kFullShard);
  CHECK(s.parallel.reduce_dtype == Dtype::kBf16);
  CHECK(s.parallel.tp == 2);
  CHECK(s.parallel.sequence_parallel);
  CHECK(s.parallel.tp_comm_overlap);
  CHECK(s.parallel.pp == 2);
  CHECK(s.parallel.pp_schedule == PipelineSchedule::kGpipe);
  CHECK(s.parallel.cp == 2);
  CHECK(s.parallel.cp_kind == CpKind::kRing);
  CHECK(s.dp() == 8);
  // [job] cannot change a step; the float8 all-gather is not priced: listed.
  CHECK(job->unmapped == std::vector<std::string>{"[float8].enable_fsdp_float8_all_gather"});
  CHECK(absl::StrContains(job->yaml, "# Not mapped"));

  auto refused = [&](const std::string& text, config::JobContext ctx) {
    auto r = config::ImportTorchtitanToml(text, "bad.toml", ctx);
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  const std::string base = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";
  // Malformed TOML and a value of the wrong type, each at its line and column.
  CHECK_THAT(refused(base + "[training\n", c), Catch::StartsWith("bad.toml:4:"));
  CHECK_THAT(refused(base + "[training]\nseq_len = \"long\"\nlocal_batch_size = 1\n", c),
             Catch::StartsWith("bad.toml:5:11: [training].seq_len: expected a whole number"));
  // data_parallel_shard_degree -1 (the default) needs the world size.
  CHECK_THAT(refused(base + "[training]\nseq_len = 2048\nlocal_batch_size = 1\n", c),
             Catch::Contains("pass --gpus N"));
  config::JobContext eight = c;
  eight.gpus = 8;
  CHECK_THAT(refused("[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n[training]\n"
                     "seq_len = 2048\nlocal_batch_size = 1\n",
                     eight),
             Catch::Contains("is no catalog model: pass --model"));
  CHECK_THAT(refused(base + "[training]\nseq_len = 2048\nlocal_batch_size = 1\n[parallelism]\n"
                            "pipeline_parallel_degree = 2\npipeline_parallel_schedule = "
                            "\"ZBVZeroBubble\"\n",
                     eight),
             Catch::Contains("'ZBVZeroBubble' is not one of 1F1B, GPipe"));
  CHECK_THAT(refused(base + "[training]\nseq_len = 2048\nlocal_batch_size = 1\n"
                            "data_parallel_shard_degree = 3\n",
                     eight),
             Catch::Contains("do not multiply to 8 GPUs"));
  // torchao's row-wise float8 scaling is not modelled.
  CHECK_THAT(refused(base + "[training]\nseq_len = 2048\nlocal_batch_size = 1\n[float8]\n"
                            "recipe_name = \"rowwise\"\n",
                     eight),
             Catch::Contains("[float8].recipe_name: torchao's rowwise scaling is not modelled"));
  // Degrees whose product leaves int64_t's range are refused, not multiplied.
  CHECK_THAT(refused(base + "[training]\nseq_len = 2048\nlocal_batch_size = 1\n[parallelism]\n"
                            "data_parallel_shard_degree = 1099511627776\n"
                            "tensor_parallel_degree = 1099511627776\n",
                     c),
             Catch::Contains("multiply to more than 1048576 GPUs"));
}

TEST_CASE("a NeMo recipe with its launcher's overrides imports as the hand-written case",
          "[import]") {
  // NVIDIA's DGX Cloud Nemotron-4 340B recipe, as published, with what nemotron/configure.sh
  // passes at v24.11.1 for the 128-GPU fp8 row (GBS = 2 x nodes), against its case in
  // scenarios/validation/nemo-dgxc-h100.yaml (written by tools/convert_megatron_te.py).
  auto text = ReadInputFile(STEPSIM_SOURCE_DIR "/tests/data/jobs/nemotron4-340b-synth.yaml");
  REQUIRE(text.ok());
  config::JobContext c;
  c.node = "dgx-h100";
  c.gpus_per_node = 8;
  const std::vector<std::string> overrides = {
      "trainer.num_nodes=16",   "model.global_batch_size=32",    "model.fp8=True",
      "+model.fp8_params=True", "model.ub_tp_comm_overlap=True", "model.sequence_parallel=True"};
  auto job = config::ImportNemoRecipe(*text, "nemotron4-340b-synth.yaml", c, overrides, 256000);
  INFO((job.ok() ? job->yaml : std::string(job.status().message())));
  REQUIRE(job.ok());
  CHECK(job->unmapped.empty());
  const config::DataRoot root{STEPSIM_SOURCE_DIR};
  auto loader = config::ScenarioLoader::FromText(root, job->yaml, "imported");
  REQUIRE(loader.ok());
  // The one setting a recipe cannot say: the Transformer Engine release of its container.
  auto imported = loader->Load({{"training.te_version", "1.10"}});
  REQUIRE(imported.ok());
  const Scenario h =
      HandCase("nemo-dgxc-h100.yaml", "dgxc_v24111_nemotron_340b_pretrain_fp8_h100x128");
  CHECK(imported->model.vocab == h.model.vocab);
  CHECK(imported->cluster.gpus() == h.cluster.gpus());
  CHECK(imported->parallel.pp_chunks == h.parallel.pp_chunks);
  CHECK(imported->parallel.store_param_remainders == h.parallel.store_param_remainders);
  CHECK(imported->parallel.overlap_param_gather == h.parallel.overlap_param_gather);
  CHECK(imported->training.fp8_params == h.training.fp8_params);
  CheckSameReplay(*imported, h);

  // Hydra's rule: a key the recipe lacks needs +; a malformed recipe is refused where it breaks.
  auto refused = [&](const std::string& t, std::vector<std::string> o) {
    auto r = config::ImportNemoRecipe(t, "r.yaml", c, o, 256000);
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  CHECK_THAT(refused(*text, {"model.fp8_params=True"}),
             Catch::Contains("is not in the recipe (Hydra adds a key with +model.fp8_params)"));
  CHECK_THAT(refused("model: {num_layers: [1\n", {}), Catch::StartsWith("r.yaml:"));
  CHECK_THAT(refused("trainer: {num_nodes: 2, devices: 8}\nmodel: {num_layers: many}\n", {}),
             Catch::StartsWith("r.yaml:2:21: model.num_layers: expected a whole number"));
  CHECK_THAT(refused(*text, {"model.activation=relu"}), Catch::Contains("'relu' is not modelled"));
  // Sizes from a stranger's recipe: a product past int64_t and a zero divisor are refused.
  CHECK_THAT(refused(*text, {"trainer.num_nodes=1099511627776", "trainer.devices=1099511627776"}),
             Catch::Contains("more than 1048576 GPUs"));
  CHECK_THAT(refused(*text, {"model.make_vocab_size_divisible_by=0"}),
             Catch::Contains("model.make_vocab_size_divisible_by: expected at least 1"));
}

}  // namespace
}  // namespace sim
