#pragma once
// DeepSpeed ZeRO-3's parameter coordinator (deepspeed/runtime/zero/
// partitioned_param_coordinator.py: fetch_sub_module, release_sub_module, __params_to_release),
// replayed over the trace of one micro-batch's module hooks: every submodule's forward (and a
// checkpointed layer's recompute) and backward, each fetching its parameters.
//
// Fetch(i), when module use i begins, as fetch_sub_module does:
//   1. its parameters that are not gathered are all-gathered now (`now`; the module waits);
//   2. the queue of the trace's parameters moves past the use's own;
//   3. if prefetch_bucket > 0, up to min(prefetch_bucket, max_live − gathered) elements are
//      prefetched (`ahead`): entries are taken off the queue in order — each marks its parameter
//      as wanted until that entry's use — and those not gathered are gathered, until that many
//      elements are in flight (the last may overshoot, as DeepSpeed's loop does).
// Release(i), when the use ends, as __params_to_release decides, per parameter: it stays
//   gathered when the prefetch queue already passed a later use of it, or when it is used again
//   within `max_reuse` elements of trace (counting every later module's parameters until the
//   window is full); otherwise it is released.
// Every module counts, parameterless ones too (containers, norms, activations): each fetch is a
// prefetch round. A steady state follows: where a module's parameters are smaller than the
// prefetch bucket, each fetch gathers more than it uses, until `max_live` elements are gathered.
// Parameters below param_persistence_threshold (norms, biases) are not in the trace; the
// lowering folds their bytes into the projections' (sim/workload/lowering.cc).
//
// Pure bookkeeping, no time: the lowering turns `now` and `ahead` into all-gather ops.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace sim {

struct Zero3Limits {
  int64_t prefetch_bucket = 0;  // elements each fetch prefetches (stage3_prefetch_bucket_size)
  int64_t max_live = 0;         // elements gathered at most (stage3_max_live_parameters)
  int64_t max_reuse = 0;        // reuse window in trace elements (stage3_max_reuse_distance)
};

// One module's hook in the trace: the parameters it fetches (none for a container, a norm with
// resident parameters, an activation).
struct ModuleUse {
  // Most modules hold one parameter or none (a norm without its weight's own gather, a
  // LoRA-less projection's weight): inline, not one allocation per use.
  absl::InlinedVector<int32_t, 2> params;
};

class Zero3Coordinator {
 public:
  // `elements`: each parameter's element count, by id; `trace`: one micro-batch's module uses.
  Zero3Coordinator(std::vector<int64_t> elements, std::vector<ModuleUse> trace, Zero3Limits limits);

  struct Fetched {
    std::vector<int32_t> now;    // gathered for the use itself
    std::vector<int32_t> ahead;  // prefetched for later uses
  };
  // (Results into `out`, cleared first, so that a replay of many uses allocates once.)
  void Fetch(int32_t i, Fetched& out);
  Fetched Fetch(int32_t i) {
    Fetched f;
    Fetch(i, f);
    return f;
  }
  // The parameters of use `i` released as it ends.
  void Release(int32_t i, std::vector<int32_t>& out);
  std::vector<int32_t> Release(int32_t i) {
    std::vector<int32_t> r;
    Release(i, r);
    return r;
  }
  // A new micro-batch: the trace starts again (reset_step). Every parameter must be released.
  void Reset();

  const std::vector<ModuleUse>& trace() const { return tables_->trace; }
  int64_t gathered_elements() const { return gathered_; }
  bool gathered(int32_t param) const { return state_[param].gathered; }

 private:
  struct Entry {  // one parameter of one use, in trace order
    int32_t use = 0;
    int32_t param = 0;
  };
  struct ParamState {
    bool gathered = false;
    int32_t wanted_until = -1;  // the furthest use whose queue entry the prefetch has passed
  };
  void Gather(int32_t param, std::vector<int32_t>& out);

  // What the trace and limits fix, shared by copies (a copy is a lowering forked mid-step,
  // sim/workload/lowering.h StepLowering; only the gathering state below is its own).
  struct Tables {
    std::vector<int64_t> elements;
    std::vector<ModuleUse> trace;
    Zero3Limits limits;
    std::vector<Entry> queue;
    std::vector<std::size_t> queue_end;  // per use: the end of its entries in queue
    std::vector<int64_t> trace_before;   // [u]: elements of the uses before u (size uses + 1)
    // Per queue entry (a use's parameter, in the use's order): the parameter's next use, or -1.
    std::vector<int32_t> next_use;
  };
  std::shared_ptr<const Tables> tables_;
  std::vector<ParamState> state_;
  std::size_t head_ = 0;
  int64_t gathered_ = 0;
};

}  // namespace sim
