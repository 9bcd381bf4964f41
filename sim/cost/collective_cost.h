#pragma once
// Time of a collective (docs/model.md "Time"). The replay asks a CollectiveCostModel; the one
// stepsim builds prices every collective on the cluster graph (graph_collective.h).

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/cost/nccl_tuner.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

// A collective's price: its time, the algorithm and NCCL protocol it ran with and the link that
// bounded it.
struct PricedCollective {
  Duration time;
  Duration latency;  // the part of `time` that does not depend on the bytes (NCCL's floor)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  std::string busiest_link;  // the bottleneck of its slowest phase: least bandwidth per transfer
  int32_t busiest_load = 0;  // transfers sharing it in one step
  double ramp = 1.0;         // the size ramp applied to the slowest phase (sim/spec/transport.h)
  std::string transport;     // the slowest phase's transport, whose ramp that is
  Bytes ramp_bytes;          // where the ramp was read: bytes per rank, or per NIC on a network
};

// What the replay asks of a collective model (a test can hand it a model of its own).
class CollectiveCostModel {
 public:
  virtual ~CollectiveCostModel() = default;
  // One collective of `kind` over `group` moving a full tensor of `tensor` bytes, launched as
  // `buckets` separate collectives of equal size. The price is the model's to keep: valid until
  // the next call (a replay reads it thousands of times, and copying its link names would cost
  // more than the lookup).
  virtual const PricedCollective& Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                        int32_t buckets) const = 0;
  Duration Cost(CollectiveKind kind, Bytes tensor, CommGroup group, int32_t buckets) const {
    return Price(kind, tensor, group, buckets).time;
  }
};

// What share of their bandwidth a pipeline stage's network links reach (sim/replay/
// variability.h: a trial's degraded links, the slowest of those each kind of transfer crosses):
// `collective` for the stage's collectives that span nodes, `send` for its pipeline sends
// across nodes. 1: healthy.
struct LinkSlowdown {
  double collective = 1, send = 1;
  auto operator<=>(const LinkSlowdown&) const = default;
};

// `base`'s prices with the collectives across nodes moving their bytes at `speed` of base's
// bandwidth: time = latency + (base time − latency) / speed, the latency (NCCL's floor) kept.
// A ring or tree runs at the pace of its slowest link, and NCCL splits a call evenly over its
// channels, so one slow NIC in a group paces the whole call. Collectives inside a node
// (NVLink) keep base's price.
class SlowLinkCostModel final : public CollectiveCostModel {
 public:
  SlowLinkCostModel(const CollectiveCostModel& base, LinkSlowdown speed)
      : base_(base), speed_(speed) {}
  // Valid as long as the model: each slowed price is kept where it was first put.
  const PricedCollective& Price(CollectiveKind kind, Bytes tensor, CommGroup group,
                                int32_t buckets) const override;

 private:
  using Key =
      std::tuple<CollectiveKind, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int32_t>;
  const CollectiveCostModel& base_;
  LinkSlowdown speed_;
  mutable std::map<Key, PricedCollective> slowed_;
};

// The scenario's cluster graph and its collective algorithm (parallel.collective).
absl::StatusOr<std::unique_ptr<CollectiveCostModel>> MakeCollectiveCostModel(const Scenario& s);

// The collective models of the last few clusters a worker replayed, so that the configurations
// of a sweep or a plan on one cluster share its graph and its priced collectives instead of
// building them anew: on 16,384 GPUs, building the graph and pricing a replay's collectives
// took 10 % of `plan llama3-405b` (perf). A model is a pure function of the cluster and the
// algorithm (its caches only remember prices), so a reused one prices exactly as a new one.
// Not thread-safe: one per thread.
class CostModelCache {
 public:
  // The model MakeCollectiveCostModel(s) gives, kept until kEntries other clusters were asked.
  absl::StatusOr<const CollectiveCostModel*> For(const Scenario& s);

 private:
  static constexpr size_t kEntries = 4;
  struct Entry {
    ClusterSpec cluster;
    CollectiveAlgorithm algorithm;
    std::unique_ptr<CollectiveCostModel> model;
  };
  std::vector<Entry> entries_;  // the newest last
};

}  // namespace sim::cost
