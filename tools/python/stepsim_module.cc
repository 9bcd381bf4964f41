// `import stepsim`: the commands as Python functions for notebooks. Each returns what the
// command's --json writes, as Python objects (dicts keep the report's key order; integers stay
// exact), because each calls the same library functions the command line does:
//
//   run      config::ScenarioLoader + replay::Simulate + report::RunJson      (stepsim run)
//   sweep    explore::RunSweep + explore::SweepJson                            (stepsim sweep)
//   compare  explore::RunCompare + explore::CompareJson                        (stepsim compare)
//   plan     explore::SetPlanOption + explore::Plan + explore::PlanJson        (stepsim plan)
//   validate validate::ValidateFiles + validate::ValidationRunJson             (stepsim validate)
//
// Bad input raises stepsim.ScenarioError (a ValueError) carrying the first problem's file,
// line, column and key path, and every problem in `problems`; an internal failure raises
// RuntimeError. The simulation runs without the GIL.

#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "sim/base/bad_input.h"
#include "sim/base/stop_request.h"
#include "sim/config/catalog.h"
#include "sim/explore/plan.h"
#include "sim/explore/plan_options.h"
#include "sim/explore/plan_report.h"
#include "sim/explore/runner.h"
#include "sim/explore/sweep_run.h"
#include "sim/replay/replay.h"
#include "sim/replay/variability.h"
#include "sim/report/run_report.h"
#include "sim/report/run_summary.h"
#include "sim/validate/validate_files.h"

namespace py = pybind11;
using Json = nlohmann::ordered_json;

namespace {

// Raises the Status as stepsim.ScenarioError or RuntimeError (defined under "errors").
[[noreturn]] void Raise(const absl::Status& st,
                        std::vector<sim::config::ConfigProblem> problems = {},
                        bool from_dict = false);

// ---- JSON <-> Python ---------------------------------------------------------------------

py::object ToPython(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: {
      py::dict d;
      for (const auto& [k, v] : j.items()) d[py::str(k)] = ToPython(v);
      return d;
    }
    case Json::value_t::array: {
      py::list l;
      for (const Json& v : j) l.append(ToPython(v));
      return l;
    }
    case Json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case Json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case Json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case Json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case Json::value_t::number_float:
      return py::float_(j.get<double>());
    default:
      return py::none();
  }
}

// A Python value as JSON (a scenario given as a dict; a --set value that is a list or a
// mapping). TypeError for anything YAML cannot hold.
Json FromPython(const py::handle& o, const std::string& where, int depth = 0) {
  // A scenario nests six levels at most; a dict or list that holds itself never ends.
  constexpr int kMaxDepth = 64;
  if (depth > kMaxDepth) {
    Raise(absl::InvalidArgumentError(
        absl::StrCat(where, ": nested more than ", kMaxDepth,
                     " levels deep (a dict or list that holds itself?)")));
  }
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();
  if (py::isinstance<py::int_>(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
    if (overflow != 0) {
      Raise(absl::InvalidArgumentError(
          absl::StrCat(where, ": ", py::str(o).cast<std::string>(), " is beyond 64-bit integers")));
    }
    return static_cast<int64_t>(v);
  }
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::isinstance<py::dict>(o)) {
    Json j = Json::object();
    for (const auto& [k, v] : o.cast<py::dict>()) {
      const std::string key = py::str(k).cast<std::string>();
      j[key] = FromPython(v, where.empty() ? key : absl::StrCat(where, ".", key), depth + 1);
    }
    return j;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    Json j = Json::array();
    for (const auto& v : o) j.push_back(FromPython(v, where, depth + 1));
    return j;
  }
  throw py::type_error(absl::StrCat(where, ": expected a number, string, bool, list or dict, got ",
                                    py::str(o.get_type()).cast<std::string>()));
}

// A value as --set takes it: YAML scalar text, or a flow sequence/mapping (JSON is YAML).
std::string SetValueText(const py::handle& v, const std::string& key) {
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::float_>(v)) return py::repr(v).cast<std::string>();
  return FromPython(v, key).dump();
}

