#!/usr/bin/env python3
"""Peak memory of diffusers/transformers components' inference forwards (torch.no_grad(), eval),
measured on CPU under torch._subclasses.fake_tensor.FakeTensorMode with PyTorch's MemTracker
(torch.distributed._tools.mem_tracker), the method of /work/shared/reference/llm/measure_llm.py:
the model and its inputs are created under FakeTensorMode, tracked as external, and the peak
of the tracked forward (parameters, buffers, inputs, activations, temporaries) is recorded.

Small configs of each family (AutoencoderKL 4- and 16-channel, UNet2DConditionModel SD- and
SDXL-style, SD3Transformer2DModel, FluxTransformer2DModel, WanTransformer3DModel,
AutoencoderKLWan, CLIPTextModel, T5EncoderModel, UMT5EncoderModel) at two sizes, the VAE decode
with and without enable_tiling()/enable_slicing().

    /root/mvenv/bin/python tools/measure_diffusion.py > crates/core/tests/data/diffusion_forward.jsonl

Run with torch 2.15, diffusers 0.42.1, transformers 5.24 (torch.set_num_threads(1)).
"""
import contextlib, gc, json, sys, warnings
import torch

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
DT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

VAE4 = {"_class_name": "AutoencoderKL", "block_out_channels": [32, 32, 64, 64], "down_block_types": ["DownEncoderBlock2D"] * 4,
        "up_block_types": ["UpDecoderBlock2D"] * 4, "latent_channels": 4, "layers_per_block": 1, "norm_num_groups": 32,
        "sample_size": 128, "in_channels": 3, "out_channels": 3}
VAE16 = dict(VAE4, latent_channels=16, use_quant_conv=False, use_post_quant_conv=False, layers_per_block=2)
UNET = {"_class_name": "UNet2DConditionModel", "block_out_channels": [32, 64], "layers_per_block": 2, "sample_size": 32,
        "in_channels": 4, "out_channels": 4, "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
        "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"], "cross_attention_dim": 32, "attention_head_dim": 8, "norm_num_groups": 32}
UNETXL = {"_class_name": "UNet2DConditionModel", "block_out_channels": [32, 64], "layers_per_block": 2, "sample_size": 32,
          "in_channels": 4, "out_channels": 4, "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
          "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"], "cross_attention_dim": 64, "attention_head_dim": [2, 4],
          "transformer_layers_per_block": [1, 2], "use_linear_projection": True, "addition_embed_type": "text_time",
          "addition_time_embed_dim": 8, "projection_class_embeddings_input_dim": 80, "norm_num_groups": 32}
FLUX = {"_class_name": "FluxTransformer2DModel", "patch_size": 1, "in_channels": 16, "num_layers": 2, "num_single_layers": 2,
        "attention_head_dim": 16, "num_attention_heads": 4, "joint_attention_dim": 48, "pooled_projection_dim": 32,
        "guidance_embeds": True, "axes_dims_rope": [4, 6, 6]}
SD3 = {"_class_name": "SD3Transformer2DModel", "sample_size": 32, "patch_size": 2, "in_channels": 4, "out_channels": 4,
       "num_layers": 3, "attention_head_dim": 16, "num_attention_heads": 4, "caption_projection_dim": 64,
       "joint_attention_dim": 48, "pooled_projection_dim": 32, "pos_embed_max_size": 48, "qk_norm": "rms_norm",
       "dual_attention_layers": [0]}
