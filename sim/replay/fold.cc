#include "sim/replay/fold.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/replay/prefix_watch.h"
#include "sim/replay/replay_steps.h"
#include "sim/replay/state_period.h"
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
  for (StageTimes& t : r.stages) ForEachTime(t, [&](absl::string_view, Duration& d) { dur(d); });
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

// Whether the PCIe stream is busy for a whole period on some stage: its copies take at least as
// long per period as the step grows. It then falls behind the compute stream a little every
// period: the copies queued on it, and the buffers they hold, grow with the step, in steps that
// three short replays can miss (an offloaded optimizer whose gradient copies outpace PCIe held
// one more bucket every two or three micro-batches: equal peaks at 6, 7 and 8 micro-batches,
// 35 GiB instead of 25 at 32). Collectives are not tested so: their busy time sums several
// streams, which may exceed the period without any falling behind, and refusing those folds
// replayed the sweep grid's communication-bound steps in full (a fifth slower); 8,000 random
// layouts showed no collective stream that fell behind.
bool SideStreamSaturated(const std::vector<ReplayResult>& runs) {
  const ReplayResult &b = runs[1], &c = runs[2];
  const Duration period = c.step - b.step;
  for (size_t st = 0; st < c.stages.size() && st < b.stages.size(); ++st) {
    if (c.stages[st].pcie - b.stages[st].pcie >= period) return true;
  }
  return false;
}

