"""The Python bindings (tools/python/stepsim_module.cc) against the command line.

Each function must return what the command's --json writes, so every test here runs the
stepsim binary (STEPSIM_BINARY, set by tests/CMakeLists.txt) on the same input and compares
the whole report. Expected locations of errors are found in the input files' text, not taken
from stepsim's output. Run from the source root with build/python on PYTHONPATH (ctest does).
"""

import json
import os
import subprocess

import pytest

import stepsim

BINARY = os.environ["STEPSIM_BINARY"]
DEFAULT = "scenarios/default.yaml"


def cli_json(*args):
    """The JSON report of `stepsim ARGS --json -`."""
    r = subprocess.run([BINARY, *args, "--json", "-"], capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout)


def cli_error(*args):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True)
    assert r.returncode == 2, r
    return r.stderr


def test_run_is_the_command_lines_report():
    r = stepsim.run(DEFAULT)
    assert r == cli_json("run", DEFAULT)
    # Key order is the report's, as --json writes it.
    assert list(r) == list(cli_json("run", DEFAULT))
    assert isinstance(r["memory"]["peak_bytes"], int)


def test_run_with_overrides_of_every_value_type():
    sets = {"parallel.zero": 2, "training.recompute": "selective", "runtime.reserved": "2 GiB",
            "training.global_batch": 512}
    args = [f"--set={k}={v}" for k, v in sets.items()]
    assert stepsim.run(DEFAULT, set=sets) == cli_json("run", DEFAULT, *args)
    # A bool is YAML's true/false, not Python's True/False.
    flags = {"parallel.overlap_grad_reduce": False}
    assert stepsim.run(DEFAULT, set=flags) == cli_json(
        "run", DEFAULT, "--set", "parallel.overlap_grad_reduce=false")


def test_run_folded_and_unfolded_agree():
    assert stepsim.run(DEFAULT, fold=False) == stepsim.run(DEFAULT)


def test_run_trials_is_the_command_lines_report():
    sets = {"cluster.variability.gemm_cv": 0.03}
    r = stepsim.run(DEFAULT, set=sets, trials=8)
    assert r == cli_json("run", DEFAULT, "--trials", "8", "--set",
                         "cluster.variability.gemm_cv=0.03")
    assert r["time"]["step_s_p50"] > r["time"]["step_s"]
    with pytest.raises(ValueError):
        stepsim.run(DEFAULT, trials=0)


def test_run_from_a_dict_is_the_file():
    scenario = {
        "schema_version": 1,
        "name": "llama2-70b-32xh100-zero3",
        "model": "llama2-70b",
        "cluster": {"node": "dgx-h100", "nodes": 4},
        "training": {"seq_len": 4096, "micro_batch": 1, "global_batch": 1024,
                     "precision": "bf16", "optimizer": "adamw", "recompute": "full",
                     "attention": "flash"},
        "parallel": {"framework": "deepspeed", "zero": 3, "tp": 1, "pp": 1},
        "runtime": {"reserved": "1 GiB"},
    }
    from_dict = stepsim.run(scenario)
    from_file = stepsim.run(DEFAULT)
    # Everything but where the scenario came from.
    assert from_dict["memory"] == from_file["memory"]
    assert from_dict["time"] == from_file["time"]


def test_bad_set_value_raises_scenario_error_naming_the_key():
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.run(DEFAULT, set={"training.recompute": "sometimes"})
    err = e.value
    assert isinstance(err, ValueError)
    assert err.key_path == "training.recompute"
    assert err.file == DEFAULT and err.line is None  # a --set value has no line
    assert "sometimes" in str(err) and "selective" in str(err)
    assert err.code == "INVALID_ARGUMENT"
    # The same words as the command line's error.
    assert str(err) in cli_error("run", DEFAULT, "--set", "training.recompute=sometimes")


def test_bad_file_raises_with_file_line_column_and_key(tmp_path):
    text = open(DEFAULT).read().replace("zero: 3", "zero: 7")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    lines = text.splitlines()
    line = next(i for i, l in enumerate(lines, 1) if l.strip() == "zero: 7")
    column = lines[line - 1].index("7") + 1
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.run(path)  # an os.PathLike
    err = e.value
    assert (err.file, err.line, err.column, err.key_path) == (str(path), line, column,
                                                              "parallel.zero")
    assert err.problems[0]["key_path"] == "parallel.zero"
    assert str(err) in cli_error("run", str(path))


