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


def run(name, build, cls, sched, mode, W, H, steps=2, text_len=None, dump_dir=None, dtype="fp32"):
    tr = Track()
    sch = scheduler(sched)
    with FakeTensorMode(allow_non_fake_inputs=True), tr:
        pipe = build(sch)
        if dtype != "fp32":
            pipe.to(dtype={"bf16": torch.bfloat16, "fp16": torch.float16}[dtype])
        pipe.set_progress_bar_config(disable=True)
        if dump_dir:
            dump(pipe, cls, dump_dir)
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
        kw = {"max_sequence_length": text_len} if text_len else {"guidance_scale": 7.0}
        out = pipe("a", height=H, width=W, num_inference_steps=steps, output_type="pt", **kw)
        assert tuple(out.images.shape) == (1, 3, H, W) and str(out.images.device) == "cuda:0", out.images.shape
    return {"name": name, "pipeline": cls, "mode": mode, "width": W, "height": H, "steps": steps, "guidance": "distilled" if text_len else "cfg", "text_len": text_len,
            "dtype": dtype, "method": "fake_cuda_standin_alloc",
            "peak_bytes": tr.peak.get("cuda:0", 0), "cpu_bytes_before_call": setup.get("cpu", 0),
            "gpu_bytes_before_call": setup.get("cuda:0", 0),
            "stages": {k[0]: v for k, v in tr.stage_peak.items() if k[1] == "cuda:0" and k[0] != "setup"}}


# (name, builder, pipeline class, scheduler class, sizes, T5 prompt length)
PIPES = [("tiny-sd", sd, "StableDiffusionPipeline", "EulerDiscreteScheduler", [(64, 64), (128, 96)], None),
         ("tiny-sdxl", sdxl, "StableDiffusionXLPipeline", "EulerDiscreteScheduler", [(64, 64), (96, 128)], None),
         ("tiny-flux", flux, "FluxPipeline", "FlowMatchEulerDiscreteScheduler", [(64, 64), (128, 96)], 32)]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "core", "tests", "data", "diffusion_pipeline")
    only = sys.argv[1:]
    for name, build, cls, sched, sizes, text_len in PIPES:
        if only and name not in only:
            continue
        # fp32 at each size, and bf16 (`torch_dtype=torch.bfloat16`) at the first
        for i, (W, H, dtype) in enumerate([(w, h, "fp32") for w, h in sizes] + [(*sizes[0], "bf16")]):
            for mode in ["none", "model", "sequential", "group"]:
                d = os.path.join(root, name) if i == 0 and mode == "none" else None
                rec = run(name, build, cls, sched, mode, W, H, text_len=text_len, dump_dir=d, dtype=dtype)
                print(json.dumps(rec, sort_keys=True), flush=True)
                print(name, W, H, dtype, mode, rec["peak_bytes"], rec["stages"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
