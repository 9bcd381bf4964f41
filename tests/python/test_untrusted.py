"""The Python module against inputs from strangers (docs/security.md): no value crashes the
interpreter, wrong types are TypeError, bad values stepsim.ScenarioError (never the internal
RuntimeError), and Ctrl-C interrupts a long plan or sweep within a second. Run by ctest with
build/python on PYTHONPATH, from the source root.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

import stepsim

ZERO3 = "tests/golden/zero3.yaml"


@pytest.mark.parametrize("scenario", [None, [], 5, 3.5, b"tests/golden/zero3.yaml", object()])
def test_a_scenario_that_is_not_a_path_or_dict_is_a_type_error(scenario):
    with pytest.raises(TypeError, match="scenario: expected a path"):
        stepsim.run(scenario)


def test_a_dict_or_list_that_holds_itself_is_refused():
    d = {}
    d["x"] = d
    with pytest.raises(stepsim.ScenarioError, match="nested more than 64 levels"):
        stepsim.run(d)
    ring = []
    ring.append(ring)
    with pytest.raises(stepsim.ScenarioError, match="nested more than 64 levels"):
        stepsim.run(ZERO3, set={"training.recompute_modules": ring})
    deep = [1]
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(stepsim.ScenarioError, match="nested more than 64 levels"):
        stepsim.run(ZERO3, set={"training.recompute_modules": deep})


def test_values_beyond_their_types_are_user_errors_not_internal_ones():
    with pytest.raises(stepsim.ScenarioError, match="beyond 64-bit integers"):
        stepsim.run(ZERO3, set={"training.seq_len": 2**70})
    with pytest.raises(TypeError):
        stepsim.sweep(ZERO3, {"training.seq_len": [256]}, jobs=2**70)
    with pytest.raises(TypeError):
        stepsim.sweep(ZERO3, {"training.seq_len": [256]}, jobs="many")
    with pytest.raises(TypeError):
        stepsim.run(ZERO3, set={"training.seq_len": object()})
    with pytest.raises(TypeError):
        stepsim.run(ZERO3, set=5)


CHILD = """
import sys
import stepsim
print("start", flush=True)
try:
    stepsim.{call}
except KeyboardInterrupt:
    sys.exit(3)
sys.exit(0)
"""


@pytest.mark.parametrize("call", [
    "plan('llama2-70b')",
    # 7,200 configurations: several seconds, on any machine this suite runs on.
    "sweep('scenarios/default.yaml', {'training.seq_len': list(range(1024, 13824, 64)), "
    "'training.micro_batch': [1, 2, 4], 'parallel.zero': [0, 1, 2, 3], "
    "'training.recompute': ['none', 'selective', 'full']})",
])
def test_ctrl_c_interrupts_a_long_call_within_a_second(call):
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(call=call)],
                             stdout=subprocess.PIPE, text=True, env=os.environ)
    assert child.stdout.readline().strip() == "start"
    time.sleep(1.0)  # well into the work
    assert child.poll() is None, "the call ended before it could be interrupted"
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=60)
    waited = time.monotonic() - sent
    assert child.returncode == 3  # KeyboardInterrupt reached Python
    # Measured on the 2-core test machine under a load average of 3.5: 0.02-0.24 s (one
    # configuration's replay and the thread's join at most).
    assert waited < 1.0


def test_a_list_value_in_set_is_the_list_the_scenario_file_writes():
    joined = stepsim.run(ZERO3, set={"training.recompute": "selective",
                                     "training.recompute_modules": "core_attn,mlp"})
    for value in (["core_attn", "mlp"], "[core_attn, mlp]"):
        r = stepsim.run(ZERO3, set={"training.recompute": "selective",
                                    "training.recompute_modules": value})
        assert r["memory"] == joined["memory"] and r["time"] == joined["time"]


def random_value(rng, depth=0):
    """A value of any kind Python code might pass: scalars of every type, odd strings, and
    nested lists and dicts."""
    kinds = ["int", "float", "str", "bool", "none", "bytes", "object"]
    if depth < 4:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, 1, -1, 7, 2**31, 2**63 - 1, 2**63, -2**64, 10**30])
    if kind == "float":
        return rng.choice([0.5, -1.5, float("nan"), float("inf"), -float("inf"), 1e308, 5e-324])
    if kind == "str":
        return rng.choice(["", "x", "1", "none", "[q, v]", "{a: 1}", "[", "é", "\x00", "a\nb",
                           "*a", "&a [*a]", "`touch x`", "1e999", "-0", "4 GiB", "deepspeed"])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "none":
        return None
    if kind == "bytes":
        return b"\xff\xfe"
    if kind == "object":
        return object()
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "training", "seq_len", 1, "", "x.y"]): random_value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


KEYS = ["training.seq_len", "training.micro_batch", "training.recompute", "parallel.zero",
        "parallel.tp", "training.finetune.targets", "training.recompute_modules", "model",
        "cluster.nodes", "parallel.deepspeed", "no.such.key", "", ".", "training..seq_len"]


def test_random_values_raise_only_user_errors():
    """A generator of arguments: whatever it draws, each call returns a report or raises
    TypeError or ScenarioError: never RuntimeError, never a crash."""
    import random
    rng = random.Random(20261206)
    outcomes = {"report": 0, "TypeError": 0, "ScenarioError": 0}
    for _ in range(300):
        call = rng.choice(["run_set", "run_dict", "sweep"])
        try:
            if call == "run_set":
                stepsim.run(ZERO3, set={rng.choice(KEYS): random_value(rng)})
            elif call == "run_dict":
                stepsim.run({"schema_version": 1, "name": "t", "model": "llama2-7b",
                             "cluster": {"node": "dgx-h100", "nodes": 1},
                             rng.choice(["training", "parallel", "x"]): random_value(rng)})
            else:
                stepsim.sweep(ZERO3, {rng.choice(KEYS): random_value(rng)}, jobs=1)
            outcomes["report"] += 1
        except stepsim.ScenarioError:
            outcomes["ScenarioError"] += 1
        except TypeError:
            outcomes["TypeError"] += 1
    # Every kind of outcome was reached, so the generator exercised each path.
    assert all(n > 0 for n in outcomes.values()), outcomes
