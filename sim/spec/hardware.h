#pragma once
// GPUs and nodes as plain data (topologies/gpus.yaml, topologies/nodes.yaml).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/units.h"

namespace sim {

enum class Dtype { kFp32, kTf32, kBf16, kFp16, kFp8 };

// The library whose kernels run a step's GEMMs and attention (training.kernel_library; a
// framework implies one, FrameworkTraits::DefaultKernelLibrary). pytorch: cuBLAS GEMMs through
// torch.matmul and flash attention through flash-attn or SDPA (llm-foundry, torchtitan,
// DeepSpeed, FSDP); transformer_engine: NVIDIA Transformer Engine's modules as Megatron-Core and
// NeMo build their layers (cuBLASLt GEMMs, cuDNN fused attention, TE's FP8 recipes with their
// own cast, transpose and amax kernels). Each library's kernels reach their own share of the
// peak: a GPU's calibration holds per-library terms (GpuCalibration::Library) over its own.
enum class KernelLibrary { kPyTorch, kTransformerEngine };

// Per-GPU-type calibration of the cost model (docs/model.md "Time"): one set of numbers per GPU
// type, never per case. Efficiencies are fractions of the datasheet peak.
struct GpuCalibration {
  // Large GEMMs in whole waves of tiles, fraction of dense peak (partial tiles and waves are
  // priced apart: Op::waves, sim/workload/gemm_waves.h).
  double gemm_efficiency = 0.75;
  // FlashAttention-2's share of the 16-bit peak; other implementations of flash attention run at
  // their published ratios to it (training.flash_impl, sim/cost/compute_cost.h FlashImplFactor).
  double attention_efficiency = 0.55;
  double memory_efficiency = 0.85;  // memory-bound kernels, fraction of HBM bandwidth
  // How much of a kernel's HBM traffic its math fails to hide: t = max(c, m) + blend·min(c, m)
  // for math time c and memory time m (0: a perfect roofline; 1: no overlap at all).
  double roofline_blend = 0.0;
  // A GEMM kernel's fixed work per output tile, in elements of its reduction dimension K: the
  // main loop walks K in CtaTileK-deep stages software-pipelined through shared memory, so it
  // first fills the pipeline (stages - 1 K-blocks) and after the last block runs the epilogue
  // that writes the tile (NVIDIA CUTLASS docs, "Efficient GEMM in CUDA"; its Ampere example
  // tiles 128 x 128 x 32 with 3 stages). A GEMM of reduction length K then runs at
  // K / (K + gemm_k_overhead) of its large-K rate: a 125M model's h = 768 projections pay most.
  // 128 is an estimate from that tile, not a fit: the fill is 2 blocks of 32 (64 elements of
  // K) and the epilogue, which converts and writes the 128 x 128 output while other tiles'
  // main loops run, is taken as about as long again. Step times alone do not separate it from
  // attention_kv_overhead (free fits put it at 512 on A100, 214 on H100), so stepsim calibrate
  // fits it only when --params names it. 0: no such term.
  double gemm_k_overhead = 128.0;
  // A flash-attention kernel's fixed work per query block, in key/value positions: each thread
  // block loads its query tile, then walks the keys and values in blocks, rescaling its running
  // softmax, and finally normalises and writes its output tile and log-sum-exp; the backward
  // walks the queries for each key/value block the same way (Dao, "FlashAttention-2", arXiv
  // 2307.08691, Algorithms 1 and 2). A causal kernel over sequence length s visits s / 2
  // positions per block on average and runs at (s / 2) / (s / 2 + attention_kv_overhead) of its
  // long-sequence rate. Fitted by stepsim calibrate to step times at one model size across
  // sequence lengths (llm-foundry's rows run 512 to 65,536 tokens); 0: no such term.
  double attention_kv_overhead = 0.0;
  Duration launch_overhead = Duration::Microseconds(4);
  // Host time to launch one kernel (the framework's Python and dispatcher work per op): the
  // host issues a stage's kernels one after another, and a kernel cannot start before it has
  // been issued, so this costs nothing while the GPU is busy with earlier work and paces the
  // step when kernels are shorter than their launch (small models, PyTorch eager). 0: never.
  Duration dispatch_overhead;
  double comm_efficiency = 0.80;  // achieved fraction of link bandwidth for collectives
  // NVLink SHARP (in-switch reduction, NVSwitch gen 3 and later): the fraction of the NVLink
  // bandwidth an NVLS all-reduce reaches; absent where the node has no NVLS.
  std::optional<double> nvls_efficiency;
  // A compute kernel runs this many times slower while a collective or send runs on its GPU
  // (sim/replay/replay.cc); at its full rate the rest of its time.
  double overlap_slowdown = 1.10;
  // The case files (by name, without .yaml) the compute efficiencies were fitted to; validate
  // --cross-validate refits without each in turn. Empty: first estimates, fitted to nothing.
  std::vector<std::string> fit_sources;
  // The terms that fit moved (a calibration file's fit.params): what cross-validation refits.
  // Empty: those stepsim calibrate moves by default.
  std::vector<std::string> fit_params;
  // FP8 GEMMs' share of the fp8 dense peak where it differs from 16-bit GEMMs' (absent:
  // gemm_efficiency): the FP8 tensor cores double the rate but not the operand bandwidth, and a
  // library's FP8 path has its own scaling and cast work, so its share is its own.
  std::optional<double> fp8_gemm_efficiency;
  double Fp8GemmEfficiency() const { return fp8_gemm_efficiency.value_or(gemm_efficiency); }
  // What the numbers rest on, for people (`stepsim list gpus`): the catalog's note, and the GPU
  // whose measured step times the compute terms were fitted to (a calibration file's `gpu:`;
  // empty: no fit, first estimates from datasheets).
  std::string note;
  std::string fitted_gpu;
  // A kernel library's own compute terms (a calibration file's `libraries:` section, fitted by
  // `stepsim calibrate --library`): in force for scenarios that run that library
  // (ForLibrary); terms a library leaves out, and libraries with no entry, keep the ones above.
  struct Library {
    KernelLibrary library = KernelLibrary::kPyTorch;
    std::optional<double> gemm_efficiency, fp8_gemm_efficiency, attention_efficiency,
        attention_kv_overhead;
    std::vector<std::string> fit_sources;  // the case files the terms were fitted to
    std::vector<std::string> fit_params;   // the terms that fit moved
    std::string note;                      // what they rest on
    bool operator==(const Library&) const = default;
  };
  std::vector<Library> libraries;
  const Library* FindLibrary(KernelLibrary l) const;
  bool operator==(const GpuCalibration&) const = default;
};

// The terms a scenario running `library` is priced with: `c` with that library's entry laid
// over it (`c` itself where it has none).
GpuCalibration ForLibrary(const GpuCalibration& c, KernelLibrary library);

struct GpuSpec {
  std::string name;
  Bytes hbm;
  // What one process can get: the total torch.cuda.mem_get_info reports (the driver keeps the
  // rest); absent = hbm. Capacity checks compare with this.
  std::optional<Bytes> usable_hbm;
  Bytes Usable() const { return usable_hbm.value_or(hbm); }
  Bandwidth hbm_bandwidth;
  // Dense (non-sparse) tensor-core peaks; absent where the part has no such path.
  std::optional<FlopRate> fp32, tf32, bf16, fp16, fp8;
  // Per-GPU NVLink/Infinity Fabric bandwidth, both directions summed, as datasheets quote it.
  Bandwidth nvlink_bandwidth;
  GpuCalibration calibration;
  // The cuBLAS workspace PyTorch allocates through its caching allocator for the compute
  // stream's handle (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize: 32 MiB
  // from compute capability 9.0 on, 2 x 4 MiB + 8 x 16 KiB before): in torch's counters.
  Bytes blas_workspace = Bytes::Count(4096 * 1024 * 2 + 16 * 1024 * 8);
  // CUDA compute capability (7.0 Volta ... 10.0 Blackwell): the GPU generation NCCL's tuner
  // tables are indexed by. Absent (non-NVIDIA parts): the tuner uses Hopper's rows.
  std::optional<double> compute_capability;
  // cuBLAS runs fp8 GEMMs with any operand layout, so a tensor-scaled fp8 operand needs no
  // transposed copy: compute capability 10.x and from 13.0 (Transformer Engine's
  // is_non_tn_fp8_gemm_supported, transformer_engine/pytorch/utils.py; Hopper and Ada run only TN
  // fp8 GEMMs, "Hopper only supports TN GEMMs for FP8", common/gemm/cublaslt_gemm.cu).
  bool Fp8AnyLayoutGemm() const {
    const double cc = compute_capability.value_or(0);
    return (cc >= 10.0 && cc < 12.0) || cc >= 13.0;
  }
  // MXFP8 tensor cores (block-scaled fp8, 32-element blocks): Blackwell, compute capability 10.0
  // on (TE's is_mxfp8_available).
  bool HasMxfp8() const { return compute_capability.value_or(0) >= 10.0; }
  // Streaming multiprocessors (AMD: compute units): the GEMM kernels' output tiles run in waves
  // of this many (sim/workload/gemm_waves.h). 0 = not given: GEMMs priced without waves.
  int64_t sms = 0;
  // The board power the part is rated for (TDP) and the limit it runs at, when capped below it
  // (nvidia-smi -pl; a system's configuration). Watts.
  std::optional<double> tdp_watts, power_limit_watts;
  // The share of its rated clocks the part sustains under its power limit: (limit / TDP)^(1/3),
  // 1 uncapped. First-order DVFS: dynamic power goes as C·V²·f and, in the range a governor
  // moves, voltage with frequency, so power as f³ (the CMOS dynamic-power relation: Weste &
  // Harris, "CMOS VLSI Design", 4th ed., ch. 5). A cap acts by lowering SM clocks; tensor cores
  // and SMs run at the result, HBM keeps its own clock. Static power is not set apart: the
  // share is an upper bound on the slowdown's inverse.
  double SustainedClock() const;
  std::optional<double> price_per_hour_usd;
  std::string source;

