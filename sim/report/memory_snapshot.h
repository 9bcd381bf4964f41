#pragma once
// The simulated allocator history of one GPU in the format of PyTorch's
// `torch.cuda.memory._snapshot()` (`stepsim run --memory-snapshot FILE.pickle`), so that it opens
// in PyTorch's memory viewer (pytorch.org/memory_viz) beside a real run's snapshot.
//
// The pickle is a dict: `segments` (what is live at the end of the step, one segment per live
// block: the simulated caching allocator's segments are not placed at addresses) and
// `device_traces` (one list per device; one device here): every allocation as `alloc` and every
// release as `free_requested` then `free_completed`, the reserved memory's growth and shrinking
// as `segment_alloc` and `segment_free`, each with `addr`, `size`, `stream`,
// `time_us` (simulated) and `frames` naming the op and the memory category
// (`{"filename": "stepsim", "line": 0, "name": "mb0 L12 fwd qkv [activations]"}`). Addresses are
// synthetic but consistent: a release carries the address its allocation got. The runtime
// reserve (CUDA context, NCCL buffers; runtime.reserved) is outside PyTorch's allocator and so
// absent from a real snapshot; it is the trace's first allocation here, named so, so that the
// trace's allocated peak is the report's `memory.peak_bytes`.

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "sim/base/pickle_reader.h"
#include "sim/replay/replay.h"
#include "sim/spec/memory_category.h"

namespace sim::report {

// The snapshot of simulated GPU `rank` of a replay made with ReplayOptions::record_memory.
std::string MemorySnapshotPickle(const replay::ReplayResult& r, int32_t rank);

// What a snapshot (a real run's, or one of the above) says of its peak: the device trace
// replayed (`alloc` adds, `free_completed` — or `free` in older snapshots — removes), its
// allocated peak and when, the reserved peak (segment_alloc / segment_free events; without them
// the segments held at the end), and the blocks live at the peak attributed to stepsim's
// categories: those allocated before the trace's first release are persistent (weights,
// gradients, optimizer: the optimizer's when a frame names the optimizer or its step), the
// others by their frames' names (backward: activations' gradients, counted as activations;
// collectives: comm_buffers; cross-entropy or logits: logits; else activations).
struct SnapshotSummary {
  int64_t events = 0;
  Bytes allocated_peak, reserved_peak;
  int64_t peak_at_us = 0;
  std::array<Bytes, kNumMemCategories> at_peak{};
  Bytes persistent_at_peak;
};
// `origin` names the file in errors ("FILE: device_traces[0][12].size: ...").
absl::StatusOr<SnapshotSummary> SummarizeSnapshot(const PickleValue& snapshot,
                                                  const std::string& origin);

}  // namespace sim::report