// ---- errors ------------------------------------------------------------------------------

// A Status message's lines as problems, for the errors that come without ConfigProblems (a
// YAML syntax error, a --set that cannot apply, one configuration of a sweep). The forms are
// those YamlErrors::ToStatus writes (sim/config/yaml_fields.cc): "--set KEY (over FILE): MSG",
// "FILE:LINE:COLUMN: KEY: MSG", "FILE:LINE:COLUMN: MSG", and anything else as the message.
std::vector<sim::config::ConfigProblem> ProblemsOf(const std::string& message) {
  static const std::regex set_form(R"(^--set (\S+) \(over (.*)\): (.*)$)");
  static const std::regex located(R"(^(.+?):(\d+):(\d+): (.*)$)");
  static const std::regex keyed(R"(^([A-Za-z_][\w\[\]-]*(\.[\w\[\]-]+)*): (.*)$)");
  std::vector<sim::config::ConfigProblem> out;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    const std::string text(line);
    std::smatch m;
    sim::config::ConfigProblem p;
    if (std::regex_match(text, m, set_form)) {
      p = {"--set", m[1].str(), m[3].str(), m[2].str()};
    } else if (std::regex_match(text, m, located)) {
      p.file = m[1];
      p.where = absl::StrCat(p.file, ":", m[2].str(), ":", m[3].str());
      p.line = std::stoi(m[2]);
      p.column = std::stoi(m[3]);
      std::smatch k;
      const std::string rest = m[4];
      if (std::regex_match(rest, k, keyed)) {
        p.key_path = k[1];
        p.message = k[3];
      } else {
        p.message = rest;
      }
    } else {
      p.message = text;
    }
    out.push_back(std::move(p));
  }
  return out;
}

py::object OrNone(const std::string& s) {
  if (s.empty()) return py::none();
  return py::str(s);
}
py::object OrNone(int n) {
  if (n <= 0) return py::none();
  return py::int_(n);
}

// Raises the Status as stepsim.ScenarioError (bad input) or RuntimeError (internal). A scenario
// given as a dict has no lines: its problems keep the key path only.
[[noreturn]] void Raise(const absl::Status& st, std::vector<sim::config::ConfigProblem> problems,
                        bool from_dict) {
  const std::string message(st.message());
  if (!sim::IsBadInput(st)) throw std::runtime_error(message);
  if (problems.empty()) problems = ProblemsOf(message);
  std::vector<std::string> lines;
  py::list listed;
  for (sim::config::ConfigProblem& p : problems) {
    if (from_dict && p.where != "--set") {
      p.file = "<dict>";
      p.line = p.column = 0;
    }
    py::dict d;
    d["file"] = OrNone(p.file);
    d["line"] = OrNone(p.line);
    d["column"] = OrNone(p.column);
    d["key_path"] = OrNone(p.key_path);
    d["message"] = p.message;
    listed.append(d);
    if (from_dict) {
      lines.push_back(p.key_path.empty() ? p.message : absl::StrCat(p.key_path, ": ", p.message));
    }
  }
  const std::string text = from_dict ? absl::StrJoin(lines, "\n") : message;
  py::object type = py::module_::import("stepsim").attr("ScenarioError");
  py::object err = type(text);
  const py::dict first = listed.empty() ? py::dict() : listed[0].cast<py::dict>();
  for (const char* k : {"file", "line", "column", "key_path"}) {
    py::object v = py::none();
    if (first.contains(k)) v = first[k];
    err.attr(k) = v;
  }
  err.attr("problems") = listed;
  err.attr("code") = absl::StatusCodeToString(st.code());
  PyErr_SetObject(type.ptr(), err.ptr());
  throw py::error_already_set();
}