  std::optional<FlopRate> Peak(Dtype d) const;
  bool operator==(const GpuSpec&) const = default;
};

// The host side of a node, for offload (topologies/nodes.yaml `host:`): host DRAM, the PCIe
// link that carries each GPU's copies, the CPU cores that run an offloaded optimizer, NVMe.
struct HostSpec {
  Bytes dram;                      // per node
  Bandwidth dram_bandwidth;        // per node, every socket's channels together
  int64_t cores = 0;               // per node
  int64_t pcie_gen = 4;            // PCIe generation of each GPU's link to the host
  int64_t pcie_lanes = 16;         // lanes of that link
  int64_t gpus_per_pcie_link = 1;  // GPUs whose copies share one host uplink (a PCIe switch)
  Bytes nvme;                      // capacity usable for offload; 0 = no NVMe offload
  Bandwidth nvme_bandwidth;        // per node, all drives (read and write alike)
  std::string source;
  // Data rate of the GPU's link, one direction: 2.5·2^(gen-1) GT/s per lane for generations 1
  // and 2 with 8b/10b coding, 8·2^(gen-3) GT/s with 128b/130b from generation 3 (PCI-SIG):
  // Gen4 x16 = 31.5 GB/s, Gen5 x16 = 63.0 GB/s.
  Bandwidth PcieLink() const;
  bool operator==(const HostSpec&) const = default;
};

struct NodeSpec {
  std::string name;
  std::string gpu;  // a GpuSpec name
  int64_t gpus_per_node = 8;
  // Per-GPU bandwidth one direction inside the node's NVLink/NVSwitch domain.
  Bandwidth intra_node_bandwidth;
  int64_t nics_per_node = 0;
  Bandwidth nic_bandwidth;  // per NIC, one direction
  // How the node's GPUs reach each other (sim/spec/transport.h): nvlink, xgmi or pcie.
  std::string intra_node_transport = "nvlink";
  // The GPUs are linked point to point, each pair by one link of intra_node_bandwidth /
  // (gpus_per_node - 1) (an MI300X platform's Infinity Fabric), not through a switch
  // (`gpu_links: mesh`; default `switch`). Sim/cost/graph_collective.h says what a group of
  // part of such a node reaches.
  bool gpu_mesh = false;
  // GPUs on one NVLink switch fabric when it spans several nodes (GB200/GB300 NVL72: 72 GPUs
  // over 18 trays of 4); 0: the node. A cluster of such nodes is priced with each domain as
  // one node of `nvlink_domain` GPUs (config::FoldNvlinkDomain), as NCCL's multi-node NVLink
  // (MNNVL) treats it: NVLink and NVLS across the domain, NICs only between domains.
  int64_t nvlink_domain = 0;
  int64_t domain_nodes = 1;  // after folding: the physical nodes each priced node stands for
  // Added to NCCL's latency of each intra- or inter-node step (its tuner's tables, which
  // already hold the links' own latency): a slower fabric or host than NCCL assumes.
  Duration intra_node_latency;
  Duration inter_node_latency;
  std::optional<HostSpec> host;  // absent: offload cannot be priced on this node
  std::string source;
  bool operator==(const NodeSpec&) const = default;
};

// What a GPU's time calibration rests on, in words: a fit to its own measured step times, the
// fit of another GPU it shares silicon with, or datasheets alone (`stepsim list gpus`, plan).
std::string CalibrationBasis(const GpuSpec& g);
// Whether its time rests on datasheets alone (no fit to any GPU's measured step times).
inline bool DatasheetOnly(const GpuSpec& g) { return g.calibration.fitted_gpu.empty(); }

}  // namespace sim
