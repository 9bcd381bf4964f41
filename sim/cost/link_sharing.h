#pragma once
// Links shared by the collectives one GPU runs at the same time (its data-parallel
// communicator, overlapped TP/CP collectives, pipeline sends). Collectives that use the same
// class of links — NVLink inside the node, or the NICs and the fabric when their group spans
// nodes — share them equally (processor sharing, the max-min fair share of one bottleneck):
// with k running, each progresses at 1/k of its stand-alone rate, so finishes move later when
// another starts and earlier when one ends. Inside one collective, link sharing among its own
// transfers and concurrent copies is already in its stand-alone price (sim/cost).

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "sim/base/check.h"
#include "sim/base/units.h"

namespace sim::cost {

enum class LinkClass : uint8_t { kNvlink = 0, kFabric = 1 };

class LinkSharing {
 public:
  explicit LinkSharing(int32_t gpus) : gpus_(static_cast<size_t>(gpus)) {}

  // A collective of stand-alone duration `alone` starts now on `gpu`: returns its duration
  // with the collectives already running in its class, whose finishes move through
  // reschedule(task, finish).
  template <class Reschedule>
  Duration Start(int32_t gpu, LinkClass c, int32_t task, Duration alone, Duration now,
                 Reschedule&& reschedule) {
    Group& g = gpus_[gpu][static_cast<int>(c)];
    Advance(g, now);
    g.flows.push_back({task, alone});
    const auto k = static_cast<int64_t>(g.flows.size());
    for (size_t i = 0; i + 1 < g.flows.size(); ++i) {
      reschedule(g.flows[i].task, now + g.flows[i].remaining * k);
    }
    return alone * k;
  }

  // The running collectives' tasks renumbered by `-by` (a replay that goes on over a program's
  // tail, numbering its tasks from a later op: sim/replay/replay.cc ReplayFrom).
  void ShiftTasks(int32_t by) {
    for (auto& groups : gpus_) {
      for (Group& g : groups) {
        for (Flow& f : g.flows) f.task -= by;
      }
    }
  }

  // Whether `o` shares its links among the same running collectives as this, each with the
  // same work left, its tasks numbered `tasks` later and its clock `time` later: the same
  // future, moved (a fold's state one period on: sim/replay/state_period.h).
  bool SameShifted(const LinkSharing& o, int32_t tasks, Duration time) const {
    if (gpus_.size() != o.gpus_.size()) return false;
    for (size_t gpu = 0; gpu < gpus_.size(); ++gpu) {
      for (size_t c = 0; c < gpus_[gpu].size(); ++c) {
        const Group &g = gpus_[gpu][c], &h = o.gpus_[gpu][c];
        if (g.flows.size() != h.flows.size()) return false;
        if (!g.flows.empty() && g.last + time != h.last) return false;
        for (size_t i = 0; i < g.flows.size(); ++i) {
          if (g.flows[i].task + tasks != h.flows[i].task ||
              g.flows[i].remaining != h.flows[i].remaining) {
            return false;
          }
        }
      }
    }
    return true;
  }

  // The collective `task` ends now: the others of its class speed up.
  template <class Reschedule>
  void Finish(int32_t gpu, LinkClass c, int32_t task, Duration now, Reschedule&& reschedule) {
    Group& g = gpus_[gpu][static_cast<int>(c)];
    Advance(g, now);
    size_t i = 0;
    while (i < g.flows.size() && g.flows[i].task != task) ++i;
    SIM_CHECK(i < g.flows.size(), "a collective ended that link sharing never saw start");
    g.flows.erase(g.flows.begin() + static_cast<std::ptrdiff_t>(i));
    const auto k = static_cast<int64_t>(g.flows.size());
    for (const Flow& f : g.flows) reschedule(f.task, now + f.remaining * k);
  }

 private:
  struct Flow {
    int32_t task;
    Duration remaining;  // work left, timed at the stand-alone rate
  };
  struct Group {
    std::vector<Flow> flows;
    Duration last;  // when `remaining` was last brought up to date
  };

  // Each running flow did (now − last) / k of its work since the last update.
  static void Advance(Group& g, Duration now) {
    if (!g.flows.empty()) {
      const Duration done = Duration::Picoseconds((now - g.last).picoseconds() /
                                                  static_cast<int64_t>(g.flows.size()));
      for (Flow& f : g.flows) f.remaining = std::max(Duration::Zero(), f.remaining - done);
    }
    g.last = now;
  }

  std::vector<std::array<Group, 2>> gpus_;
};

}  // namespace sim::cost
