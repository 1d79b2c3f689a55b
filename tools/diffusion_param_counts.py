#!/usr/bin/env python3
"""Exact parameter counts of the diffusion pipelines' components, built from their config.json on
torch.device("meta") (no weights downloaded): diffusers models by `_class_name`
(`Model.from_config`), transformers text encoders by `architectures[0]` (`Class(Config(**cfg))`).

    /root/mvenv/bin/python tools/diffusion_param_counts.py crates/core/src/diffusion/configs \
        > crates/core/tests/data/diffusion_params.json

Walks every `<pipeline>/<component>/config.json` under the folder given (and any extra config.json
files named after it); prints {"<pipeline>/<component>": params, ...}. Also gives per-module leaf
counts' maximum (the largest leaf module's weights: what sequential offload keeps on the GPU).
Run with diffusers 0.42.1, transformers 5.24, torch 2.15.
"""
import json, os, sys
import torch

def build(cfg):
    cfg = dict(cfg)
    if "_class_name" in cfg:
        import diffusers
        cls = getattr(diffusers, cfg.pop("_class_name"))
        return cls.from_config(cfg)
    import transformers
    arch = cfg["architectures"][0]
    cls = getattr(transformers, arch)
    conf_cls = cls.config_class
    if arch.startswith("CLIPText"):
        conf_cls = transformers.CLIPTextConfig
    return cls(conf_cls(**cfg))

def leaf_max(model):
    best = 0
    for m in model.modules():
        own = sum(p.numel() for p in m.parameters(recurse=False))
        if next(m.children(), None) is None or own:
            best = max(best, own)
    return best

def main():
    torch.set_num_threads(1)
    root = sys.argv[1]
    out = {}
    files = []
    for dirpath, _, names in os.walk(root):
        if "config.json" in names:
            files.append(os.path.join(dirpath, "config.json"))
    files += sys.argv[2:]
    for f in sorted(files):
        key = os.path.relpath(os.path.dirname(f), root) if f.startswith(root) else f
        cfg = json.load(open(f))
        with torch.device("meta"):
            m = build(cfg)
        out[key] = {"params": sum(p.numel() for p in m.parameters()),
                    "buffers": sum(b.numel() for b in m.buffers()),
                    "largest_leaf_params": leaf_max(m)}
        print(key, out[key], file=sys.stderr, flush=True)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()

if __name__ == "__main__":
    main()
