#!/usr/bin/env python3
"""Converts published Megatron-Core + Transformer Engine measurements into stepsim case files
(docs/model.md "Validation data"): NVIDIA's DGX Cloud benchmarking recipes (NeMo on DGX H100:
step times) and SimuMax's B200 rows (Megatron-LM on one 8 x B200 node: step times, allocated and
reserved peaks). Run from the project root:

    python3 tools/convert_megatron_te.py PATH/TO/nemo_dgxc_h100.yaml PATH/TO/simumax_b200.yaml

writes scenarios/validation/nemo-dgxc-h100.yaml and scenarios/validation/simumax-b200.yaml. Each
case's id is the record's id (a B200 row's reserved peak is a second case, `<id>_reserved`, since
a case holds one memory convention). Records stepsim cannot express yet become cases with an
explicit `skip:` reason. Settings the records leave open take the framework's default, said in a
comment. Nothing here enters a fit: these cases measure how far the H100 calibration (fitted on
MosaicML's llm-foundry) and the B200 datasheet transfer to Megatron-Core + TE. The output is
deterministic. Needs PyYAML (Debian: python3-yaml).
"""
import math
import os
import sys

import yaml

from case_yaml import emit_case, q

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "scenarios", "validation")


def padded_vocab(vocab, tp):
    """Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by (128) x TP
    (megatron/training/tokenizer: _vocab_size_with_padding)."""
    unit = 128 * tp
    return int(math.ceil(vocab / unit) * unit)


# Model shapes, from the recipes' configs as the data files describe them. `mlp`: stepsim prices
# the MLP by its GEMMs: squared ReLU (Nemotron-4) has GELU's two, GeGLU (Grok-1) SwiGLU's three.
NEMO_MODELS = {
    ("llama3.1", "8b"): dict(name="llama3.1-8b-nemo", family="llama", layers=32, hidden=4096,
                            heads=32, kv_heads=8, ffn=14336, vocab=128256, mlp="swiglu",
                            norm="rmsnorm", position="rope"),
    ("llama3.1", "70b"): dict(name="llama3.1-70b-nemo", family="llama", layers=80, hidden=8192,
                             heads=64, kv_heads=8, ffn=28672, vocab=128256, mlp="swiglu",
                             norm="rmsnorm", position="rope"),
    # The recipe's yaml: num_query_groups 16 and the GPT-2 BPE tokenizer (50257), not Llama 3.1's.
    ("llama3.1", "405b"): dict(name="llama3.1-405b-nemo", family="llama", layers=126,
                              hidden=16384, heads=128, kv_heads=16, ffn=53248, vocab=50257,
                              mlp="swiglu", norm="rmsnorm", position="rope"),
    ("nemotron", "15b"): dict(name="nemotron4-15b", family="nemotron", layers=32, hidden=6144,
                             heads=48, kv_heads=8, ffn=24576, vocab=256000, mlp="gelu",
                             norm="layernorm", position="rope",
                             note="squared-ReLU MLP priced as GELU's (the same two GEMMs)"),
    ("nemotron", "340b"): dict(name="nemotron4-340b", family="nemotron", layers=96, hidden=18432,
                              heads=96, kv_heads=8, ffn=73728, vocab=256000, mlp="gelu",
                              norm="layernorm", position="rope",
                              note="squared-ReLU MLP priced as GELU's (the same two GEMMs)"),
    ("nemo_megatron", "175b"): dict(name="gpt3-175b-nemo", family="gpt", layers=96, hidden=12288,
                                    heads=96, kv_heads=96, ffn=49152, vocab=50257, mlp="gelu",
                                    norm="layernorm", position="learned", bias=True, tied=True,
                                    dropout=0.1),
    ("grok1", "314b"): dict(name="grok1-314b", family="grok", layers=64, hidden=6144, heads=48,
                           kv_heads=8, ffn=32768, vocab=131072, mlp="swiglu", norm="rmsnorm",
                           position="rope",
                           moe=dict(experts=8, top_k=2, expert_ffn_hidden=32768),
                           note="GeGLU experts priced as SwiGLU's (the same three GEMMs)"),
}