template <class T>
T OrRaise(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

// Runs `work` (which must not touch Python objects) on a thread of its own while this thread
// keeps the interpreter's signals: Ctrl-C (or any handler that raises) is seen within 50 ms,
// asks the work to stop (sim/base/stop_request.h: each configuration not yet replayed finishes
// at once), waits for it, and raises the handler's exception (KeyboardInterrupt). Without a
// thread to run on, the work runs here, uninterruptible.
void RunInterruptible(const std::function<void()>& work) {
  std::exception_ptr error;
  bool interrupted = false;
  {
    py::gil_scoped_release unlocked;
    std::mutex m;
    std::condition_variable cv;
    bool finished = false;
    std::optional<std::thread> worker;
    try {
      worker.emplace([&] {
        try {
          work();
        } catch (...) {
          error = std::current_exception();
        }
        std::lock_guard<std::mutex> lock(m);
        finished = true;
        cv.notify_one();
      });
    } catch (const std::system_error&) {
      work();
      finished = true;
    }
    std::unique_lock<std::mutex> lock(m);
    while (!finished) {
      if (cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished; })) break;
      lock.unlock();
      {
        py::gil_scoped_acquire held;
        if (!interrupted && PyErr_CheckSignals() != 0) {
          interrupted = true;
          sim::RequestStop();
        }
      }
      lock.lock();
    }
    lock.unlock();
    if (worker) worker->join();
  }
  if (interrupted) {
    sim::ClearStopRequest();
    throw py::error_already_set();  // the exception PyErr_CheckSignals set
  }
  if (error) std::rethrow_exception(error);
}

// ---- arguments ---------------------------------------------------------------------------

std::vector<std::string> StringList(const py::object& o, const std::string& what) {
  if (o.is_none()) return {};
  if (py::isinstance<py::str>(o) || py::hasattr(o, "__fspath__")) {
    return {py::module_::import("os").attr("fspath")(o).cast<std::string>()};
  }
  std::vector<std::string> out;
  for (const auto& v : o) {
    if (!py::isinstance<py::str>(v) && !py::hasattr(v, "__fspath__")) {
      throw py::type_error(absl::StrCat(what, ": expected a string or a list of strings"));
    }
    out.push_back(py::module_::import("os").attr("fspath")(v).cast<std::string>());
  }
  return out;
}

sim::config::DataRoot Root(const py::object& calibration) {
  return OrRaise(sim::config::DataRoot::WithCalibrations(StringList(calibration, "calibration")));
}

// {key: value} as --set overrides, in the dict's order.
std::vector<sim::config::Override> Overrides(const py::object& set) {
  std::vector<sim::config::Override> out;
  if (set.is_none()) return out;
  if (!py::isinstance<py::dict>(set)) {
    throw py::type_error("set: expected a dict of {dotted.key: value}");
  }
  for (const auto& [k, v] : set.cast<py::dict>()) {
    const std::string key = py::str(k).cast<std::string>();
    out.push_back(
        OrRaise(sim::config::ParseOverride(absl::StrCat(key, "=", SetValueText(v, key)))));
  }
  return out;
}

// A scenario path (str or os.PathLike, found under the data root like the command line does)
// or a dict with the keys of a scenario file.
struct ScenarioSource {
  sim::config::ScenarioLoader loader;
  bool from_dict;
};
ScenarioSource Source(const sim::config::DataRoot& root, const py::object& scenario) {
  if (py::isinstance<py::dict>(scenario)) {
    const std::string text = FromPython(scenario, "").dump();
    auto loader = sim::config::ScenarioLoader::FromText(root, text, "<dict>");
    if (!loader.ok()) Raise(loader.status(), {}, true);
    return {*std::move(loader), true};
  }
  if (!py::isinstance<py::str>(scenario) && !py::hasattr(scenario, "__fspath__")) {
    throw py::type_error(
        absl::StrCat("scenario: expected a path (str or os.PathLike) or a dict, got ",
                     py::str(scenario.get_type()).cast<std::string>()));
  }
  const std::string path = StringList(scenario, "scenario").front();
  auto loader = sim::config::ScenarioLoader::Open(root, root.ResolveScenarioPath(path));
  if (!loader.ok()) Raise(loader.status());
  return {*std::move(loader), false};
}

