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
    ck = rec["checkpointing"]
    if ck:
        m.enable_gradient_checkpointing()
        m.train()
        if rec.get("unet_port") == "kohya-sd1":
            sd1_port_checkpointing(m)
    else:
        m.eval()
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
        target = torch.zeros_like(pred)
        loss = F.mse_loss(pred.float(), target.float(), reduction="none")
        loss = loss.mean([1, 2, 3])
        loss = loss * loss_weights
        loss = loss.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return m, network, ins, opt, trainable, step


def measure(rec):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        m, network, ins, opt, trainable, step = setup(rec)
        for _ in range(2):
            step()
        gc.collect()
        mt = DL.tracker_cls()()
        mt.track_external(m, network, opt, *ins)
        with mt:
            step()
        peak = mt.get_tracker_snapshot("peak")
        total = sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
        params = sum(p.numel() for p in m.parameters()) + sum(p.numel() for p in network.parameters())
        return dict(rec, peak_bytes=total, params=params, trainable=sum(p.numel() for p in trainable))


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

    DL.run([r for r in grid() if wanted(r)], measure, ("name", "width", "height", "checkpointing", "full_bf16"))


if __name__ == "__main__":
    main()
