#!/usr/bin/env python3
"""Measures on one real GPU what stepsim's memory and time models rest on.

Run on a machine with one NVIDIA GPU and PyTorch (written against torch 2.11):
    OUT=DIR python3 tools/measure/gpu_measure.py [--deadline SECONDS]
Writes DIR/results.jsonl, one JSON object per measurement, flushed as it goes (a run cut short
keeps what it finished), and DIR/env.json. docs/measurements/README.md says how the rows were
taken and how they become validation cases.

Parts, cheapest first:
  hbm        device-to-device copy bandwidth (bytes read + written / time)
  gemm       bf16 matmul and fp8 torch._scaled_mm (tensor-wise and row-wise scales) over
             Llama-shaped (M, N, K), TFLOP/s = 2 M N K / time
  fp8_cast   Transformer Engine-style dynamic cast of a bf16 tensor: amax, scale, cast to e4m3
  attention  causal scaled_dot_product_attention, flash and cuDNN backends, forward and
             forward+backward, b*s = 16384 tokens, 32 heads of 128
  train      a Llama-style decoder (torchtitan's eager modules: fp32 RMSNorm, complex RoPE,
             repeat_kv before SDPA, SwiGLU) trained a few steps on one GPU under each
             checkpointing policy and loss kernel, as PyTorch DDP + AMP (fp32 parameters, autocast
             bf16, AdamW) and as torchtune (bf16 parameters and AdamW states): per step,
             torch.cuda.max_memory_allocated / max_memory_reserved and wall time. Each
             configuration runs in a fresh process (a clean caching allocator).
Timing: CUDA events around N launches after warm-up launches; medians reported.
"""
import argparse
import contextlib
import functools
import gc
import json
import math
import os
import statistics
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

T0 = time.time()
OUT = os.environ.get("OUT", "/tmp/gpu_measure_out")
os.makedirs(OUT, exist_ok=True)
RESULTS = open(os.path.join(OUT, "results.jsonl"), "a", buffering=1)


def emit(part, **rec):
    rec = {"part": part, **rec, "t_s": round(time.time() - T0, 1)}
    RESULTS.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def elapsed():
    return time.time() - T0


