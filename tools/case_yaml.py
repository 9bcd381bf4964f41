"""Writing stepsim case files (docs/model.md "Validation data"): one case as YAML lines, its text
quoted for YAML. Shared by the converters of published measurements (convert_published.py,
convert_megatron_te.py)."""


def q(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit_case(out, case):
    out.append(f"  - id: {case['id']}")
    out.append(f"    source: {q(case['source'])}")
    if case.get("skip"):
        out.append(f"    skip: {q(case['skip'])}")
    out.append("    measured:")
    for k, v in case["measured"].items():
        out.append(f"      {k}: {q(v) if isinstance(v, str) else v}")
    out.append("    conventions:")
    out.append(f"      flops: {case['flops']}")
    out.append(f"      memory: {case.get('memory', 'allocated')}")
    for note in case.get("notes", []):
        # A comment line each: a line break in a record's text would end the comment.
        out.append("    # " + " ".join(str(note).splitlines()))
    if "estimator" in case:
        out.append("    deepspeed_estimator:")
        for line in case["estimator"]:
            out.append("      " + line)
        if "scenario" not in case:
            return
    out.append("    scenario:")
    for line in case["scenario"]:
        out.append("      " + line)
