#pragma once
// Time of a collective (SPEC §3.5). The replay asks a CollectiveCostModel; the one stepsim
// builds prices every collective on the cluster graph (graph_collective.h).

#include <memory>

#include "absl/status/statusor.h"
#include "sim/base/units.h"
#include "sim/spec/scenario.h"
#include "sim/workload/program.h"

namespace sim::cost {

class CollectiveCostModel {
 public:
  virtual ~CollectiveCostModel() = default;
  // Time for one collective of `kind` over `group` moving a full tensor of `tensor` bytes,
  // launched as `buckets` separate collectives of equal size.
  virtual Duration Cost(CollectiveKind kind, Bytes tensor, CommGroup group,
                        int32_t buckets) const = 0;
};

class GraphCostModel;

// The scenario's cluster graph and its collective algorithm (parallel.collective).
absl::StatusOr<std::unique_ptr<GraphCostModel>> MakeCollectiveCostModel(const Scenario& s);

}  // namespace sim::cost
