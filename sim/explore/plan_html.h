#pragma once
// `stepsim plan --html FILE`: the Pareto front of training days against cost (against GPU count
// when a GPU type has no price), each point's layout on hover, the chosen point when --days or
// --budget asked for one, the front as a table and the smallest GPU count that fits per type.

#include <string>

#include "sim/explore/plan.h"

namespace sim::explore {

std::string PlanHtml(const PlanResult& plan);

}  // namespace sim::explore