// Whether three replays, one period apart, repeat: every additive quantity and every moment
// grows by the same integer from the first to the second as from the second to the third,
// what must not change is the same in all three, and no stream beside the compute stream is
// falling behind it (SideStreamSaturated).
bool Repeats(std::vector<ReplayResult>& runs) {
  if (SideStreamSaturated(runs)) return false;
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

// `last` with n more periods: each additive quantity (in ForEachAdditive's order) grows n
// times by its `increment`, and each GPU's peak and first overflow moments by n times `late`
// (per GPU, as Moments orders them); each GPU's reserved peak is `reserved`'s when given.
absl::StatusOr<std::optional<ReplayResult>> Extend(const Scenario& s, ReplayResult last,
                                                   const std::vector<int64_t>& increment, int64_t n,
                                                   const std::vector<int64_t>& late,
                                                   const std::vector<Bytes>& reserved = {}) {
  ReplayResult r = std::move(last);
  size_t i = 0;
  bool overflow = false;
  ForEachAdditive(r, [&](int64_t x) {
    int64_t more = 0, v = 0;
    overflow = overflow || __builtin_mul_overflow(n, increment[i], &more) ||
               __builtin_add_overflow(x, more, &v);
    ++i;
    return v;
  });
  for (size_t g = 0; g < r.ledgers.size() && !overflow; ++g) {
    int64_t peak = 0, first = 0;
    overflow = __builtin_mul_overflow(n, late[2 * g], &peak) ||
               __builtin_mul_overflow(n, late[2 * g + 1], &first);
    r.ledgers[g].ShiftLateMoments(Duration::Picoseconds(peak), Duration::Picoseconds(first));
    if (!reserved.empty()) r.ledgers[g].SetReservedPeak(reserved[g]);
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

// What a replay has added by a state, as a result's additive quantities (ForEachAdditive):
// its clock, events and ops, each stage's times with what closing the step there would book,
// and what its ops' collectives add.
ReplayResult SoFar(const ReplaySnapshot& state) {
  const ListenerState& l = state.listener;
  ReplayResult r;
  r.step = state.executor.stats.makespan;
  r.events = state.executor.stats.events;
  r.ops = l.prefix;
  r.stages = l.stages;
  for (size_t stage = 0; stage < r.stages.size(); ++stage) {
    CloseStage(r.stages[stage], r.step, l.last_end[stage]);
  }
  r.collectives = l.totals.stats;
  r.comm_bytes_sent = l.totals.sent;
  return r;
}

// Whether an op's label names its micro-batch (OpLabel): then a moment that moves a period
// per period moves to another label too, which the folded program cannot name.
bool LabelMoves(const OpProgram& p, std::optional<int32_t> op) {
  return op && (p.ops[*op].kind == OpKind::kCollective || p.ops[*op].pass != OpPass::kStep);
}

// Each GPU's reserved peak over a step of n more periods than `after`, when the two states of
// its replay differ only in where the caching allocators placed the same tensors (StateRepeats'
// `allocators`): the allocator is all that the reserved memory depends on, and nothing else
// depends on it, so the later state's ledger goes through the period's changes again (`calls`
// between the two states' counts) — until it comes out as it went in, after which every period
// left repeats the last, or n times — and then through the step's end (the calls after the
// later state). `periods`: raised to the most periods a GPU's allocator was replayed alone.
// False when that takes more than kMaxPeriods periods, when the allocator drifts (below), or
// when it could move a first overflow (none by the later state, and one after it in `after` or
// in the periods replayed): its moment and excess depend on the allocator's state.
// `records` (optional): receives per GPU the reserved bytes after each change so replayed
// (FoldedRecords::reserved).
bool ReservedPeaks(const ReplaySnapshot& f1, const ReplaySnapshot& f2, const ReplayResult& after,
                   const std::vector<LedgerCall>& calls, int64_t n, std::vector<Bytes>& reserved,
                   int& periods, std::vector<FoldedRecords::Reserved>* records) {
  // A cost bound, measured on the sweep grid (callgrind, one thread): its allocators that
  // settle do within 4 periods (24 at once, 9 after one more, 20 after two, 4 after three);
  // those that have not by then did not within 14 or 30 either, and replaying them alone costs
  // more than the three replays they fall back to: 2.985G instructions with 3, 2.845G with 4,
  // 2.872G with 5, 2.900G with 6, 3.101G with 16.
  constexpr int64_t kMaxPeriods = 4;
  const size_t from = f1.listener.calls, to = f2.listener.calls;
  if (from > to || to > calls.size()) return false;
  reserved.clear();
  if (records) records->assign(f2.listener.ledgers.size(), {});
  for (size_t g = 0; g < f2.listener.ledgers.size(); ++g) {
    memory::MemoryLedger l = f2.listener.ledgers[g];
    const bool overflowed = l.first_overflow().has_value();
    if (!overflowed && after.ledgers[g].first_overflow()) return false;
    std::vector<Bytes>* out = nullptr;  // where the reserved bytes after each change go
    const auto replay = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const LedgerCall& c = calls[i];
        if (c.gpu != static_cast<int32_t>(g)) continue;
        l.Apply(c.category, c.bytes, Duration::Zero(), memory::MemoryLedger::kNoOp, c.stream);
        if (out && c.bytes != Bytes()) out->push_back(l.reserved());  // a change (Apply)
      }
    };
    // An allocator whose reserved bytes change by the same amount in two periods running, each
    // replayed alone, is drifting, not settling: the sweep grid's 12 that do (releasing 8, 16 or
    // 32 MiB of cached segments a period, past capacity) had not settled after 12 periods, and
    // none that settles changes so twice (callgrind: 2.673G -> 2.624G instructions; counting the
    // replay's own change from the earlier state to the later as the first gave up on some that
    // settle: 2.744G). A cost rule, as kMaxPeriods: giving up only means three replays.
    std::optional<Bytes> change;
    for (int64_t done = 0; done < n; ++done) {
      if (done == kMaxPeriods) return false;
      const memory::MemoryLedger before = l;
      if (records) out = &(*records)[g].copies.emplace_back();
      replay(from, to);
      periods = std::max(periods, static_cast<int>(done) + 1);
      if (l.SameFuture(before)) break;
      const Bytes now = l.reserved() - before.reserved();
      if (now != Bytes() && change == now) return false;
      change = now;
    }
    if (records) out = &(*records)[g].after;
    replay(to, calls.size());
    if (!overflowed && l.first_overflow()) return false;
    reserved.push_back(l.reserved_peak());
  }
  return true;
}

// Whether the replay `after` repeats itself from its state `snapshot->earlier` on
// (sim/replay/state_period.h): `snapshot` is its state where the next program would part from
// it, `snapshot->earlier` the one where `before` (a period shorter) parts from it. When the
// later state is the earlier one a period on and the programs go on from them alike, every
// further period adds what the replay added between the two states (`increment`, in
// ForEachAdditive's order) and the step of n more periods is `after` extended (Extend). Each
// GPU's peak and first overflow: reached by the later state, they stay (the periods after it
// only repeat what led to it, and `after` passed the earlier state as every longer replay
// does); reached after it, they move a period per period (`late`) — unless their op's label
// names its micro-batch, which refuses. With the ledger changes the replay recorded (`calls`),
// states whose allocators alone differ fold too, their reserved peaks worked out by
// ReservedPeaks (`reserved`, per GPU; empty otherwise; `periods`, what it replayed).
// `period` receives the first op not finished at the earlier state, the ops and the time a
// period adds.
struct Period {
  int32_t from = 0, ops = 0;
  Duration dt;
};
bool StateFold(const OpProgram& before, const ReplayResult& after,
               const std::shared_ptr<const ReplaySnapshot>& snapshot,
               const std::vector<LedgerCall>* calls, int64_t n, std::vector<int64_t>& increment,
               std::vector<int64_t>& late, std::vector<Bytes>& reserved, int& periods,
               Period& period, std::vector<FoldedRecords::Reserved>* records = nullptr) {
  reserved.clear();
  if (!snapshot || !snapshot->earlier) return false;
  const ReplaySnapshot &f1 = *snapshot->earlier, &f2 = *snapshot;
  const OpProgram& p = after.program;
  if (p.ops.size() <= before.ops.size()) return false;
  const auto ops = static_cast<int32_t>(p.ops.size() - before.ops.size());
  // What runs on from f1: the ops from the first not finished there.
  const engine::ExecutorSnapshot& e1 = f1.executor;
  int32_t from = 0;
  while (from < e1.prefix && e1.finished[from]) ++from;
  if (!ProgramRepeats(before, p, from, ops)) return false;
  bool allocators = false;
  const std::optional<Duration> dt = StateRepeats(p, f1, f2, ops, calls ? &allocators : nullptr);
  if (!dt || (allocators && !ReservedPeaks(f1, f2, after, *calls, n, reserved, periods, records))) {
    return false;
  }
  period = {from, ops, *dt};
  late.clear();
  const std::vector<memory::MemoryLedger>& at = f2.listener.ledgers;
  for (size_t g = 0; g < after.ledgers.size(); ++g) {
    const memory::MemoryLedger& l = after.ledgers[g];
    const bool peak_late = l.peak() != at[g].peak();
    const bool overflow_late = l.first_overflow() && !at[g].first_overflow();
    if ((peak_late && LabelMoves(p, l.peak_op())) ||
        (overflow_late && LabelMoves(p, l.first_overflow()->op))) {
      return false;
    }
    late.push_back(peak_late ? dt->picoseconds() : 0);
    late.push_back(overflow_late ? dt->picoseconds() : 0);
  }
  ReplayResult a = SoFar(f1), b = SoFar(f2);
  const std::vector<int64_t> x = Additive(a), y = Additive(b);
  increment.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) increment[i] = y[i] - x[i];
  return true;
}

