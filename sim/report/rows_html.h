#pragma once
// The `--html` pages of `stepsim sweep` and `stepsim compare`: the peak per GPU (with the usable
// capacity as a line) and the step time against the first varied key, one series per
// combination of the others, and every row's numbers in a table.

#include <string>
#include <vector>

#include "sim/report/sweep_report.h"

namespace sim::report {

// `title`: the page's heading; `held`: what the rows share ("held constant: ...", or "").
std::string RowsHtml(const std::string& title, const std::string& held,
                     const std::vector<std::string>& label_names, const std::vector<Row>& rows);

}  // namespace sim::report
