// The Catch2 (v2) runner for all unit tests, with the heap kept across replays as stepsim keeps
// it (sim/base/heap_tuning.h): the tests replay thousands of programs.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "sim/base/heap_tuning.h"

int main(int argc, char** argv) {
  sim::KeepHeapForReplays();
  return Catch::Session().run(argc, argv);
}