// How the records of `after` — the replay that repeats itself from `f1` to `f2` (StateFold's
// `period`), n periods short of the step — give the step's (FoldedRecords). `next`: the
// program a period longer than after's, which must run after's ops from the period's first on
// a period later (ProgramRepeats) for the micro-batch labels to follow: each op names the
// micro-batch its copy in `next` names a period on. None when it does not.
std::optional<FoldedRecords> Records(const OpProgram& next, const ReplayResult& after,
                                     const ReplaySnapshot& f1, const ReplaySnapshot& f2,
                                     const Period& period, int64_t n) {
  const OpProgram& p = after.program;
  if (!ProgramRepeats(p, next, period.from, period.ops)) return std::nullopt;
  FoldedRecords f;
  f.windows = n + 1;
  f.ops = period.ops;
  f.period = period.dt;
  f.timings_begin = f1.listener.timings;
  f.timings_end = f2.listener.timings;
  for (size_t g = 0; g < after.ledgers.size(); ++g) {
    f.changes.push_back({f1.listener.changes[g], f2.listener.changes[g]});
  }
  f.label_step.assign(p.ops.size(), 0);
  for (size_t v = static_cast<size_t>(period.from); v < p.ops.size(); ++v) {
    f.label_step[v] =
        next.ops[v + static_cast<size_t>(period.ops)].micro_batch - p.ops[v].micro_batch;
  }
  return f;
}

