#include "sim/report/memory_snapshot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/pickle_writer.h"
#include "sim/workload/program.h"

namespace sim::report {

namespace {

// The caching allocator rounds every request to 512 bytes (c10/cuda/CUDACachingAllocator.cpp,
// kMinBlockSize); synthetic addresses keep that alignment.
constexpr int64_t kAlign = 512;

struct Live {
  int64_t addr = 0, size = 0;
  std::string name;
};

void Frames(PickleWriter& p, const std::string& name) {
  p.BeginList();
  p.BeginDict();
  p.String("filename");
  p.String("stepsim");
  p.String("line");
  p.Int(0);
  p.String("name");
  p.String(name);
  p.End();
  p.End();
}

void Event(PickleWriter& p, const char* action, const Live& b, int64_t time_us) {
  p.BeginDict();
  p.String("action");
  p.String(action);
  p.String("addr");
  p.Int(b.addr);
  p.String("size");
  p.Int(b.size);
  p.String("stream");
  p.Int(0);
  p.String("time_us");
  p.Int(time_us);
  p.String("frames");
  Frames(p, b.name);
  p.End();
}

}  // namespace

std::string MemorySnapshotPickle(const replay::ReplayResult& r, int32_t rank) {
  PickleWriter p;
  // Allocations take fresh addresses; a release takes the last live block of its category and
  // size, as the ledger matches them (sim/memory/ledger.h).
  int64_t next = 0;
  std::map<std::pair<int, int64_t>, std::vector<Live>> live;
  // The trace, collected first: the segments are what stays live at its end.
  std::vector<std::tuple<const char*, Live, int64_t>> log;
  for (const memory::MemoryChange& c : r.ledgers[rank].changes()) {
    const int64_t time_us = std::llround(c.time.seconds() * 1e6);
    const std::pair<int, int64_t> key{static_cast<int>(c.category), std::llabs(c.delta.count())};
    if (c.delta > Bytes()) {
      std::string name =
          c.category == MemCategory::kReserved
              ? "runtime reserve (CUDA context, NCCL buffers: outside PyTorch's allocator)"
              : absl::StrCat(c.op ? OpLabel(r.program.ops[*c.op], r.program.layers)
                                  : std::string("persistent states"),
                             " [", Name(c.category), "]");
      Live b{next, c.delta.count(), std::move(name)};
      next += (b.size + kAlign - 1) / kAlign * kAlign;
      log.push_back({"alloc", b, time_us});
      live[key].push_back(std::move(b));
    } else if (c.delta < Bytes()) {
      auto it = live.find(key);
      if (it == live.end() || it->second.empty()) continue;  // unmatched: the ledger counts it
      Live b = std::move(it->second.back());
      it->second.pop_back();
      log.push_back({"free_requested", b, time_us});
      log.push_back({"free_completed", b, time_us});
    }
  }
  p.BeginDict();
  p.String("segments");
  p.BeginList();
  std::vector<const Live*> remaining;
  for (const auto& [key, blocks] : live) {
    for (const Live& b : blocks) remaining.push_back(&b);
  }
  std::sort(remaining.begin(), remaining.end(),
            [](const Live* a, const Live* b) { return a->addr < b->addr; });
  for (const Live* b : remaining) {
    p.BeginDict();
    p.String("device");
    p.Int(0);
    p.String("address");
    p.Int(b->addr);
    for (const char* k : {"total_size", "allocated_size", "active_size", "requested_size"}) {
      p.String(k);
      p.Int(b->size);
    }
    p.String("stream");
    p.Int(0);
    p.String("segment_type");
    p.String("large");
    p.String("is_expandable");
    p.Bool(false);
    p.String("frames");
    Frames(p, b->name);
    p.String("blocks");
    p.BeginList();
    p.BeginDict();
    p.String("address");
    p.Int(b->addr);
    p.String("size");
    p.Int(b->size);
    p.String("requested_size");
    p.Int(b->size);
    p.String("state");
    p.String("active_allocated");
    p.String("frames");
    Frames(p, b->name);
    p.End();
    p.End();
    p.End();
  }
  p.End();
  p.String("device_traces");
  p.BeginList();
  p.BeginList();
  for (const auto& [action, b, time_us] : log) Event(p, action, b, time_us);
  p.End();
  p.End();
  p.End();
  return p.Finish();
}

}  // namespace sim::report
