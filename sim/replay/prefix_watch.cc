#include "sim/replay/prefix_watch.h"

#include <algorithm>
#include <limits>

#include "sim/base/check.h"

namespace sim::replay {

namespace {

bool SameCollective(const OpProgram& a, const Op& x, const OpProgram& b, const Op& y) {
  if (x.collective.has_value() != y.collective.has_value()) return false;
  if (!x.collective) return true;
  const CollectiveSpec &c = a.CollectiveOf(x), &d = b.CollectiveOf(y);
  return c.kind == d.kind && c.tensor == d.tensor && c.buckets == d.buckets &&
         c.group.size == d.group.size && c.group.nodes == d.group.nodes &&
         c.group.stride == d.group.stride && c.group.copies == d.group.copies &&
         c.group.copy_offset == d.group.copy_offset;
}

bool SameActions(const std::vector<MemAction>& a, int32_t a0, int32_t a1,
                 const std::vector<MemAction>& b, int32_t b0, int32_t b1) {
  if (a1 - a0 != b1 - b0) return false;
  for (int32_t i = 0; i < a1 - a0; ++i) {
    const MemAction &x = a[a0 + i], &y = b[b0 + i];
    if (x.when != y.when || x.category != y.category || x.bytes != y.bytes) return false;
  }
  return true;
}

// Everything the replay reads of an op (its price, stream, dependencies and memory), and its
// micro-batch unless `any_micro_batch` (which only labels it); y's dependencies are x's
// `shift` ops later.
bool SameOp(const OpProgram& a, const Op& x, const OpProgram& b, const Op& y, int32_t shift = 0,
            bool any_micro_batch = false) {
  if (x.name != y.name || x.kind != y.kind || x.pass != y.pass || x.stream != y.stream ||
      (!any_micro_batch && x.micro_batch != y.micro_batch) || x.stage != y.stage ||
      x.group != y.group || x.op_class != y.op_class || x.flops != y.flops ||
      x.bytes_moved != y.bytes_moved || x.serial_bytes != y.serial_bytes ||
      x.serial_kernels != y.serial_kernels || x.keep_16bit != y.keep_16bit || x.inv_k != y.inv_k ||
      x.waves != y.waves || x.kernels != y.kernels || !SameCollective(a, x, b, y) ||
      !std::equal(a.deps.begin() + x.deps_begin, a.deps.begin() + x.deps_end,
                  b.deps.begin() + y.deps_begin, b.deps.begin() + y.deps_end,
                  [shift](int32_t d, int32_t e) { return d + shift == e; })) {
    return false;
  }
  return x.mem_start - x.mem_begin == y.mem_start - y.mem_begin &&
         x.mem_finish - x.mem_start == y.mem_finish - y.mem_start &&
         SameActions(a.mem, x.mem_begin, x.mem_end, b.mem, y.mem_begin, y.mem_end);
}

bool SamePersistent(const OpProgram& a, const OpProgram& b) {
  if (a.persistent.size() != b.persistent.size()) return false;
  for (size_t s = 0; s < a.persistent.size(); ++s) {
    const auto &x = a.persistent[s], &y = b.persistent[s];
    if (!SameActions(x, 0, static_cast<int32_t>(x.size()), y, 0, static_cast<int32_t>(y.size()))) {
      return false;
    }
  }
  return true;
}

int32_t StreamOf(const Op& op) { return StreamIndex(op.stage, op.stream); }

}  // namespace

int32_t CommonPrefix(const OpProgram& a, const OpProgram& b, int32_t known) {
  if (a.stages != b.stages || !SamePersistent(a, b)) return 0;
  const size_t n = std::min(a.ops.size(), b.ops.size());
  size_t i = std::min(n, static_cast<size_t>(std::max(known, 0)));
  while (i < n && SameOp(a, a.ops[i], b, b.ops[i])) ++i;
  return static_cast<int32_t>(i);
}

bool ProgramRepeats(const OpProgram& shorter, const OpProgram& longer, int32_t from, int32_t ops) {
  if (shorter.stages != longer.stages || !SamePersistent(shorter, longer) || from < 0 || ops <= 0 ||
      longer.ops.size() != shorter.ops.size() + static_cast<size_t>(ops)) {
    return false;
  }
  for (size_t u = static_cast<size_t>(from); u < shorter.ops.size(); ++u) {
    if (!SameOp(shorter, shorter.ops[u], longer, longer.ops[u + ops], ops, true)) return false;
  }
  return true;
}

PrefixIndex::PrefixIndex(const OpProgram& p)
    : first_(static_cast<size_t>(p.stages) * kNumStreams, -1),
      last_(static_cast<size_t>(p.stages) * kNumStreams, -1) {
  SIM_CHECK(first_.size() <= std::numeric_limits<uint16_t>::max(), "too many streams");
  const auto n = static_cast<int32_t>(p.ops.size());
  least_latest_.resize(static_cast<size_t>(n) + 1);
  stream_.resize(n);
  // One pass from the back, over the arrays' data (the op records are large: read each once).
  const Op* ops = p.ops.data();
  const int32_t* deps = p.deps.data();
  int32_t* least = least_latest_.data();
  uint16_t* stream = stream_.data();
  int32_t* first = first_.data();
  int32_t* last = last_.data();
  int32_t running_least = std::numeric_limits<int32_t>::max();
  least[n] = running_least;
  for (int32_t t = n - 1; t >= 0; --t) {
    const Op& op = ops[t];
    const int32_t s = StreamOf(op);
    stream[t] = static_cast<uint16_t>(s);
    first[s] = t;
    if (last[s] < 0) last[s] = t;
    if (op.deps_begin != op.deps_end) {
      int32_t latest = deps[op.deps_begin];
      for (int32_t i = op.deps_begin + 1; i < op.deps_end; ++i) latest = std::max(latest, deps[i]);
      running_least = std::min(running_least, latest);
    } else if (op.mem_begin != op.mem_start && last_issuing_ < 0) {
      last_issuing_ = t;
    }
    least[t] = running_least;
  }
}

template <class F>
void PrefixIndex::FirstOfStreams(int32_t from, F&& f) const {
  // The streams still to find: those with an op from `from` on.
  std::vector<uint8_t> wanted(last_.size(), 0);
  size_t left = 0;
  for (size_t s = 0; s < last_.size(); ++s) {
    if (last_[s] >= from) wanted[s] = 1, ++left;
  }
  for (int32_t t = from; left > 0 && t < static_cast<int32_t>(stream_.size()); ++t) {
    if (wanted[stream_[t]]) {
      wanted[stream_[t]] = 0;
      --left;
      f(stream_[t], t);
    }
  }
}

template <class F>
void PrefixIndex::LastOfStreams(int32_t to, F&& f) const {
  std::vector<uint8_t> wanted(first_.size(), 0);
  size_t left = 0;
  for (size_t s = 0; s < first_.size(); ++s) {
    if (first_[s] >= 0 && first_[s] < to) wanted[s] = 1, ++left;
  }
  for (int32_t t = to - 1; left > 0 && t >= 0; --t) {
    if (wanted[stream_[t]]) {
      wanted[stream_[t]] = 0;
      --left;
      f(stream_[t], t);
    }
  }
}

std::optional<PrefixWatch> PrefixWatch::Make(const PrefixIndex& index, const OpProgram& running,
                                             const OpProgram& other, int32_t prefix) {
  PrefixWatch w;
  w.prefix_ = prefix;
  const std::vector<int32_t> last = w.LastOfStreams(index);
  if (!w.AddRunning(index, running, last, prefix, [](int32_t d) { return d; }) ||
      !w.AddOther(other, last)) {
    return std::nullopt;
  }
  w.Index();
  return w;
}

std::optional<PrefixWatch> PrefixWatch::MakeForNext(const PrefixIndex& index,
                                                    const OpProgram& running, int32_t prefix,
                                                    int32_t period) {
  if (period <= 0 || prefix - period < 0) return std::nullopt;
  PrefixWatch w;
  w.prefix_ = prefix;
  const std::vector<int32_t> last = w.LastOfStreams(index);
  // The next program's ops past the prefix, as a period of this one's moved one period on:
  // a dependency within the last two periods moves with them, an earlier one stays.
  const auto moved = [&](int32_t d) { return d >= prefix - 2 * period ? d + period : d; };
  if (!w.AddRunning(index, running, last, prefix, [](int32_t d) { return d; }) ||
      !w.AddRunning(index, running, last, prefix - period, moved)) {
    return std::nullopt;
  }
  w.Index();
  return w;
}

std::vector<int32_t> PrefixWatch::LastOfStreams(const PrefixIndex& index) const {
  std::vector<int32_t> last(index.first_.size(), -1);
  index.LastOfStreams(prefix_, [&](int32_t s, int32_t t) { last[s] = t; });
  return last;
}

template <class Shifted>
bool PrefixWatch::AddRunning(const PrefixIndex& index, const OpProgram& running,
                             const std::vector<int32_t>& last, int32_t from, Shifted&& shifted) {
  // An op without dependencies is issued at time zero: harmless while it allocates nothing
  // then and waits behind prefix ops of its stream.
  if (index.last_issuing_ >= from) return false;
  // Each stream's first op from `from` on, when it has no dependencies, starts when the
  // stream's last prefix op finishes.
  bool no_prefix_op = false;
  index.FirstOfStreams(from, [&](int32_t s, int32_t t) {
    const Op& op = running.ops[t];
    if (op.deps_begin != op.deps_end) return;
    if (last[s] < 0) {
      no_prefix_op = true;
      return;
    }
    AddItem({&last[s], 1});
  });
  if (no_prefix_op) return false;
  // The ops that depend on the prefix alone: up to the last whose latest dependency is in it.
  std::vector<int32_t> preds;
  const auto n = static_cast<int32_t>(running.ops.size());
  for (int32_t t = from; t < n && index.least_latest_[t] < from; ++t) {
    const Op& op = running.ops[t];
    if (op.deps_begin == op.deps_end) continue;
    const auto deps =
        absl::MakeConstSpan(running.deps).subspan(op.deps_begin, op.deps_end - op.deps_begin);
    if (std::any_of(deps.begin(), deps.end(), [&](int32_t d) { return d >= from; })) continue;
    preds.clear();
    for (int32_t d : deps) preds.push_back(shifted(d));
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    AddItem(preds);
  }
  return true;
}

bool PrefixWatch::AddOther(const OpProgram& other, const std::vector<int32_t>& last) {
  std::vector<uint8_t> stream_seen(last.size(), 0);
  std::vector<int32_t> preds;
  for (int32_t t = prefix_; t < static_cast<int32_t>(other.ops.size()); ++t) {
    const Op& op = other.ops[t];
    const auto deps =
        absl::MakeConstSpan(other.deps).subspan(op.deps_begin, op.deps_end - op.deps_begin);
    const int32_t s = StreamOf(op);
    const bool first_on_stream = !stream_seen[s];
    stream_seen[s] = 1;
    if (deps.empty()) {
      // Issued at time zero: harmless while it allocates nothing then and waits behind prefix
      // ops of its stream; it starts when the last of them finishes.
      if (op.mem_begin != op.mem_start) return false;
      if (first_on_stream) {
        if (last[s] < 0) return false;
        AddItem({&last[s], 1});
      }
      continue;
    }
    if (std::any_of(deps.begin(), deps.end(), [&](int32_t d) { return d >= prefix_; })) {
      continue;  // touched only after an op past the prefix
    }
    preds.assign(deps.begin(), deps.end());
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    AddItem(preds);
  }
  return true;
}

std::vector<std::vector<int32_t>> PrefixWatch::Items() const {
  std::vector<std::vector<int32_t>> items;
  for (size_t i = 0; i + 1 < preds_begin_.size(); ++i) {
    items.emplace_back(preds_.begin() + preds_begin_[i], preds_.begin() + preds_begin_[i + 1]);
  }
  return items;
}

void PrefixWatch::AddItem(absl::Span<const int32_t> preds) {
  preds_.insert(preds_.end(), preds.begin(), preds.end());
  preds_begin_.push_back(static_cast<int32_t>(preds_.size()));
  unstarted_.push_back(static_cast<int32_t>(preds.size()));
  unfinished_.push_back(static_cast<int32_t>(preds.size()));
}

void PrefixWatch::Index() {
  feeds_begin_.assign(static_cast<size_t>(prefix_) + 1, 0);
  for (int32_t p : preds_) feeds_begin_[p + 1]++;
  for (int32_t t = 0; t < prefix_; ++t) feeds_begin_[t + 1] += feeds_begin_[t];
  feeds_.resize(preds_.size());
  std::vector<int32_t> fill(feeds_begin_.begin(), feeds_begin_.end() - 1);
  for (int32_t item = 0; item + 1 < static_cast<int32_t>(preds_begin_.size()); ++item) {
    for (int32_t i = preds_begin_[item]; i < preds_begin_[item + 1]; ++i) {
      feeds_[fill[preds_[i]]++] = item;
    }
  }
}

}  // namespace sim::replay
