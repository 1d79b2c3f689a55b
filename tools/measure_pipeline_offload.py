#!/usr/bin/env python3
"""Whole-pipeline GPU peaks of tiny diffusers pipelines in each offload mode, measured on CPU.

No GPU here: a *fake* CUDA device stands in for it. Everything runs under
torch._subclasses.fake_tensor.FakeTensorMode (which makes tensors on `cuda:0` without CUDA),
so diffusers' and accelerate's offload hooks really move modules between `cpu` and `cuda:0`:
`pipe.to("cuda")`, `enable_model_cpu_offload(device="cuda")`, `enable_sequential_cpu_offload(device="cuda")`,
`enable_group_offload(onload_device="cuda", offload_type="block_level", num_blocks_per_group=1)`.
A TorchDispatchMode (Track) records every storage an op creates with its device and frees it when
its Python storage dies; the record is the peak of live bytes on `cuda:0` over the whole `__call__`
(text encoding, 2 denoising steps with CFG, VAE decode, output_type="pt"), plus per-stage peaks.
These are allocated bytes: the fake device has no caching allocator and no 512-byte rounding, so
compare them with an estimate's allocated bytes, not with reserved memory.

What the stand-in needs (each patch below says why): Module._apply's `.data` path for fake
parameters, FakeTensor's `.data` setter carrying the new device, accelerate's
`type(param)(value)` rebuild, the scheduler's timesteps computed on real tensors, and SDPA routed
to the fused CPU flash kernel (on a fake CUDA device SDPA falls back to the math kernel, which
materialises the scores a GPU's fused kernels never do).

    /root/mvenv/bin/python tools/measure_pipeline_offload.py > crates/core/tests/data/diffusion_pipeline.jsonl

`cpu_peak_bytes` is the largest CPU RAM of live storages during the call (the offloaded weights
and the pipeline's CPU-side tensors). With `--vae-tiling`, SD3 and Wan are measured again at
their second size with 64 px tiles in two offload modes (`TILED`). `tiny-sd3-t5` is tiny-sd3
with a T5 four times the other components' weights (SD3.5's T5-XXL is 9.5 of its 16.3 GB):
with model offload its encoder stages, T5 still on the GPU beside CLIP-L and CLIP-G for the
negative prompt, reach the pipeline's peak.

It also writes each tiny pipeline's model_index.json and components' config.json under
crates/core/tests/data/diffusion_pipeline/<name>/, the files the core reads with --model-index.
Run with torch 2.15, diffusers 0.42.1, transformers 5.24, accelerate 1.15 (torch.set_num_threads(1)).
"""
import functools, json, os, sys, weakref, warnings
import torch
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
from torch._subclasses.fake_tensor import FakeTensorMode, FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# (1) `param.data = t` on a FakeTensor keeps its old fake_device; carry the new one.
_D = torch._C.TensorBase.data
def _get(self): return _D.__get__(self)
def _set(self, v):
    _D.__set__(self, v)
    if isinstance(v, FakeTensor): self.fake_device = v.fake_device
FakeTensor.data = property(_get, _set)
# (2) Module._apply swaps FakeTensor params (swap_tensors refuses: fake mode holds weakrefs); use the .data path
def _apply(self, fn, recurse=True):
    """Module._apply's set_data path (what a real CPU->CUDA move takes): `param.data = fn(param)`."""
    if recurse:
        for m in self.children(): m._apply(fn)
    with torch.no_grad():
        for k, p in self._parameters.items():
            if p is not None:
                p.data = fn(p)
                if p.grad is not None: p.grad.data = fn(p.grad)
        for k, b in self._buffers.items():
            if b is not None: self._buffers[k] = fn(b)
    return self
torch.nn.Module._apply = _apply
# (3) accelerate's set_module_tensor_to_device rebuilds a parameter as type(param)(value, requires_grad=...);
# a parameter made under fake mode is of type FakeTensor, whose constructor wants fake_mode first.
_new = FakeTensor.__new__
def _fnew(cls, *a, **k):
    if a and isinstance(a[0], torch.Tensor) and "fake_mode" not in k:
        return torch.nn.Parameter(a[0], requires_grad=k.get("requires_grad", True))
    return _new(cls, *a, **k)
FakeTensor.__new__ = _fnew