int Jobs(const py::object& jobs) {
  if (jobs.is_none()) return sim::explore::DefaultJobs();
  const int n = jobs.cast<int>();
  if (n < 1 || n > 1024) Raise(absl::InvalidArgumentError("jobs: expected 1..1024"));
  return n;
}

// ---- the commands ------------------------------------------------------------------------

py::object Run(const py::object& scenario, const py::object& set, const py::object& calibration,
               bool explicit_ranks, bool fold, const py::object& trials) {
  std::optional<int64_t> n;
  if (!trials.is_none()) {
    n = trials.cast<int64_t>();
    if (*n < 1 || *n > 100000) {
      throw py::value_error("trials: expected a whole number of trials from 1 to 100000");
    }
  }
  const sim::config::DataRoot root = Root(calibration);
  const ScenarioSource source = Source(root, scenario);
  const std::vector<sim::config::Override> overrides = Overrides(set);
  std::vector<sim::config::ConfigProblem> problems;
  absl::StatusOr<sim::Scenario> s;
  absl::StatusOr<sim::replay::ReplayResult> result;
  Json j;
  {
    py::gil_scoped_release unlocked;
    s = source.loader.Load(overrides, &problems);
    if (s.ok()) {
      sim::replay::ReplayOptions options;
      options.explicit_ranks = explicit_ranks;
      options.fold = fold;
      result = sim::replay::Simulate(*s, options);
      if (result.ok()) {
        sim::report::RunSummary summary = sim::report::Summarize(*s, *result);
        if (n) {
          auto d = sim::replay::SimulateTrials(*s, *result, *n);
          if (d.ok()) {
            sim::report::AddDistribution(*s, *std::move(d), summary);
          } else {
            result = d.status();
          }
        }
        if (result.ok()) j = sim::report::RunJson(summary);
      }
    }
  }
  if (!s.ok()) Raise(s.status(), problems, source.from_dict);
  if (!result.ok()) Raise(result.status());
  return ToPython(j);
}

py::object Sweep(const py::object& scenario, const py::dict& vary, const py::object& set,
                 const py::object& jobs, const py::object& shard, const py::object& calibration) {
  const sim::config::DataRoot root = Root(calibration);
  const ScenarioSource source = Source(root, scenario);
  sim::explore::SweepRequest request{Overrides(set), {}, std::nullopt, Jobs(jobs)};
  for (const auto& [k, v] : vary) {
    const std::string key = py::str(k).cast<std::string>();
    std::vector<std::string> values;
    if (py::isinstance<py::str>(v)) {
      values.push_back(v.cast<std::string>());  // a list or range as --vary writes it
    } else {
      for (const auto& x : v) values.push_back(SetValueText(x, key));
    }
    request.varies.push_back(
        OrRaise(sim::explore::ParseVary(absl::StrCat(key, "=", absl::StrJoin(values, ",")))));
  }
  if (!shard.is_none())
    request.shard = OrRaise(sim::explore::ParseShard(shard.cast<std::string>()));
  absl::StatusOr<sim::explore::SweepOutcome> outcome;
  RunInterruptible([&] { outcome = sim::explore::RunSweep(source.loader, request, nullptr); });
  if (!outcome.ok()) Raise(outcome.status(), {}, source.from_dict);
  return ToPython(sim::explore::SweepJson(source.loader.path(), *outcome));
}

// A comma-joined string or a list of strings (`name` in errors).
std::vector<std::string> Names(const py::object& value, const char* name) {
  if (py::isinstance<py::str>(value)) {
    return absl::StrSplit(value.cast<std::string>(), ',', absl::SkipEmpty());
  }
  return StringList(value, name);
}

