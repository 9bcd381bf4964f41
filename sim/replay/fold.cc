#include "sim/replay/fold.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/replay/replay_steps.h"
#include "sim/workload/lowering.h"

namespace sim::replay {

namespace {

// Visits every additive integer of a raw result in a fixed order: f(value) returns the value to
// store (the identity when reading).
template <class F>
void ForEachAdditive(ReplayResult& r, F&& f) {
  auto dur = [&](Duration& d) { d = Duration::Picoseconds(f(d.picoseconds())); };
  auto bytes = [&](Bytes& b) { b = Bytes::Count(f(b.count())); };
  dur(r.step);
  r.events = static_cast<uint64_t>(f(static_cast<int64_t>(r.events)));
  r.ops = f(r.ops);
  for (StageTimes& t : r.stages) {
    for (Duration* d : {&t.compute, &t.recompute, &t.optimizer, &t.comm, &t.pcie, &t.exposed_comm,
                        &t.exposed_pcie, &t.bubble, &t.overlap_stretch}) {
      dur(*d);
    }
  }
  for (auto& c : r.collectives) {
    c.count = f(c.count);
    dur(c.time);
    for (int64_t& n : c.by_algorithm) n = f(n);
    for (int64_t& n : c.by_protocol) n = f(n);
  }
  for (Bytes& b : r.comm_bytes_sent) bytes(b);
}

// When each GPU's peak and first overflow happen: the same in every replay when they fall in
// the first micro-batches, later by one period per period when they come after the folded ones
// (the optimizer's), and then linear like the additive quantities.
std::vector<int64_t> Moments(const ReplayResult& r) {
  std::vector<int64_t> v;
  for (const memory::MemoryLedger& l : r.ledgers) {
    v.push_back(l.peak_time().picoseconds());
    v.push_back(l.first_overflow() ? l.first_overflow()->time.picoseconds() : 0);
  }
  return v;
}

std::vector<int64_t> Additive(ReplayResult& r) {
  std::vector<int64_t> v;
  ForEachAdditive(r, [&](int64_t x) {
    v.push_back(x);
    return x;
  });
  return v;
}

std::string Label(const ReplayResult& r, std::optional<int32_t> op) {
  return op ? OpLabel(r.program.ops[*op], r.program.layers) : std::string("persistent");
}

// What must not change with the number of micro-batches, as text (compared whole).
std::string Invariant(const ReplayResult& r) {
  std::string out;
  auto add = [&](auto... parts) { ((out += std::to_string(parts), out += ' '), ...); };
  for (const memory::MemoryLedger& l : r.ledgers) {
    add(l.peak().count(), l.reserved_peak().count());
    out += Label(r, l.peak_op()) + '|';
    for (Bytes b : l.peak_breakdown()) add(b.count());
    for (Bytes b : l.category_peaks()) add(b.count());
    if (const auto& o = l.first_overflow()) {
      add(o->excess.count());
      out += Label(r, o->op) + '|';
    }
    out += ';';
  }
  for (Bytes b : r.host_activation_peak) add(b.count());
  for (const auto& c : r.collectives) {
    add(c.slowest.picoseconds(), c.busiest_load);
    out += c.busiest_link + '|';
  }
  add(r.peak_rank);
  return out;
}

// Whether three replays, one period apart, repeat: every additive quantity and every moment
// grows by the same integer from the first to the second as from the second to the third, and
// what must not change is the same in all three.
bool Repeats(std::vector<ReplayResult>& runs) {
  const std::vector<int64_t> a = Additive(runs[0]), b = Additive(runs[1]), c = Additive(runs[2]);
  for (size_t i = 0; i < a.size(); ++i) {
    if (b[i] - a[i] != c[i] - b[i]) return false;
  }
  const std::vector<int64_t> ta = Moments(runs[0]), tb = Moments(runs[1]), tc = Moments(runs[2]);
  for (size_t i = 0; i < ta.size(); ++i) {
    if (tb[i] - ta[i] != tc[i] - tb[i]) return false;
  }
  const std::string invariant = Invariant(runs[0]);
  return Invariant(runs[1]) == invariant && Invariant(runs[2]) == invariant;
}

}  // namespace

std::optional<FoldPlan> PlanFold(const Scenario& s) {
  // GPipe runs every forward before any backward (sim/workload/pipeline_schedule.cc, with or
  // without a pipeline): its peak holds every micro-batch's activations and grows with M, so
  // its short replays never repeat. Not tried.
  if (s.parallel.pp_schedule == PipelineSchedule::kGpipe) return std::nullopt;
  FoldPlan f;
  const int64_t pp = s.parallel.pp;
  f.d = s.parallel.pp_schedule == PipelineSchedule::kInterleaved ? pp : 1;
  // K = pp without interleaving: one micro-batch more than 1F1B's pp - 1 warm-up ones (and
  // K = 1 without a pipeline), so that the second and third replays each add a micro-batch
  // that runs in the steady state. Where the first micro-batch still allocates what later ones
  // reuse (lazy gradients, the first gathers, the caching allocator's segments) the window
  // slides (FoldedReplay). Interleaved: past its warm-up of (pp - 1)·2 + (v - 1)·pp units of
  // 1/v micro-batch each (Megatron-LM schedules.py), rounded up to whole groups of pp, and one
  // group more for the pipeline to settle (without it the golden interleaved layouts do not
  // repeat). The check of the increments makes K a matter of cost, not of correctness: a K
  // too small only means a slide or no fold.
  if (s.parallel.pp_schedule == PipelineSchedule::kInterleaved && pp > 1) {
    const int64_t v = s.parallel.pp_chunks;
    const int64_t warmup = ((pp - 1) * 2 + (v - 1) * pp + v - 1) / v;
    f.k = ((warmup + f.d - 1) / f.d + 1) * f.d;
  } else {
    f.k = pp;
  }
  const int64_t m = s.micro_batches();
  // Folded only when the three short replays hold fewer micro-batches than the step.
  if (3 * (f.k + f.d) >= m || (m - f.k) % f.d != 0) return std::nullopt;
  return f;
}

absl::StatusOr<std::optional<ReplayResult>> FoldedReplay(const Scenario& s,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options) {
  if (options.record_ops || options.record_memory) return std::nullopt;  // traces expand
  const auto plan = PlanFold(s);
  if (!plan) return std::nullopt;
  // The window of three replays K + w·d, K + (w + 1)·d, K + (w + 2)·d. When they do not
  // repeat, the window slides one period (one more short replay instead of the full one), at
  // most kMaxSlides times, while a fold that fails costs less than the full replay it falls
  // back to. Without a pipeline a slide lowers one more period (StepLowering), replays it from
  // the last state (ReplayAfter) and prepares its program: it slides while the next short
  // replay holds fewer micro-batches than the step (Llama-2-70B, ZeRO-3, 1,024-token
  // sequences, micro-batch 2, 16 micro-batches: 267 -> 123 million instructions, folded after
  // three slides instead of replayed in full; callgrind). A pipeline's programs are lowered
  // whole: it slides while every short replay so far and the next together hold fewer micro-
  // batches than the step — the condition PlanFold sets on the first window. What slides is a
  // replay still settling: an allocator whose cached segments reach their final layout a few
  // micro-batches late (the first stage of a 1F1B pipeline, which holds pp micro-batches'
  // activations, grows its reserved peak for two more); a pipeline whose sends slow the compute
  // beside them (SPEC §3.5), converging to its period over several. Only three replays that repeat
  // are folded, so sliding changes what is tried, never what is accepted.
  constexpr int kMaxSlides = 8;
  std::vector<ReplayResult> runs;
  int64_t replayed = 0;  // micro-batches, over every short replay so far
  // A state of the longest replay so far, where it parts from the one before: each slide's
  // replay goes on from there instead of starting over (ReplayAfter).
  std::shared_ptr<const ReplaySnapshot> snapshot;
  // The short steps' programs, their shared micro-batches lowered once.
  auto lowering = StepLowering::Start(s);
  if (!lowering.ok()) return std::nullopt;  // the full lowering reports it
  {
    // The first window's three programs share their first micro-batches: one replay, forked
    // (ReplayFamily).
    std::vector<OpProgram> programs;
    std::vector<int32_t> shared;  // the ops each shares with the longer ones by construction
    for (int64_t i = 0; i < 3; ++i) {
      auto program = lowering->Lower(plan->k + i * plan->d);
      if (!program.ok()) return std::nullopt;  // the full lowering reports it
      programs.push_back(*std::move(program));
      shared.push_back(lowering->shared());
      replayed += plan->k + i * plan->d;
    }
    // The ops of the longest that the next, a slide's, shares: where its replay will go on from.
    runs = ReplayFamily(std::move(programs), compute, comm, s.cluster.gpu.Usable(), options,
                        nullptr, &snapshot, &shared, lowering->shared());
  }
  int64_t w = 0;
  while (!Repeats(runs)) {
    const int64_t next = plan->k + (w + 3) * plan->d;
    const int64_t cost = lowering->incremental() ? next : replayed + next;
    if (w == kMaxSlides || cost >= s.micro_batches()) return std::nullopt;
    const int32_t shared = lowering->shared();  // of runs.back()'s program with the next
    auto program = lowering->Lower(next);
    if (!program.ok()) return std::nullopt;  // the full lowering reports it
    ReplayResult r =
        ReplayAfter(*std::move(program), runs.back().program, compute, comm, s.cluster.gpu.Usable(),
                    options, snapshot, shared, lowering->shared());
    runs.erase(runs.begin());
    runs.push_back(std::move(r));
    replayed += next;
    ++w;
  }
  const std::vector<int64_t> b = Additive(runs[1]), c = Additive(runs[2]);
  const std::vector<int64_t> tb = Moments(runs[1]), tc = Moments(runs[2]);
  // The increments of one more period, n more times.
  const int64_t n = (s.micro_batches() - plan->k - (w + 2) * plan->d) / plan->d;
  ReplayResult r = std::move(runs[2]);
  size_t i = 0;
  bool overflow = false;
  ForEachAdditive(r, [&](int64_t x) {
    int64_t more = 0, v = 0;
    overflow = overflow || __builtin_mul_overflow(n, c[i] - b[i], &more) ||
               __builtin_add_overflow(x, more, &v);
    ++i;
    return v;
  });
  for (size_t g = 0; g < r.ledgers.size() && !overflow; ++g) {
    int64_t peak = 0, first = 0;
    overflow = __builtin_mul_overflow(n, tc[2 * g] - tb[2 * g], &peak) ||
               __builtin_mul_overflow(n, tc[2 * g + 1] - tb[2 * g + 1], &first);
    r.ledgers[g].ShiftLateMoments(Duration::Picoseconds(peak), Duration::Picoseconds(first));
  }
  if (overflow) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.global_batch: a step of ", s.micro_batches(),
        " micro-batches is beyond what stepsim counts (2^63 picoseconds, about 106 days, or "
        "2^63 bytes sent); fewer micro-batches answer it"));
  }
  if (!Finalize(r, s.micro_batches())) return std::nullopt;  // FLOPs differ by micro-batch
  return std::optional<ReplayResult>(std::move(r));
}

}  // namespace sim::replay
