#!/usr/bin/env python3
"""Peak memory of one LoRA training step as kohya-ss/sd-scripts' `train_network.py` runs it, on
a small diffusers UNet2DConditionModel (SD-like: proj_in/proj_out 1x1 convs; SDXL-like:
linear projections, text_time embedding). kohya is not on PyPI: its `networks/lora.py`
`LoRAModule` is re-implemented below (copied from kohya-ss/sd-scripts, Apache-2.0, commit
48d368fa, dropout branches dropped: kohya's defaults are None) and injected as its
`LoRANetwork.create_modules` does: every `Linear` and 1x1 `Conv2d` inside each
`Transformer2DModel` (UNET_TARGET_REPLACE_MODULE; no conv_dim), UNet only
(`--network_train_unet_only`, latents and text embeddings cached: no VAE, no encoders).

The step (train_network.py, `get_noise_pred_and_target` and the loop):
  - base `unet.to(weight_dtype)` (bf16), `unet.requires_grad_(False)`; the network fp32, or bf16
    with `--full_bf16` (`network.to(weight_dtype)`)
  - `noisy_latents.requires_grad_(True)` always; text conds `requires_grad_(True)` with
    `--gradient_checkpointing` (and `unet.enable_gradient_checkpointing()`: here diffusers')
  - forward under `accelerator.autocast()` (here `torch.autocast("cpu", bfloat16)`)
  - `loss = conditional_loss(pred.float(), target.float(), "l2", "none")`, `.mean([1, 2, 3])`,
    `* loss_weights`, `.mean()`, backward, AdamW.step() (torch default: foreach), zero_grad
Measured with measure_diffusion_lora.py's method: CPU, FakeTensorMode + MemTracker, iteration 3.

    /root/mvenv/bin/python tools/measure_kohya_lora.py > crates/core/tests/data/diffusion_kohya.jsonl
    (a subset: `... measure_kohya_lora.py unet-sd | unet-sdxl | sd1-port | conv-dim`)
    /root/mvenv/bin/python tools/measure_kohya_lora.py te >> crates/core/tests/data/diffusion_kohya.jsonl
    (kohya's text-encoder LoRA too: records with "train_text_encoder", see setup_te)
    /root/mvenv/bin/python tools/measure_kohya_lora.py fp8 >> crates/core/tests/data/diffusion_kohya.jsonl
    (--fp8_base: records with "fp8_base", see grid_fp8)

Records with "unet_port": "kohya-sd1" take the checkpointing units of kohya's SD 1.x UNet
(`library/original_unet.py`, see sd1_port_checkpointing); records with "conv_dim" add
`--network_args conv_dim=N`.
"""
import gc, json, math, sys, warnings
import torch
import torch.nn.functional as F
sys.path.insert(0, "tools")
sys.path.insert(0, "/work/shared/reference/llm")
sys.path.insert(0, "/work/shared/reference")
import measure_diffusion as D
import measure_diffusion_lora as DL

warnings.filterwarnings("ignore")
torch.set_num_threads(1)


