#pragma once
// Shared by the fuzz targets: an input written to a file of the process's own (the loaders read
// files), and the data root of the source tree.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "sim/config/catalog.h"

namespace sim::fuzz {

inline std::string WriteInput(const uint8_t* data, size_t size, const char* suffix) {
  const std::string path = "/tmp/stepsim-fuzz-" + std::to_string(::getpid()) + suffix;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

inline const config::DataRoot& Root() {
  static const config::DataRoot root{STEPSIM_SOURCE_DIR};
  return root;
}

}  // namespace sim::fuzz