# (4) On a fake CUDA device SDPA falls back to the math kernel (no device properties), which
# materialises [B, H, Sq, Skv] scores a GPU never does. Route it to the fused CPU flash kernel
# (the kernel the component records ran; output plus an fp32 [B, H, Sq] log-sum-exp, like the
# GPU's flash / memory-efficient kernels), whose meta kernel serves any fake device.
_real_sdpa = torch.nn.functional.scaled_dot_product_attention
def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = query, key, value
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        return _real_sdpa(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
torch.nn.functional.scaled_dot_product_attention = _sdpa

class Track(TorchDispatchMode):
    """Live bytes per device: every storage an op returns is counted once, on its device, until
    its Python storage object dies (storages keep their PyObject while a tensor holds them, as
    torch.distributed._tools.mem_tracker relies on). Peaks overall and per stage."""
    def __init__(self):
        super().__init__(); self.cur = {}; self.peak = {}; self.refs = {}; self.stage = 'setup'; self.stage_peak = {}
    def _add(self, t):
        st = t.untyped_storage(); k = st._cdata
        if k in self.refs: return
        dev = str(t.device); n = st.nbytes()
        def fin(_r, k=k, dev=dev, n=n):
            self.refs.pop(k, None); self.cur[dev] -= n
        self.refs[k] = weakref.ref(st, fin)
        self.cur[dev] = self.cur.get(dev, 0) + n
        if self.cur[dev] > self.peak.get(dev, 0): self.peak[dev] = self.cur[dev]
        key = (self.stage, dev)
        if self.cur[dev] > self.stage_peak.get(key, 0): self.stage_peak[key] = self.cur[dev]
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor): self._add(t)
        return out
    def reset_peak(self):
        self.peak = dict(self.cur)

class Tok:
    """A tokenizer stand-in (no vocabulary files here): `max_length` ids of 0 when padded to it,
    and a shorter `longest` so the pipelines' truncation check (`torch.equal`, data-dependent
    under fake mode) is skipped."""
    model_max_length = 8
    added_tokens_encoder = {}
    def __init__(self, L=8): self.model_max_length = L
    def tokenize(self, p): return []
    def __call__(self, prompt, padding=None, max_length=None, truncation=None, return_tensors=None, **kw):
        n = 1 if isinstance(prompt, str) else len(prompt)
        L = max_length if padding == "max_length" else 2
        class O: pass
        o = O(); o.input_ids = torch.zeros(n, L, dtype=torch.long); o.attention_mask = torch.ones(n, L, dtype=torch.long)
        return o
    def batch_decode(self, *a, **k): return [""]


CLIP = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
            max_position_embeddings=77, hidden_act="quick_gelu")
UNET = dict(block_out_channels=[32, 64], layers_per_block=2, sample_size=32, in_channels=4, out_channels=4,
            down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"], up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"],
            cross_attention_dim=32, attention_head_dim=8, norm_num_groups=32)
VAE = dict(block_out_channels=[32, 64], down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
           latent_channels=4, layers_per_block=1, norm_num_groups=32, in_channels=3, out_channels=3)


def sd(sch):
    import transformers
    from diffusers import StableDiffusionPipeline, UNet2DConditionModel, AutoencoderKL
    te = transformers.CLIPTextModel(transformers.CLIPTextConfig(**CLIP))
    pipe = StableDiffusionPipeline(vae=AutoencoderKL(**VAE), text_encoder=te, tokenizer=Tok(77), unet=UNet2DConditionModel(**UNET),
                                   scheduler=sch, safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    return pipe


UNETXL = dict(UNET, down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"], up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"],
              cross_attention_dim=64, attention_head_dim=[2, 4], transformer_layers_per_block=[1, 2], use_linear_projection=True,
              addition_embed_type="text_time", addition_time_embed_dim=8, projection_class_embeddings_input_dim=80)


def sdxl(sch):
    import transformers
    from diffusers import StableDiffusionXLPipeline, UNet2DConditionModel, AutoencoderKL
    te = transformers.CLIPTextModel(transformers.CLIPTextConfig(**CLIP))
    te2 = transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**dict(CLIP, hidden_act="gelu", projection_dim=32)))
    return StableDiffusionXLPipeline(vae=AutoencoderKL(**VAE), text_encoder=te, text_encoder_2=te2, tokenizer=Tok(77), tokenizer_2=Tok(77),
                                     unet=UNet2DConditionModel(**UNETXL), scheduler=sch, add_watermarker=False)


FLUX = dict(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2, attention_head_dim=16, num_attention_heads=4,
            joint_attention_dim=48, pooled_projection_dim=32, guidance_embeds=True, axes_dims_rope=[4, 6, 6])
T5 = dict(d_model=48, d_ff=96, d_kv=12, num_heads=4, num_layers=2, vocab_size=1000, feed_forward_proj="gated-gelu")
# Flux's VAE: no quant convs; 4 latent channels packed 2×2 into the transformer's 16
FLUX_VAE = dict(VAE, use_quant_conv=False, use_post_quant_conv=False, scaling_factor=0.3611, shift_factor=0.1159)