// K and d whatever the step's length (PlanFold without its condition on M); none for GPipe.
std::optional<FoldPlan> FoldWindow(const Scenario& s) {
  // GPipe runs every forward before any backward (sim/workload/pipeline_schedule.cc, with or
  // without a pipeline): its peak holds every micro-batch's activations and grows with M, so
  // its short replays never repeat. Not tried.
  if (s.parallel.pp_schedule == PipelineSchedule::kGpipe) return std::nullopt;
  FoldPlan f;
  const int64_t pp = s.parallel.pp;
  f.d = s.parallel.pp_schedule == PipelineSchedule::kInterleaved ? pp : 1;
  // K = 1 without a pipeline, so that the second and third replays each add a micro-batch that
  // runs in the steady state. Where the first micro-batch still allocates what later ones
  // reuse (lazy gradients, the first gathers, the caching allocator's segments) the window
  // slides (FoldedReplay). The check of the states makes K a matter of cost, not of
  // correctness: a K too small only means a slide or no fold; one too large, a longer replay.
  //
  // 1F1B: K = pp + max(2, pp / 4). Past its pp - 1 warm-up micro-batches the first stage holds
  // pp micro-batches' activations, and its caching allocator reaches the segments it keeps only
  // some micro-batches later: until stop 61 K was pp, and not one pair (pp, pp + 1) repeated in
  // the llama2-70b and llama3-405b plans (411 tried); the pair repeats from pp + 2 at 4 and 8
  // stages and from pp + 4 at 16 (pp + 3 did not). At this K, 163 of the 164 1F1B folds in
  // those plans (2 to 32 stages) were on the first pair, the other after a slide. `run`
  // instructions: GPT-3 175B as 1F1B on 8 stages (256 micro-batches) 261.4M -> 189.0M;
  // Llama-2-70B on 4, 8 and 16 stages 114.6M -> 104.4M, 198.0M -> 145.1M, 370.0M -> 260.6M,
  // on 2 stages 83.1M -> 83.8M.
  //
  // Interleaved: past its warm-up of (pp - 1)·2 + (v - 1)·pp units of 1/v micro-batch each
  // (Megatron-LM schedules.py), rounded up to whole groups of pp. Until stop 61 K had one group
  // more, which the golden interleaved layouts need (2 stages × 2 chunks: a warm-up of exactly
  // one group), but real ones mostly do not: GPT-3 175B on 4, 8 or 16 stages × 2 to 4 chunks
  // and Llama-2-70B on 4, 8 or 16 stages × 2 or 5 chunks, at 256 micro-batches, all fold on the
  // pair at this K, as did the 48 interleaved layouts of 4 and 8 stages that the two plans
  // replay; GPT-3 175B as shipped: `run` 462.8M -> 350.2M instructions. A layout that needs
  // more (those plans' 32-stage ones, whose sends settle over several periods) slides to it
  // and pays one short program's lowering more: the golden interleaved layout at 16
  // micro-batches 39.0M -> 39.9M.
  if (s.parallel.pp_schedule == PipelineSchedule::kInterleaved && pp > 1) {
    const int64_t v = s.parallel.pp_chunks;
    const int64_t warmup = ((pp - 1) * 2 + (v - 1) * pp + v - 1) / v;
    f.k = (warmup + f.d - 1) / f.d * f.d;
  } else if (pp > 1) {
    f.k = pp + std::max<int64_t>(2, pp / 4);
  } else {
    f.k = 1;
  }
  return f;
}

}  // namespace

