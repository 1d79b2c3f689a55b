#!/usr/bin/env python3
"""Peak memory of one LoRA training step of a diffusers denoiser (the method of
/work/shared/reference/llm/measure_llm.py's `lora` family): CPU, FakeTensorMode + MemTracker
(grad hooks only on trainable parameters, measure_llm.py's _train_tracker_cls), iteration 3 of
zero_grad(set_to_none=True) -> forward -> F.mse_loss(pred.float(), target.float()) -> backward
-> AdamW(foreach=True).step() over the adapters. The base is built in the record's dtype and
frozen (`requires_grad_(False)`), peft's LoRA added by `add_adapter(LoraConfig(...))` on
to_q/to_k/to_v/to_out.0 and cast to fp32 (diffusers' `cast_training_params`), no autocast —
as crates/core/src/diffusion/train.rs models it.

    /root/mvenv/bin/python tools/measure_diffusion_lora.py > crates/core/tests/data/diffusion_lora.jsonl
"""
import gc, json, sys, warnings
import torch
import torch.nn.functional as F
sys.path.insert(0, "tools")
sys.path.insert(0, "/work/shared/reference/llm")
sys.path.insert(0, "/work/shared/reference")
import measure_diffusion as D

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


def tracker_cls():
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType

    class T(MemTracker):
        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            def _grad_hook(grad):
                self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)
            pm = 0
            for p in module.parameters():
                pm += sum(w.mem_consumed for w in self._update_and_maybe_create_winfos(p, _MemRefType.PARAM))
                if p.grad is not None:
                    self._update_and_maybe_create_winfos(p.grad, _MemRefType.GRAD)
                if self._param_to_grad_hook_handles.get(p) is None and install_grad_hooks and p.requires_grad:
                    h1 = p.register_hook(_grad_hook)
                    h2 = p.register_post_accumulate_grad_hook(lambda q: _grad_hook(q.grad))
                    self._param_to_grad_hook_handles[p] = (h1, h2)
            bm = 0
            for b in module.buffers():
                bm += sum(w.mem_consumed for w in self._update_and_maybe_create_winfos(b, _MemRefType.BUFFER))
            return pm, bm
    return T


def setup(rec):
    """Under an active FakeTensorMode: the record's model with its adapters, its inputs, the
    optimizer and one training step (tools/trace_diffusion_lora.py runs the same)."""
    from peft import LoraConfig
    cfg, dt = rec["config"], D.DT[rec["dtype"]]
    torch.set_default_dtype(dt)
    try:
        m = D.build(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    D.cast_buffers(m, dt)
    m.train()
    m.requires_grad_(False)
    import measure_llm as L  # its fake_safe_module_to: Module.to without tensor swaps
    with L.fake_safe_module_to():
        m.add_adapter(LoraConfig(r=rec["lora_r"], lora_alpha=rec["lora_r"], init_lora_weights="gaussian",
                                 target_modules=["to_k", "to_q", "to_v", "to_out.0"]))
    for p in m.parameters():
        if p.requires_grad:
            p.data = p.to(torch.float32)
    if rec.get("checkpointing"):
        m.enable_gradient_checkpointing()
    call, ins = D.inputs(cfg, rec, dt)
    trainable = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        pred = call(m)
        loss = F.mse_loss(pred.float(), torch.zeros_like(pred).float())
        loss.backward()
        opt.step()

    return m, ins, opt, trainable, step


def measure(rec):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        m, ins, opt, trainable, step = setup(rec)
        for _ in range(2):
            step()
        gc.collect()
        mt = tracker_cls()()
        mt.track_external(m, opt, *ins)
        with mt:
            step()
        peak = mt.get_tracker_snapshot("peak")
        total = sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
        out = dict(rec, peak_bytes=total, params=sum(p.numel() for p in m.parameters()), trainable=sum(p.numel() for p in trainable))
    return out


def grid():
    R = []
    for name, cfg, extra in [("unet-sd", D.UNET, {"text_len": 77}), ("unet-sdxl", D.UNETXL, {"text_len": 77}),
                             ("flux", D.FLUX, {"text_len": 64}), ("sd3", D.SD3, {"text_len": 64}),
                             ("wan", D.WAN, {"text_len": 32, "frames": 9})]:
        for (w, h, ck) in [(256, 256, False), (384, 512, True)]:
            R.append(dict({"name": name, "config": cfg, "batch": 1, "dtype": "bf16", "width": w, "height": h,
                           "lora_r": 4, "checkpointing": ck, "method": "memtracker_fake_cpu_lora_step"}, **extra))
    # held out when the step was modelled: other sizes, batch 2, rank 8, more frames
    for name, cfg, extra in [("unet-sd", D.UNET, {"text_len": 77, "width": 320, "height": 320, "batch": 2, "checkpointing": False}),
                             ("unet-sdxl", D.UNETXL, {"text_len": 77, "width": 256, "height": 384, "checkpointing": True, "lora_r": 8}),
                             ("flux", D.FLUX, {"text_len": 32, "width": 320, "height": 256, "checkpointing": True}),
                             ("sd3", D.SD3, {"text_len": 48, "width": 512, "height": 384, "checkpointing": False, "lora_r": 8}),
                             ("wan", D.WAN, {"text_len": 32, "frames": 17, "width": 192, "height": 256, "checkpointing": False})]:
        R.append(dict({"name": name, "config": cfg, "batch": 1, "dtype": "bf16", "lora_r": 4,
                       "method": "memtracker_fake_cpu_lora_step", "held_out": True}, **extra))
    return R


def run(records, measure_fn, keys=("name", "width", "height", "checkpointing")):
    """Measures each record: its JSON line on stdout, a progress line (or the error) on stderr."""
    for rec in records:
        try:
            out = measure_fn(rec)
        except Exception as e:
            print(f"{rec['name']}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        print(json.dumps(out, sort_keys=True), flush=True)
        print(*[rec.get(k) for k in keys], out["peak_bytes"], out["trainable"], file=sys.stderr, flush=True)


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    run([rec for rec in grid() if not (only == "held-out" and not rec.get("held_out") or only not in (None, "held-out") and only != rec["name"])], measure)


if __name__ == "__main__":
    main()