def cuda_time_ms(fn, iters=10, warmup=3):
    """Median of `iters` CUDA-event timings of fn() after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def env_info():
    p = torch.cuda.get_device_properties(0)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "device": torch.cuda.get_device_name(0),
        "sms": p.multi_processor_count,
        "total_memory_bytes": p.total_memory,
        "capability": list(torch.cuda.get_device_capability(0)),
    }
    with contextlib.suppress(Exception):
        free, total = torch.cuda.mem_get_info()
        info["mem_get_info_free_bytes"] = free
        info["mem_get_info_total_bytes"] = total
    with contextlib.suppress(Exception):
        import subprocess
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    return info


# ---------------------------------------------------------------- kernels

def measure_hbm():
    n = 2 * 1024**3  # 2 GiB each way
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    med, best = cuda_time_ms(lambda: b.copy_(a), iters=10)
    emit("hbm", op="copy", bytes_moved=2 * n, median_ms=med, min_ms=best,
         tb_per_s=2 * n / (med * 1e-3) / 1e12)
    del a, b


GEMM_SHAPES = [
    # square
    (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384), (2048, 2048, 2048),
    (1024, 1024, 1024),
    # Llama 3.2 3B layer GEMMs at 16384 tokens (M = tokens, N = out, K = in)
    (16384, 3072, 3072), (16384, 1024, 3072), (16384, 8192, 3072), (16384, 3072, 8192),
    (16384, 128256, 3072),
    # Llama 3 8B / 70B layer GEMMs at 8192 tokens
    (8192, 4096, 4096), (8192, 14336, 4096), (8192, 4096, 14336), (8192, 8192, 8192),
    (8192, 28672, 8192), (8192, 8192, 28672), (8192, 10240, 8192),
    # small token counts (micro-batch 1 x 2048, TP-split widths)
    (2048, 1792, 4096), (2048, 4096, 1792), (2048, 3584, 8192), (4096, 7168, 8192),
]


def measure_gemm():
    for m, n, k in GEMM_SHAPES:
        flops = 2.0 * m * n * k
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        iters = 10 if flops > 1e12 else 30
        med, best = cuda_time_ms(lambda: torch.matmul(a, w.t()), iters=iters)
        emit("gemm", dtype="bf16", m=m, n=n, k=k, median_ms=med, min_ms=best,
             tflops=flops / (med * 1e-3) / 1e12)
        try:
            a8 = a.to(torch.float8_e4m3fn)
            w8 = w.to(torch.float8_e4m3fn)
            one = torch.tensor(1.0, device="cuda")
            med, best = cuda_time_ms(
                lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16), iters=iters)
            emit("gemm", dtype="fp8_e4m3_tensorwise", m=m, n=n, k=k, median_ms=med,
                 min_ms=best, tflops=flops / (med * 1e-3) / 1e12)
            sa = torch.ones(m, 1, device="cuda", dtype=torch.float32)
            sb = torch.ones(1, n, device="cuda", dtype=torch.float32)
            med, best = cuda_time_ms(
                lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb,
                                         out_dtype=torch.bfloat16), iters=iters)
            emit("gemm", dtype="fp8_e4m3_rowwise", m=m, n=n, k=k, median_ms=med,
                 min_ms=best, tflops=flops / (med * 1e-3) / 1e12)
            del a8, w8
        except Exception as e:  # noqa: BLE001 - record and go on
            emit("gemm", dtype="fp8", m=m, n=n, k=k, error=repr(e)[:300])
        del a, w
    torch.cuda.empty_cache()


def measure_fp8_cast():
    # Transformer Engine's delayed/current scaling casts each GEMM input: amax, scale, cast.
    for rows, cols in [(16384, 3072), (16384, 8192), (8192, 4096), (8192, 28672)]:
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)

        def cast():
            amax = x.abs().amax()
            scale = 448.0 / torch.clamp(amax.float(), min=1e-12)
            return (x.float() * scale).to(torch.float8_e4m3fn)

        med, best = cuda_time_ms(cast, iters=20)
        nbytes = rows * cols * (2 + 1)
        emit("fp8_cast", rows=rows, cols=cols, median_ms=med, min_ms=best,
             bytes_min=nbytes, gb_per_s_min_bytes=nbytes / (med * 1e-3) / 1e9,
             impl="eager: abs, amax, float, mul, to(e4m3)")
        del x
    torch.cuda.empty_cache()


def measure_attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    heads, dim, tokens = 32, 128, 16384
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    for s in [1024, 2048, 4096, 8192, 16384]:
        b = tokens // s
        # causal: half the s x s score matrix; fwd = 2 matmuls of 2*b*h*s*s*d / 2 each
        fwd_flops = 4.0 * b * heads * s * s * dim / 2
        for name, backend in backends:
            try:
                q, k, v = (torch.randn(b, heads, s, dim, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True) for _ in range(3))
                with sdpa_kernel([backend]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    med_f, best_f = cuda_time_ms(fwd, iters=10)
                    o = fwd()
                    g = torch.randn_like(o)

                    def fwd_bwd():
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        out.backward(g)

                    med_fb, best_fb = cuda_time_ms(fwd_bwd, iters=10)
                emit("attention", backend=name, batch=b, heads=heads, head_dim=dim, seq=s,
                     causal=True, fwd_median_ms=med_f, fwd_min_ms=best_f,
                     fwd_bwd_median_ms=med_fb, fwd_bwd_min_ms=best_fb,
                     fwd_flops=fwd_flops, fwd_tflops=fwd_flops / (med_f * 1e-3) / 1e12,
                     fwd_bwd_tflops_3p5x=3.5 * fwd_flops / (med_fb * 1e-3) / 1e12)
                del q, k, v, o, g
            except Exception as e:  # noqa: BLE001
                emit("attention", backend=name, seq=s, error=repr(e)[:300])
    torch.cuda.empty_cache()


# ---------------------------------------------------------------- model
# torchtitan/models/llama3/model.py and norms.py as eager PyTorch (training.kernels: eager).

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


def rope_freqs(head_dim, seq, theta=500000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device="cuda").float() / head_dim))
    t = torch.arange(seq, device="cuda").float()
    return torch.polar(torch.ones(seq, head_dim // 2, device="cuda"), torch.outer(t, freqs))


def apply_rope(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.wq = nn.Linear(d, heads * self.hd, bias=False)
        self.wk = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, d, bias=False)
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.attention_norm = RMSNorm(d)
        self.ffn_norm = RMSNorm(d)

    def attention(self, x, freqs_cis):
        b, s, _ = x.shape
        xq = self.wq(x).view(b, s, self.heads, self.hd)
        xk = self.wk(x).view(b, s, self.kv_heads, self.hd)
        xv = self.wv(x).view(b, s, self.kv_heads, self.hd)
        xq, xk = apply_rope(xq, xk, freqs_cis)
        rep = self.heads // self.kv_heads
        if rep > 1:  # torchtitan repeat_kv: expand then reshape (a copy)
            xk = xk[:, :, :, None, :].expand(b, s, self.kv_heads, rep, self.hd).reshape(
                b, s, self.heads, self.hd)
            xv = xv[:, :, :, None, :].expand(b, s, self.kv_heads, rep, self.hd).reshape(
                b, s, self.heads, self.hd)
        o = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2),
                                           xv.transpose(1, 2), is_causal=True)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))

    def forward(self, x, freqs_cis):
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        hn = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(hn)) * self.w3(hn))


class Decoder(nn.Module):
    def __init__(self, cfg, recompute):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.layers = nn.ModuleList(Block(cfg["hidden"], cfg["heads"], cfg["kv_heads"],
                                          cfg["ffn"]) for _ in range(cfg["layers"]))
        self.norm = RMSNorm(cfg["hidden"])
        self.recompute = recompute
        self.freqs = None

    def forward(self, tokens):
        s = tokens.shape[1]
        if self.freqs is None or self.freqs.shape[0] != s:
            self.freqs = rope_freqs(self.layers[0].hd, s)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            if self.recompute == "none":
                h = layer(h, self.freqs)
            else:
                from torch.utils.checkpoint import checkpoint
                kw = {}
                if self.recompute == "op":
                    kw["context_fn"] = op_sac_context
                h = checkpoint(layer, h, self.freqs, use_reentrant=False, **kw)
        return self.norm(h)

    def lm_head(self, h):  # tied: the embedding matrix (Llama 3.2 tie_word_embeddings)
        return F.linear(h, self.tok_embeddings.weight)


def op_sac_context():
    """torchtitan's per-op selective AC (torchtitan/distributed/activation_checkpoint.py,
    _apply_op_sac): save the outputs of matmuls and attention, but recompute every second mm."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    save = {torch.ops.aten.mm.default,
            torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default,
            torch.ops.aten._scaled_dot_product_cudnn_attention.default}
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):
        key = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[key] += 1
        to_save = func in save and not (func == torch.ops.aten.mm.default and counts[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


# ---------------------------------------------------------------- losses

def ce_eager(logits, labels):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))


