#!/usr/bin/env python3
"""Peak memory of one full fine-tuning step of a diffusers UNet as diffusers'
examples/dreambooth/train_dreambooth.py and examples/text_to_image/train_text_to_image.py run it
(the method of tools/measure_diffusion_lora.py: CPU, FakeTensorMode + MemTracker, iteration 3):

- the UNet in fp32 (both scripts load it so; train_dreambooth.py raises unless
  `unwrap_model(unet).dtype == torch.float32`), `unet.train()`, every parameter trainable;
- `--mixed_precision bf16`: accelerate's `prepare` wraps the forward in autocast
  (here `torch.autocast("cpu", bfloat16)`; the inputs — noisy latents, text embeddings — in
  `weight_dtype`, as the frozen VAE and text encoder make them);
- `loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")`, `backward`,
  `clip_grad_norm_(unet.parameters(), max_grad_norm=1.0)`, `optimizer.step()` (torch AdamW,
  foreach as on CUDA), then `optimizer.zero_grad(set_to_none=args.set_grads_to_none)`:
  train_dreambooth.py's default keeps the zeroed `.grad`s (set_to_none=False),
  train_text_to_image.py's `zero_grad()` frees them;
- train_text_to_image.py `--use_ema`: `EMAModel(unet.parameters())` (fp32 clones on the device),
  `ema_unet.step(unet.parameters())` after `zero_grad()`.

    /root/mvenv/bin/python tools/measure_diffusion_full.py > crates/core/tests/data/diffusion_full.jsonl
    /root/mvenv/bin/python tools/measure_diffusion_full.py after >> crates/core/tests/data/diffusion_full.jsonl
    /root/mvenv/bin/python tools/measure_diffusion_full.py flux >> crates/core/tests/data/diffusion_full.jsonl
"""
import gc, json, sys, warnings
import torch
import torch.nn.functional as F
sys.path.insert(0, "tools")
sys.path.insert(0, "/work/shared/reference/llm")
sys.path.insert(0, "/work/shared/reference")
import measure_diffusion as D
import measure_diffusion_lora as DL

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


def setup(rec):
    cfg = rec["config"]
    m = D.build(cfg)  # fp32
    m.train()
    m.requires_grad_(True)
    if rec["checkpointing"]:
        m.enable_gradient_checkpointing()
    call, ins = D.inputs(cfg, rec, torch.bfloat16)
    params = list(m.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    ema = None
    if rec.get("ema"):
        from diffusers.training_utils import EMAModel
        ema = EMAModel(m.parameters())
    set_to_none = rec["script"] != "train_dreambooth.py"

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = call(m).float()  # accelerate's convert_outputs_to_fp32
        target = torch.zeros_like(pred)
        loss = F.mse_loss(pred.float(), target.float(), reduction="mean")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        if ema is not None:
            ema.step(m.parameters())

    return m, ins, opt, ema, step


def measure(rec):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        m, ins, opt, ema, step = setup(rec)
        for _ in range(2):
            step()
        gc.collect()
        mt = DL.tracker_cls()()
        mt.track_external(m, opt, *ins, *(ema.shadow_params if ema else []))
        with mt:
            step()
        peak = mt.get_tracker_snapshot("peak")
        total = sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
        n = sum(p.numel() for p in m.parameters())
        return dict(rec, peak_bytes=total, params=n, trainable=n)


def grid():
    R = []
    base = {"batch": 1, "text_len": 77, "dtype": "bf16", "method": "memtracker_fake_cpu_full_unet_step"}
    for name, cfg in [("unet-sd", D.UNET), ("unet-sdxl", D.UNETXL)]:
        for (w, h) in [(256, 256), (384, 512)]:
            for ck in (False, True):
                R.append(dict(base, name=name, config=cfg, width=w, height=h, checkpointing=ck, script="train_dreambooth.py"))
    # train_text_to_image.py: grads freed by zero_grad(), with and without --use_ema; held out: other sizes, batch 2
    for name, cfg, w, h, ck, ema, b in [("unet-sd", D.UNET, 256, 256, False, True, 1), ("unet-sdxl", D.UNETXL, 384, 512, True, True, 1),
                                        ("unet-sd", D.UNET, 320, 256, True, False, 2), ("unet-sdxl", D.UNETXL, 256, 320, False, False, 2)]:
        R.append(dict(base, name=name, config=cfg, width=w, height=h, checkpointing=ck, script="train_text_to_image.py", ema=ema, batch=b, held_out=True))
    R.append(dict(base, name="unet-sd", config=D.UNET, width=320, height=384, checkpointing=True, script="train_dreambooth.py", batch=2, held_out=True))
    # Flux's transformer as train_dreambooth_flux.py trains it (fp32, autocast, zero_grad() frees the
    # gradients; its weighted flow-matching loss measured as mse_loss: latent-sized temporaries apart)
    for (w, h, ck, b) in [(256, 256, False, 1), (256, 256, True, 1), (384, 512, False, 1), (384, 512, True, 1), (320, 256, True, 2)]:
        R.append(dict(base, name="flux", config=D.FLUX, width=w, height=h, checkpointing=ck, script="train_dreambooth_flux.py", batch=b, text_len=64, held_out=b == 2))
    # measured after the model was settled (`... measure_diffusion_full.py after >> ...jsonl`)
    for name, cfg, w, h, ck, script, ema, b in [("unet-sd", D.UNET, 448, 320, False, "train_dreambooth.py", False, 3),
                                                ("unet-sdxl", D.UNETXL, 512, 256, True, "train_text_to_image.py", True, 1),
                                                ("unet-sdxl", D.UNETXL, 320, 320, True, "train_dreambooth.py", False, 2)]:
        R.append(dict(base, name=name, config=cfg, width=w, height=h, checkpointing=ck, script=script, ema=ema, batch=b, held_out=True, after=True))
    return R


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    pick = (lambda r: r.get("after")) if only == "after" else (lambda r: only in (None, r["name"]) and not r.get("after"))
    # the Flux records came later: `measure_diffusion_full.py flux >> ...jsonl`
    DL.run([r for r in grid() if pick(r)], measure, keys=("name", "script", "width", "height", "checkpointing", "batch"))


if __name__ == "__main__":
    main()
