#pragma once
// How NCCL moves bytes over one kind of link (docs/reference.md "Scenario files" "fabrics name a
// transport"): the fraction of the link's line rate a large collective reaches, and how that
// fraction ramps up with the message size. Inter-node transports are named by fabrics
// (`transport:`), the intra-node one by node types (`intra_node_transport:`). The table is compiled
// in (transport.cc) with what each number rests on; tools/fit-transport-ramps.py re-derives the
// ramps from the nccl-tests curves of the published nccl-tests runs stepsim is validated on
// (collectives.yaml).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/base/units.h"

namespace sim {

struct Transport {
  std::string name;
  bool network = true;  // a NIC transport (else the node's GPU-to-GPU links)
  // Fraction of line rate a large message reaches; absent: the GPU's calibrated
  // comm_efficiency (NVLink, Infinity Fabric) or nvls_efficiency (NVLink SHARP).
  std::optional<double> efficiency;
  // The bandwidth ramp: the fraction of the large-message bandwidth a call reaches beyond
  // NCCL's latency, by size (intra-node transports: M bytes
  // per rank; network ones: the bytes through the busiest NIC), interpolated in log(size), 1
  // beyond the table, the first row's fraction below it. Measured, so not always increasing:
  // the curve dips where NCCL changes protocol.
  std::vector<std::pair<Bytes, double>> ramp;
  // The latency the network plugin reports to NCCL's tuner (graph latencyInter), µs.
  double net_latency_us = 0;
  std::string source;
  double RampAt(Bytes m) const;
};

// The compiled table's entry by name (case-insensitive), or nullptr.
const Transport* FindTransport(absl::string_view name);
std::vector<std::string> TransportNames(bool network);
// NVLink SHARP's row (the NVLS phases of all-reduce).
const Transport& NvlsTransport();
// InfiniBand SHARP's row (the in-switch phase of CollNet all-reduce): a fabric is not `sharp`
// by transport but by FabricSpec::sharp, so neither row is a name fabrics or nodes may give.
const Transport& SharpTransport();

}  // namespace sim
