#include "sim/workload/zero3_coordinator.h"

#include <algorithm>

#include "sim/base/check.h"

namespace sim {

Zero3Coordinator::Zero3Coordinator(std::vector<int64_t> elements, std::vector<ModuleUse> trace,
                                   Zero3Limits limits)
    : state_(elements.size()) {
  auto t = std::make_shared<Tables>();
  t->elements = std::move(elements);
  t->trace = std::move(trace);
  t->limits = limits;
  const int32_t uses = static_cast<int32_t>(t->trace.size());
  std::vector<int64_t> last(t->elements.size(), -1);  // per parameter: its last entry so far
  for (int32_t u = 0; u < uses; ++u) {
    for (const int32_t p : t->trace[u].params) {
      SIM_CHECK(p >= 0 && p < static_cast<int32_t>(t->elements.size()), "an unknown parameter");
      if (last[p] >= 0) t->next_use[last[p]] = u;
      last[p] = static_cast<int64_t>(t->queue.size());
      t->queue.push_back({u, p});
      t->next_use.push_back(-1);
    }
    t->queue_end.push_back(t->queue.size());
  }
  // trace_before[u]: the elements of uses [0, u).
  t->trace_before.assign(t->trace.size() + 1, 0);
  for (int32_t u = 0; u < uses; ++u) {
    int64_t n = 0;
    for (int32_t p : t->trace[u].params) n += t->elements[p];
    t->trace_before[u + 1] = t->trace_before[u] + n;
  }
  tables_ = std::move(t);
}

void Zero3Coordinator::Gather(int32_t param, std::vector<int32_t>& out) {
  ParamState& st = state_[param];
  if (st.gathered || std::find(out.begin(), out.end(), param) != out.end()) return;
  st.gathered = true;
  gathered_ += tables_->elements[param];
  out.push_back(param);
}

void Zero3Coordinator::Fetch(int32_t i, Fetched& f) {
  const Tables& t = *tables_;
  f.now.clear();
  f.ahead.clear();
  for (int32_t p : t.trace[i].params) Gather(p, f.now);
  head_ = std::max(head_, t.queue_end[i]);
  if (t.limits.prefetch_bucket <= 0) return;
  const int64_t budget = std::min(t.limits.prefetch_bucket, t.limits.max_live - gathered_);
  int64_t prefetching = 0;
  while (head_ < t.queue.size() && prefetching < budget) {
    const Entry e = t.queue[head_++];
    ParamState& st = state_[e.param];
    st.wanted_until = std::max(st.wanted_until, e.use);
    if (!st.gathered) {
      Gather(e.param, f.ahead);
      prefetching += t.elements[e.param];
    }
  }
}

void Zero3Coordinator::Release(int32_t i, std::vector<int32_t>& released) {
  const Tables& t = *tables_;
  released.clear();
  const auto& params = t.trace[i].params;
  const size_t entries = i == 0 ? 0 : t.queue_end[i - 1];  // use i's first entry
  for (size_t k = 0; k < params.size(); ++k) {
    const int32_t p = params[k];
    ParamState& st = state_[p];
    if (!st.gathered) continue;  // a module listing a parameter twice
    if (st.wanted_until > i) continue;
    // The reuse window: later modules are walked while fewer than max_reuse elements have been
    // traversed; the next use is reached when the uses before it hold fewer than that.
    const int32_t j = t.next_use[entries + k];
    if (j >= 0 && t.trace_before[j] - t.trace_before[i + 1] < t.limits.max_reuse) continue;
    st.gathered = false;
    gathered_ -= t.elements[p];
    released.push_back(p);
  }
}

void Zero3Coordinator::Reset() {
  SIM_CHECK(gathered_ == 0, "a micro-batch ended with parameters still gathered");
  head_ = 0;
  for (ParamState& st : state_) st.wanted_until = -1;
}

}  // namespace sim
