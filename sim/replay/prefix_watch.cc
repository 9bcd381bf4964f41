#include "sim/replay/prefix_watch.h"

#include <algorithm>

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

// Everything the replay reads of an op (its price, stream, dependencies and memory).
bool SameOp(const OpProgram& a, const Op& x, const OpProgram& b, const Op& y) {
  if (x.name != y.name || x.kind != y.kind || x.pass != y.pass || x.stream != y.stream ||
      x.micro_batch != y.micro_batch || x.stage != y.stage || x.group != y.group ||
      x.op_class != y.op_class || x.flops != y.flops || x.bytes_moved != y.bytes_moved ||
      x.serial_bytes != y.serial_bytes || x.keep_16bit != y.keep_16bit || x.inv_k != y.inv_k ||
      x.waves != y.waves || x.kernels != y.kernels || !SameCollective(a, x, b, y) ||
      !std::equal(a.deps.begin() + x.deps_begin, a.deps.begin() + x.deps_end,
                  b.deps.begin() + y.deps_begin, b.deps.begin() + y.deps_end)) {
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

int32_t StreamOf(const Op& op) { return op.stage * kNumStreams + static_cast<int32_t>(op.stream); }

}  // namespace

int32_t CommonPrefix(const OpProgram& a, const OpProgram& b, int32_t known) {
  if (a.stages != b.stages || !SamePersistent(a, b)) return 0;
  const size_t n = std::min(a.ops.size(), b.ops.size());
  size_t i = std::min(n, static_cast<size_t>(std::max(known, 0)));
  while (i < n && SameOp(a, a.ops[i], b, b.ops[i])) ++i;
  return static_cast<int32_t>(i);
}

std::optional<PrefixWatch> PrefixWatch::Make(const OpProgram& running, const OpProgram& other,
                                             int32_t prefix) {
  return MakeWith(running, prefix, [&](auto&& visit) {
    for (const OpProgram* p : {&running, &other}) {
      for (int32_t t = prefix; t < static_cast<int32_t>(p->ops.size()); ++t) {
        const Op& op = p->ops[t];
        if (!visit(op, absl::MakeConstSpan(p->deps).subspan(op.deps_begin,
                                                            op.deps_end - op.deps_begin))) {
          return false;
        }
      }
      visit.NextProgram();
    }
    return true;
  });
}

std::optional<PrefixWatch> PrefixWatch::MakeForNext(const OpProgram& running, int32_t prefix,
                                                    int32_t period) {
  if (period <= 0 || prefix - period < 0) return std::nullopt;
  std::vector<int32_t> deps;  // one op's, shifted
  return MakeWith(running, prefix, [&](auto&& visit) {
    for (int32_t t = prefix; t < static_cast<int32_t>(running.ops.size()); ++t) {
      const Op& op = running.ops[t];
      if (!visit(op, absl::MakeConstSpan(running.deps)
                         .subspan(op.deps_begin, op.deps_end - op.deps_begin))) {
        return false;
      }
    }
    visit.NextProgram();
    // The next program's ops past the prefix, as a period of this one's moved one period on:
    // a dependency within the last two periods moves with them, an earlier one stays.
    for (int32_t t = prefix - period; t < static_cast<int32_t>(running.ops.size()); ++t) {
      const Op& op = running.ops[t];
      deps.clear();
      for (int32_t i = op.deps_begin; i < op.deps_end; ++i) {
        const int32_t d = running.deps[i];
        deps.push_back(d >= prefix - 2 * period ? d + period : d);
      }
      if (!visit(op, absl::MakeConstSpan(deps))) return false;
    }
    visit.NextProgram();
    return true;
  });
}

template <class ForEachPastPrefix>
std::optional<PrefixWatch> PrefixWatch::MakeWith(const OpProgram& running, int32_t prefix,
                                                 ForEachPastPrefix&& for_each) {
  PrefixWatch w;
  w.prefix_ = prefix;
  // The last prefix op of each stream.
  std::vector<int32_t> last(static_cast<size_t>(running.stages) * kNumStreams, -1);
  for (int32_t t = 0; t < prefix; ++t) last[StreamOf(running.ops[t])] = t;
  // Each program's ops past the prefix in turn: an item for each that only prefix ops precede.
  struct Visit {
    PrefixWatch& w;
    const std::vector<int32_t>& last;
    int32_t prefix;
    std::vector<uint8_t> stream_seen;
    std::vector<int32_t> preds;  // one item's, reused
    void NextProgram() { stream_seen.assign(last.size(), 0); }
    bool operator()(const Op& op, absl::Span<const int32_t> deps) {
      const int32_t s = StreamOf(op);
      const bool first_on_stream = !stream_seen[s];
      stream_seen[s] = 1;
      if (deps.empty()) {
        // Issued at time zero: harmless while it allocates nothing then and waits behind
        // prefix ops of its stream; it starts when the last of them finishes.
        if (op.mem_begin != op.mem_start) return false;
        if (first_on_stream) {
          if (last[s] < 0) return false;
          w.AddItem({&last[s], 1});
        }
        return true;
      }
      if (std::any_of(deps.begin(), deps.end(), [&](int32_t d) { return d >= prefix; })) {
        return true;  // touched only after an op past the prefix
      }
      preds.assign(deps.begin(), deps.end());
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      w.AddItem(preds);
      return true;
    }
  } visit{w, last, prefix, std::vector<uint8_t>(last.size(), 0), {}};
  if (!for_each(visit)) return std::nullopt;
  w.Index();
  return w;
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
