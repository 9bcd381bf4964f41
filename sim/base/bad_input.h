#pragma once
// Which failures are the user's bad input: the command line exits 2 for them (docs/model.md "The
// report") and the Python bindings raise stepsim.ScenarioError; any other code is an internal
// failure (exit 1, RuntimeError). The loaders return InvalidArgument (malformed input), NotFound (a
// name or file that does not exist) or FailedPrecondition (input that conflicts with the cluster);
// the replay OutOfRange (a step beyond the clock) and Unimplemented (a layout not modelled).

#include "absl/status/status.h"

namespace sim {

inline bool IsBadInput(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

}  // namespace sim