def test_yaml_syntax_error_is_located(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("schema_version: 1\nmodel: [llama2-7b\n")
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.run(str(path))
    assert e.value.file == str(path) and e.value.line is not None


def test_dict_errors_carry_the_key_path_without_lines():
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.run({"schema_version": 1, "model": "llama2-7b",
                     "cluster": {"node": "dgx-h100", "nodes": 1},
                     "parallel": {"zeroo": 1}})
    err = e.value
    assert err.file == "<dict>" and err.line is None and err.column is None
    assert err.key_path == "parallel.zeroo"
    assert "zero" in str(err)  # the nearest valid key


def test_missing_file_is_a_scenario_error():
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.run("no/such/scenario.yaml")
    assert e.value.code == "NOT_FOUND"


def test_sweep_is_the_command_lines_report_and_converts_to_a_dataframe():
    vary = {"training.seq_len": [2048, 4096], "parallel.zero": "2..3"}
    r = stepsim.sweep(DEFAULT, vary, set={"training.global_batch": 256}, jobs=2)
    assert r == cli_json("sweep", DEFAULT, "--vary", "training.seq_len=2048,4096",
                         "--vary", "parallel.zero=2..3", "--set", "training.global_batch=256",
                         "--jobs", "1")
    pandas = pytest.importorskip("pandas", reason="pandas converts sweeps (python3-pandas)")
    df = stepsim.to_dataframe(r)
    assert isinstance(df, pandas.DataFrame)
    assert len(df) == 4
    assert list(df.columns[:2]) == ["training.seq_len", "parallel.zero"]
    assert list(df["training.seq_len"]) == [2048, 2048, 4096, 4096]  # numbers, first outermost
    peaks = [x["report"]["memory"]["peak_bytes"] for x in r["results"]]
    assert list(df["memory.peak_bytes"]) == peaks


def test_compare_is_the_command_lines_report():
    r = stepsim.compare(DEFAULT, set={"training.global_batch": 256})
    assert r == cli_json("compare", DEFAULT, "--set", "training.global_batch=256")
    assert [s["zero"] for s in r["stages"]] == [0, 1, 2, 3]
    pandas = pytest.importorskip("pandas", reason="pandas converts comparisons (python3-pandas)")
    df = stepsim.to_dataframe(r)
    assert list(df["zero"]) == [0, 1, 2, 3]


def test_compare_finetune_methods():
    r = stepsim.compare(DEFAULT, finetune=["full", "lora"])
    assert r == cli_json("compare", DEFAULT, "--finetune", "full,lora")
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.compare(DEFAULT, finetune="lorra")
    assert "lorra" in str(e.value)


def test_compare_expert_parallel_degrees():
    moe = {"model": "mixtral-8x7b", "parallel.framework": "megatron", "parallel.zero": 1,
           "training.global_batch": 64}
    r = stepsim.compare(DEFAULT, set=moe, ep=[1, 8])
    assert r == cli_json("compare", DEFAULT, *[a for k, v in moe.items()
                                               for a in ("--set", f"{k}={v}")], "--ep", "1,8")
    assert [s["mode"] for s in r["stages"]] == ["ep 1", "ep 8"]
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.compare(DEFAULT, ep=[8])
    assert "has no experts" in str(e.value)


def test_plan_is_the_command_lines_report():
    r = stepsim.plan("llama2-7b", gpu=["H100-SXM5-80GB"], max_gpus=8, tokens="10B",
                     price={"H100-SXM5-80GB": 3.5}, jobs=2)
    cli = cli_json("plan", "llama2-7b", "--gpu", "H100-SXM5-80GB", "--max-gpus", "8",
                   "--tokens", "10B", "--price", "H100-SXM5-80GB=3.5", "--jobs", "1")
    # The search's wall time differs from run to run; everything else is the same.
    assert r.pop("seconds") > 0 and cli.pop("seconds") > 0
    assert r == cli
    assert r["min_gpus"]


def test_plan_takes_a_scenario_with_set_and_search_as_dicts():
    r = stepsim.plan(DEFAULT, gpus=64, set={"parallel.tp": 2},
                     search={"training.precision": ["bf16", "fp8"]}, jobs=2)
    assert [t["variant"] for t in r["types"]] == ["training.precision=bf16",
                                                  "training.precision=fp8"]
    assert r["fits"] and all(f["config"]["tp"] == 2 and f["gpus"] == 64 for f in r["fits"])
    assert r["choice"]["gpus"] == 64


def test_plan_bad_options():
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.plan("llama2-7b", tokens="lots")
    assert str(e.value) == "tokens: expected a count, got 'lots'"
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.plan("llama2-7b", max_gpus=8.5)
    assert str(e.value) == "max_gpus: expected a whole count, got '8.5'"
    with pytest.raises(stepsim.ScenarioError) as e:
        stepsim.plan("llama2-7b", max_gpu=8)
    assert "max_gpu" in str(e.value) and "max-gpus" in str(e.value)


def test_validate_is_the_command_lines_report():
    files = ["scenarios/validation/torchtitan.yaml"]
    r = stepsim.validate(files)
    assert r == cli_json("validate", *files)
    assert r["cases"] and "mape" in r
    pandas = pytest.importorskip("pandas", reason="pandas converts validations (python3-pandas)")
    assert len(stepsim.to_dataframe(r)) == len(r["cases"])


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError):
        stepsim.run(DEFAULT, set=["parallel.zero=2"])
    with pytest.raises(TypeError):
        stepsim.run(DEFAULT, set={"parallel.zero": object()})
    with pytest.raises(ValueError):
        stepsim.to_dataframe({"neither": 1})


def test_the_reference_notebook_example_runs(capsys):
    pytest.importorskip("pandas", reason="the reference's example converts a sweep (python3-pandas)")
    readme = open("docs/reference.md").read()
    section = readme[readme.index("## Python"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    code = code[:code.index("```")]
    namespace = {}
    exec(compile(code, "docs/reference.md (Python example)", "exec"), namespace)
    df = namespace["df"]
    assert len(df) == 8 and "memory.peak_bytes" in df.columns
    out = capsys.readouterr().out
    assert "GiB at" in out and "training.recompute" in out