py::object Compare(const py::object& scenario, const py::object& set, const py::object& finetune,
                   const py::object& ep, const py::object& jobs, const py::object& calibration) {
  const sim::config::DataRoot root = Root(calibration);
  const ScenarioSource source = Source(root, scenario);
  sim::explore::CompareRequest request{Overrides(set), {}, {}, Jobs(jobs)};
  request.finetune = Names(finetune, "finetune");
  if (!finetune.is_none() && request.finetune.empty()) {
    Raise(absl::InvalidArgumentError("finetune: give at least one method"));
  }
  if (!ep.is_none()) {
    if (!finetune.is_none()) Raise(absl::InvalidArgumentError("ep and finetune: choose one"));
    // Degrees as integers or strings ("all").
    for (const py::handle d :
         py::isinstance<py::str>(ep) ? py::list(py::str(ep).attr("split")(",")) : py::list(ep)) {
      request.ep.push_back(py::str(d).cast<std::string>());
    }
    if (request.ep.empty()) Raise(absl::InvalidArgumentError("ep: give at least one degree"));
  }
  absl::StatusOr<sim::explore::CompareOutcome> outcome;
  RunInterruptible([&] { outcome = sim::explore::RunCompare(source.loader, request, nullptr); });
  if (!outcome.ok()) Raise(outcome.status(), {}, source.from_dict);
  return ToPython(
      sim::explore::CompareJson(source.loader.path(), outcome->stages, outcome->results));
}

py::object Plan(const std::string& model, const py::object& calibration, const py::kwargs& opts) {
  const sim::config::DataRoot root = Root(calibration);
  sim::explore::PlanRequest req;
  req.model = model;
  req.jobs = sim::explore::DefaultJobs();
  for (const auto& [k, v] : opts) {
    const std::string shown = py::str(k).cast<std::string>();
    std::string name = shown;
    std::replace(name.begin(), name.end(), '_', '-');
    std::vector<std::string> values;
    if (name == "price" && py::isinstance<py::dict>(v)) {
      for (const auto& [gpu, usd] : v.cast<py::dict>()) {
        values.push_back(
            absl::StrCat(py::str(gpu).cast<std::string>(), "=", py::str(usd).cast<std::string>()));
      }
    } else if ((name == "set" || name == "search") && py::isinstance<py::dict>(v)) {
      // {KEY: VALUE} for set, {KEY: [A, B]} for search.
      for (const auto& [key, value] : v.cast<py::dict>()) {
        const std::string text =
            name == "search" && !py::isinstance<py::str>(value)
                ? absl::StrJoin(StringList(py::reinterpret_borrow<py::object>(value), shown), ",")
                : py::str(value).cast<std::string>();
        values.push_back(absl::StrCat(py::str(key).cast<std::string>(), "=", text));
      }
    } else if ((name == "gpu" || name == "offload") && !py::isinstance<py::str>(v)) {
      values.push_back(
          absl::StrJoin(StringList(py::reinterpret_borrow<py::object>(v), shown), ","));
    } else {
      values.push_back(py::str(v).cast<std::string>());
    }
    for (const std::string& value : values) {
      if (absl::Status st = sim::explore::SetPlanOption(req, name, value, shown); !st.ok()) {
        Raise(st);
      }
    }
  }
  absl::StatusOr<sim::explore::PlanResult> plan;
  RunInterruptible([&] { plan = sim::explore::Plan(root, req, nullptr); });
  if (!plan.ok()) Raise(plan.status());
  return ToPython(sim::explore::PlanJson(*plan));
}

py::object Validate(const py::object& cases, bool cross_validate, const py::object& jobs,
                    const py::object& calibration) {
  const sim::config::DataRoot root = Root(calibration);
  const std::vector<std::string> files = StringList(cases, "cases");
  const int n = Jobs(jobs);
  absl::StatusOr<sim::validate::ValidationRun> run;
  RunInterruptible([&] { run = sim::validate::ValidateFiles(root, files, n, cross_validate); });
  if (!run.ok()) Raise(run.status());
  return ToPython(sim::validate::ValidationRunJson(*run));
}

// ---- DataFrames --------------------------------------------------------------------------