class LoRAModule(torch.nn.Module):
    """kohya-ss/sd-scripts networks/lora.py `LoRAModule` (Apache-2.0), dropouts None."""

    def __init__(self, lora_name, org_module, multiplier=1.0, lora_dim=4, alpha=1):
        super().__init__()
        self.lora_name = lora_name
        if org_module.__class__.__name__ == "Conv2d":
            in_dim, out_dim = org_module.in_channels, org_module.out_channels
        else:
            in_dim, out_dim = org_module.in_features, org_module.out_features
        self.lora_dim = lora_dim
        if org_module.__class__.__name__ == "Conv2d":
            self.lora_down = torch.nn.Conv2d(in_dim, self.lora_dim, org_module.kernel_size, org_module.stride, org_module.padding, bias=False)
            self.lora_up = torch.nn.Conv2d(self.lora_dim, out_dim, (1, 1), (1, 1), bias=False)
        else:
            self.lora_down = torch.nn.Linear(in_dim, self.lora_dim, bias=False)
            self.lora_up = torch.nn.Linear(self.lora_dim, out_dim, bias=False)
        alpha = self.lora_dim if alpha is None or alpha == 0 else alpha
        self.scale = alpha / self.lora_dim
        self.register_buffer("alpha", torch.tensor(alpha))
        torch.nn.init.kaiming_uniform_(self.lora_down.weight, a=math.sqrt(5))
        torch.nn.init.zeros_(self.lora_up.weight)
        self.multiplier = multiplier
        self.org_module = org_module

    def apply_to(self):
        self.org_forward = self.org_module.forward
        self.org_module.forward = self.forward
        del self.org_module

    def forward(self, x):
        org_forwarded = self.org_forward(x)
        lx = self.lora_down(x)
        lx = self.lora_up(lx)
        return org_forwarded + lx * self.multiplier * self.scale


def create_unet_loras(unet, dim, alpha, conv_dim=None):
    """`LoRANetwork.create_modules(True, None, unet, target_modules)`: ["Transformer2DModel"],
    plus UNET_TARGET_REPLACE_MODULE_CONV2D_3X3 with conv_dim (its 3x3 convs at conv_dim,
    conv_alpha 1.0)."""
    targets = ["Transformer2DModel"] + (["ResnetBlock2D", "Downsample2D", "Upsample2D"] if conv_dim else [])
    loras = []
    for name, module in unet.named_modules():
        if module.__class__.__name__ in targets:
            for child_name, child in module.named_modules():
                is_linear = child.__class__.__name__ == "Linear"
                is_conv2d = child.__class__.__name__ == "Conv2d"
                is_conv2d_1x1 = is_conv2d and child.kernel_size == (1, 1)
                if is_linear or is_conv2d:
                    lora_name = ("lora_unet." + name + "." + child_name).replace(".", "_")
                    if is_linear or is_conv2d_1x1:
                        loras.append(LoRAModule(lora_name, child, 1.0, dim, alpha))
                    elif conv_dim:
                        loras.append(LoRAModule(lora_name, child, 1.0, conv_dim, 1.0))
    return loras


def sd1_port_checkpointing(unet):
    """The units of kohya's library/original_unet.py (SD 1.x/2.x) on diffusers' UNet: each
    Transformer2DModel is one `checkpoint(..., use_reentrant=False)` (its blocks not again), and
    so is the mid block's first resnet (`UNetMidBlock2DCrossAttn.forward`); the down/up blocks'
    resnets stay diffusers' units, as kohya's."""
    from torch.utils.checkpoint import checkpoint
    def wrap(mod):
        orig = mod.forward
        mod.forward = lambda *a, **k: checkpoint(orig, *a, use_reentrant=False, **k)
    for mod in unet.modules():
        if mod.__class__.__name__ == "Transformer2DModel":
            mod.gradient_checkpointing = False
            wrap(mod)
    if unet.mid_block is not None:
        wrap(unet.mid_block.resnets[0])


def backward_and_step(pred, loss_weights, opt):
    """`conditional_loss(pred.float(), target.float(), "l2", "none")`, `.mean([1, 2, 3])`,
    `* loss_weights`, `.mean()`, backward, the optimizer's step, `zero_grad(set_to_none=True)`."""
    target = torch.zeros_like(pred)
    loss = F.mse_loss(pred.float(), target.float(), reduction="none")
    loss = loss.mean([1, 2, 3])
    loss = loss * loss_weights
    loss = loss.mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def unet_mode(m, rec):
    """`unet.enable_gradient_checkpointing()` and `unet.train()` under --gradient_checkpointing
    (kohya's SD 1.x port's units for "kohya-sd1" records), else `unet.eval()`."""
    ck = rec["checkpointing"]
    if ck:
        m.enable_gradient_checkpointing()
        m.train()
        if rec.get("unet_port") == "kohya-sd1":
            sd1_port_checkpointing(m)
    else:
        m.eval()
    return ck


