#pragma once
// Internal invariants. SIM_CHECK stays on in release builds: a broken invariant in the replay
// would otherwise print a plausible but wrong number. Input errors never reach it; they travel as
// absl::Status.

#include <cstdio>
#include <cstdlib>

#define SIM_CHECK(cond, msg)                                                                    \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "%s:%d: internal check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                        \
      std::abort();                                                                             \
    }                                                                                           \
  } while (false)
