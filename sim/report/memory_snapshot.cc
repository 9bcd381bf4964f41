#include "sim/report/memory_snapshot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/base/pickle_reader.h"
#include "sim/base/pickle_writer.h"
#include "sim/replay/step_records.h"
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
  // The reserved memory (the allocator's segments and the runtime reserve) as segment_alloc and
  // segment_free events of its changes, at addresses of their own.
  int64_t reserved = 0, next_segment = int64_t{1} << 50;
  std::vector<Live> segments;
  const replay::StepRecords records(r);
  for (int64_t i = 0, n = records.changes(rank); i < n; ++i) {
    const replay::StepRecords::Change change = records.change(rank, i);
    const memory::MemoryChange& c = change.change;
    const int64_t time_us = std::llround(c.time.seconds() * 1e6);
    if (const int64_t grow = c.reserved.count() - reserved; grow > 0) {
      Live seg{next_segment, grow, "segment"};
      next_segment += (grow + kAlign - 1) / kAlign * kAlign;
      log.push_back({"segment_alloc", seg, time_us});
      segments.push_back(std::move(seg));
    } else if (grow < 0) {
      int64_t release = -grow;
      while (release > 0 && !segments.empty()) {
        Live seg = std::move(segments.back());
        segments.pop_back();
        const int64_t part = std::min(release, seg.size);
        log.push_back({"segment_free", Live{seg.addr, part, "segment"}, time_us});
        if (part < seg.size) segments.push_back(Live{seg.addr, seg.size - part, "segment"});
        release -= part;
      }
    }
    reserved = c.reserved.count();
    const std::pair<int, int64_t> key{static_cast<int>(c.category), std::llabs(c.delta.count())};
    if (c.delta > Bytes()) {
      std::string name =
          c.category == MemCategory::kReserved
              ? "runtime reserve (CUDA context, NCCL buffers: outside PyTorch's allocator)"
              : absl::StrCat(change.op ? OpLabel(*change.op, r.program.layers)
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

namespace {

bool Has(const std::string& text, std::initializer_list<const char*> words) {
  for (const char* w : words) {
    if (text.find(w) != std::string::npos) return true;
  }
  return false;
}

// The frames' names and file names, lower-cased, joined.
std::string FrameText(const PickleValue& e) {
  std::string out;
  const PickleValue* frames = e.Get("frames");
  const PickleList* list = frames ? frames->list() : nullptr;
  if (list == nullptr) return out;
  for (const auto& f : *list) {
    for (const char* key : {"name", "filename"}) {
      if (const PickleValue* v = f->Get(key); v && v->string()) {
        absl::StrAppend(&out, *v->string(), " ");
      }
    }
  }
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

absl::StatusOr<SnapshotSummary> SummarizeSnapshot(const PickleValue& snapshot,
                                                  const std::string& origin) {
  auto bad = [&](const std::string& where, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", where, ": ", what));
  };
  if (snapshot.dict() == nullptr)
    return bad("(top level)", "expected a dict, as torch.cuda.memory._snapshot() returns");
  const PickleValue* traces = snapshot.Get("device_traces");
  if (traces == nullptr || traces->list() == nullptr) {
    return bad("device_traces",
               "missing: record the snapshot with "
               "torch.cuda.memory._record_memory_history() enabled");
  }
  // The device with the most events.
  const PickleList* trace = nullptr;
  size_t device = 0;
  for (size_t k = 0; k < traces->list()->size(); ++k) {
    const PickleList* t = (*traces->list())[k]->list();
    if (t == nullptr) return bad(absl::StrCat("device_traces[", k, "]"), "expected a list");
    if (trace == nullptr || t->size() > trace->size()) {
      trace = t;
      device = k;
    }
  }
  SnapshotSummary out;
  if (trace == nullptr) return out;
  struct Block {
    int64_t size;
    int64_t index;  // the event that allocated it
    std::string frames;
  };
  std::map<int64_t, Block> live;
  int64_t allocated = 0, reserved = 0, first_free = -1, outside = 0;
  std::map<int64_t, Block> at_peak;
  for (size_t i = 0; i < trace->size(); ++i) {
    const PickleValue& e = *(*trace)[i];
    const std::string where = absl::StrCat("device_traces[", device, "][", i, "]");
    const PickleValue* action = e.Get("action");
    const PickleValue* addr = e.Get("addr");
    const PickleValue* size = e.Get("size");
    if (!action || !action->string()) return bad(where + ".action", "missing or not a string");
    if (!addr || !addr->integer()) return bad(where + ".addr", "missing or not an integer");
    if (!size || !size->integer() || *size->integer() < 0) {
      return bad(where + ".size", "missing or not a size");
    }
    const std::string& a = *action->string();
    ++out.events;
    if (a == "alloc") {
      allocated += *size->integer();
      if (FrameText(e).find("runtime reserve") != std::string::npos) outside += *size->integer();
      live[*addr->integer()] = Block{*size->integer(), static_cast<int64_t>(i), FrameText(e)};
      if (allocated > out.allocated_peak.count()) {
        out.allocated_peak = Bytes::Count(allocated);
        const PickleValue* t = e.Get("time_us");
        out.peak_at_us = t && t->integer() ? *t->integer() : 0;
        at_peak = live;
      }
    } else if (a == "free_completed" || a == "free") {
      auto it = live.find(*addr->integer());
      if (it != live.end()) {
        allocated -= it->second.size;
        live.erase(it);
      }
      if (first_free < 0) first_free = static_cast<int64_t>(i);
    } else if (a == "segment_alloc" || a == "segment_map") {
      reserved += *size->integer();
      out.reserved_peak = std::max(out.reserved_peak, Bytes::Count(reserved));
    } else if (a == "segment_free" || a == "segment_unmap") {
      reserved -= *size->integer();
    }
  }
  // The runtime reserve (stepsim's own snapshots name it) is outside a real snapshot: left out.
  out.allocated_peak = out.allocated_peak - Bytes::Count(outside);
  if (out.reserved_peak > Bytes()) out.reserved_peak = out.reserved_peak - Bytes::Count(outside);
  if (out.reserved_peak == Bytes()) {
    // No segment events: the segments held when the snapshot was taken.
    if (const PickleValue* segs = snapshot.Get("segments"); segs && segs->list()) {
      int64_t total = 0;
      for (const auto& seg : *segs->list()) {
        if (const PickleValue* t = seg->Get("total_size"); t && t->integer())
          total += *t->integer();
      }
      out.reserved_peak = Bytes::Count(total);
    }
  }
  for (const auto& [addr, b] : at_peak) {
    MemCategory c = MemCategory::kActivations;
    const bool persistent = first_free < 0 || b.index < first_free;
    // stepsim's own snapshots name the category in brackets.
    std::optional<MemCategory> named;
    for (int k = 0; k < kNumMemCategories; ++k) {
      if (b.frames.find(absl::StrCat("[", kMemCategoryNames[k], "]")) != std::string::npos) {
        named = static_cast<MemCategory>(k);
      }
    }
    if (Has(b.frames, {"runtime reserve"})) {
      continue;  // outside the allocator: left out above
    } else if (named) {
      c = *named;
    } else if (persistent) {
      c = Has(b.frames, {"optim", "adam", ".step", " step "}) ? MemCategory::kOptimizer
          : Has(b.frames, {"grad"})                           ? MemCategory::kGradients
                                                              : MemCategory::kWeights;
    } else if (Has(b.frames, {"nccl", "all_gather", "reduce_scatter", "all_reduce", "allgather"})) {
      c = MemCategory::kCommBuffers;
    } else if (Has(b.frames, {"cross_entropy", "logits", "lm_head", "output_layer"})) {
      c = MemCategory::kLogits;
    }
    const bool state =
        c == MemCategory::kWeights || c == MemCategory::kGradients || c == MemCategory::kOptimizer;
    if (named ? state : persistent) out.persistent_at_peak += Bytes::Count(b.size);
    out.at_peak[static_cast<int>(c)] += Bytes::Count(b.size);
  }
  return out;
}

}  // namespace sim::report
