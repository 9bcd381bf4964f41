#pragma once
// The progress of `stepsim plan` (sim/explore/plan.h) for its line on stderr: what the search has
// done so far, and an estimate of the time it has left.

#include <cstdint>
#include <functional>
#include <string>

namespace sim::explore {

// How far a search has got, for a progress line (PlanProgressText): the GPU type it is on, the
// layouts it has enumerated and what became of them, and the replays so far. Counts cover every
// GPU type searched so far.
struct PlanProgress {
  std::string gpu;  // the GPU type being searched
  // Its place (1-based) among the GPU types searched (not a GPU count).
  int64_t gpu_index = 0, gpu_types = 0;
  // Layouts of one cluster size being loaded (and their static floors taken): begun, of to_load
  // on `loading_gpus` GPUs; to_load 0 when none is loading.
  int64_t loading = 0, to_load = 0, loading_gpus = 0;
  int64_t layouts = 0;             // layouts considered so far
  int64_t kept = 0, rejected = 0;  // of them: that fit (so far), rejected with a reason
  int64_t replayed = 0;            // replays run
  // This type's layouts that passed the static floor (and so wait for replays), and how many of
  // them are decided: kept or rejected.
  int64_t replay_layouts = 0, replay_decided = 0;

  // The share of the search done, in [0, 1]: whole GPU types, and of the current one the share of
  // its replayed layouts decided (its loading and static pruning count as nothing: they take a
  // small part of a type's time). An estimate for the time left, not a measure of work.
  double Fraction() const;
};
using PlanProgressFn = std::function<void(const PlanProgress&)>;

// "plan: H100-SXM5-80GB (1/3): 1234 layouts (56 kept, 1100 rejected), 345 replays, about 40 s
// left", with "loading the layouts on N GPUs, k of n" while a size loads: the time left from
// `elapsed_s` and Fraction() once a twentieth of the search is done, "time left not known
// yet" before.
std::string PlanProgressText(const PlanProgress& p, double elapsed_s);

}  // namespace sim::explore
