#!/usr/bin/env python3
"""Rank 0's peak of fine-tuning and autocast jobs on several GPUs: LoRA, partially frozen models and
CPU autocast under FSDP2 and DDP, measured as `shared/reference/llm/fsdp.jsonl` was (its README,
section C): FakeTensorMode, a fake process group of world size W, `FSDPMemTracker` (FSDP2) or
`MemTracker` with the reducer's buckets as external tensors (DDP), third iteration measured.

What this adds to `measure_llm.py`'s `build_dist_bundle`, in the order users apply it:
- `finetune.method = lora`: `get_peft_model(model, LoraConfig(r, 2r, targets, dropout 0))` on the
  fp32 or bf16 model, *before* `fully_shard`/DDP (peft first, then the wrapper, as accelerate and
  TRL do); with checkpointing, `gradient_checkpointing_enable(use_reentrant=False)` and
  `enable_input_require_grads()` before peft.
- `finetune.method = frozen`: `embed_tokens` and the first `frozen_layers` decoder layers get
  `requires_grad_(False)` before wrapping.
- `precision = bf16_autocast`: `torch.autocast("cpu", bfloat16)` around the forward and loss
  (`cache_enabled` as `autocast_cache`); FSDP2 with or without `MixedPrecisionPolicy`.
- `weights_dtype = bf16`: `model.to(bfloat16)` before wrapping (and `MixedPrecisionPolicy(
  param_dtype=bf16, reduce_dtype=fp32)` as FSDP-on-bf16 users set it).

Run (about 10 s per record on one core; the grid of `--grid` is what `crates/core/tests/data/
dist_finetune.jsonl` holds):

    python tools/measure_dist_finetune.py --grid > crates/core/tests/data/dist_finetune.jsonl

Needs torch, transformers and peft from PyPI and `shared/reference/` beside the checkout.
"""
import argparse
import contextlib
import gc
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference", "llm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference"))
import measure as M  # noqa: E402
import measure_llm as L  # noqa: E402

torch.set_num_threads(1)


def build(cfg):
    """The model as the job wraps it: (wrapped module, bare model, bundle)."""
    d, ft = cfg["distributed"], cfg["finetune"]
    dtype = L.DTYPES[cfg["weights_dtype"]]
    with L.fake_safe_module_to():
        model = L.build_causal_lm(cfg["model"], cfg["attn_impl"], dtype)
    if cfg["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if ft["method"] == "lora":
            model.enable_input_require_grads()
    layers_of = lambda m: m.model.layers  # noqa: E731
    if ft["method"] == "lora":
        from peft import LoraConfig, get_peft_model
        lcfg = LoraConfig(r=ft["r"], lora_alpha=2 * ft["r"], target_modules=ft["targets"], lora_dropout=0.0,
                          bias="none", task_type="CAUSAL_LM")
        with L.fake_safe_module_to():
            model = get_peft_model(model, lcfg)
        layers_of = lambda m: m.base_model.model.model.layers  # noqa: E731
    elif ft["method"] == "frozen":
        model.model.embed_tokens.weight.requires_grad_(False)
        for layer in model.model.layers[: ft["frozen_layers"]]:
            for p in layer.parameters():
                p.requires_grad_(False)
    wrapped = model
    if d["strategy"] == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=L.DTYPES[d["mp_param_dtype"]] if d.get("mp_param_dtype") else None,
                                  reduce_dtype=L.DTYPES[d["mp_reduce_dtype"]] if d.get("mp_reduce_dtype") else None)
        for layer in layers_of(model):
            fully_shard(layer, mesh=cfg["_mesh"], reshard_after_forward=d["reshard_after_forward"], mp_policy=mp)
        fully_shard(model, mesh=cfg["_mesh"], reshard_after_forward=d["reshard_after_forward"], mp_policy=mp)
    elif d["strategy"] == "ddp":
        import torch.nn.parallel.distributed as ddp_mod
        from torch.nn.parallel import DistributedDataParallel as DDP
        saved = (ddp_mod._verify_param_shape_across_processes, ddp_mod._sync_module_states)
        ddp_mod._verify_param_shape_across_processes = lambda *a, **k: None
        ddp_mod._sync_module_states = lambda *a, **k: None
        try:
            wrapped = DDP(model, gradient_as_bucket_view=d.get("gradient_as_bucket_view", False))
        finally:
            ddp_mod._verify_param_shape_across_processes, ddp_mod._sync_module_states = saved
        real = wrapped.reducer

        class NoRebuild:  # as measure_llm.py: the bucket index broadcast reads data
            def _rebuild_buckets(self):
                return False

            def __getattr__(self, k):
                return getattr(real, k)

        wrapped.reducer = NoRebuild()
    b, s = cfg["batch"], cfg["seq_len"]
    V = 32000

    def make_batch():
        return {"input_ids": torch.randint(0, V, (b, s))}

    return wrapped, make_batch


def autocast(cfg):
    if cfg["precision"] != "bf16_autocast":
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cfg.get("autocast_cache", True))


def iteration(model, opt, batch, cfg, phase):
    with phase("zero_grad"):
        opt.zero_grad(set_to_none=True)
    with phase("forward"):
        with autocast(cfg):
            loss = model(input_ids=batch["input_ids"], labels=batch["input_ids"]).loss
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        opt.step()
    del loss


