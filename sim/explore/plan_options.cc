#include "sim/explore/plan_options.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/base/quantity.h"
#include "sim/base/suggest.h"

namespace sim::explore {

namespace {

absl::Status Bad(absl::string_view shown, absl::string_view what, absl::string_view value) {
  return absl::InvalidArgumentError(
      absl::StrCat(shown, ": expected ", what, ", got '", value, "'"));
}

// A positive count, written plainly or with a suffix (2T, 300B, 4M: sim/base/quantity.h), of at
// most `max`: a count past it was cast to an integer it does not fit (--max-gpus 1e19 planned
// nothing and said so as an answer) or asked for minutes of search (--max-gpus 1e15).
template <class T>
absl::Status Count(absl::string_view shown, absl::string_view value, T& slot, double max) {
  auto n = ParseCount(value);
  if (!n.ok() || *n < 1) return Bad(shown, "a count", value);
  // A GPU count, a length or a rank is whole: 8.5 is refused, not truncated to 8.
  if (std::is_integral_v<T> && *n != std::floor(*n)) return Bad(shown, "a whole count", value);
  if (*n > max) {
    return Bad(
        shown,
        absl::StrCat("a count of at most ", max < 1e15 ? absl::StrCat(static_cast<int64_t>(max))
                                                       : absl::StrFormat("%g", max)),
        value);
  }
  slot = static_cast<T>(*n);
  return absl::OkStatus();
}

// The bounds of the plan's counts. Tokens: a budget, any finite number. GPUs: 2^20, past the
// largest clusters built (about 10^5 GPUs in 2025), with room; the search doubles the node
// count up to it. Sequence length: the scenario's own bound (sim/config, training.seq_len).
// Tokens per step: 2^40, the scenario's bound on a count. Jobs: sweep's 1..1024. LoRA rank: a
// model's width bound, 2^20.
constexpr double kMaxTokens = 1e300;
constexpr double kMaxGpus = 1 << 20;
constexpr double kMaxSeqLen = 1 << 24;
constexpr double kMaxBatchTokens = static_cast<double>(int64_t{1} << 40);
constexpr double kMaxJobs = 1024;
constexpr double kMaxLoraRank = 1 << 20;

absl::Status Positive(absl::string_view shown, absl::string_view value,
                      std::optional<double>& slot) {
  double x = 0;
  if (!absl::SimpleAtod(value, &x) || !(x > 0) || !std::isfinite(x)) {
    return Bad(shown, "a positive number", value);
  }
  slot = x;
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& PlanOptionNames() {
  static const std::vector<std::string> names = {
      "gpu",    "tokens", "seq-len",   "batch-tokens", "max-gpus",  "jobs",    "days",
      "budget", "price",  "framework", "finetune",     "lora-rank", "offload", "shard",
      "set",    "search", "gpus",      "headroom",     "count-gap", "power-mw"};
  return names;
}

absl::Status SetPlanOption(PlanRequest& req, absl::string_view name, absl::string_view value,
                           absl::string_view shown) {
  absl::Status st = ApplyPlanOption(req, name, value, shown);
  if (st.ok()) req.given.insert(std::string(name));
  return st;
}

namespace {

// The keys a plan sets itself for every candidate: a --set or --search of them would be
// overwritten or would break the search, so each is refused with what to use instead.
std::optional<std::string> OwnKey(absl::string_view key) {
  if (key == "cluster.nodes" || key == "cluster.gpus_per_node") return "--gpus N";
  if (key == "training.global_batch" || key == "training.global_batch_tokens") {
    return "--batch-tokens";
  }
  if (key == "training.seq_len") return "--seq-len";
  if (key == "model") return "the plan's MODEL or SCENARIO argument";
  if (key == "runtime.headroom") return "--headroom";
  return std::nullopt;
}

}  // namespace

absl::Status ApplyPlanOption(PlanRequest& req, absl::string_view name, absl::string_view value,
                             absl::string_view shown) {
  if (name == "set" || name == "search") {
    std::pair<std::string, std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty()) {
      return Bad(shown, name == "set" ? "KEY=VALUE" : "KEY=VALUE,VALUE,...", value);
    }
    if (auto instead = OwnKey(kv.first)) {
      return absl::InvalidArgumentError(
          absl::StrCat(shown, ": ", kv.first, " is set by the plan itself; use ", *instead));
    }
    if (name == "set") {
      auto o = config::ParseOverride(value);
      if (!o.ok())
        return absl::InvalidArgumentError(absl::StrCat(shown, ": ", o.status().message()));
      req.sets.push_back(*std::move(o));
      return absl::OkStatus();
    }
    std::vector<std::string> values = absl::StrSplit(kv.second, ',', absl::SkipEmpty());
    if (values.empty()) return Bad(shown, "KEY=VALUE,VALUE,...", value);
    for (const auto& [key, vs] : req.searches) {
      if (key == kv.first) {
        return absl::InvalidArgumentError(absl::StrCat(shown, ": ", key, " is searched twice"));
      }
    }
    req.searches.emplace_back(kv.first, std::move(values));
    return absl::OkStatus();
  }
  if (name == "gpus") {
    int64_t n = 0;
    if (absl::Status st = Count(shown, value, n, kMaxGpus); !st.ok()) return st;
    req.fixed_gpus = n;
    return absl::OkStatus();
  }
  if (name == "headroom") {
    auto m = ParseMemoryMargin(value);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(shown, ": ", m.status().message()));
    req.headroom = *m;
    return absl::OkStatus();
  }
  if (name == "count-gap") {
    std::string v(absl::StripAsciiWhitespace(value));
    const bool percent = absl::EndsWith(v, "%");
    if (percent) v.pop_back();
    double x = 0;
    if (!absl::SimpleAtod(v, &x) || !(x >= 0) || !std::isfinite(x)) {
      return Bad(shown, "a share of days, 0 or more (10% or 0.1; 0: powers of two only)", value);
    }
    req.count_gap = percent ? x / 100.0 : x;
    return absl::OkStatus();
  }
  if (name == "gpu") {
    req.gpus = absl::StrSplit(value, ',', absl::SkipEmpty());
    if (req.gpus.empty()) return Bad(shown, "GPU catalog names, comma-separated", value);
    return absl::OkStatus();
  }
  if (name == "tokens") return Count(shown, value, req.tokens, kMaxTokens);
  if (name == "seq-len") return Count(shown, value, req.seq_len, kMaxSeqLen);
  if (name == "batch-tokens") {
    return Count(shown, value, req.global_batch_tokens, kMaxBatchTokens);
  }
  if (name == "max-gpus") return Count(shown, value, req.max_gpus, kMaxGpus);
  if (name == "jobs") return Count(shown, value, req.jobs, kMaxJobs);
  if (name == "lora-rank") return Count(shown, value, req.lora_rank, kMaxLoraRank);
  if (name == "days") return Positive(shown, value, req.deadline_days);
  if (name == "power-mw") return Positive(shown, value, req.power_mw);
  if (name == "budget") return Positive(shown, value, req.budget_usd);
  if (name == "price") {
    std::pair<std::string, std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
    double usd = 0;
    if (kv.first.empty() || !absl::SimpleAtod(kv.second, &usd) || !(usd >= 0) ||
        !std::isfinite(usd)) {
      return Bad(shown, "GPU=USD_PER_HOUR (a finite price, 0 or more)", value);
    }
    // Names are matched to the catalog by Plan (case-insensitively, as --gpu is); the same name
    // twice is a mistake, not a later price winning.
    for (const auto& [gpu, price] : req.prices) {
      if (absl::AsciiStrToLower(gpu) == absl::AsciiStrToLower(kv.first)) {
        return absl::InvalidArgumentError(absl::StrCat(shown, ": ", kv.first, " is priced twice"));
      }
    }
    req.prices[kv.first] = usd;
    return absl::OkStatus();
  }
  if (name == "framework") {
    // fsdp2: framework fsdp with parallel.fsdp_version 2 (FSDP2's copies around collectives).
    if (value != "deepspeed" && value != "fsdp" && value != "fsdp2" && value != "torchtune") {
      return Bad(shown, "deepspeed, fsdp, fsdp2 or torchtune", value);
    }
    req.fsdp_version = value == "fsdp2" ? 2 : 1;
    req.framework = *EnumFromName<Framework>(value == "fsdp2" ? "fsdp" : value);
    return absl::OkStatus();
  }
  if (name == "finetune") {
    auto m = EnumFromName<FinetuneMethod>(value);
    if (!m) return Bad(shown, "full, lora or qlora", value);
    req.finetune = *m;
    return absl::OkStatus();
  }
  if (name == "offload") {
    for (absl::string_view what : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      if (what == "optimizer") {
        req.offload.optimizer = OffloadTarget::kCpu;
      } else if (what == "params") {
        req.offload.params = OffloadTarget::kCpu;
      } else if (what == "activations") {
        req.offload.activations = true;
      } else {
        return Bad(shown, "optimizer, params or activations, comma-separated", what);
      }
    }
    return absl::OkStatus();
  }
  if (name == "shard") {
    auto shard = ParseShard(value);
    if (!shard.ok()) return shard.status();
    req.shard = *shard;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown plan option '", shown, "'",
                                                 DidYouMean(std::string(name), PlanOptionNames())));
}

absl::StatusOr<std::vector<std::string>> DefaultPlanGpus(const config::DataRoot& root) {
  auto catalogs = config::LoadCatalogs(root);
  if (!catalogs.ok()) return catalogs.status();
  std::vector<std::string> gpus;
  for (const auto& n : catalogs->nodes) {
    if (std::find(gpus.begin(), gpus.end(), n.gpu) == gpus.end()) gpus.push_back(n.gpu);
  }
  return gpus;
}

}  // namespace sim::explore