def ce_chunk_sum(logits, labels):  # torchtune CEWithChunkedOutputLoss.compute_cross_entropy
    return F.cross_entropy(logits.float(), labels, reduction="sum")


_compiled = {}


def loss_value(model, h, labels, kind, chunks=8):
    if kind == "eager":
        return ce_eager(model.lm_head(h), labels)
    if kind == "compiled":
        if "full" not in _compiled:
            _compiled["full"] = torch.compile(ce_eager)
        return _compiled["full"](model.lm_head(h), labels)
    if kind in ("chunked", "chunked_compiled"):
        # torchtune: the decoder returns num_output_chunks logits chunks (all computed before the
        # loss), and the loss upcasts and reduces one chunk at a time.
        fn = ce_chunk_sum
        if kind == "chunked_compiled":
            if "chunk" not in _compiled:
                _compiled["chunk"] = torch.compile(ce_chunk_sum)
            fn = _compiled["chunk"]
        logit_chunks = [model.lm_head(c) for c in h.chunk(chunks, dim=1)]
        label_chunks = labels.chunk(chunks, dim=1)
        total = 0.0
        for lc, yc in zip(logit_chunks, label_chunks):
            total = total + fn(lc.reshape(-1, lc.shape[-1]), yc.reshape(-1))
        return total / labels.numel()
    raise ValueError(kind)


