#include "sim/spec/transport.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace sim {

namespace {

using Ramp = std::vector<std::pair<Bytes, double>>;

Ramp FromKiB(std::initializer_list<std::pair<int64_t, double>> rows) {
  Ramp r;
  for (const auto& [kib, f] : rows) r.push_back({Bytes::Count(kib * 1024), f});
  return r;
}

// The ramps are written by tools/fit-transport-ramps.py from the nccl-tests curve named in
// each source: at each size, the measured time less NCCL's latency for what its tuner runs
// there, against the same at the curve's largest size, over the bandwidth term stepsim
// computes for both (so the ramp is the curve's shape, 1 at its largest size). efa-rdma's is
// absolute instead (against the bandwidth term at EFA's efficiency), as the tool says why.
const std::vector<Transport>& Table() {
  // clang-format off
  // Intra-node ramps: by bytes per rank; network ramps: by bytes through the busiest NIC in
  // one call. KiB, fraction.
  static const Ramp kNvlinkRamp = FromKiB({
      {16, 0.009}, {32, 0.018}, {64, 0.036}, {128, 0.067}, {256, 0.130},
      {512, 0.242}, {1024, 0.444}, {2048, 0.591}, {4096, 0.554}, {8192, 0.562},
      {16384, 0.595}, {32768, 0.656}, {65536, 0.781}, {131072, 0.784}, {262144, 0.947},
      {524288, 0.969}, {1048576, 0.991}});
  static const Ramp kNvlsRamp = FromKiB({
      {16, 0.387}, {32, 0.387}, {64, 0.387}, {128, 0.387}, {256, 0.387},
      {512, 0.387}, {1024, 0.387}, {2048, 0.387}, {4096, 0.478}, {8192, 0.508},
      {16384, 0.611}, {32768, 0.705}, {65536, 0.818}, {131072, 0.873}, {262144, 0.904},
      {524288, 0.926}, {1048576, 0.979}});
  static const Ramp kXgmiRamp = FromKiB({
      {16, 0.386}, {32, 1.000}, {64, 1.000}, {128, 1.000}, {256, 1.000},
      {512, 0.472}, {1024, 0.867}, {2048, 1.000}, {4096, 1.000}, {8192, 1.000},
      {16384, 0.924}, {32768, 0.976}, {65536, 0.987}, {131072, 0.998}, {262144, 1.000},
      {524288, 1.000}, {1048576, 1.000}});
  static const Ramp kIbRamp = FromKiB({
      {16, 0.086}, {32, 0.122}, {64, 0.166}, {128, 0.144}, {256, 0.157},
      {512, 0.243}, {1024, 0.356}, {2048, 0.478}, {4096, 0.645}, {8192, 0.787},
      {16384, 0.897}, {32768, 1.000}, {65536, 1.000}, {131072, 0.963}, {262144, 0.989}});
  static const Ramp kSharpRamp = FromKiB({
      {16, 0.142}, {32, 0.121}, {64, 0.133}, {128, 0.125}, {256, 0.140},
      {512, 0.218}, {1024, 0.322}, {2048, 0.434}, {4096, 0.589}, {8192, 0.721},
      {16384, 0.823}, {32768, 0.937}, {65536, 0.923}, {131072, 0.960}, {262144, 0.988}});
  static const Ramp kEfaRamp = FromKiB({
      {16, 0.015}, {32, 0.031}, {64, 0.036}, {128, 0.064}, {256, 0.104},
      {512, 0.142}, {1024, 0.224}, {2048, 0.305}, {4096, 0.381}, {8192, 0.584},
      {16384, 0.671}, {32768, 0.902}, {65536, 0.975}, {131072, 0.953}, {262144, 0.982}});
  static const Ramp kEfaRdmaRamp = FromKiB({
      {16, 0.042}, {32, 0.044}, {64, 0.066}, {128, 0.108}, {256, 0.164},
      {512, 0.204}, {1024, 0.258}, {2048, 0.364}, {4096, 0.489}, {8192, 0.565},
      {16384, 0.638}, {32768, 0.902}, {65536, 0.975}, {131072, 0.953}, {262144, 0.982}});
  static const Ramp kTcpxoRamp = FromKiB({
      {16, 0.011}, {32, 0.013}, {64, 0.025}, {128, 0.039}, {256, 0.058},
      {512, 0.074}, {1024, 0.089}, {2048, 0.100}, {4096, 0.184}, {8192, 0.307},
      {16384, 0.464}, {32768, 0.643}, {65536, 0.788}, {131072, 0.885}, {262144, 0.943},
      {524288, 0.977}});
  // clang-format on
  static const std::vector<Transport> table = {
      {"nvlink", false, std::nullopt, kNvlinkRamp, 0,
       "NVLink through NVSwitch (or NVLink bridges): efficiency is the GPU's comm_efficiency; "
       "ramp: ring all-reduce of an 8-GPU A100 node (azure_nda100v4_1n8g_allreduce)"},
      {"nvls", false, std::nullopt, kNvlsRamp, 0,
       "NVLink SHARP all-reduce in the NVSwitch: efficiency is the GPU's nvls_efficiency; ramp: "
       "NVLS all-reduce of an 8-GPU H100 node (azure_ndh100v5_1n8g_allreduce)"},
      {"xgmi", false, std::nullopt, kXgmiRamp, 0,
       "AMD Infinity Fabric between MI300X GPUs: efficiency is the GPU's comm_efficiency; ramp: "
       "RCCL all-reduce of an 8-GPU MI300X node (amd_mi300x_aac8_1n8g_allreduce_rccl)"},
      {"pcie", false, std::nullopt, kNvlinkRamp, 0,
       "GPUs on PCIe only (NCCL's PCI latencies): efficiency is the GPU's comm_efficiency; "
       "no public curve: NVLink's ramp"},
      {"ib", true, 0.93, kIbRamp, 0,
       "InfiniBand verbs with GPUDirect RDMA: 0.93 of line rate, the middle of measured "
       "NIC-bound rings (0.91-0.95, issue 19); ramp: the one public InfiniBand curve, two A100 "
       "nodes on 4x HDR (abci_a100_2n16g_allreduce_sharp), read as a tree: that run had CollNet "
       "requested, and no public curve without SHARP is at hand"},
      {"sharp", true, 0.563, kSharpRamp, 0,
       "SHARP aggregation in InfiniBand switches (NCCL CollNet): 0.563 of the NICs' line rate "
       "each way, fitted to the one public run: two A100 nodes on 4x HDR at 2 GiB "
       "(abci_a100_2n16g_allreduce_sharp, NCCL 2.8 with CollNet requested, 105.5 GB/s busbw); "
       "ramp: that run's curve"},
      {"roce", true, 0.93, kIbRamp, 0,
       "RoCEv2 with GPUDirect RDMA (NCCL's IB transport): as InfiniBand, whose ramp it takes "
       "(no public RoCE curve below 10 GiB)"},
      {"efa", true, 0.84, kEfaRamp, 0,
       "AWS EFA (SRD) through aws-ofi-nccl: efficiency (the 2 GiB point) and ramp from two "
       "p4de nodes (aws_p4de_2n16g_allreduce_awsome)"},
      {"efa-rdma", true, 0.84, kEfaRdmaRamp, 0,
       "AWS EFA through aws-ofi-nccl's RDMA protocol (its default on p5 and later; p4d/p4de run "
       "SENDRECV: src/platform-aws.c), which stripes each message over the GPU's EFA rails; "
       "efficiency: EFA's 0.84 (p4de: p5's own curve is bound by its NVLS phase from 1 GiB "
       "up); ramp: fitted absolute to two p5 nodes up to 16 MiB per NIC "
       "(aws_p5_2n16g_allreduce_awsome), EFA's beyond; held out: two p6-b200 nodes' ~654 GB/s "
       "peak busbw (awslabs/awsome-distributed-ai#1120)"},
      {"tcpxo", true, 0.90, kTcpxoRamp, 0,
       "Google GPUDirect-TCPXO (A3 Mega): efficiency (the 8 GiB point) and ramp from two "
       "a3-megagpu-8g nodes (gcp_a3mega_2n16g_allreduce_ztan)"},
      {"tcpx", true, 0.90, kTcpxoRamp, 0,
       "Google GPUDirect-TCPX (A3 High): no public curve; first estimate: TCPXO's terms"},
      {"socket", true, 0.60, kNvlinkRamp, 0,
       "NCCL's socket transport (TCP through host memory): no public curve; first estimate "
       "0.6 of line rate with NVLink's ramp"},
  };
  return table;
}

}  // namespace

double Transport::RampAt(Bytes m) const {
  const auto& t = ramp;
  if (t.empty()) return 1.0;
  if (m <= t.front().first) return t.front().second;
  for (size_t i = 1; i < t.size(); ++i) {
    if (m <= t[i].first) {
      const double x0 = std::log(static_cast<double>(t[i - 1].first.count()));
      const double x1 = std::log(static_cast<double>(t[i].first.count()));
      const double x = std::log(static_cast<double>(m.count()));
      return t[i - 1].second + (t[i].second - t[i - 1].second) * (x - x0) / (x1 - x0);
    }
  }
  return 1.0;
}

const Transport* FindTransport(absl::string_view name) {
  for (const Transport& t : Table()) {
    if (absl::EqualsIgnoreCase(t.name, name)) return &t;
  }
  return nullptr;
}

std::vector<std::string> TransportNames(bool network) {
  std::vector<std::string> out;
  for (const Transport& t : Table()) {
    if (t.network == network && t.name != "nvls" && t.name != "sharp") out.push_back(t.name);
  }
  return out;
}

const Transport& NvlsTransport() { return *FindTransport("nvls"); }

const Transport& SharpTransport() { return *FindTransport("sharp"); }

}  // namespace sim