def setup(rec):
    cfg, dt = rec["config"], D.DT["bf16"]
    torch.set_default_dtype(dt)  # unet.to(weight_dtype)
    try:
        m = D.build(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    D.cast_buffers(m, dt)
    m.requires_grad_(False)
    net_dt = dt if rec["full_bf16"] else torch.float32
    loras = create_unet_loras(m, rec["lora_r"], rec["lora_r"] / 2, rec.get("conv_dim"))
    for l in loras:  # network.apply_to(...) comes before network.to(weight_dtype)
        l.apply_to()
    import measure_llm as L  # its fake_safe_module_to: Module.to without tensor swaps
    with L.fake_safe_module_to():
        network = torch.nn.ModuleList(loras).to(net_dt)
        if rec.get("fp8_base"):
            m.to(torch.float8_e4m3fn)  # --fp8_base: `unet.to(dtype=unet_weight_dtype)`, after the network
    ck = unet_mode(m, rec)
    network.train()
    call, ins = D.inputs(cfg, dict(rec, batch=rec["batch"]), dt)
    x, e = ins[0], ins[2]
    x.requires_grad_(True)  # noisy_latents.requires_grad_(train_unet)
    if ck:
        e.requires_grad_(True)  # text_encoder_conds requires_grad_ under gradient checkpointing
    trainable = list(network.parameters())
    opt = torch.optim.AdamW(trainable, lr=1e-4)
    loss_weights = torch.ones(rec["batch"])

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pred = call(m)
        backward_and_step(pred, loss_weights, opt)

    return m, network, ins, opt, trainable, step


def measure(rec, setup_fn=None):
    """Iteration 3 of `setup_fn`'s step (default: `setup`, the UNet alone) under MemTracker."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        mods, network, ins, opt, trainable, step = (setup_fn or setup)(rec)
        mods = mods if isinstance(mods, list) else [mods]
        for _ in range(2):
            step()
        gc.collect()
        mt = DL.tracker_cls()()
        mt.track_external(*mods, network, opt, *ins)
        with mt:
            step()
        peak = mt.get_tracker_snapshot("peak")
        total = sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
        params = sum(p.numel() for mod in mods for p in mod.parameters()) + sum(p.numel() for p in network.parameters())
        return dict(rec, peak_bytes=total, params=params, trainable=sum(p.numel() for p in trainable))


# --- kohya's text-encoder LoRA (without --network_train_unet_only) -------------------------
# Tiny CLIP text encoders whose widths feed the tiny UNets: SD's one CLIP-L-like encoder
# (last_hidden_state, 32 = UNET's cross_attention_dim); SDXL's CLIP-L-like (12 layers: kohya
# reads hidden_states[11]) and OpenCLIP-bigG-like with projection (hidden_states[-2], the pool
# from last_hidden_state's EOS token through text_projection), 32 + 32 = UNETXL's 64, pool 32 =
# its text_embeds.
TE_SD = {"architectures": ["CLIPTextModel"], "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 77, "hidden_act": "quick_gelu"}
TE_XL1 = dict(TE_SD, num_hidden_layers=12)
TE_XL2 = dict(TE_SD, architectures=["CLIPTextModelWithProjection"], num_hidden_layers=3, hidden_act="gelu", projection_dim=32)
EOS = 2


def create_te_loras(te, dim, alpha, prefix):
    """`create_modules(False, index, text_encoder, TEXT_ENCODER_TARGET_REPLACE_MODULE)`: every
    Linear inside each CLIPAttention / CLIPSdpaAttention / CLIPMLP."""
    loras = []
    for name, module in te.named_modules():
        if module.__class__.__name__ in ("CLIPAttention", "CLIPSdpaAttention", "CLIPMLP"):
            for child_name, child in module.named_modules():
                if child.__class__.__name__ == "Linear":
                    loras.append(LoRAModule((prefix + "." + name + "." + child_name).replace(".", "_"), child, 1.0, dim, alpha))
    return loras


def pool_workaround(te2, last_hidden_state, ids):
    """strategy_sdxl.SdxlTextEncodingStrategy._pool_workaround."""
    eos_token_mask = (ids == EOS).int()
    eos_token_index = torch.argmax(eos_token_mask, dim=1)
    pooled = last_hidden_state[torch.arange(last_hidden_state.shape[0]), eos_token_index]
    # `te2.text_projection(...)`, called as F.linear: the module already ran in te2's forward
    # and MemTracker refuses a second call of one module in a step (same memory)
    w = te2.text_projection.weight
    pooled = F.linear(pooled.to(w.dtype), w)
    return pooled.to(last_hidden_state.dtype)


def setup_te(rec):
    """train_network.py without --network_train_unet_only: the encoders in weight_dtype
    (`t_enc.to(dtype=te_weight_dtype)` off the CPU), frozen, their LoRA first in the network
    and in its own param group (`prepare_optimizer_params`: text encoder loras, then the
    unet's); under --gradient_checkpointing `t_enc.gradient_checkpointing_enable()`,
    `t_enc.train()` and `text_model.embeddings.requires_grad_(True)`
    (`prepare_text_encoder_grad_ckpt_workaround`), else `t_enc.eval()`; the encoding under
    `torch.set_grad_enabled(True), accelerator.autocast()` (`process_batch`), SD's
    `text_encoder(tokens)[0]` (strategy_sd), SDXL's `_get_hidden_states_sdxl` and
    `torch.cat([hs1, hs2], dim=2)`, `torch.cat([pool2, embs], dim=1)` (here diffusers'
    text_time: text_embeds=pool2, time_ids the size embeddings)."""
    cfg, dt = rec["config"], D.DT["bf16"]
    sdxl = rec["name"] == "unet-sdxl"
    torch.set_default_dtype(dt)
    try:
        m = D.build(cfg)
        tes = [D.build(c) for c in ([TE_XL1, TE_XL2] if sdxl else [TE_SD])]
    finally:
        torch.set_default_dtype(torch.float32)
    for mod in [m] + tes:
        D.cast_buffers(mod, dt)
        mod.requires_grad_(False)
    net_dt = dt if rec["full_bf16"] else torch.float32
    r = rec["lora_r"]
    te_loras = []
    for i, te in enumerate(tes):
        te_loras += create_te_loras(te, r, r / 2, "lora_te" + (str(i + 1) if sdxl else ""))
    unet_loras = create_unet_loras(m, r, r / 2, rec.get("conv_dim"))
    for l in te_loras + unet_loras:
        l.apply_to()
    import measure_llm as L
    with L.fake_safe_module_to():
        network = torch.nn.ModuleList(te_loras + unet_loras).to(net_dt)
        if rec.get("fp8_base"):
            # --fp8_base: `unet.to(dtype=float8_e4m3fn)`, `t_enc.to(dtype=te_weight_dtype)` and
            # `prepare_text_encoder_fp8`: `text_model.embeddings.to(dtype=weight_dtype)`
            m.to(torch.float8_e4m3fn)
            for te in tes:
                te.to(torch.float8_e4m3fn)
                getattr(te, "text_model", te).embeddings.to(dt)
    ck = unet_mode(m, rec)
    if ck:
        for te in tes:
            # kohya pins transformers 4.54.1, whose gradient_checkpointing_enable() defaults to
            # use_reentrant=True (transformers 5 to False)
            te.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            te.train()
            getattr(te, "text_model", te).embeddings.requires_grad_(True)  # transformers 5: no text_model
    else:
        for te in tes:
            te.eval()
    network.train()
    b = rec["batch"]
    x = torch.randn(b, 4, rec["height"] // 8, rec["width"] // 8, dtype=dt)
    t = torch.tensor([10] * b)
    ids = [torch.zeros(b, 77, dtype=torch.long) for _ in tes]
    time_ids = torch.randn(b, 6, dtype=dt)
    x.requires_grad_(True)
    te_params = [p for l in te_loras for p in l.parameters()]
    unet_params = [p for l in unet_loras for p in l.parameters()]
    opt = torch.optim.AdamW([{"params": te_params}, {"params": unet_params}], lr=1e-4)
    loss_weights = torch.ones(b)

    def encode():
        if not sdxl:
            return [tes[0](ids[0])[0]]
        out = tes[0](ids[0], output_hidden_states=True, return_dict=True)
        hs1 = out["hidden_states"][11]
        out = tes[1](ids[1], output_hidden_states=True, return_dict=True)
        hs2 = out["hidden_states"][-2]
        pool2 = pool_workaround(tes[1], out["last_hidden_state"], ids[1])
        return [hs1, hs2, pool2]

    def step():
        with torch.set_grad_enabled(True), torch.autocast("cpu", dtype=torch.bfloat16):
            conds = encode()
        if ck:
            for c in conds:
                c.requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if sdxl:
                text = torch.cat([conds[0], conds[1]], dim=2).to(dt)
                pred = m(x, t, text, added_cond_kwargs={"text_embeds": conds[2].to(dt), "time_ids": time_ids}).sample
            else:
                pred = m(x, t, conds[0]).sample
        backward_and_step(pred, loss_weights, opt)

    return [m] + tes, network, [x, t, time_ids] + ids, opt, te_params + unet_params, step


def measure_te(rec):
    return measure(rec, setup_te)


def grid_fp8():
    """--fp8_base (train_network.py: asserts mixed_precision fp16/bf16): the frozen weights in
    float8_e4m3fn, each Linear / conv weight cast to bf16 by autocast at its use (no autocast
    cache: they do not require grad). CPU autocast leaves the norms' fp8 weights uncast (real
    CPU kernels refuse them; FakeTensorMode does not; CUDA's autocast would run them in fp32)."""
    R = []
    base = {"text_len": 77, "trainer": "kohya", "fp8_base": True, "method": "memtracker_fake_cpu_kohya_lora_step"}
    for name, cfg, w, h, b, r, ck, fb in [("unet-sd", D.UNET, 256, 256, 1, 4, False, False), ("unet-sd", D.UNET, 384, 512, 1, 4, True, False),
                                          ("unet-sdxl", D.UNETXL, 256, 256, 1, 4, False, False), ("unet-sdxl", D.UNETXL, 384, 512, 1, 4, True, False),
                                          ("unet-sd", D.UNET, 320, 256, 2, 16, True, True)]:
        R.append(dict(base, name=name, config=cfg, batch=b, width=w, height=h, lora_r=r, checkpointing=ck, full_bf16=fb,
                      unet_port="kohya-sd1" if name == "unet-sd" and ck else None,
                      command="/root/mvenv/bin/python tools/measure_kohya_lora.py fp8"))
    for name, cfg, w, h, ck in [("unet-sd", D.UNET, 256, 256, True), ("unet-sd", D.UNET, 384, 512, False), ("unet-sdxl", D.UNETXL, 256, 256, True)]:
        R.append(dict(base, name=name, config=cfg, text_encoders=[TE_XL1, TE_XL2] if name == "unet-sdxl" else [TE_SD], train_text_encoder=True,
                      batch=1, width=w, height=h, lora_r=4, checkpointing=ck, full_bf16=False,
                      unet_port="kohya-sd1" if name == "unet-sd" and ck else None,
                      command="/root/mvenv/bin/python tools/measure_kohya_lora.py fp8"))
    return R


def grid_te():
    R = []
    for name, cfg in [("unet-sd", D.UNET), ("unet-sdxl", D.UNETXL)]:
        tes = [TE_XL1, TE_XL2] if name == "unet-sdxl" else [TE_SD]
        for (w, h, b, ck, fb, r) in [(256, 256, 1, False, False, 4), (256, 256, 1, True, False, 4), (384, 512, 1, False, False, 4),
                                     (384, 512, 1, True, False, 4), (320, 256, 2, True, True, 16), (320, 256, 2, False, False, 8)]:
            R.append({"name": name, "config": cfg, "text_encoders": tes, "train_text_encoder": True, "batch": b, "width": w,
                      "height": h, "text_len": 77, "lora_r": r, "checkpointing": ck, "full_bf16": fb, "trainer": "kohya",
                      "unet_port": "kohya-sd1" if name == "unet-sd" and ck else None,
                      "method": "memtracker_fake_cpu_kohya_lora_step",
                      "command": "/root/mvenv/bin/python tools/measure_kohya_lora.py te"})
    return R


def grid():
    R = []
    for name, cfg in [("unet-sd", D.UNET), ("unet-sdxl", D.UNETXL)]:
        for (w, h) in [(256, 256), (384, 512)]:
            for ck in (False, True):
                for fb in (False, True):
                    R.append({"name": name, "config": cfg, "batch": 1, "width": w, "height": h, "text_len": 77,
                              "lora_r": 4, "checkpointing": ck, "full_bf16": fb, "trainer": "kohya",
                              "method": "memtracker_fake_cpu_kohya_lora_step"})
    # held out: batch 2, rank 16, another size
    for name, cfg in [("unet-sd", D.UNET), ("unet-sdxl", D.UNETXL)]:
        R.append({"name": name, "config": cfg, "batch": 2, "width": 320, "height": 256, "text_len": 77, "lora_r": 16,
                  "checkpointing": name == "unet-sdxl", "full_bf16": False, "trainer": "kohya", "held_out": True,
                  "method": "memtracker_fake_cpu_kohya_lora_step"})
    # kohya's SD 1.x UNet port's checkpointing units
    for (w, h) in [(256, 256), (384, 512)]:
        R.append({"name": "unet-sd", "config": D.UNET, "batch": 1, "width": w, "height": h, "text_len": 77, "lora_r": 4,
                  "checkpointing": True, "full_bf16": False, "trainer": "kohya", "unet_port": "kohya-sd1",
                  "method": "memtracker_fake_cpu_kohya_lora_step"})
    # --network_args conv_dim=8: the resnets' and samplers' convs too
    for name, cfg in [("unet-sd", D.UNET), ("unet-sdxl", D.UNETXL)]:
        for (w, h, ck) in [(256, 256, False), (384, 512, True)]:
            R.append({"name": name, "config": cfg, "batch": 1, "width": w, "height": h, "text_len": 77, "lora_r": 4,
                      "conv_dim": 8, "checkpointing": ck, "full_bf16": False, "trainer": "kohya",
                      "unet_port": "kohya-sd1" if name == "unet-sd" and ck else None,
                      "method": "memtracker_fake_cpu_kohya_lora_step"})
    return R


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None

    def wanted(rec):
        if only == "sd1-port":
            return rec.get("unet_port") == "kohya-sd1" and not rec.get("conv_dim")
        if only == "conv-dim":
            return bool(rec.get("conv_dim"))
        return only is None or only == rec["name"]

    keys = ("name", "width", "height", "batch", "checkpointing", "full_bf16")
    if only == "te":
        DL.run(grid_te(), measure_te, keys)
        return
    if only == "fp8":
        for rec in grid_fp8():
            DL.run([rec], measure_te if rec.get("train_text_encoder") else measure, keys)
        return
    DL.run([r for r in grid() if wanted(r)], measure, keys)


if __name__ == "__main__":
    main()
