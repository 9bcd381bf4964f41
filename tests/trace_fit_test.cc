// stepsim calibrate --trace (sim/validate/trace_fit.h): kernels sorted by their real names, a
// Kineto trace read with its steps and its other GPUs refused, and known efficiencies recovered
// from a synthetic trace made with them.

#include "sim/validate/trace_fit.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "sim/config/loaders.h"
#include "sim/cost/compute_cost.h"
#include "sim/workload/lowering.h"
#include "sim/workload/policy/framework_traits.h"

namespace sim::validate {
namespace {

using Json = nlohmann::json;

TEST_CASE("kernels are sorted by the names CUDA gives them", "[trace]") {
  // Names as PyTorch profiler traces show them on H100s and A100s.
  CHECK(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize"
                       "2x1x1_execute_segment_k_off_kernel__5x_cublas") == KernelClass::kGemm);
  CHECK(ClassifyKernel("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN") == KernelClass::kGemm);
  CHECK(ClassifyKernel("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn") ==
        KernelClass::kGemm);
  CHECK(ClassifyKernel("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_"
                       "64x64_32x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_"
                       "32x6_tn_align8::Params)") == KernelClass::kGemm);
  CHECK(ClassifyKernel("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, "
                       "false, cutlass::bfloat16_t>, false, true, false>(Flash_fwd_params)") ==
        KernelClass::kAttention);
  CHECK(ClassifyKernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_"
                       "64x128x128_4x1x1_kernel0_0") == KernelClass::kAttention);
  CHECK(ClassifyKernel("fmha_cutlassF_bf16_aligned_64x128_rf_sm80") == KernelClass::kAttention);
  CHECK(ClassifyKernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)") ==
        KernelClass::kCommunication);
  CHECK(ClassifyKernel("void at::native::vectorized_elementwise_kernel<4, "
                       "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, "
                       "at::native::FillFunctor<float>, at::detail::Array<char*, 1>)") ==
        KernelClass::kMemoryBound);
  CHECK(ClassifyKernel("void transformer_engine::cast_transpose_fused_kernel_notaligned<...>") ==
        KernelClass::kMemoryBound);
  CHECK(ClassifyKernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, "
                       "float, long>, float, float, float, float, float, float, int, float>") ==
        KernelClass::kMemoryBound);
}

Scenario Load(std::vector<config::Override> keys) {
  auto s = config::LoadScenario(config::DataRoot{STEPSIM_SOURCE_DIR},
                                STEPSIM_SOURCE_DIR "/scenarios/default.yaml", keys);
  REQUIRE(s.ok());
  return *s;
}

// A Kineto trace of `steps` steps of `s` on stage 0 as a GPU with `s`'s calibration would run
// them: one kernel per op, named as real ones are (fp8 casts apart from their GEMMs), NCCL
// kernels and copies beside them, which the fit must leave out.
std::string SyntheticTrace(const Scenario& s, int steps) {
  auto p = Lower(s);
  REQUIRE(p.ok());
  GpuSpec gpu = CalibratedGpu(s);
  gpu.calibration.launch_overhead = Duration::Zero();
  Json events = Json::array();
  double ts = 0;
  auto kernel = [&](const std::string& name, double seconds) {
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", name},
                      {"pid", 0},
                      {"tid", 7},
                      {"ts", ts},
                      {"dur", seconds * 1e6},
                      {"args", {{"device", 0}, {"stream", 7}}}});
    ts += seconds * 1e6;
  };
  for (int step = 0; step < steps; ++step) {
    events.push_back({{"ph", "X"},
                      {"cat", "user_annotation"},
                      {"name", absl::StrCat("ProfilerStep#", step + 3)},
                      {"ts", ts},
                      {"dur", 1.0}});
    for (const Op& op : p->ops) {
      if (op.kind != OpKind::kCompute || op.stage != 0) continue;
      Op body = op;
      body.serial_bytes = Bytes();
      const double t =
          cost::ComputeDuration(body, gpu, s.training.precision, s.training.flash_impl).seconds();
      if (op.serial_bytes > Bytes()) {
        kernel("void transformer_engine::cast_transpose_fused_kernel<...>",
               static_cast<double>(op.serial_bytes.count()) /
                   (gpu.hbm_bandwidth.bytes_per_s() * gpu.calibration.memory_efficiency));
      }
      switch (op.op_class) {
        case OpClass::kGemm:
          kernel("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN", t);
          break;
        case OpClass::kAttention:
          kernel(op.pass == OpPass::kBackward ? "cudnn_generated_fort_native_sdpa_sm90_flash_bprop"
                                              : "void flash_fwd_kernel<...>",
                 t);
          break;
        case OpClass::kMemoryBound:
          kernel("void at::native::vectorized_elementwise_kernel<4, ...>", t);
          break;
        default:
          break;
      }
    }
    kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0.01);
    events.push_back({{"ph", "X"}, {"cat", "gpu_memcpy"}, {"name", "Memcpy HtoD"}, {"dur", 50.0}});
  }
  return Json{{"schemaVersion", 1}, {"traceEvents", events}}.dump();
}

