// Validation against published measurements: the conventions, the DeepSpeed estimator view, and
// the regression guard on the public cases' errors.
#include "sim/validate/validate.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "absl/strings/match.h"
#include "sim/config/catalog.h"
#include "sim/workload/params.h"
#include "sim/workload/static_ledger.h"

namespace sim {
namespace {

const config::DataRoot kRoot{STEPSIM_SOURCE_DIR};

std::vector<ValidationCase> AllCases() {
  std::vector<ValidationCase> all;
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(STEPSIM_SOURCE_DIR "/scenarios/validation")) {
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto c = config::LoadCases(kRoot, f);
    REQUIRE(c.ok());
    all.insert(all.end(), c->begin(), c->end());
  }
  return all;
}

TEST_CASE("DeepSpeed estimator formulas, branch by branch", "[validate]") {
  const int64_t p = 1'000'000'000, ll = 10'000'000;
  DeepSpeedEstimatorInput in{3, p, ll, 8, 1, false, false, true, 1.5};
  // ZeRO-3, nothing offloaded: GPU 4·LL + 18P/G; CPU (zero_init) LL·4·gpn·1.5.
  CHECK(EstimateDeepSpeed(in).gpu.count() == 4 * ll + 18 * p / 8);
  CHECK(EstimateDeepSpeed(in).cpu.count() == ll * 4 * 8 * 3 / 2);
  in.zero_init = false;  // CPU P·4·gpn·1.5
  CHECK(EstimateDeepSpeed(in).cpu.count() == p * 4 * 8 * 3 / 2);
  in.offload_optimizer = true;  // GPU 4·LL + 2P/G; CPU P·max(4·gpn, 16)·1.5
  CHECK(EstimateDeepSpeed(in).gpu.count() == 4 * ll + 2 * p / 8);
  CHECK(EstimateDeepSpeed(in).cpu.count() == p * 32 * 3 / 2);
  in.offload_param = true;  // GPU 4·LL; CPU P·max(4·gpn, 18)·1.5
  CHECK(EstimateDeepSpeed(in).gpu.count() == 4 * ll);
  CHECK(EstimateDeepSpeed(in).cpu.count() == p * 32 * 3 / 2);
  in.zero_init = true;  // CPU P·18·1.5
  CHECK(EstimateDeepSpeed(in).cpu.count() == p * 18 * 3 / 2);
  DeepSpeedEstimatorInput z2{2, p, 0, 8, 1, false, false, true, 1.5};
  CHECK(EstimateDeepSpeed(z2).gpu.count() == 4 * p + 16 * p / 8);
  CHECK(EstimateDeepSpeed(z2).cpu.count() == p * 4 * 8 * 3 / 2);
  z2.offload_optimizer = true;
  CHECK(EstimateDeepSpeed(z2).gpu.count() == 2 * p);
  CHECK(EstimateDeepSpeed(z2).cpu.count() == p * 32 * 3 / 2);
}

TEST_CASE("MFU in the MosaicML and torchtitan conventions", "[validate]") {
  auto cases = config::LoadCases(kRoot, STEPSIM_SOURCE_DIR "/scenarios/validation/mpt-a100.yaml");
  REQUIRE(cases.ok());
  const ValidationCase& c = cases->front();
  auto replayed = replay::Simulate(c.scenario, {});
  REQUIRE(replayed.ok());
  const auto r = std::make_optional(report::Summarize(c.scenario, *replayed));
  const Scenario& s = c.scenario;
  const double n = static_cast<double>(CountParameters(s.model).total);
  const double seq = static_cast<double>(s.training.seq_len), l = s.model.layers,
               h = s.model.hidden, b = static_cast<double>(s.training.global_batch);
  const double denom = r->step.seconds() * static_cast<double>(s.cluster.gpus()) * 312e12;
  const double per_seq = 2 * n * seq + 4 * l * h * seq * seq;
  CHECK(*validate::Predict("mfu", c, *r) == Approx(3 * per_seq * b / denom).epsilon(1e-12));
  // This case checkpoints activations: HFU counts 4 passes.
  CHECK(*validate::Predict("hfu", c, *r) == Approx(4 * per_seq * b / denom).epsilon(1e-12));
  ValidationCase t = c;
  t.flops = FlopConvention::kTorchtitan;
  const double v = static_cast<double>(s.model.vocab);
  const double per_token = 6 * (n - v * h) + 12 * l * h * seq;
  CHECK(*validate::Predict("mfu", t, *r) == Approx(per_token * b * seq / denom).epsilon(1e-12));
  CHECK_FALSE(validate::Predict("hfu", t, *r).has_value());
  CHECK(*validate::Predict("tokens_per_s_per_gpu", c, *r) ==
        Approx(b * seq / r->step.seconds() / static_cast<double>(s.cluster.gpus())));
}

TEST_CASE("a measured run that the replay does not fit is said so beside its errors",
          "[validate]") {
  // The default scenario without recompute overflows its 80 GB H100s (the README's example);
  // with full recompute it fits. Both as if a run had measured them.
  auto make = [](const char* id, const char* recompute) {
    auto s = config::LoadScenario(kRoot, STEPSIM_SOURCE_DIR "/scenarios/default.yaml",
                                  {{"training.recompute", recompute}});
    REQUIRE(s.ok());
    ValidationCase c;
    c.id = id;
    c.source = "a test";
    c.file = "test.yaml";
    c.measured = {{"step_s", 100.0}};
    c.scenario = *s;
    return c;
  };
  const auto results = validate::RunCases({make("overflows", "none"), make("fits", "full")}, 1);
  REQUIRE(results.size() == 2);
  REQUIRE(results[0].not_fitting.has_value());
  CHECK(absl::StrContains(*results[0].not_fitting, "of 79.18 GiB usable per GPU"));
  CHECK_FALSE(results[1].not_fitting.has_value());
  // Its step is still compared.
  CHECK(results[0].metrics.size() == 1);
  const std::string text = validate::ValidationText(results);
  CHECK(absl::StrContains(text, "Replayed as not fitting, though the runs were measured"));
  CHECK(absl::StrContains(text, "  overflows: reserved peak"));
  const auto json = validate::ValidationJson(results);
  REQUIRE(json["not_fitting"].size() == 1);
  CHECK(json["not_fitting"][0]["id"] == "overflows");
}

// The regression guard: the public cases' errors may not rise above what this calibration
// reaches (step-time MAPE 5.0% over the 69 fitted A100 cases; MosaicML time metrics 3.95%;
// flash attention priced per implementation, MosaicML's rows on llm-foundry's Triton kernel).
TEST_CASE("public validation cases stay within their error levels", "[validate]") {
  const auto results = validate::RunCases(AllCases(), 2);
  double step_sum = 0, mpt_sum = 0, table5_sum = 0, memory_sum = 0, tune_sum = 0, h100_sum = 0;
  int h100_n = 0;
  double h200_sum = 0;
  int h200_n = 0;
  int replayed_beside = 0;
  int step_n = 0, mpt_n = 0, table5_n = 0, memory_n = 0, tune_n = 0, ran = 0, skipped = 0;
  int not_fitting = 0;
  // Megatron-Core + Transformer Engine: NeMo on DGX H100 (held out of every fit: where the H100
  // calibration stands on that stack) and SimuMax's B200 rows (the B200's fit).
  double nemo_sum = 0, b200_step_sum = 0;
  int nemo_n = 0, b200_step_n = 0, te_not_fitting = 0;
  for (const auto& r : results) {
    if (r.skipped) {
      ++skipped;
      CHECK_FALSE(r.skipped->empty());
      continue;
    }
    ++ran;
    const bool megatron_te = r.group == "nemo-dgxc-h100" || r.group == "simumax-b200";
    (megatron_te ? te_not_fitting : not_fitting) += r.not_fitting.has_value();
    for (const auto& m : r.metrics) {
      if (megatron_te) {
        // NeMo on H100 (issue 66 asks for 5 %): the H100's Transformer Engine terms are fitted
        // to these 88 steps (tools/calibrate.sh, --library transformer_engine): MAPE 3.52 %, each
        // model left out 4.4 % (Grok-1 fp8 -14.7 % the furthest, Nemotron-4 340B fp8 up to +5.9
        // %). 4.23 % while distributed_fused_adam's overlapped gradient and parameter syncs were
        // left out; 4.90 % while the Nemotron-4 and Grok-1 cases followed their yamls' TP
        // overlap (false) where the launchers turn it on (the 340B rows +14 .. +19 % then); 4.96 %
        // before Megatron's step read the fp32 gradients, their norm and the zeroed buffer
        // (MegatronPolicy::StepExtraTraffic); 4.91 % while every micro-batch cast the fp8 weights
        // again and gathered the SP inputs in 16 bits, with an FP8 GEMM term of 0.875 standing in
        // for what TE does not do (0.73 now). On the llm-foundry (PyTorch-kernel) terms
        // before: 13.2 % with the recipes' TP communication overlap (userbuffers) modelled, 19.5 %
        // without, 21.4 % while the gradients were reduced in fp32 where the recipes reduce them in
        // bf16. B200: its calibration is fitted to these 22 steps (tools/calibrate.sh): -16.3 ..
        // +7.0 %, MAPE 4.84 %, each model left out 6.6 %; 6.2 % (left out 10.7 %) before
        // Megatron-Core's MoE layer sorted its tokens by local expert and ran a GEMM per expert
        // (the DeepSeek-V3 rows -5.8 .. -15.6 % then, -0.5 .. -10.1 % now). The TP 8 rows the
        // furthest (-11.4 .. -16.3
        // %: each micro-batch 9 % fast and ~45 ms per step missing; TP communication on NVLink 5
        // is priced with a first-estimate efficiency). Peaks, nothing fitted: allocated -1.9 ..
        // -7.5 % (the all-to-all CP rows at 32K tokens the furthest), reserved -4.1 .. -15.3 %
        // (the allocator cache these runs hold). Guards that tighten as the model improves.
        if (m.metric == "step_s") {
          CHECK(std::abs(m.error_pct) < (r.group == "simumax-b200" ? 17.0 : 15.5));
          (r.group == "simumax-b200" ? b200_step_sum : nemo_sum) += std::abs(m.error_pct);
          ++(r.group == "simumax-b200" ? b200_step_n : nemo_n);
        } else if (m.metric == "peak_memory") {
          CHECK(std::abs(m.error_pct) < (absl::EndsWith(r.id, "_reserved") ? 16.0 : 8.0));
        }
        continue;
      }
      if (r.group == "h200-measured") {
        // Llama 3.2 3B trained on one H200 by tools/measure/gpu_measure.py (docs/measurements/),
        // nothing fitted to them. Allocated peaks: MAPE 0.6 %, the worst DDP without
        // checkpointing (-4.4 %: the forward's peak); 5.4 % (up to -15.8 %) before AdamW's
        // foreach temporaries, DDP's lazy .grad and one gradient for a tied embedding. Reserved
        // peaks: MAPE 5.4 %, up to -17.5 % (torchtune, full recompute, eager loss: the caching
        // allocator's model). Step times on the H100's fitted efficiencies: MAPE 7.2 % (10.6 %
        // before the optimizer's traffic followed its implementation and the parameters'
        // dtype), up to -28.5 % (per-op checkpointing, whose dispatch-mode policy made the
        // eager step slower than full recompute: 0.449 s against 0.372 s); torchtune's rows
        // +1.3 to +10.4 %.
        if (m.metric == "peak_memory") {
          CHECK(std::abs(m.error_pct) < (absl::StrContains(r.id, "_allocated") ? 5.0 : 18.0));
        } else if (m.metric == "step_s") {
          CHECK(std::abs(m.error_pct) < 30.0);
        }
        h200_sum += std::abs(m.error_pct) *
                    (m.metric == "peak_memory" && absl::StrContains(r.id, "_allocated"));
        h200_n += m.metric == "peak_memory" && absl::StrContains(r.id, "_allocated");
        continue;
      }
      if (m.metric == "peak_memory" && r.group == "torchtune") {
        // torchtune's README and Llama 3.2 3B ablation (issue 13 asks MAPE <= 10 %), nothing
        // fitted to them. Reached: 6.4 % over 17; the worst are 405B QLoRA (+15.8 %; +12.1 %
        // before FSDP2's gather buffer was held beside the parameters it is copied into), 70B
        // full with CPU offload (-14.5 %) and 8-bit AdamW (-14.5 %); 70B LoRA +2.1 % (-4.5 %
        // before). The uncompiled packed 3B row is -0.7 % with training.kernels: eager (-18.2 %
        // priced as fused kernels).
        CHECK(std::abs(m.error_pct) < 16.5);
        tune_sum += std::abs(m.error_pct);
        ++tune_n;
      } else if (m.metric == "peak_memory") {
        // Measured peaks (torchao, torchtitan: reserved; ColossalAI DDP: allocated), nothing
        // fitted to them. Reached: torchao +3.1, +5.7; torchtitan -2.2, -0.6 (FSDP2, eager
        // kernels; with FSDP1's in-place collectives +4.2, +2.0 and -1.5, +0.2); ColossalAI DDP
        // -9.4 %, DeepSpeed ZeRO-3 +3.8 %.
        CHECK(std::abs(m.error_pct) < 10.0);
        memory_sum += std::abs(m.error_pct);
        ++memory_n;
      }
      if (m.metric == "step_s" && r.group == "megatron-moe") {
        // Held out of every fit; both run Megatron-Core with Transformer Engine, priced with the
        // H100's TE terms (fitted to NeMo's dense-heavy rows), which made both faster: the MoE
        // layers of Megatron-Core stay underpriced (so is Grok-1 in fp8, down to -14.9 %, and
        // DeepSeek-V3 on B200). Megatron-Core's Mixtral 8x7B on 64 H100 (EP 8, PP 4
        // interleaved): -4.3 % (+4.2 % on the PyTorch-kernel terms: the step its 468 TFLOP/s
        // imply, 2.903 s, against 3.025 s; +1.9 % before GEMM waves, +5.1 % with
        // gemm_k_overhead fitted at 512). Qwen3-235B-A22B on 256 H100 (TP 2, EP 8, ETP 1, PP 32
        // x VPP 3): -23.7 % (24.2 s measured; -28.0 % before Megatron-Core's sort of the routed
        // tokens by local expert and TE's GEMM per expert; -20.7 % on the PyTorch-kernel terms;
        // -21.3 % before GEMM waves, -17.5 % while
        // gemm_k_overhead was fitted at 512, which
        // slowed each expert's weight-gradient GEMM over its 1,024 rows by half). Not modelled,
        // and candidates for the gap: the A2A dispatcher's host synchronisation per layer, the
        // grouped GEMM kernel's efficiency beyond its reduction lengths.
        CHECK(std::abs(m.error_pct) < (absl::StrContains(r.id, "qwen3") ? 25.0 : 9.0));
        continue;
      }
      if (m.metric == "step_s" && absl::StrContains(r.id, "_h100_202412_")) {
        // torchtitan on Grand Teton's 96 GB H100 at its 500 W limit, held out of every fit:
        // -8.8 % (8 GPUs) and -11.0 % (128) with compute at (500/700)^(1/3) of the SXM5's
        // clocks; -15.9 and -17.8 % at the SXM5's. The rest is the part's unpublished HBM
        // bandwidth (the SXM5's stands in) and torchtitan's own rows, whose A100 ones without
        // full recompute run -6.2 to -9.0 % on the A100's fit.
        CHECK(std::abs(m.error_pct) < 12.0);
        continue;
      }
      if (m.metric == "step_s" && r.group != "megatron" && r.group != "mpt-h100") {
        step_sum += std::abs(m.error_pct);
        ++step_n;
      }
      if (m.metric == "step_s" && absl::StartsWith(r.id, "korthikanti22_t5_")) {
        // Korthikanti et al. 2022 Table 5 (issue 17 asks for Calculon's 3.65 % MAPE), with
        // the A100 calibration fitted to the MosaicML and torchtitan cases only, Megatron out
        // of the fit: MAPE 3.19 %, from +0.6 % (22B selective) through -0.1 .. +2.8 % (22B full,
        // 530B) and +3.7 / +5.2 % (175B selective / full, whose TP-8 QKV and first MLP GEMMs of
        // 2,048 x 4,608 and 2,048 x 6,144 run 6 and 8 waves for 5.3 and 7.1 waves of tiles on
        // 108 SMs: 12.5 % slower) to +5.5 / +6.0 % (1T full / selective, whose last stage
        // carries the LM head beside its 2 layers). 3.05 % before Megatron's step read the fp32
        // gradients, their norm and the zeroed gradient buffer (StepExtraTraffic). 2.48 % before
        // GEMM waves were priced (the 175B rows +1.9 / +0.9 %), when the fitted A100 efficiency was
        // 2 % lower and the leave-one-source-out error higher (7.8 %, now 7.4 %). 5.90 % (every row
        // slow, up to +10.5 %) while gemm_k_overhead was fitted at 512 with no attention term: it
        // stood in for short sequences' slow flash attention in MosaicML's small models and slowed
        // the 1T's weight-gradient GEMMs over 2,048 tokens by 25 %; pinned at the tile's 128 with
        // attention_kv_overhead fitted (246 on A100), the rows fall into line. Earlier: 4.02 %
        // while compute beside a collective was stretched whole when it started during one
        // (gemm_k_overhead then fitted at 350); 5.81 % before the 1F1B schedule waited for its
        // sends as Megatron-LM's does (the 1T rows' 64 stages: +0.3 and +0.4 %). The 1T rows
        // conflict with Narayanan's Table 1: its 1T row is the same configuration (TP 8, PP 64, 512
        // micro-batches of one 2,048-token sequence, full recompute) measured 8.7 % slower (HFU
        // 0.522, 102.6 s at Korthikanti's scale, against 94.42 s); stepsim gives 99.9 s for
        // Narayanan's row (HFU +2.7 %) and 99.6 s for Korthikanti's.
        CHECK(std::abs(m.error_pct) < 7.0);
        table5_sum += std::abs(m.error_pct);
        ++table5_n;
      }
      if (absl::StartsWith(r.id, "narayanan21_t1_")) {
        // Narayanan et al. SC21 Table 1 (HFU), out of the A100 fit, with the micro-batches and
        // virtual stages of the paper's reproduction script (examples/sc21/run_table_1.sh):
        // every row within 10 % as issue 17 asks, the TP 1-8 models of 1.7-18.4B from +0.5 to
        // +3.1 %, 39.1B +2.0 %, 76.1B (interleaved, 3 chunks) +9.8 % (+9.4 % before GEMM
        // waves), 145.6-529.6B +6.0 to +7.8 %, 1T +2.7 % (with gemm_k_overhead fitted at 512:
        // -2.2 .. +6.3 %).
        CHECK(std::abs(m.error_pct) < 10.0);
      }
      if (r.group == "torchtitan" && m.metric == "step_s") {
        // torchtitan's FSDP2 A100 rows (8 of the 69 fitted): -9.0 to -1.4 % (MAPE 6.1 %; 5.0 %
        // before GEMM waves, whose cost falls mostly on MosaicML's small models and raised the
        // fitted efficiency by 2 %, which these long-sequence rows' large GEMMs, within 2 % of
        // whole waves, then run at; 4.4 % with gemm_k_overhead fitted at 512 and no attention
        // term; 6.8 %
        // while a kernel that started beside a collective was stretched whole, 9.8 % before
        // FSDP2's copies around each collective were priced, 14.5 % before training.kernels
        // priced their eager RoPE, SwiGLU, repeat_kv and, in the 70B presets, RMSNorm); the
        // rows without full recompute are still the furthest (-6.2 to -9.0 %; full: -2.1,
        // -1.4).
        CHECK(std::abs(m.error_pct) < 9.5);
      }
      if (r.group == "mpt-h100" && m.metric == "step_s") {
        // The H100 calibration is fitted to these 38 rows (bf16 and fp8): MAPE 2.83 %.
        CHECK(std::abs(m.error_pct) < 10.0);
        h100_sum += std::abs(m.error_pct);
        ++h100_n;
      }
      if (r.group == "mpt-a100" &&
          (m.metric == "step_s" || m.metric == "mfu" || m.metric == "tokens_per_s_per_gpu")) {
        mpt_sum += std::abs(m.error_pct);
        ++mpt_n;
      }
      if (r.group == "deepspeed-estimator" && m.metric == "replayed_gpu_memory") {
        // The replayed GPU peak of the same configuration beside the estimate (a decoder-only
        // T5-3B stand-in, 512 tokens per GPU): the estimate counts model states only, the
        // replay adds DeepSpeed's defaults — up to 1e9 gathered elements (1.86 GiB) and a
        // 5e8-element gradient bucket (0.93 GiB) — transient gradients, the upcast and
        // activations, and shards ZeRO-2 gradients the estimate keeps whole (-28.8 %); the tiny
        // offloaded cases (0.12-0.79 GiB estimated) are mostly those transients. A formula, not a
        // measurement: only the replay's running is checked here.
        CHECK(m.predicted > 0);
        ++replayed_beside;
        continue;
      }
      if (r.group == "deepspeed-estimator") {
        // Exact formula; the residue is the record's rounding of P (2.851B) and the largest
        // layer (32M for 32.9M).
        CHECK(std::abs(m.error_pct) < 3.5);
      }
    }
  }
  CHECK(ran >= 121);    // 61 MosaicML + 6 torchtitan + 17 estimator + 20 Megatron + 17 torchtune
  CHECK(skipped >= 1);  // reported with their reason, not dropped
  CHECK(table5_n == 8);
  // Measured runs the replay does not fit (stepsim validate lists them): none. Listed before:
  // 21 MosaicML rows of 350M-3B models without checkpointing, at 84-99 GiB reserved of 79 GiB,
  // until their cases took llm-foundry's default loss (flash-attn's cross-entropy) instead of
  // stepsim's eager one; and Qwen3-235B (82.4 GiB) until its `--recompute-modules layernorm
  // moe_act` was modelled. A guard that may only go down.
  CHECK(not_fitting == 0);
  // Megatron/TE runs replayed as not fitting (issue 66 asks for none): none. Nemotron-4 340B
  // on 128 GPUs (data-parallel 2) did, bf16 (+1.5 GiB) and fp8 (+6.9 GiB), until NeMo's fp32
  // masters were held as 16-bit remainders (parallel.store_param_remainders) and TE's fp8
  // layers saved their inputs in fp8; 6 while Megatron's gradient buffer was fp32 in runs that
  // keep it in bf16.
  CHECK(te_not_fitting == 0);
  CHECK(nemo_n == 88);
  CHECK(nemo_sum / nemo_n <= 3.55);  // 3.52 % reached (fitted; 19.5 % before the TE terms)
  CHECK(b200_step_n == 22);
  CHECK(b200_step_sum / b200_step_n <= 4.9);  // 4.84 % reached (fitted; 26.0 % before)
  CHECK(h200_n == 17);
  CHECK(h200_sum / h200_n <= 0.7);  // 0.6 % reached
  CHECK(memory_n >= 6);
  CHECK(memory_sum / memory_n <= 4.2);  // 4.1 % reached
  CHECK(tune_n == 17);
  CHECK(h100_n == 38);
  CHECK(h100_sum / h100_n <= 2.9);  // 2.83 % reached (issue 17: <= 5 %)
  CHECK(replayed_beside == 17);
  CHECK(tune_sum / tune_n <= 6.5);      // 6.4 % reached
  CHECK(table5_sum / table5_n <= 3.2);  // 3.19 % reached (issue 17: <= 3.65 %; see above)
  CHECK(step_n >= 67);
  CHECK(mpt_n >= 180);
  // 3.94 % reached over the 69 fitted A100 cases (4.17 % before GEMM waves; 3.91 % with
  // gemm_k_overhead free at 512, which put Korthikanti's Table 5 at 5.90 %); 3.79 % over
  // MosaicML's A100 step, MFU and tokens/s (4.18 % before GEMM waves).
  CHECK(step_sum / step_n <= 4.0);
  CHECK(mpt_sum / mpt_n <= 3.9);
}

}  // namespace
}  // namespace sim