std::optional<FoldPlan> PlanFold(const Scenario& s) {
  const auto f = FoldWindow(s);
  if (!f) return std::nullopt;
  const int64_t m = s.micro_batches();
  // The window of three short replays only when they hold fewer micro-batches than the step;
  // a shorter step, down to K + 2d, tries the first pair's states alone and goes on from them
  // when they do not repeat (FoldedReplay).
  if (3 * (f->k + f->d) >= m || (m - f->k) % f->d != 0) return std::nullopt;
  return f;
}

namespace {

// The step of `m` micro-batches folded on the states of the pair of short replays of `shorter`
// and shorter + d micro-batches, recording: the longer runs from the step's start and holds
// every record, which FoldedRecords expands (Records). When the pair's states do not repeat
// (or its records do not expand): with `go_on`, the whole step gone on from the longer
// replay's state, its records before that state prepended (ReplayAfter); else none.
absl::StatusOr<std::optional<ReplayResult>> RecordedPair(const Scenario& s, const FoldPlan& plan,
                                                         int64_t shorter, bool go_on,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options,
                                                         FoldTrace& t) {
  const int64_t last = shorter + plan.d, m = s.micro_batches();
  if (last > m || (m - last) % plan.d != 0) return std::nullopt;
  auto lowering = StepLowering::Start(s);
  if (!lowering.ok()) return std::nullopt;  // the full lowering reports it
  std::vector<OpProgram> programs;
  std::vector<int32_t> shared;
  for (const int64_t count : {shorter, last}) {
    auto program = lowering->Lower(count);
    if (!program.ok()) return std::nullopt;
    programs.push_back(*std::move(program));
    shared.push_back(lowering->shared());
  }
  std::shared_ptr<const ReplaySnapshot> snapshot;
  bool deferred = false;
  std::vector<LedgerCall> calls;
  std::vector<ReplayResult> runs =
      ReplayFamily(std::move(programs), compute, comm, s.cluster.gpu.Usable(), options, nullptr,
                   &snapshot, &shared, lowering->shared(), &deferred, &calls);
  const int64_t n = (m - last) / plan.d;
  std::vector<int64_t> increment, late;
  std::vector<Bytes> reserved;
  std::vector<FoldedRecords::Reserved> settling;
  Period period;
  int periods = 0;
  const auto went_on = [&]() -> absl::StatusOr<std::optional<ReplayResult>> {
    if (!go_on) return std::nullopt;
    const int32_t shared = lowering->shared();  // of the longer's program with the step's
    auto program = lowering->Lower(m);
    if (!program.ok()) return std::nullopt;  // the full lowering reports it
    ReplayResult r =
        ReplayAfter(*std::move(program), runs[1].program, compute, comm, s.cluster.gpu.Usable(),
                    options, snapshot, shared, 0, nullptr, &runs[1]);
    Finalize(r, kAsLowered);  // as Replay does
    t.went_on = true;
    return std::optional<ReplayResult>(std::move(r));
  };
  if (!StateFold(runs[0].program, runs[1], snapshot, &calls, n, increment, late, reserved, periods,
                 period, &settling)) {
    return went_on();
  }
  auto next = lowering->Lower(last + plan.d);
  if (!next.ok()) return std::nullopt;
  std::optional<FoldedRecords> records =
      Records(*next, runs[1], *snapshot->earlier, *snapshot, period, n);
  if (!records) return std::nullopt;
  // Where the allocators alone repeat, their reserved bytes as replayed alone.
  if (!reserved.empty()) records->reserved = std::move(settling);
  t.last = last;
  t.by_state = true;
  t.allocator_alone = !reserved.empty();
  t.allocator_periods = std::max(t.allocator_periods, periods);
  auto r = Extend(s, std::move(runs[1]), increment, n, late, reserved);
  if (r.ok() && *r) (*r)->folded_records = std::move(records);
  return r;
}

// Recording (--trace, --timeline, --html, --memory-snapshot): the step folded on the states of
// its first pair of short replays (RecordedPair) or, when those do not repeat, of the pair
// where it folds on states without records (a window that slid: an interleaved pipeline still
// warming up), replayed again from the start with records. None (replay it in full) when it
// does not fold on states.
absl::StatusOr<std::optional<ReplayResult>> RecordedFold(const Scenario& s,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options,
                                                         FoldTrace& t) {
  // States are saved of one replica standing for all (ReplayFamily): with every replica
  // simulated nothing folds on states.
  std::optional<FoldPlan> plan = FoldWindow(s);
  if (options.replicas != 1 || !plan || plan->k + plan->d >= s.micro_batches()) {
    return std::nullopt;
  }
  t.replays += 2;
  // A step too short for three short replays does not slide (FoldedReplay): where its first
  // pair does not repeat, it goes on from the pair's longer replay.
  const bool short_step = !PlanFold(s);
  auto first = RecordedPair(s, *plan, plan->k, short_step, compute, comm, options, t);
  if (!first.ok() || *first || short_step) return first;
  ReplayOptions plain = options;
  plain.record_ops = plain.record_memory = false;
  FoldTrace where;
  auto folded = FoldedReplay(s, compute, comm, plain, &where);
  if (!folded.ok() || !*folded || !where.by_state || where.last - plan->d <= plan->k) {
    return std::optional<ReplayResult>();
  }
  t.replays += where.replays + 2;
  return RecordedPair(s, *plan, where.last - plan->d, false, compute, comm, options, t);
}

}  // namespace