TEST_CASE("calibrate --trace recovers the efficiencies a trace was made with", "[trace]") {
  // Llama-2-7B on one H100 node (FSDP, PyTorch kernels): its catalog terms start the fit; the
  // trace was made with others.
  const Scenario s = Load({{"model", "llama2-7b"},
                           {"cluster.nodes", "1"},
                           {"cluster.node", "dgx-h100"},
                           {"training.global_batch", "16"}});
  Scenario known = s;
  known.cluster.gpu.calibration.gemm_efficiency = 0.612;
  known.cluster.gpu.calibration.attention_efficiency = 0.471;
  known.cluster.gpu.calibration.memory_efficiency = 0.802;
  auto trace = ReadKernelTrace(SyntheticTrace(known, 2), "synthetic.json");
  REQUIRE(trace.ok());
  CHECK(trace->steps == 2);
  CHECK(trace->communication_kernels == 2);
  auto fit = FitToTrace(s, *trace, {"synthetic.json", std::nullopt, 0});
  REQUIRE(fit.ok());
  const GpuCalibration& c = fit->fit.fitted;
  CHECK(c.gemm_efficiency == Approx(0.612).epsilon(1e-4));
  CHECK(c.attention_efficiency == Approx(0.471).epsilon(1e-4));
  CHECK(c.memory_efficiency == Approx(0.802).epsilon(1e-4));
  CHECK(fit->fit.mape < 0.01);
  CHECK(fit->fit.start_mape > 5);
  CHECK(fit->fit.params ==
        std::vector<std::string>{"memory_efficiency", "gemm_efficiency", "attention_efficiency"});
  // The file reads back with the fitted terms and says what they rest on.
  const std::string file = CalibrationFileText(fit->fit, "stepsim calibrate x --trace t");
  CHECK_THAT(file, Catch::Contains("gemm_efficiency: 0.6120"));
  CHECK_THAT(file, Catch::Contains("kernel times of a profiled step"));
}

TEST_CASE("calibrate --trace fits a kernel library's fp8 GEMMs", "[trace]") {
  // Megatron in fp8 under Transformer Engine: the GEMM class fixes fp8_gemm_efficiency, under
  // the library's entry; memory_efficiency, a GPU term, is not moved.
  const Scenario s = Load({{"model", "llama2-7b"},
                           {"cluster.nodes", "1"},
                           {"cluster.node", "dgx-h100"},
                           {"training.global_batch", "16"},
                           {"parallel.framework", "megatron"},
                           {"parallel.zero", "1"},
                           {"training.precision", "fp8"}});
  Scenario known = s;
  auto& entry = LibraryEntry(known.cluster.gpu.calibration, KernelLibrary::kTransformerEngine);
  entry.fp8_gemm_efficiency = 0.55;
  entry.attention_efficiency = 0.5;
  auto trace = ReadKernelTrace(SyntheticTrace(known, 1), "te.json");
  REQUIRE(trace.ok());
  CHECK(trace->steps == 1);
  auto fit = FitToTrace(s, *trace, {"te.json", KernelLibrary::kTransformerEngine, 0});
  REQUIRE(fit.ok());
  const GpuCalibration te = ForLibrary(fit->fit.fitted, KernelLibrary::kTransformerEngine);
  CHECK(te.Fp8GemmEfficiency() == Approx(0.55).epsilon(1e-4));
  CHECK(te.attention_efficiency == Approx(0.5).epsilon(1e-4));
  CHECK(fit->fit.fitted.memory_efficiency == s.cluster.gpu.calibration.memory_efficiency);
  CHECK(fit->fit.params == std::vector<std::string>{"fp8_gemm_efficiency", "attention_efficiency"});
  // A library the scenario does not run is refused.
  auto wrong = FitToTrace(s, *trace, {"te.json", KernelLibrary::kPyTorch, 0});
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(std::string(wrong.status().message()), Catch::Contains("runs transformer_engine"));
}

TEST_CASE("a trace is refused where it cannot be read, at its line and column", "[trace]") {
  auto refused = [](const std::string& text) {
    auto t = ReadKernelTrace(text, "t.json");
    REQUIRE_FALSE(t.ok());
    return std::string(t.status().message());
  };
  CHECK_THAT(refused("{\"traceEvents\": [\n  {\"ph\": \"X\",,}\n]}"),
             Catch::StartsWith("t.json:2:"));
  CHECK_THAT(refused("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\"}]}"),
             Catch::Contains("dur is not a duration"));
  CHECK_THAT(refused("{\"traceEvents\": []}"), Catch::Contains("no GPU kernels"));
  CHECK_THAT(refused("{\"events\": []}"), Catch::Contains("no traceEvents"));
  const std::string two =
      "[{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"dur\": 1, \"args\": {\"device\": "
      "0}}, {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"dur\": 1, \"args\": "
      "{\"device\": 3}}]";
  CHECK_THAT(refused(two), Catch::Contains("kernels of several GPUs (devices 0, 3)"));
}

}  // namespace
}  // namespace sim::validate
