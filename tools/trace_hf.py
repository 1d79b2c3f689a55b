#!/usr/bin/env python3
"""Peak live-tensor bytes of one PyTorch training step of a Hugging Face model, traced op by op.

This is how the README's GPT-2 / LLaMA / ViT comparisons were measured. Like
`shared/reference/measure.py` it runs under FakeTensorMode (no real memory or compute), but counts
live storages itself after every aten op with a TorchDispatchMode, so it works for any
`architectures` class. One step from `zero_grad(set_to_none=True)`: forward, cross-entropy loss,
backward (no optimizer; compare with `vramcalc estimate … --optimizer sgd`). Dropout and SDPA use
their CUDA memory behaviour (`measure.py`'s `cuda_emulation`).

Needs torch, transformers (PyPI) and `shared/reference/measure.py` on the path, e.g.:

    python tools/trace_hf.py crates/core/tests/data/gpt2.config.json --layers 4 --batch 2 --seq-len 256
    cargo run --release -p vramcalc-cli -- estimate --hf-config gpt2-4.json --batch 2 --seq-len 256 --optimizer sgd

(`--write-config PATH` writes the config with the layer count applied, for the second command.)
"""
import argparse
import json
import os
import sys
import weakref

import torch
import transformers
import transformers.initialization
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared", "reference"))
from measure import cuda_emulation  # noqa: E402

# ViT's truncated-normal init reads tensor values, which fake tensors do not have.
transformers.initialization.trunc_normal_ = lambda t, *a, **k: t