def flux(sch):
    import transformers
    from diffusers import FluxPipeline, FluxTransformer2DModel, AutoencoderKL
    te = transformers.CLIPTextModel(transformers.CLIPTextConfig(**CLIP))
    te2 = transformers.T5EncoderModel(transformers.T5Config(**T5))
    return FluxPipeline(scheduler=sch, vae=AutoencoderKL(**FLUX_VAE), text_encoder=te, tokenizer=Tok(77), text_encoder_2=te2,
                        tokenizer_2=Tok(512), transformer=FluxTransformer2DModel(**FLUX))


# SD3: CLIP-L and CLIP-G with projections (pooled: 32 + 32), their hidden states joined (32 + 32)
# and padded to T5's d_model, then joined with T5's on the sequence; a 16-channel VAE without
# quant convs (as SD3.5's)
CLIP_P = dict(CLIP, projection_dim=32)
T5_SD3 = dict(T5, d_model=64, d_ff=128, d_kv=16)
SD3 = dict(sample_size=32, patch_size=2, in_channels=16, out_channels=16, num_layers=3, attention_head_dim=16,
           num_attention_heads=4, caption_projection_dim=64, joint_attention_dim=64, pooled_projection_dim=64,
           pos_embed_max_size=48, qk_norm="rms_norm", dual_attention_layers=[0])
SD3_VAE = dict(VAE, latent_channels=16, use_quant_conv=False, use_post_quant_conv=False, scaling_factor=1.5305, shift_factor=0.0609)


# SD3.5's T5-XXL is most of its weights (9.5 GB of 16.3 in bf16): a T5 four times the other
# components', so that with model offload the peak is the encoders' (T5 still on the GPU while
# CLIP-G encodes the negative prompt)
T5_SD3_BIG = dict(T5_SD3, d_ff=2048, num_layers=4)


def sd3(sch, t5=T5_SD3):
    import transformers
    from diffusers import StableDiffusion3Pipeline, SD3Transformer2DModel, AutoencoderKL
    te = transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**CLIP_P))
    te2 = transformers.CLIPTextModelWithProjection(transformers.CLIPTextConfig(**dict(CLIP_P, hidden_act="gelu")))
    te3 = transformers.T5EncoderModel(transformers.T5Config(**t5))
    return StableDiffusion3Pipeline(transformer=SD3Transformer2DModel(**SD3), scheduler=sch, vae=AutoencoderKL(**SD3_VAE),
                                    text_encoder=te, tokenizer=Tok(77), text_encoder_2=te2, tokenizer_2=Tok(77),
                                    text_encoder_3=te3, tokenizer_3=Tok(256))


# Wan 2.1: a UMT5 encoder, WanTransformer3DModel, AutoencoderKLWan (z_dim 4, its latents_mean/std
# of that length)
UMT5 = dict(T5, d_model=48, d_ff=96, d_kv=12)
WAN = dict(patch_size=[1, 2, 2], num_attention_heads=4, attention_head_dim=16, in_channels=4, out_channels=4, text_dim=48,
           freq_dim=32, ffn_dim=96, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=64, eps=1e-6)
WAN_VAE = dict(base_dim=16, z_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=1, temperal_downsample=[False, True, True], attn_scales=[],
               latents_mean=[0.0] * 4, latents_std=[1.0] * 4)


def wan_t5_prompt_embeds(pipe):
    """`WanPipeline._get_t5_prompt_embeds` as written (pipelines/wan/pipeline_wan.py), with the
    prompt's length taken from the tokenizer stand-in: `seq_lens = mask.gt(0).sum(dim=1)` then
    `u[:v]` is data-dependent under fake mode. The stand-in pads every prompt to max_length, so
    each length is max_length and the ops are the source's: the encoder, `.to(dtype, device)`,
    the per-prompt `torch.cat([u, u.new_zeros(0, d)])`, `torch.stack`, `repeat`, `view`."""
    from diffusers.utils.torch_utils import get_module_execution_device

    def f(prompt=None, num_videos_per_prompt=1, max_sequence_length=226, device=None, dtype=None):
        device = device or pipe._execution_device
        dtype = dtype or pipe.text_encoder.dtype
        prompt = [prompt] if isinstance(prompt, str) else prompt
        batch_size = len(prompt)
        ti = pipe.tokenizer(prompt, padding="max_length", max_length=max_sequence_length, truncation=True,
                            add_special_tokens=True, return_attention_mask=True, return_tensors="pt")
        ids, mask = ti.input_ids, ti.attention_mask
        seq_lens = [max_sequence_length] * batch_size
        dev = get_module_execution_device(pipe.text_encoder)
        e = pipe.text_encoder(ids.to(dev), mask.to(dev)).last_hidden_state
        e = e.to(dtype=dtype, device=device)
        e = [u[:v] for u, v in zip(e, seq_lens)]
        e = torch.stack([torch.cat([u, u.new_zeros(max_sequence_length - u.size(0), u.size(1))]) for u in e], dim=0)
        _, seq_len, _ = e.shape
        e = e.repeat(1, num_videos_per_prompt, 1)
        return e.view(batch_size * num_videos_per_prompt, seq_len, -1)
    return f


