#include "sim/explore/runner.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "sim/report/run_report.h"

namespace sim::explore {

int DefaultJobs() { return std::max(1u, std::thread::hardware_concurrency()); }

std::vector<ConfigResult> RunConfigs(const config::ScenarioLoader& loader,
                                     const std::vector<std::vector<config::Override>>& configs,
                                     int jobs, const Progress& progress) {
  std::vector<ConfigResult> results(configs.size());
  std::atomic<size_t> next{0}, done{0};
  auto work = [&]() {
    for (size_t i = next++; i < configs.size(); i = next++) {
      ConfigResult& out = results[i];
      out.overrides = configs[i];
      auto scenario = loader.Load(configs[i]);
      if (!scenario.ok()) {
        out.status = scenario.status();
      } else if (auto r = replay::Replay(*scenario, {}); !r.ok()) {
        out.status = r.status();
      } else {
        out.report = report::RunJson(*scenario, *r);
      }
      const size_t d = ++done;
      if (progress) progress(d, configs.size());
    }
  };
  const int threads = std::max(1, std::min<int>(jobs, static_cast<int>(configs.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return results;
}

}  // namespace sim::explore
