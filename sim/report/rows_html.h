#pragma once
// The `--html` pages of `stepsim sweep` and `stepsim compare`: the peak per GPU (with the usable
// capacity as a line) and the step time against the first varied key, one series per
// combination of the others, and every row's numbers in a table. Configurations that do not fit
// are drawn hollow, and the legend says so.

#include <string>
#include <vector>

#include "sim/report/sweep_report.h"

namespace sim::report {

// `title`: the page's heading; `held`: what the rows share ("held constant: ...", or "").
std::string RowsHtml(const std::string& title, const std::string& held,
                     const std::vector<std::string>& label_names, const std::vector<Row>& rows);

// The `compare` page: RowsHtml's, and a chart of what each GPU sends per step by collective kind,
// each row's total as a multiple of the first row's (ZeRO-0: DDP), with why the sharded stages
// send more under gradient accumulation.
std::string CompareHtml(const std::string& title, const std::vector<std::string>& label_names,
                        const std::vector<Row>& rows);

}  // namespace sim::report