def wan(sch):
    import transformers
    from diffusers import WanPipeline, WanTransformer3DModel, AutoencoderKLWan
    te = transformers.UMT5EncoderModel(transformers.UMT5Config(**UMT5))
    pipe = WanPipeline(tokenizer=Tok(512), text_encoder=te, vae=AutoencoderKLWan(**WAN_VAE), scheduler=sch,
                       transformer=WanTransformer3DModel(**WAN))
    pipe._get_t5_prompt_embeds = wan_t5_prompt_embeds(pipe)
    return pipe


def dump(pipe, cls, d):
    """model_index.json and each component's config.json, as a diffusers repository lays them out."""
    index = {"_class_name": cls}
    for name, c in pipe.components.items():
        if not isinstance(c, torch.nn.Module):
            continue
        os.makedirs(f"{d}/{name}", exist_ok=True)
        if hasattr(c, "save_config"):
            cfg = {k: v for k, v in dict(c.config).items() if not k.startswith("_")}
            cfg = {"_class_name": type(c).__name__, **cfg}
            index[name] = ["diffusers", type(c).__name__]
        else:
            cfg = c.config.to_dict()
            cfg["architectures"] = [type(c).__name__]
            index[name] = ["transformers", type(c).__name__]
        with open(f"{d}/{name}/config.json", "w") as f:
            json.dump(cfg, f, indent=1, sort_keys=True, default=list)
    index["scheduler"] = ["diffusers", type(pipe.scheduler).__name__]
    with open(f"{d}/model_index.json", "w") as f:
        json.dump(index, f, indent=1)

def scheduler(cls):
    """A scheduler made outside fake mode (set_timesteps goes through numpy), its
    sigmas kept as floats (step() compares sigma with floats: data-dependent under fake mode)."""
    import diffusers
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    sch = getattr(diffusers, cls)()
    real_set = sch.set_timesteps

    @functools.wraps(real_set)  # retrieve_timesteps reads its signature (sigmas=, timesteps=)
    def set_timesteps(*a, device=None, **k):
        with unset_fake_temporarily():
            real_set(*a, device="cpu", **k)
            sch.sigmas = sch.sigmas.tolist()
        sch.timesteps = sch.timesteps.to(device)
    sch.set_timesteps = set_timesteps
    # index_for_timestep's nonzero() is data-dependent under fake mode; the loop starts at step 0
    sch.index_for_timestep = lambda t, schedule_timesteps=None: 0
    return sch


def offload(pipe, mode):
    if mode == "none":
        pipe.to("cuda")
    elif mode == "model":
        pipe.enable_model_cpu_offload(device="cuda")
    elif mode == "sequential":
        pipe.enable_sequential_cpu_offload(device="cuda")
    elif mode == "group":
        pipe.enable_group_offload(onload_device=torch.device("cuda"), offload_device=torch.device("cpu"),
                                  offload_type="block_level", num_blocks_per_group=1)


