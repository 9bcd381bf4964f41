#pragma once
// Propagation helpers for absl::Status / absl::StatusOr, the error vocabulary of every function
// reachable from user input.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SIM_CONCAT_INNER(a, b) a##b
#define SIM_CONCAT(a, b) SIM_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    absl::Status sim_status_ = (expr);         \
    if (!sim_status_.ok()) return sim_status_; \
  } while (false)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(SIM_CONCAT(sim_statusor_, __LINE__), lhs, expr)