def measure(cfg):
    from torch._subclasses.fake_tensor import FakeTensorMode
    d = cfg["distributed"]
    L._ensure_fake_pg(d["world_size"])
    cfg = dict(cfg)
    if d["strategy"] == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        cfg["_mesh"] = init_device_mesh("cpu", (d["world_size"],))
    buckets = []
    with FakeTensorMode():
        model, make_batch = build(cfg)
        model.train()
        if d["strategy"] == "ddp":
            import torch.distributed as dist

            def hook(state, bucket):
                buf = bucket.buffer()
                if not any(x is buf for x in buckets):
                    buckets.append(buf)
                buf.div_(dist.get_world_size())
                dist.all_reduce(buf)
                fut = torch.futures.Future()
                fut.set_result(buf)
                return fut
            model.register_comm_hook(dist.group.WORLD, hook)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-4)
        null = lambda name: contextlib.nullcontext()  # noqa: E731
        for _ in range(2):
            batch = make_batch()
            iteration(model, opt, batch, cfg, null)
            del batch
        batch = make_batch()
        gc.collect()
        allp = list(model.parameters())
        opt_tensors = [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
        st = {"param_count": sum(p.numel() for p in allp),
              "param_bytes": sum(L._nbytes_local(p) for p in allp),
              "trainable_param_count": sum(p.numel() for p in allp if p.requires_grad),
              "optimizer_state_bytes": sum(L._nbytes_local(t) for t in opt_tensors),
              "grad_bytes_at_iter_start": sum(L._nbytes_local(p.grad) for p in allp if p.grad is not None)}
        if d["strategy"] == "fsdp2":
            mt = L._fsdp_phase_tracker_cls()(model, opt)
            mt.track_inputs(tuple(batch.values()))
        else:
            mt = L._train_tracker_cls()()
            mt.track_external(model, opt, *batch.values(), *buckets)
        mt.rpeak = mt.rtotal
        with mt:
            iteration(model, opt, batch, cfg, mt.in_phase)
        peak = mt.get_tracker_snapshot("peak")
        breakdown = M._split_opt(mt.snap_named(peak), st["optimizer_state_bytes"])
        total = breakdown.pop("total")
    bucket_bytes = sum(x.untyped_storage().nbytes() for x in buckets)
    if d["strategy"] == "ddp":
        breakdown["ddp_bucket_buffers"] = bucket_bytes
        breakdown["inputs"] = breakdown.get("inputs", 0) - bucket_bytes
    rec = {k: v for k, v in cfg.items() if not k.startswith("_")}
    rec.update(st)
    rec.update({"peak_bytes": total, "peak_phase": mt.peak_phase, "breakdown": breakdown,
                "phase_peak_bytes": mt.phase_peak, "ddp_bucket_bytes": bucket_bytes if buckets else None,
                "method": "memtracker_fake", "torch_version": torch.__version__})
    return rec


def grid():
    base = {"model": "llama-h1024-l4", "attn_impl": "sdpa", "batch": 2, "seq_len": 512, "weights_dtype": "fp32",
            "precision": "fp32", "checkpointing": False}

    def dist(strategy, w, raf=True, mp=None, view=False):
        return {"strategy": strategy, "world_size": w, "reshard_after_forward": raf,
                "mp_param_dtype": mp[0] if mp else None, "mp_reduce_dtype": mp[1] if mp else None,
                "gradient_as_bucket_view": view}
    lora = {"method": "lora", "r": 16, "targets": ["q_proj", "v_proj"]}
    lora_all = {"method": "lora", "r": 16, "targets": "all-linear"}
    frozen = {"method": "frozen", "frozen_layers": 2}
    full = {"method": "full"}
    out = []
    for w in (2, 4, 8):
        for raf in (True, False):
            out.append(dict(base, finetune=lora, distributed=dist("fsdp2", w, raf)))
    out.append(dict(base, finetune=lora_all, distributed=dist("fsdp2", 4)))
    out.append(dict(base, finetune=lora, checkpointing=True, distributed=dist("fsdp2", 4)))
    out.append(dict(base, finetune=lora, weights_dtype="bf16", precision="bf16", distributed=dist("fsdp2", 4)))
    for view in (False, True):
        out.append(dict(base, finetune=lora, distributed=dist("ddp", 2, view=view)))
    out.append(dict(base, finetune=lora_all, distributed=dist("ddp", 4)))
    for w in (2, 8):
        out.append(dict(base, finetune=frozen, distributed=dist("fsdp2", w)))
    out.append(dict(base, finetune=frozen, distributed=dist("fsdp2", 4, raf=False)))
    out.append(dict(base, finetune=frozen, distributed=dist("ddp", 2)))
    for w in (4, 8):
        for ckpt in (False, True):
            out.append(dict(base, finetune=full, precision="bf16_autocast", checkpointing=ckpt, distributed=dist("fsdp2", w)))
    out.append(dict(base, finetune=full, precision="bf16_autocast", autocast_cache=False, checkpointing=True,
                    distributed=dist("fsdp2", 4)))
    out.append(dict(base, finetune=full, distributed=dist("fsdp2", 4, mp=("bf16", "fp32"))))
    out.append(dict(base, finetune=full, weights_dtype="bf16", precision="bf16", distributed=dist("fsdp2", 4, mp=("bf16", "fp32"))))
    out.append(dict(base, finetune=lora, precision="bf16_autocast", distributed=dist("fsdp2", 4)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", action="store_true", help="measure the whole grid, one JSON line per record")
    ap.add_argument("--only", type=int, help="measure only this grid index")
    a = ap.parse_args()
    cfgs = grid()
    if a.only is not None:
        cfgs = [cfgs[a.only]]
    for cfg in cfgs:
        print(json.dumps(measure(cfg)), flush=True)


if __name__ == "__main__":
    main()