def run(name, build, cls, sched, mode, W, H, steps=2, text_len=None, dump_dir=None, dtype="fp32", frames=None, cfg=True, tiling=None):
    tr = Track()
    sch = scheduler(sched)
    with FakeTensorMode(allow_non_fake_inputs=True), tr:
        pipe = build(sch)
        if dtype != "fp32":
            pipe.to(dtype={"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])
        pipe.set_progress_bar_config(disable=True)
        if dump_dir:
            dump(pipe, cls, dump_dir)
        if tiling:
            # `pipe.vae.enable_tiling()`: AutoencoderKL's tiles of `sample_size`, or AutoencoderKLWan's
            # (tile_sample_min_height, _width, stride_height, stride_width) = (t, t, 3t/4, 3t/4)
            if cls == "WanPipeline":
                pipe.vae.enable_tiling(tiling, tiling, tiling * 3 // 4, tiling * 3 // 4)
            else:
                pipe.vae.enable_tiling()
                pipe.vae.tile_sample_min_size = tiling
                pipe.vae.tile_latent_min_size = tiling // 2 ** (len(pipe.vae.config.block_out_channels) - 1)
        offload(pipe, mode)
        # per-stage peaks: a component's stage starts at its call, before its offload hooks onload it
        for cname, c in pipe.components.items():
            if isinstance(c, torch.nn.Module):
                c.register_forward_pre_hook(lambda *_a, cname=cname: setattr(tr, "stage", cname))
        real_decode = pipe.vae.decode
        def decode(*a, **k):
            tr.stage = "vae"
            return real_decode(*a, **k)
        pipe.vae.decode = decode
        setup = dict(tr.cur)
        tr.reset_peak()
        kw = {"guidance_scale": 7.0 if cfg else 3.5}
        if text_len:
            kw["max_sequence_length"] = text_len
        if frames:
            kw["num_frames"] = frames
        out = pipe("a", height=H, width=W, num_inference_steps=steps, output_type="pt", **kw)
        img = out.frames if frames else out.images
        shape = (1, frames, 3, H, W) if frames else (1, 3, H, W)
        assert tuple(img.shape) == shape and str(img.device) == "cuda:0", img.shape
    rec = {"name": name, "pipeline": cls, "mode": mode, "width": W, "height": H, "steps": steps, "guidance": "cfg" if cfg else "distilled", "text_len": text_len,
           "dtype": dtype, "method": "fake_cuda_standin_alloc",
           "peak_bytes": tr.peak.get("cuda:0", 0), "cpu_bytes_before_call": setup.get("cpu", 0),
           "cpu_peak_bytes": tr.peak.get("cpu", 0),
           "gpu_bytes_before_call": setup.get("cuda:0", 0),
           "stages": {k[0]: v for k, v in tr.stage_peak.items() if k[1] == "cuda:0" and k[0] != "setup"}}
    if frames:
        rec["frames"] = frames
    if tiling:
        rec["tiling"] = tiling
    return rec


# (name, builder, pipeline class, scheduler class, sizes (W, H[, frames]), T5 prompt length, CFG)
PIPES = [("tiny-sd", sd, "StableDiffusionPipeline", "EulerDiscreteScheduler", [(64, 64), (128, 96)], None, True),
         ("tiny-sdxl", sdxl, "StableDiffusionXLPipeline", "EulerDiscreteScheduler", [(64, 64), (96, 128)], None, True),
         ("tiny-flux", flux, "FluxPipeline", "FlowMatchEulerDiscreteScheduler", [(64, 64), (128, 96)], 32, False),
         ("tiny-sd3", sd3, "StableDiffusion3Pipeline", "FlowMatchEulerDiscreteScheduler", [(64, 64), (128, 96)], 32, True),
         ("tiny-wan", wan, "WanPipeline", "FlowMatchEulerDiscreteScheduler", [(64, 64, 9), (96, 64, 5)], 32, True),
         ("tiny-sd3-t5", functools.partial(sd3, t5=T5_SD3_BIG), "StableDiffusion3Pipeline", "FlowMatchEulerDiscreteScheduler",
          [(64, 64)], 32, True)]


# offload modes measured with 64 px VAE tiles
TILED = {"tiny-sd3": ["model", "group"], "tiny-wan": ["model", "sequential"]}


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "core", "tests", "data", "diffusion_pipeline")
    only = sys.argv[1:]
    for name, build, cls, sched, sizes, text_len, cfg in PIPES:
        if only and name not in only:
            continue
        # fp32 at each size, and bf16 (`torch_dtype=torch.bfloat16`) at the first
        for i, (size, dtype) in enumerate([(s, "fp32") for s in sizes] + [(sizes[0], "bf16")]):
            W, H, F = (*size, None)[:3]
            for mode in ["none", "model", "sequential", "group"]:
                d = os.path.join(root, name) if i == 0 and mode == "none" else None
                rec = run(name, build, cls, sched, mode, W, H, text_len=text_len, dump_dir=d, dtype=dtype, frames=F, cfg=cfg)
                print(json.dumps(rec, sort_keys=True), flush=True)
                print(name, W, H, dtype, mode, rec["peak_bytes"], rec["stages"], file=sys.stderr, flush=True)
        # the decode tiled inside the whole pipeline (`pipe.vae.enable_tiling()`), at the second size
        for mode in TILED.get(name, []):
            W, H, F = (*sizes[1], None)[:3]
            rec = run(name, build, cls, sched, mode, W, H, text_len=text_len, frames=F, cfg=cfg, tiling=64)
            print(json.dumps(rec, sort_keys=True), flush=True)
            print(name, W, H, "tiled", mode, rec["peak_bytes"], rec["stages"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
