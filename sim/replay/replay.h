#pragma once
// The step replay: drives a rank's op program (sim/workload) through the event executor
// (sim/engine), timing ops with the cost models (sim/cost) and booking every allocation and free
// in a per-GPU ledger (sim/memory). Reports are observers of the result (sim/report).
//
// Data-parallel ranks run the same program, so by default one rank is simulated and stands for
// all; with `explicit_ranks` every DP rank is simulated with its own streams and ledger, and the
// collectives of all ranks start together. Both give the same report (tests/replay_test.cc).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/memory/ledger.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::replay {

struct ReplayOptions {
  bool explicit_ranks = false;
  bool record_ops = false;     // per-op start/end times (for --trace)
  bool record_memory = false;  // every ledger change (for --trace and --timeline)
};

struct OpTiming {
  int32_t op;
  int32_t rank;
  Duration start, end;
};

struct ReplayResult {
  OpProgram program;
  int32_t simulated_ranks = 1;
  uint64_t events = 0;

  Duration step;
  // Busy time of the compute stream by kind of work, and of the communication stream.
  Duration compute, recompute, optimizer, comm;
  // Compute-stream time not covered by compute, recompute or the optimizer: waiting for
  // collectives (the exposed communication; there is no pipeline bubble without pp).
  Duration exposed_comm;
  // Extra compute time from running beside collectives (calibrated overlap_slowdown).
  Duration overlap_stretch;

  // Per GPU per step.
  Flops model_flops, hardware_flops, recompute_flops;
  std::array<Bytes, 4> comm_bytes_sent{};  // indexed by CollectiveKind

  // Per collective kind (indexed by CollectiveKind): how the cost model ran them.
  struct CollectiveStats {
    int64_t count = 0;
    Duration time;                                 // sum over the step
    std::array<int64_t, 5> by_algorithm{};         // indexed by CollectiveAlgorithm
    std::string busiest_link;                      // of the slowest collective of this kind
    int32_t busiest_load = 0;                      // transfers sharing it in one step
    Duration slowest;
  };
  std::array<CollectiveStats, 4> collectives{};

  std::vector<memory::MemoryLedger> ledgers;  // one per simulated rank
  int32_t peak_rank = 0;                       // the simulated rank with the highest peak
  std::vector<OpTiming> timings;
};

absl::StatusOr<ReplayResult> Replay(const Scenario& s, const ReplayOptions& options);

}  // namespace sim::replay