class LiveBytes(TorchDispatchMode):
    """Bytes of every live storage, sampled after each aten op."""

    def __init__(self):
        super().__init__()
        self.live = {}
        self.peak = 0

    def track(self, t):
        st = t.untyped_storage()
        key = st._cdata
        if key not in self.live:
            self.live[key] = (weakref.ref(st, lambda _r, key=key: self.live.pop(key, None)), st.nbytes())

    def total(self):
        return sum(n for r, n in self.live.values() if r() is not None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        self.peak = max(self.peak, self.total())
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--layers", type=int, help="override num_hidden_layers / n_layer")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32",
                    help="weights dtype, as model.to(dtype) (vramcalc's --precision bf16|fp16); no autocast")
    ap.add_argument("--target-len", type=int, default=128,
                    help="encoder-decoders: decoder tokens (T5; Whisper uses max_target_positions)")
    ap.add_argument("--write-config")
    a = ap.parse_args()
    cfgd = json.load(open(a.config))
    if a.layers:
        if cfgd["model_type"] == "t5":
            cfgd["num_layers"] = cfgd["num_decoder_layers"] = a.layers
        elif cfgd["model_type"] == "whisper":
            cfgd["encoder_layers"] = cfgd["decoder_layers"] = a.layers
        else:
            cfgd["n_layer" if "n_layer" in cfgd else "num_hidden_layers"] = a.layers
    if a.write_config:
        json.dump(cfgd, open(a.write_config, "w"), indent=1)
    arch = cfgd["architectures"][0]
    cfg = transformers.AutoConfig.for_model(cfgd["model_type"], **{k: v for k, v in cfgd.items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = a.attn
    tracker = LiveBytes()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    with cuda_emulation(True), FakeTensorMode():
        # built in the dtype (Module.to swaps parameters, which fake tensors refuse)
        torch.set_default_dtype(dtype)
        linspace = torch.linspace
        if cfgd["model_type"] == "convnext":
            # ConvNextEncoder reads its drop-path rates with `.tolist()`: a real (CPU) linspace
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            class Rates:  # `.split(depths)` of the real tensor, each part's `.tolist()` already taken
                def __init__(self, args, kwargs):
                    self.args, self.kwargs = args, kwargs

                def split(self, sizes):
                    with unset_fake_temporarily():
                        parts = [p.tolist() for p in linspace(*self.args, **self.kwargs).split(sizes)]
                    return [type("Part", (), {"tolist": lambda self, p=p: p})() for p in parts]

            def real_linspace(*args, **kwargs):
                return Rates(args, kwargs)
            torch.linspace = real_linspace
        model = getattr(transformers, arch)(cfg)
        torch.linspace = linspace
        torch.set_default_dtype(torch.float32)
        if cfgd["model_type"] == "t5":
            x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
            y = torch.randint(0, cfg.vocab_size, (a.batch, a.target_len))
            loss_fn = lambda: model(input_ids=x, labels=y).loss
        elif cfgd["model_type"] == "whisper":
            # log-mel frames: 2 x max_source_positions (transformers insists); --seq-len is ignored
            x = torch.randn(a.batch, cfg.num_mel_bins, 2 * cfg.max_source_positions, dtype=dtype)
            y = torch.randint(0, cfg.vocab_size, (a.batch, cfg.max_target_positions))
            loss_fn = lambda: model(input_features=x, labels=y).loss
        elif cfgd["model_type"] in ("clip", "siglip"):
            # both towers: images of `image_size`, captions of `max_position_embeddings` tokens
            v, t = cfg.vision_config, cfg.text_config
            px = torch.randn(a.batch, v.num_channels, v.image_size, v.image_size)
            ids = torch.randint(0, t.vocab_size, (a.batch, t.max_position_embeddings))
            x = px
            loss_fn = lambda: model(input_ids=ids, pixel_values=px, return_loss=True).loss
        elif cfgd["model_type"] in ("vit", "dinov2", "convnext", "swin"):
            size = cfg.image_size
            x = torch.randn(a.batch, cfg.num_channels, size, size)
            y = torch.randint(0, cfg.num_labels, (a.batch,))
            loss_fn = lambda: torch.nn.functional.cross_entropy(model(pixel_values=x).logits, y)
        elif cfgd["model_type"] == "gemma3":
            # `get_placeholder_mask` checks the image-token count against the features' size: a
            # data-dependent check fake tensors cannot answer (the counts agree by construction)
            import transformers.models.gemma3.modeling_gemma3 as g3
            g3.torch_compilable_check = lambda *args, **kwargs: None
            # one image and a prompt of --seq-len tokens, its first mm_tokens_per_image the image's
            v = cfg.vision_config
            x = torch.randn(a.batch, v.num_channels, v.image_size, v.image_size, dtype=dtype)
            ids = torch.randint(0, cfg.text_config.vocab_size, (a.batch, a.seq_len))
            ids[:, :cfg.mm_tokens_per_image] = cfg.image_token_id
            types = (ids == cfg.image_token_id).long()
            loss_fn = lambda: model(input_ids=ids, pixel_values=x, token_type_ids=types, labels=ids).loss
        elif cfgd["model_type"] in ("llava", "paligemma"):
            # as gemma3: the placeholder count check is data-dependent; one image of `image_size`
            # and a prompt of --seq-len tokens whose first ones are the image's tokens
            import importlib
            mod = importlib.import_module(f"transformers.models.{cfgd['model_type']}.modeling_{cfgd['model_type']}")
            mod.torch_compilable_check = lambda *args, **kwargs: None
            v = cfg.vision_config
            n = (v.image_size // v.patch_size) ** 2 + (cfgd["model_type"] == "llava" and cfg.vision_feature_select_strategy == "full")
            x = torch.randn(a.batch, v.num_channels, v.image_size, v.image_size, dtype=dtype)
            ids = torch.randint(0, cfg.text_config.vocab_size - 1, (a.batch, a.seq_len))
            ids[:, :n] = cfg.image_token_id
            loss_fn = lambda: model(input_ids=ids, pixel_values=x, labels=ids).loss
        elif cfgd["model_type"] == "mllama":
            # one image of `max_num_tiles` tiles (aspect-ratio id 1, every tile present) and a prompt
            # of --seq-len tokens; no cross-attention mask (every token attends to the whole image)
            v = cfg.vision_config
            x = torch.randn(a.batch, 1, v.max_num_tiles, v.num_channels, v.image_size, v.image_size, dtype=dtype)
            ids = torch.randint(0, cfg.text_config.vocab_size, (a.batch, a.seq_len))
            ar_ids = torch.ones(a.batch, 1, dtype=torch.long)
            ar_mask = torch.ones(a.batch, 1, v.max_num_tiles, dtype=torch.long)
            loss_fn = lambda: model(input_ids=ids, pixel_values=x, aspect_ratio_ids=ar_ids, aspect_ratio_mask=ar_mask, labels=ids).loss
        elif cfgd["model_type"] == "wav2vec2":
            # a 10 s clip at 16 kHz (the importer's); the CTC loss needs data-dependent target
            # lengths fake tensors cannot run: a cross-entropy over the frames' logits instead
            # (layerdrop and SpecAugment off in the traced configs: both branch on values)
            x = torch.randn(a.batch, 160_000, dtype=dtype)
            def loss_fn():
                logits = model(input_values=x).logits
                y = torch.randint(0, logits.shape[-1], logits.shape[:2])
                return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        elif cfgd["model_type"] == "deberta-v2":
            # its own loss picks the labelled rows with `nonzero()` (a data-dependent shape fake
            # tensors cannot run): the same cross-entropy on the logits
            x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
            y = torch.randint(0, cfg.num_labels, (a.batch,))
            loss_fn = lambda: torch.nn.functional.cross_entropy(model(input_ids=x).logits, y)
        elif arch.endswith("ForSequenceClassification"):
            x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
            y = torch.randint(0, cfg.num_labels, (a.batch,))
            loss_fn = lambda: model(input_ids=x, labels=y).loss
        else:
            x = torch.randint(0, cfg.vocab_size, (a.batch, a.seq_len))
            loss_fn = lambda: model(input_ids=x, labels=x).loss  # causal LM: labels are the ids
        for t in [*model.parameters(), *model.buffers(), x]:
            tracker.track(t)
        model.train()
        with tracker:
            loss = loss_fn()
            loss.backward()
    print(json.dumps({"class": arch, "batch": a.batch, "seq_len": a.seq_len, "attn": a.attn, "dtype": a.dtype, "peak_bytes": tracker.peak}))


if __name__ == "__main__":
    main()
