#pragma once
// A request to stop long work early, for an embedding that can be interrupted (the Python
// module, on Ctrl-C). Like the signal it stands for, it is process-wide: the one piece of state
// stepsim shares between calls. While it is set, each configuration a sweep, comparison, plan or
// validation has not yet replayed finishes at once as Cancelled (sim/explore/runner.cc), so the
// work ends within one configuration's replay; its results are then meant to be discarded.

namespace sim {

void RequestStop();
void ClearStopRequest();
bool StopRequested();

}  // namespace sim
