#include "sim/workload/zero3_coordinator.h"

#include <algorithm>

#include "sim/base/check.h"

namespace sim {

Zero3Coordinator::Zero3Coordinator(std::vector<int64_t> elements, std::vector<ModuleUse> trace,
                                   Zero3Limits limits)
    : elements_(std::move(elements)),
      trace_(std::move(trace)),
      limits_(limits),
      state_(elements_.size()) {
  const int32_t uses = static_cast<int32_t>(trace_.size());
  std::vector<std::pair<int32_t, int32_t>> last(elements_.size(), {-1, -1});  // (use, position)
  next_use_.resize(trace_.size());
  for (int32_t u = 0; u < uses; ++u) {
    const std::vector<int32_t>& params = trace_[u].params;
    next_use_[u].assign(params.size(), -1);
    for (int32_t k = 0; k < static_cast<int32_t>(params.size()); ++k) {
      const int32_t p = params[k];
      SIM_CHECK(p >= 0 && p < static_cast<int32_t>(elements_.size()), "an unknown parameter");
      if (last[p].first >= 0) next_use_[last[p].first][last[p].second] = u;
      last[p] = {u, k};
      queue_.push_back({u, p});
    }
    queue_end_.push_back(queue_.size());
  }
  // trace_before_[u]: the elements of uses [0, u).
  trace_before_.assign(trace_.size() + 1, 0);
  for (int32_t u = 0; u < uses; ++u) {
    int64_t n = 0;
    for (int32_t p : trace_[u].params) n += elements_[p];
    trace_before_[u + 1] = trace_before_[u] + n;
  }
}

void Zero3Coordinator::Gather(int32_t param, std::vector<int32_t>& out) {
  ParamState& st = state_[param];
  if (st.gathered || std::find(out.begin(), out.end(), param) != out.end()) return;
  st.gathered = true;
  gathered_ += elements_[param];
  out.push_back(param);
}

void Zero3Coordinator::Fetch(int32_t i, Fetched& f) {
  f.now.clear();
  f.ahead.clear();
  for (int32_t p : trace_[i].params) Gather(p, f.now);
  head_ = std::max(head_, queue_end_[i]);
  if (limits_.prefetch_bucket <= 0) return;
  const int64_t budget = std::min(limits_.prefetch_bucket, limits_.max_live - gathered_);
  int64_t prefetching = 0;
  while (head_ < queue_.size() && prefetching < budget) {
    const Entry e = queue_[head_++];
    ParamState& st = state_[e.param];
    st.wanted_until = std::max(st.wanted_until, e.use);
    if (!st.gathered) {
      Gather(e.param, f.ahead);
      prefetching += elements_[e.param];
    }
  }
}

void Zero3Coordinator::Release(int32_t i, std::vector<int32_t>& released) {
  released.clear();
  const std::vector<int32_t>& params = trace_[i].params;
  for (size_t k = 0; k < params.size(); ++k) {
    const int32_t p = params[k];
    ParamState& st = state_[p];
    if (!st.gathered) continue;  // a module listing a parameter twice
    if (st.wanted_until > i) continue;
    // The reuse window: later modules are walked while fewer than max_reuse elements have been
    // traversed; the next use is reached when the uses before it hold fewer than that.
    const int32_t j = next_use_[i][k];
    if (j >= 0 && trace_before_[j] - trace_before_[i + 1] < limits_.max_reuse) continue;
    st.gathered = false;
    gathered_ -= elements_[p];
    released.push_back(p);
  }
}

void Zero3Coordinator::Reset() {
  SIM_CHECK(gathered_ == 0, "a micro-batch ended with parameters still gathered");
  head_ = 0;
  for (ParamState& st : state_) st.wanted_until = -1;
}

}  // namespace sim