// Nested dicts as one level of dotted keys (pandas.json_normalize's naming); lists stay lists.
void Flatten(const py::dict& d, const std::string& prefix, py::dict& out) {
  for (const auto& [k, v] : d) {
    const std::string key = absl::StrCat(prefix, py::str(k).cast<std::string>());
    if (py::isinstance<py::dict>(v)) {
      Flatten(v.cast<py::dict>(), key + ".", out);
    } else {
      out[py::str(key)] = v;
    }
  }
}

// A varied value as the sweep wrote it ("4096", "0.5", "selective", "25 MB") as a number when
// it is one, so a DataFrame column sorts and plots numerically.
py::object VaryValue(const py::handle& v) {
  const std::string s = py::str(v).cast<std::string>();
  int64_t i = 0;
  double x = 0;
  if (absl::SimpleAtoi(s, &i)) return py::int_(i);
  if (absl::SimpleAtod(s, &x)) return py::float_(x);
  return py::str(s);
}

py::object ToDataFrame(const py::dict& result) {
  py::module_ pandas;
  try {
    pandas = py::module_::import("pandas");
  } catch (py::error_already_set&) {
    throw py::import_error(
        "stepsim.to_dataframe needs pandas (Debian: apt install python3-pandas)");
  }
  py::list rows;
  auto add = [&](const py::dict& first, const py::handle& item) {
    py::dict row = first;
    const py::dict entry = item.cast<py::dict>();
    if (entry.contains("report")) Flatten(entry["report"].cast<py::dict>(), "", row);
    if (entry.contains("error")) row["error"] = entry["error"];
    rows.append(row);
  };
  if (result.contains("results")) {  // sweep
    for (const auto& item : result["results"]) {
      py::dict first;
      for (const auto& [k, v] : item["vary"].cast<py::dict>()) first[k] = VaryValue(v);
      add(first, item);
    }
  } else if (result.contains("stages")) {  // compare
    for (const auto& item : result["stages"]) {
      py::dict first;
      first["zero"] = item["zero"];
      first["mode"] = item["mode"];
      add(first, item);
    }
  } else if (result.contains("pareto")) {  // plan: its Pareto set
    for (const auto& item : result["pareto"]) {
      py::dict row;
      Flatten(item.cast<py::dict>(), "", row);
      rows.append(row);
    }
  } else if (result.contains("cases")) {  // validate
    for (const auto& item : result["cases"]) {
      py::dict row;
      Flatten(item.cast<py::dict>(), "", row);
      rows.append(row);
    }
  } else {
    throw py::value_error(
        "to_dataframe: expected the result of stepsim.sweep, compare, plan or validate");
  }
  return pandas.attr("DataFrame")(rows);
}

}  // namespace