def model_lines(m, layers, tp, max_seq_len=None):
    lines = ["model:",
             f"  name: {m['name']}-l{layers}" if layers != m["layers"] else f"  name: {m['name']}",
             f"  family: {m['family']}",
             f"  layers: {layers}",
             f"  hidden: {m['hidden']}",
             f"  heads: {m['heads']}",
             f"  kv_heads: {m['kv_heads']}",
             f"  ffn_hidden: {m['ffn']}",
             f"  vocab: {padded_vocab(m['vocab'], tp)}  # {m['vocab']} padded to a multiple of 128 x TP (Megatron)",
             f"  mlp: {m['mlp']}",
             f"  norm: {m['norm']}",
             f"  position: {m['position']}"]
    if m["position"] == "learned":
        lines.append(f"  max_seq_len: {max_seq_len}")
    lines += [f"  tied_embeddings: {'true' if m.get('tied') else 'false'}",
              f"  bias: {'true' if m.get('bias') else 'false'}",
              f"  dropout: {m.get('dropout', 0)}"]
    if "moe" in m:
        e = m["moe"]
        lines += ["  moe:"] + [f"    {k}: {v}" for k, v in e.items()] + ["    router: softmax"]
    if "mla" in m:
        lines.append("  mla:")
        lines += [f"    {k}: {v}" for k, v in m["mla"].items()]
    return lines