absl::StatusOr<std::optional<ReplayResult>> FoldedReplay(const Scenario& s,
                                                         const cost::ComputeCostModel& compute,
                                                         const cost::CollectiveCostModel& comm,
                                                         const ReplayOptions& options,
                                                         FoldTrace* trace) {
  FoldTrace local;
  FoldTrace& t = trace ? *trace : local;
  t = {};
  if (options.record_ops || options.record_memory) {
    return RecordedFold(s, compute, comm, options, t);
  }
  const int64_t m = s.micro_batches();
  auto plan = PlanFold(s);
  // A step too short for the three short replays but longer than the first pair (GPT-3 175B's
  // 64 micro-batches on 8 stages × 3 chunks: K + d = 24) tries the pair's states alone and,
  // where they do not repeat, the whole step goes on from the state of the pair's longer replay
  // where the next program parts from it (ReplayAfter: every longer program shares its ops
  // that far). Without a pipeline, where the step is longer than the next short replay, the
  // pair first slides once (ReplayAfter), as the longer window does: it lowers one period
  // more. A pipeline's programs are lowered whole, and where a pair does not repeat the step
  // costs more than a full replay (the short programs' lowerings, and the part of the longer
  // one's replay that the step does not share): Llama 3 405B at 128 micro-batches (K = 32,
  // d = 16), whose sends settle only some seven periods in, 1.97G instructions in full, 2.85G
  // going on from the pair of 48 and 64 (stop 60, K a group longer), 3.17G sliding once from
  // the pair of 32 and 48 to 48 and 64 before going on, so a pipeline does not slide. Until
  // stop 61, with K = pp, 1F1B pairs never repeated (FoldWindow) and were not tried.
  bool pair_only = false;
  if (!plan) {
    plan = FoldWindow(s);
    if (!plan || plan->k + plan->d >= m || (m - plan->k) % plan->d != 0) {
      return std::nullopt;
    }
    pair_only = true;
  }
  // The short replays K, K + d, K + 2d, ... In order of cost:
  //   - By state (StateFold, sim/replay/state_period.h): the replay of K + d micro-batches is
  //     watched where K's program parts from it and where K + 2d's would; when the second state
  //     is the first a period on, K + d's replay and what it added between the two give the
  //     step, and K's is never replayed past their common state. Where the two differ only in
  //     where the caching allocators placed the same tensors (one still settling, or one past
  //     its capacity that releases and reserves segments anew), the period's ledger changes,
  //     recorded, go through the allocators alone for the reserved peak (ReservedPeaks). Of the
  //     144 sweep-grid configurations (docs/benchmarks.md) 132 fold so at the first pair, 57
  //     of them with the allocator replayed alone; the default scenario without it. Pipelines
  //     too, their programs listing one more micro-batch as one block (PipelineEmission): the
  //     golden 1F1B layouts at the first pair, the interleaved ones after one slide.
  //   - By three replays (Repeats): otherwise K's replay is forked after all, and three
  //     replays that grow by the same increments are folded (the grid's other 12, whose
  //     allocators past capacity drift instead of settling: ReservedPeaks gives up on them).
  // After each replay past the second the window slides one period: one more short replay
  // instead of the full one, at most kMaxSlides times past the first three, while a fold that
  // fails costs less than the full replay it falls back to. Without a pipeline a slide lowers
  // one more period (StepLowering), replays it from the last state (ReplayAfter) and prepares
  // its program: it slides while the next short replay holds fewer micro-batches than the step
  // (Llama-2-70B, ZeRO-3, 1,024-token sequences, micro-batch 2, 16 micro-batches: folded after
  // a few slides instead of replayed in full). A pipeline's programs are lowered whole: it
  // slides while every short replay so far and the next together hold fewer micro-batches than
  // the step — the condition PlanFold sets on the first window. What slides is a replay still
  // settling: an allocator whose cached segments reach their final layout a few micro-batches
  // late (the first stage of a 1F1B pipeline, which holds pp micro-batches' activations, grows
  // its reserved peak for two more); a pipeline whose sends slow the compute beside them (SPEC
  // §3.5), converging to its period over several. Only states that repeat or three replays
  // that do are folded, so sliding changes what is tried, never what is accepted.
  constexpr int kMaxSlides = 8;
  // The last two or three short replays (K + i·d micro-batches each, the last `last`).
  std::vector<ReplayResult> runs;
  int64_t replayed = 0, last = 0;  // micro-batches, over every short replay so far; the last's
  // A state of the longest replay so far, where the next program will part from it, with the
  // one where it parted from the one before behind it: each slide's replay goes on from there
  // instead of starting over (ReplayAfter), and the two are what StateFold compares.
  std::shared_ptr<const ReplaySnapshot> snapshot;
  // The short steps' programs, their shared micro-batches lowered once.
  auto lowering = StepLowering::Start(s);
  if (!lowering.ok()) return std::nullopt;  // the full lowering reports it
  // The first two programs share their first micro-batches: the longer is replayed, and the
  // shorter forked from its state where they part (ReplayFamily) — only when the states do not
  // repeat, for the comparison of three replays.
  bool deferred = false;
  std::vector<LedgerCall> calls;  // the first pair's longer replay's ledger changes
  {
    std::vector<OpProgram> programs;
    std::vector<int32_t> shared;  // the ops each shares with the longer ones by construction
    for (int64_t i = 0; i < 2; ++i) {
      last = plan->k + i * plan->d;
      auto program = lowering->Lower(last);
      if (!program.ok()) return std::nullopt;  // the full lowering reports it
      programs.push_back(*std::move(program));
      shared.push_back(lowering->shared());
      replayed += last;
      ++t.replays;
    }
    runs = ReplayFamily(std::move(programs), compute, comm, s.cluster.gpu.Usable(), options,
                        nullptr, &snapshot, &shared, lowering->shared(), &deferred, &calls);
  }
  // Where the shorter program of the pair forks from the longer's replay, when it was deferred:
  // replayed only if three replays are compared (Repeats), after a slide has replaced
  // `snapshot`.
  const std::shared_ptr<const ReplaySnapshot> fork =
      deferred && snapshot ? (snapshot->earlier ? snapshot->earlier : snapshot) : nullptr;
  int64_t w = 0;  // slides past the first window of three
  std::vector<int64_t> increment, late;
  std::vector<Bytes> reserved;
  Period period;
  while (true) {
    t.last = last;
    const int64_t n = (m - last) / plan->d;
    // The first pair's replay recorded its ledger changes, for states whose allocators alone
    // differ (ReservedPeaks).
    if (StateFold(runs[runs.size() - 2].program, runs.back(), snapshot,
                  runs.size() == 2 ? &calls : nullptr, n, increment, late, reserved,
                  t.allocator_periods, period)) {
      t.by_state = true;
      t.allocator_alone = !reserved.empty();
      return Extend(s, std::move(runs.back()), increment, n, late, reserved);
    }
    if (pair_only && (runs.size() == 3 || last + plan->d >= m || !lowering->incremental())) {
      const int32_t shared = lowering->shared();  // of runs.back()'s program with the step's
      auto program = lowering->Lower(m);
      if (!program.ok()) return std::nullopt;  // the full lowering reports it
      ReplayResult r = ReplayAfter(*std::move(program), runs.back().program, compute, comm,
                                   s.cluster.gpu.Usable(), options, snapshot, shared);
      Finalize(r, kAsLowered);  // as Replay does
      t.went_on = true;
      return std::optional<ReplayResult>(std::move(r));
    }
    if (runs.size() == 3) {
      if (deferred) {
        runs[0] = ReplayFromState(std::move(runs[0].program), *fork, compute, comm,
                                  s.cluster.gpu.Usable(), options);
        deferred = false;
      }
      if (Repeats(runs)) break;
    }
    const int64_t next = last + plan->d;
    if (runs.size() == 3) {
      const int64_t cost = lowering->incremental() ? next : replayed + next;
      if (w == kMaxSlides || cost >= m) return std::nullopt;
      ++w;
    }
    const int32_t shared = lowering->shared();  // of runs.back()'s program with the next
    auto program = lowering->Lower(next);
    if (!program.ok()) return std::nullopt;  // the full lowering reports it
    ReplayResult r =
        ReplayAfter(*std::move(program), runs.back().program, compute, comm, s.cluster.gpu.Usable(),
                    options, snapshot, shared, lowering->shared());
    if (runs.size() == 3) runs.erase(runs.begin());
    runs.push_back(std::move(r));
    ++t.replays;
    replayed += next;
    last = next;
  }
  // Three replays that repeat: the increments from the second to the third, n more times.
  const std::vector<int64_t> b = Additive(runs[1]), c = Additive(runs[2]);
  const std::vector<int64_t> tb = Moments(runs[1]), tc = Moments(runs[2]);
  increment.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) increment[i] = c[i] - b[i];
  late.resize(tc.size());
  for (size_t i = 0; i < tc.size(); ++i) late[i] = tc[i] - tb[i];
  return Extend(s, std::move(runs[2]), increment, (m - last) / plan->d, late);
}

}  // namespace sim::replay