WAN = {"_class_name": "WanTransformer3DModel", "patch_size": [1, 2, 2], "num_attention_heads": 4, "attention_head_dim": 16,
       "in_channels": 4, "out_channels": 4, "text_dim": 48, "freq_dim": 32, "ffn_dim": 96, "num_layers": 2,
       "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 64, "eps": 1e-6}
WANVAE = {"_class_name": "AutoencoderKLWan", "base_dim": 16, "z_dim": 4, "dim_mult": [1, 2, 4, 4], "num_res_blocks": 1,
          "temperal_downsample": [False, True, True], "attn_scales": []}
CLIP = {"architectures": ["CLIPTextModel"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 77, "hidden_act": "quick_gelu"}
CLIPG = dict(CLIP, architectures=["CLIPTextModelWithProjection"], hidden_act="gelu", projection_dim=32)
T5 = {"architectures": ["T5EncoderModel"], "model_type": "t5", "d_model": 64, "d_ff": 128, "d_kv": 16, "num_heads": 4,
      "num_layers": 2, "vocab_size": 1000, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.1}
UMT5 = dict(T5, architectures=["UMT5EncoderModel"], model_type="umt5")


def cast_buffers(m, dt):
    """`Module.to(dtype)` also casts floating buffers a module made in an explicit dtype (SD3's
    fp32 `pos_embed`, Wan's rotary tables), which the default dtype does not reach."""
    for mod in m.modules():
        for name, b in list(mod._buffers.items()):
            if b is not None and b.is_floating_point() and b.dtype != dt:
                mod._buffers[name] = b.to(dt)


def build(cfg):
    cfg = dict(cfg)
    if "_class_name" in cfg:
        import diffusers
        return getattr(diffusers, cfg.pop("_class_name")).from_config(cfg)
    import transformers
    arch = cfg["architectures"][0]
    cls = getattr(transformers, arch)
    conf = transformers.CLIPTextConfig if arch.startswith("CLIPText") else cls.config_class
    return cls(conf(**cfg))


class Wrap(torch.nn.Module):
    def __init__(self, m, call):
        super().__init__()
        self.m, self.call = m, call

    def forward(self):
        return self.call(self.m)


def inputs(cfg, rec, dt):
    """The forward's call and its inputs (made under FakeTensorMode)."""
    cls = cfg.get("_class_name") or cfg["architectures"][0]
    b, w, h = rec["batch"], rec.get("width"), rec.get("height")
    L = rec.get("text_len")
    if cls == "AutoencoderKL":
        s = 2 ** (len(cfg["block_out_channels"]) - 1)
        z = torch.randn(b, cfg["latent_channels"], h // s, w // s, dtype=dt)
        return (lambda m: m.decode(z).sample), [z]
    if cls == "AutoencoderKLWan":
        f = (rec["frames"] - 1) // 4 + 1
        z = torch.randn(b, cfg["z_dim"], f, h // 8, w // 8, dtype=dt)
        return (lambda m: m.decode(z).sample), [z]
    if cls == "UNet2DConditionModel":
        x = torch.randn(b, 4, h // 8, w // 8, dtype=dt)
        t = torch.tensor([10] * b)
        e = torch.randn(b, L, cfg["cross_attention_dim"], dtype=dt)
        kw = {}
        if cfg.get("addition_embed_type") == "text_time":
            kw = {"added_cond_kwargs": {"text_embeds": torch.randn(b, 32, dtype=dt), "time_ids": torch.randn(b, 6, dtype=dt)}}
        return (lambda m: m(x, t, e, **kw).sample), [x, t, e] + list(kw.get("added_cond_kwargs", {}).values())
    if cls == "FluxTransformer2DModel":
        s = (h // 16) * (w // 16)
        x = torch.randn(b, s, cfg["in_channels"], dtype=dt)
        e = torch.randn(b, L, cfg["joint_attention_dim"], dtype=dt)
        p = torch.randn(b, cfg["pooled_projection_dim"], dtype=dt)
        t = torch.ones(b, dtype=dt)
        g = torch.ones(b, dtype=dt)
        img_ids = torch.zeros(s, 3)
        txt_ids = torch.zeros(L, 3)
        if not cfg.get("guidance_embeds"):
            return (lambda m: m(hidden_states=x, encoder_hidden_states=e, pooled_projections=p, timestep=t, img_ids=img_ids,
                                txt_ids=txt_ids).sample), [x, e, p, t, img_ids, txt_ids]
        return (lambda m: m(hidden_states=x, encoder_hidden_states=e, pooled_projections=p, timestep=t, img_ids=img_ids,
                            txt_ids=txt_ids, guidance=g).sample), [x, e, p, t, g, img_ids, txt_ids]
    if cls == "SD3Transformer2DModel":
        x = torch.randn(b, cfg["in_channels"], h // 8, w // 8, dtype=dt)
        e = torch.randn(b, L, cfg["joint_attention_dim"], dtype=dt)
        p = torch.randn(b, cfg["pooled_projection_dim"], dtype=dt)
        t = torch.ones(b, dtype=dt)
        return (lambda m: m(hidden_states=x, encoder_hidden_states=e, pooled_projections=p, timestep=t).sample), [x, e, p, t]
    if cls == "WanTransformer3DModel":
        f = (rec["frames"] - 1) // 4 + 1
        x = torch.randn(b, cfg["in_channels"], f, h // 8, w // 8, dtype=dt)
        e = torch.randn(b, L, cfg["text_dim"], dtype=dt)
        t = torch.ones(b, dtype=dt)
        return (lambda m: m(hidden_states=x, timestep=t, encoder_hidden_states=e).sample), [x, e, t]
    ids = torch.zeros(b, L, dtype=torch.long)
    return (lambda m: m(input_ids=ids)[0]), [ids]


def measure(rec):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    cfg, dt = rec["config"], DT[rec["dtype"]]
    with FakeTensorMode():
        # built in the dtype (`Module.to` cannot swap fake parameters): as `.to(dtype)` casts
        # every parameter and buffer, so does the default dtype
        torch.set_default_dtype(dt)
        try:
            m = build(cfg).eval()
        finally:
            torch.set_default_dtype(torch.float32)
        cast_buffers(m, dt)
        if rec.get("tiling") and cfg.get("_class_name") == "AutoencoderKLWan":
            # `AutoencoderKLWan.enable_tiling(tile_sample_min_height, _width, stride_height,
            # stride_width)`: 1 is the default (256, 192); a size t is (t, t, 3t/4, 3t/4)
            t = rec["tiling"]
            m.enable_tiling() if t == 1 else m.enable_tiling(t, t, t * 3 // 4, t * 3 // 4)
        elif rec.get("tiling"):
            m.enable_tiling()
            if rec["tiling"] > 1:
                m.tile_sample_min_size = rec["tiling"]
                m.tile_latent_min_size = rec["tiling"] // 8
        if rec.get("slicing"):
            m.enable_slicing()
        call, ins = inputs(cfg, rec, dt)
        gc.collect()
        # one wrapping module, so that a submodule called several times (tiles, slices, Wan's
        # chunks) is never a top-level call MemTracker refuses
        wrap = Wrap(m, call)
        mt = MemTracker()
        mt.track_external(wrap, *ins)
        with mt, torch.no_grad():
            out = wrap()
            del out
        peak = mt.get_tracker_snapshot("peak")
        total = sum(v.get("Total", 0) if isinstance(v, dict) else 0 for v in peak.values())
        rec = dict(rec)
        rec["peak_bytes"] = total
        rec["params"] = sum(p.numel() for p in m.parameters())
        rec["param_bytes"] = sum(p.numel() * p.element_size() for p in m.parameters())
        rec["buffer_bytes"] = sum(x.numel() * x.element_size() for x in m.buffers())
    return rec


def grid():
    R = []
    def add(name, cfg, **kw):
        R.append(dict({"name": name, "config": cfg, "batch": 1, "dtype": "fp32", "method": "memtracker_fake_cpu"}, **kw))
    for dt in ["fp32", "bf16"]:
        add("vae4-decode", VAE4, width=256, height=256, dtype=dt)
        add("vae4-decode", VAE4, width=384, height=512, dtype=dt)
    add("vae4-decode", VAE4, width=256, height=256, batch=2)
    add("vae4-decode-sliced", VAE4, width=256, height=256, batch=2, slicing=True)
    add("vae4-decode-tiled", VAE4, width=512, height=512, tiling=1)
    add("vae16-decode", VAE16, width=256, height=256)
    add("vae16-decode", VAE16, width=512, height=384, dtype="bf16")
    add("vae16-decode-tiled", VAE16, width=512, height=512, tiling=1, dtype="bf16")
    for (w, h) in [(256, 256), (384, 512)]:
        add("unet-sd", UNET, width=w, height=h, text_len=77)
        add("unet-sdxl", UNETXL, width=w, height=h, text_len=77, dtype="bf16")
        add("flux", FLUX, width=w, height=h, text_len=64, dtype="bf16")
        add("sd3", SD3, width=w, height=h, text_len=64)
        add("wan", WAN, width=w, height=h, text_len=32, frames=9, dtype="bf16")
    add("unet-sd", UNET, width=256, height=256, text_len=77, batch=2, dtype="fp16")
    add("flux", FLUX, width=256, height=256, text_len=64, batch=2)
    # held out when the rotary locals were fixed: Flux-schnell style (no guidance), more
    # blocks, wider heads, another text length, batch 2 in bf16
    add("flux", dict(FLUX, guidance_embeds=False, num_layers=1, num_single_layers=3, attention_head_dim=32, axes_dims_rope=[8, 12, 12]),
        width=512, height=384, text_len=32, dtype="bf16")
    add("flux", FLUX, width=320, height=320, text_len=96, batch=2, dtype="bf16")
    add("wanvae-decode", WANVAE, width=128, height=128, frames=9)
    add("wanvae-decode", WANVAE, width=192, height=128, frames=13, dtype="bf16")
    # held out when the chunk model was written: one latent frame (a first chunk only), two
    # (the `"Rep"` chunk), batch 2, fp16, two resnets per block and a wider base
    add("wanvae-decode", WANVAE, width=96, height=64, frames=1)
    add("wanvae-decode", WANVAE, width=128, height=96, frames=5, dtype="bf16")
    add("wanvae-decode", WANVAE, width=64, height=128, frames=9, batch=2)
    add("wanvae-decode", dict(WANVAE, num_res_blocks=2, base_dim=24), width=128, height=128, frames=17, dtype="fp16")
    # AutoencoderKLWan.tiled_decode: 3 × 3 tiles of 64 px, a 3 × 4 grid in bf16, the default
    # 256 px tiles (2 × 2), batch 2 in fp16 with 96 px tiles, one latent frame
    add("wanvae-decode-tiled", WANVAE, width=128, height=128, frames=9, tiling=64)
    add("wanvae-decode-tiled", WANVAE, width=192, height=128, frames=5, tiling=64, dtype="bf16")
    add("wanvae-decode-tiled", WANVAE, width=320, height=256, frames=5, tiling=1)
    add("wanvae-decode-tiled", WANVAE, width=160, height=160, frames=9, tiling=96, batch=2, dtype="fp16")
    add("wanvae-decode-tiled", WANVAE, width=128, height=96, frames=1, tiling=64)
    # a batch of one takes views where a larger one copies (`WanResample`'s
    # `permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)`): the same decode at batch 1, 2 and 3
    for b in [1, 2, 3]:
        add("wanvae-batch-decode", WANVAE, width=96, height=96, frames=9, batch=b, dtype="fp16")
    add("wanvae-batch-decode-tiled", WANVAE, width=160, height=160, frames=9, tiling=96, batch=3, dtype="fp16")
    for L in [77, 32]:
        add("clip-l", CLIP, text_len=L)
        add("clip-g", CLIPG, text_len=L, dtype="bf16")
    for L in [128, 512]:
        add("t5", T5, text_len=L, dtype="bf16")
        add("umt5", UMT5, text_len=L)
    return R


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    for rec in grid():
        if only and only not in rec["name"]:
            continue
        try:
            out = measure(rec)
        except Exception as e:  # report and go on
            print(f"{rec['name']}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        print(json.dumps(out, sort_keys=True), flush=True)
        print(rec["name"], rec.get("width"), rec.get("height"), rec["dtype"], out["peak_bytes"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
