#pragma once
// `stepsim run --resolved`: the scenario after defaults, catalog names and overrides, as a
// person checks it before a long run (model shape, cluster, training, layout, placement).

#include <string>

#include "sim/spec/scenario.h"

namespace sim::report {

std::string ResolvedScenarioText(const Scenario& s);

}  // namespace sim::report