def write(name, header, cases):
    lines = ["# Generated by tools/convert_megatron_te.py from published Megatron-Core + Transformer Engine measurements.",
             *[f"# {h}" for h in header], "schema_version: 1", "cases:"]
    for c in cases:
        emit_case(lines, c)
    with open(os.path.join(OUT, name), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{name}: {len(cases)} cases, {sum(1 for c in cases if c.get('skip'))} skipped")


def parallel_line(tp, pp, cp, ep, vp, extra=""):
    """Megatron-Core's layout: the distributed optimizer (zero 1), SP with TP, interleaving."""
    p = f"parallel: {{framework: megatron, zero: 1, tp: {tp}, pp: {pp}, cp: {cp}"
    if ep > 1:
        p += f", ep: {ep}"
    p += f", sequence_parallel: {'true' if tp > 1 else 'false'}"
    if pp > 1 and vp > 1:
        p += f", pp_schedule: interleaved, pp_chunks: {vp}"
    return p + extra + "}"


# The recipes that run ub_tp_comm_overlap true. The data's header reads the NeMo-Framework-Launcher
# yamls (Llama 70B/405B, Nemotron-4 15B and GPT-3 175B true; Llama 8B, Grok-1 and Nemotron-4 340B
# false), but the benchmark's launchers override them on the command line: nemotron/configure.sh
# (both sizes) and grok1/configure.sh pass model.ub_tp_comm_overlap=true at the release tags
# (NVIDIA/dgxc-benchmarking 35a9aecc), so only Llama 8B runs without it.
UB_TP_COMM_OVERLAP = {("llama3.1", "70b"), ("llama3.1", "405b"), ("nemotron", "15b"),
                      ("nemotron", "340b"), ("grok1", "314b"), ("nemo_megatron", "175b")}


# distributed_fused_adam's overlap_grad_sync is true in every NeMo recipe that runs it (the data's
# header): the gradients' reduce-scatter runs in buckets beside the backward. overlap_param_sync
# (the updated parameters' all-gather beside the next forward) is true for Llama 3.1 70B/405B by
# the header, and in nemotron/nemotron4-340b-synth.yaml (optim: overlap_param_sync: true).
# Grok-1 runs Megatron-Core's distributed optimizer with its own defaults (no overlap).
OVERLAP_PARAM_SYNC = {("llama3.1", "70b"), ("llama3.1", "405b"), ("nemotron", "340b")}


# The Transformer Engine release of the recipes' containers: NeMo 24.09 ships TE 1.10 (NeMo
# Framework user guide 24.09, "Software Component Versions"; 24.05 ships 1.6). The 24.11
# container's is not listed there; TE's 2.x releases began in 2025, so it is a 1.x release
# too, and every release before 2.3 is modelled alike (TeVersion::CachesDummyWeightGradients).
NEMO_TE_VERSION = "1.10"


def dp_of(r):
    """A record's data-parallel degree: its GPUs over TP x PP x CP."""
    c = r["config"]
    return r["gpus"] // (c.get("tp", 1) * c.get("pp", 1) * c.get("cp", 1))


def nemo_cases(path):
    data = yaml.safe_load(open(path))
    tags = data["source"]["release_tags"]
    cases = []
    for r in data["records"]:
        c = r["config"]
        m = NEMO_MODELS[(r["family"], r["model"])]
        tp, pp, cp = c.get("tp", 1), c.get("pp", 1), c.get("cp", 1)
        ep, vp = c.get("ep", 1), c.get("vp", 1)
        layers, seq, mbs, gbs = c["layers"], c["seq_len"], c["mbs"], c["gbs"]
        gpus = r["gpus"]
        notes = [f"{r['table_title']}, {r['column']}",
                 "no activation checkpointing in the recipe" if not (r["family"] == "nemotron" and r["model"] == "340b")
                 else "activations_checkpoint_granularity selective (the recipe)"]
        if "note" in m:
            notes.append(m["note"])
        if layers != m["layers"]:
            notes.append(f"a proxy of {layers} of the model's {m['layers']} layers, as the table runs it")
        if pp == 1 and vp > 1:
            notes.append(f"VP={vp} with PP=1: no interleaving (Megatron needs pp > 1)")
        # ub_tp_comm_overlap in the recipe's yaml (the data's header): Transformer Engine's
        # userbuffers pipeline the SP all-gather and reduce-scatter with the GEMMs they feed.
        tp_overlap = tp > 1 and (r["family"], r["model"]) in UB_TP_COMM_OVERLAP
        if tp_overlap:
            notes.append("ub_tp_comm_overlap true (the recipe): parallel.tp_comm_overlap")
        # distributed_fused_adam with a bf16 model and fp32 optimizer states: NeMo sets Apex's
        # store_param_remainders (megatron_base_model.py setup_optimization). Grok-1 runs
        # Megatron-Core's own distributed optimizer (mcore_distributed_optim), fp32 masters.
        remainders = r["family"] != "grok1"
        grad_overlap = remainders and dp_of(r) > 1
        param_overlap = grad_overlap and (r["family"], r["model"]) in OVERLAP_PARAM_SYNC
        if grad_overlap:
            notes.append("distributed_fused_adam overlap_grad_sync: parallel.overlap_grad_reduce" +
                         (", overlap_param_sync: parallel.overlap_param_gather"
                          if param_overlap else ""))
        if remainders:
            notes.append("distributed_fused_adam: fp32 masters as 16-bit remainders "
                         "(parallel.store_param_remainders)")
        # Every launcher passes model.fp8_params=$FP8_ENABLED (llama3.1, nemotron, grok1
        # configure.sh): the fp8 runs hold their fp8 layers' weights as fp8 parameters.
        fp8_params = r["precision"] == "fp8"
        if fp8_params:
            notes.append("fp8_params true (the launcher): training.fp8_params")
        notes.append(f"Transformer Engine {NEMO_TE_VERSION} (NeMo 24.09's; the 24.11 container's is a 1.x "
                     "release too): no cached placeholder weight gradients")
        notes.append("not modelled: CUDA graphs")
        recompute = "selective" if (r["family"] == "nemotron" and r["model"] == "340b") else "none"
        dp = gpus // (tp * pp * cp)
        skip = None
        per_pipeline = gbs // (mbs * dp) if dp else 0
        if pp > 1 and vp > 1 and per_pipeline % pp != 0:
            skip = (f"{per_pipeline} micro-batches per pipeline is no multiple of pp {pp}: "
                    "Megatron's interleaved schedule asserts it, and the published layout is not "
                    "reproducible as given")
        if pp > 1 and vp > 1 and layers % (pp * vp) != 0:
            skip = (f"{layers} layers do not split evenly over pp {pp} x vp {vp} virtual stages, "
                    "and the recipe names no per-stage split (parallel.pp_layers)")
        scenario = model_lines(m, layers, tp, max_seq_len=seq) + [
            f"cluster: {{node: dgx-h100, nodes: {gpus // 8}}}",
            f"training: {{seq_len: {seq}, micro_batch: {mbs}, global_batch: {gbs}, recompute: {recompute}, "
            f"attention: flash, precision: {r['precision']}, te_version: \"{NEMO_TE_VERSION}\""
            + (", fp8_params: true" if fp8_params else "") + "}",
            # distributed_fused_adam with grad_sync_dtype bf16: gradients bucketed and reduced in bf16.
            parallel_line(tp, pp, cp, ep, vp, extra=", reduce_dtype: bf16" +
                          (", store_param_remainders: true" if remainders else "") +
                          (", tp_comm_overlap: true" if tp_overlap else "") +
                          (", overlap_grad_reduce: true" if grad_overlap else "") +
                          (", overlap_param_gather: true" if param_overlap else ""))]
        case = {"id": r["id"], "flops": "stepsim",
                "source": f"NVIDIA/dgxc-benchmarking {r['first_release']} ({tags[r['first_release']][:8]}), {r['file']}",
                "measured": {"step_s": r["measured"]["step_s"]},
                "notes": notes, "scenario": scenario}
        if skip:
            case["skip"] = skip
        cases.append(case)
    return cases


SIMUMAX_MODELS = {
    "llama3_70b": dict(name="llama3-70b", family="llama", layers=80, hidden=8192, heads=64,
                       kv_heads=8, ffn=28672, vocab=128256, mlp="swiglu", norm="rmsnorm",
                       position="rope"),
    # DeepSeek-V3's shape (models/deepseek-v3.yaml) with the launcher's layers, the first dense.
    "deepseek_v3": dict(name="deepseek-v3", family="deepseek-v3", layers=61, hidden=7168,
                        heads=128, kv_heads=128, ffn=18432, vocab=129280, mlp="swiglu",
                        norm="rmsnorm", position="rope",
                        moe=dict(experts=256, top_k=8, expert_ffn_hidden=2048, shared_experts=1,
                                 shared_expert_ffn_hidden=2048, first_dense_layers=1),
                        mla=dict(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                                 qk_rope_head_dim=64, v_head_dim=128)),
    # The launcher's shape: 16 KV groups, not Llama 3.1's 8.
    "llama3_405b": dict(name="llama3-405b-simumax", family="llama", layers=126, hidden=16384,
                        heads=128, kv_heads=16, ffn=53248, vocab=128256, mlp="swiglu",
                        norm="rmsnorm", position="rope"),
}


def simumax_cases(path):
    data = yaml.safe_load(open(path))
    src = data["source"]
    cases = []
    for r in data["b200_rows"]:
        p = r["parallel"]
        tp, pp, cp, ep, vp, dp = p["tp"], p["pp"], p["cp"], p["ep"], p["vp"], p["dp"]
        meas = r["measured"]
        notes = ["Megatron-LM 23e00ed0963c + TransformerEngine 2.11 on one 8 x B200 node (dgx-b200 assumed); "
                 "distributed optimizer without overlap, TP comm overlap off, no layer recomputed, "
                 "TE cross-entropy fusion",
                 "step: the minimum of iterations 2-3 (optimistic by the jitter)"]
        skip = None
        m = SIMUMAX_MODELS[r["model"]]
        routing = ""
        if "moe" in m:
            # --moe-expert-capacity-factor 1 with --moe-pad-expert-input-to-capacity: every expert
            # computes a full capacity, whatever the router chose (its group-limited top-k aside).
            routing = ", routing: {capacity_factor: 1, pad_to_capacity: true}"
            notes.append("MoE: alltoall dispatcher, grouped GEMM, capacity factor 1 padded; "
                         "the group-limited top-k router is not modelled (padding makes every "
                         "expert's work the same)")
        cp_extra = ""
        if p.get("cp_comm_type") == "a2a":
            # --cp-comm-type a2a: Q, K, V and the output exchanged by all-to-all (Ulysses).
            cp_extra = ", cp_kind: ulysses"
        scenario = model_lines(m, r["layers"], tp) + [
            "cluster: {node: dgx-b200, nodes: 1}",
            f"training: {{seq_len: {r['seq_len']}, micro_batch: {r['micro_batch']}, "
            f"global_batch: {r['global_batch']}, recompute: none, attention: flash, precision: bf16, "
            f"loss: fused, te_version: \"2.11\"{routing}}}",
            parallel_line(tp, pp, cp, ep, vp, extra=cp_extra)]
        source = f"MooreThreads/SimuMax {src['commit'][:8]}, docs/b200/b200_release_v1.2_summary.json, row {r['case']}"
        measured = {"step_s": round(meas["step_ms"] / 1000, 6)}
        has_memory = meas.get("peak_allocated_gib") is not None
        if has_memory:
            measured["peak_memory"] = f"{meas['peak_allocated_gib']} GiB"
        case = {"id": r["id"], "flops": "stepsim", "source": source, "measured": measured, "notes": notes,
                "scenario": scenario, "memory": "allocated"}
        if skip:
            case["skip"] = skip
        cases.append(case)
        if has_memory:
            rcase = dict(case)
            rcase["id"] = r["id"] + "_reserved"
            rcase["measured"] = {"peak_memory": f"{meas['peak_reserved_gib']} GiB"}
            rcase["memory"] = "reserved"
            cases.append(rcase)
    return cases


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python3 tools/convert_megatron_te.py nemo_dgxc_h100.yaml simumax_b200.yaml")
    write("nemo-dgxc-h100.yaml",
          ["NVIDIA DGX Cloud benchmarking recipes (NeMo: Megatron-Core + Transformer Engine) on DGX H100: step times.",
           "The H100's transformer_engine kernel terms are fitted to them (tools/calibrate.sh)."],
          nemo_cases(sys.argv[1]))
    write("simumax-b200.yaml",
          ["SimuMax's measured B200 rows (Megatron-LM + Transformer Engine, one 8 x B200 node): step times, allocated",
           "and reserved peaks. The B200's calibration is fitted to their step times (tools/calibrate.sh)."],
          simumax_cases(sys.argv[2]))


if __name__ == "__main__":
    main()