# ---------------------------------------------------------------- training runs

LLAMA32_3B = dict(layers=28, hidden=3072, heads=24, kv_heads=8, ffn=8192, vocab=128256)

_pg = {"up": False}


def ensure_process_group():
    import torch.distributed as dist
    if not _pg["up"]:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1,
                                device_id=torch.device("cuda", 0))
        _pg["up"] = True


def run_training(framework, recompute, loss, seq, micro_batch, optim="foreach", steps=4,
                 model_cfg=LLAMA32_3B):
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base_alloc = torch.cuda.memory_allocated()
    base_reserved = torch.cuda.memory_reserved()
    torch.manual_seed(0)
    dtype = torch.float32 if framework == "ddp" else torch.bfloat16
    with torch.device("cuda"):
        model = Decoder(model_cfg, recompute).to(dtype)
    params = sum(p.numel() for p in model.parameters())
    net = model
    if framework == "ddp":  # PyTorch DDP + torch.amp: fp32 parameters, autocast bf16
        ensure_process_group()
        net = nn.parallel.DistributedDataParallel(model, device_ids=[0])
    # foreach: torch.optim.AdamW's default on CUDA (multi-tensor kernels); fused: fused=True;
    # loop: foreach=False (one parameter at a time)
    opt_kw = {"foreach": {}, "fused": {"fused": True}, "loop": {"foreach": False}}[optim]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, **opt_kw)
    tokens = torch.randint(0, model_cfg["vocab"], (micro_batch, seq), device="cuda")
    labels = torch.randint(0, model_cfg["vocab"], (micro_batch, seq), device="cuda")
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if framework == "ddp"
           else contextlib.nullcontext())
    from torch.nn.attention import SDPBackend, sdpa_kernel
    after_init = torch.cuda.memory_allocated() - base_alloc
    per_step = []
    for step in range(steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # FlashAttention-2 (training.flash_impl fa2)
            with amp:
                h = net(tokens)
                lv = loss_value(model, h, labels, loss)
            after_forward = torch.cuda.max_memory_allocated()
            lv.backward()
        after_backward = torch.cuda.max_memory_allocated()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del h, lv
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        st = torch.cuda.memory_stats()
        per_step.append({
            "step": step, "wall_s": dt,
            "max_allocated_bytes": torch.cuda.max_memory_allocated() - base_alloc,
            "max_reserved_bytes": torch.cuda.max_memory_reserved(),
            "max_active_bytes": st.get("active_bytes.all.peak", 0),
            "max_allocated_fwd_bytes": after_forward - base_alloc,
            "max_allocated_fwd_bwd_bytes": after_backward - base_alloc,
            "allocated_end_bytes": torch.cuda.memory_allocated() - base_alloc,
            "num_alloc_retries": st.get("num_alloc_retries", 0),
            "num_device_alloc": st.get("num_device_alloc", 0)})
    later = per_step[1:]
    rec = dict(framework=framework, recompute=recompute, loss=loss, seq=seq,
               micro_batch=micro_batch, model="llama3.2-3b", params=params,
               optimizer="torch.optim.AdamW " + optim,
               kernels="eager (torchtitan modules)", attention="sdpa flash backend",
               reserved_before_bytes=base_reserved,
               states_after_init_bytes=after_init,
               steady_max_allocated_bytes=max(s["max_allocated_bytes"] for s in later),
               steady_max_reserved_bytes=max(s["max_reserved_bytes"] for s in later),
               steady_step_s=statistics.median(s["wall_s"] for s in later),
               tokens_per_step=seq * micro_batch, per_step=per_step)
    del net, model, opt, tokens, labels
    gc.collect()
    torch.cuda.empty_cache()
    return rec


TRAIN_RUNS = [
    # (framework, recompute, loss, seq, micro_batch[, optimizer])
    ("ddp", "none", "eager", 4096, 1),
    ("ddp", "full", "eager", 4096, 1),
    ("ddp", "op", "eager", 4096, 1),
    ("ddp", "full", "chunked", 4096, 1),
    ("torchtune", "none", "eager", 4096, 2),
    ("torchtune", "full", "eager", 4096, 2),
    ("torchtune", "op", "eager", 4096, 2),
    ("torchtune", "full", "chunked", 4096, 2),
    ("torchtune", "none", "chunked", 4096, 2),
    ("torchtune", "full", "eager", 8192, 2),
    ("ddp", "full", "eager", 8192, 1),
    ("torchtune", "full", "chunked_compiled", 4096, 2),
    ("ddp", "full", "compiled", 4096, 1),
    ("ddp", "full", "eager", 4096, 1, "fused"),
    ("ddp", "full", "eager", 4096, 1, "loop"),
    ("torchtune", "full", "chunked", 4096, 2, "fused"),
    ("torchtune", "full", "chunked", 4096, 2, "loop"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deadline", type=float, default=420.0,
                    help="start no new measurement after this many seconds")
    ap.add_argument("--parts", default="hbm,gemm,fp8_cast,attention,train")
    ap.add_argument("--one-train", help="internal: one training run, 'fw,recompute,loss,seq,mb,opt'")
    args = ap.parse_args()
    if args.one_train:
        fw, rc, loss, seq, mb, optim = args.one_train.split(",")
        try:
            emit("train", **run_training(fw, rc, loss, int(seq), int(mb), optim))
        except Exception as e:  # noqa: BLE001
            emit("train", framework=fw, recompute=rc, loss=loss, seq=int(seq), micro_batch=int(mb),
                 optimizer=optim, error=repr(e)[:500], trace=traceback.format_exc()[-1500:])
        return
    parts = args.parts.split(",")
    with open(os.path.join(OUT, "env.json"), "w") as f:
        json.dump(env_info(), f, indent=1)
    steps = [("hbm", measure_hbm), ("gemm", measure_gemm), ("fp8_cast", measure_fp8_cast),
             ("attention", measure_attention)]
    for name, fn in steps:
        if name in parts and elapsed() < args.deadline:
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                emit(name, error=repr(e)[:500], trace=traceback.format_exc()[-1500:])
    if "train" in parts:
        # Each run in a fresh process: a clean caching allocator (the reserved peak a user's job
        # sees) and nothing left from the previous model.
        import subprocess
        import sys
        RESULTS.flush()
        for run in TRAIN_RUNS:
            fw, rc, loss, seq, mb = run[:5]
            optim = run[5] if len(run) > 5 else "foreach"
            if elapsed() > args.deadline:
                emit("train", framework=fw, recompute=rc, loss=loss, seq=seq,
                     micro_batch=mb, optimizer=optim, skipped="deadline")
                continue
            rc_ = subprocess.run([sys.executable, __file__, "--one-train",
                                  f"{fw},{rc},{loss},{seq},{mb},{optim}"]).returncode
            if rc_ != 0:
                emit("train", framework=fw, recompute=rc, loss=loss, seq=seq, micro_batch=mb,
                     optimizer=optim, error=f"process exit {rc_}")
    emit("done", elapsed_s=elapsed())


if __name__ == "__main__":
    main()