PYBIND11_MODULE(stepsim, m) {
  m.doc() =
      "stepsim: replays one LLM training step layer by layer over a modeled GPU cluster.\n"
      "Each function returns what the command's --json writes (docs/model.md, 'The report'),\n"
      "as Python objects; bad input raises stepsim.ScenarioError with file, line, column and "
      "key_path.";
  py::object value_error = py::reinterpret_borrow<py::object>(PyExc_ValueError);
  py::dict ns;
  ns["ValueError"] = value_error;
  py::exec(R"(
class ScenarioError(ValueError):
    """Bad input: a scenario, --set value, model, cluster or case file stepsim refused.

    file, line, column, key_path: where the first problem is (None where it has no such
    part: a value given in `set` has no line); problems: every problem, each a dict with
    those keys and its message; code: the status code (INVALID_ARGUMENT, NOT_FOUND, ...)."""
    file = line = column = key_path = None
    problems = ()
    code = None
)",
           ns);
  py::object scenario_error = ns["ScenarioError"];
  scenario_error.attr("__module__") = "stepsim";
  m.attr("ScenarioError") = scenario_error;
  // A value of the wrong type that pybind11 could not convert (a str for jobs, 2**70 for an int
  // argument) is the caller's TypeError, not an internal RuntimeError.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::cast_error& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });

  m.def("run", &Run, py::arg("scenario"), py::arg("set") = py::none(), py::kw_only(),
        py::arg("calibration") = py::none(), py::arg("explicit_ranks") = false,
        py::arg("fold") = true, py::arg("trials") = py::none(),
        "run(scenario, set=None, *, calibration=None, explicit_ranks=False, fold=True, "
        "trials=None)\n    -> dict\n\n"
        "Replays one training step, as `stepsim run SCENARIO --json -`. scenario: a path (found\n"
        "under the data root when relative and absent) or a dict of scenario keys; set: {dotted\n"
        "key: value} overrides applied in order; calibration: calibration file(s) from\n"
        "`stepsim calibrate --out`; fold=False replays every micro-batch (same report); trials=N\n"
        "draws the GPUs' speeds N times (cluster.variability) for the step's percentiles.");
  m.def("sweep", &Sweep, py::arg("scenario"), py::arg("vary"), py::arg("set") = py::none(),
        py::kw_only(), py::arg("jobs") = py::none(), py::arg("shard") = py::none(),
        py::arg("calibration") = py::none(),
        "sweep(scenario, vary, set=None, *, jobs=None, shard=None, calibration=None) -> dict\n\n"
        "Replays the product of the varied values, as `stepsim sweep --json -`. vary: {dotted\n"
        "key: [values] or '2..64:x2'} (the first key outermost). The report is identical for\n"
        "any jobs. stepsim.to_dataframe(result) gives one row per configuration.");
  m.def("compare", &Compare, py::arg("scenario"), py::arg("set") = py::none(), py::kw_only(),
        py::arg("finetune") = py::none(), py::arg("ep") = py::none(), py::arg("jobs") = py::none(),
        py::arg("calibration") = py::none(),
        "compare(scenario, set=None, *, finetune=None, ep=None, jobs=None, calibration=None)"
        " -> dict\n\n"
        "ZeRO 0-3 (or the FSDP strategies, or Megatron without/with the distributed optimizer)\n"
        "side by side, as `stepsim compare --json -`; finetune: methods (full, lora, qlora,\n"
        "offload) to compare instead; ep: expert-parallel degrees (MoE models, e.g. [1, 8]).");
  m.def("plan", &Plan, py::arg("model"), py::kw_only(), py::arg("calibration") = py::none(),
        "plan(model, *, gpu=None, tokens='1T', seq_len=4096, batch_tokens='4Mi', max_gpus=1024,\n"
        "     gpus=None, days=None, budget=None, price=None, set=None, search=None,\n"
        "     headroom='5%', count_gap='10%', framework='deepspeed', finetune='full',\n"
        "     lora_rank=16, offload=None, jobs=None, shard=None, calibration=None) -> dict\n\n"
        "The smallest GPU count that fits per GPU type, a row per type and the Pareto set of\n"
        "time-to-train against cost, as `stepsim plan MODEL|SCENARIO --json -` (each keyword\n"
        "is the flag of the same name; gpu and offload take lists, price a {GPU: USD per\n"
        "GPU-hour} dict, set a {KEY: VALUE} dict, search a {KEY: [VALUES]} dict).");
  m.def("validate", &Validate, py::arg("cases") = py::none(), py::kw_only(),
        py::arg("cross_validate") = false, py::arg("jobs") = py::none(),
        py::arg("calibration") = py::none(),
        "validate(cases=None, *, cross_validate=False, jobs=None, calibration=None) -> dict\n\n"
        "Predictions against measured runs, as `stepsim validate --json -`; cases: case files\n"
        "(default: every file of scenarios/validation/).");
  m.def("to_dataframe", &ToDataFrame, py::arg("result"),
        "to_dataframe(result) -> pandas.DataFrame\n\n"
        "One row per configuration of a sweep (the varied keys, then the report's keys dotted:\n"
        "memory.peak_bytes, time.step_s, ...), per row of a comparison, per Pareto point of a\n"
        "plan or per case of a validation. Needs pandas.");
}
