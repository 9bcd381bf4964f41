#pragma once
// The simulated allocator history of one GPU in the format of PyTorch's
// `torch.cuda.memory._snapshot()` (`stepsim run --memory-snapshot FILE.pickle`), so that it opens
// in PyTorch's memory viewer (pytorch.org/memory_viz) beside a real run's snapshot.
//
// The pickle is a dict: `segments` (what is live at the end of the step, one segment per live
// block: the simulated caching allocator's segments are not placed at addresses) and
// `device_traces` (one list per device; one device here): every allocation as `alloc` and every
// release as `free_requested` then `free_completed`, each with `addr`, `size`, `stream`,
// `time_us` (simulated) and `frames` naming the op and the memory category
// (`{"filename": "stepsim", "line": 0, "name": "mb0 L12 fwd qkv [activations]"}`). Addresses are
// synthetic but consistent: a release carries the address its allocation got. The runtime
// reserve (CUDA context, NCCL buffers; runtime.reserved) is outside PyTorch's allocator and so
// absent from a real snapshot; it is the trace's first allocation here, named so, so that the
// trace's allocated peak is the report's `memory.peak_bytes`.

#include <string>

#include "sim/replay/replay.h"

namespace sim::report {

// The snapshot of simulated GPU `rank` of a replay made with ReplayOptions::record_memory.
std::string MemorySnapshotPickle(const replay::ReplayResult& r, int32_t rank);

}  // namespace sim::report
