#!/usr/bin/env python3
"""Peak live bytes of real QLoRA training steps on the CPU (bitsandbytes >= 0.49 runs 4- and 8-bit
layers, their backward and 8-bit AdamW there), as users run them:

    model = AutoModelForCausalLM.from_pretrained(dir, quantization_config=BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=bf16,
        bnb_4bit_use_double_quant=dq), dtype=bf16)
    model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=ckpt,
                                            gradient_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=..., task_type="CAUSAL_LM"))

The model is a small Llama or Qwen2 built from its config with random weights and saved to a
temporary folder first (nothing is downloaded). The step is `shared/reference/measure.py`'s
(zero_grad(set_to_none) -> `model(input_ids, labels=input_ids).loss` -> backward -> step), the
third iteration is measured with `torch.profiler(profile_memory=True)`: live bytes are the running
sum of the allocator's events (`shared/reference/llm/measure_llm.py`'s `_profile_events`).

    python tools/measure_qlora_cpu.py --grid > crates/core/tests/data/qlora_cpu.jsonl

Needs torch, transformers, peft and bitsandbytes from PyPI and `shared/reference/` beside the
checkout; about a minute per record on one core.
"""
import argparse
import contextlib
import gc
import json
import os
import sys
import tempfile
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference", "llm"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "reference"))
import measure_llm as L  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore")

SHAPES = {
    "llama-h512-l2": ("llama", dict(hidden_size=512, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                                   intermediate_size=1408, vocab_size=32000, tie_word_embeddings=False)),
    "qwen2-h512-l2": ("qwen2", dict(hidden_size=512, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                                   intermediate_size=1536, vocab_size=32000, tie_word_embeddings=False)),
}


def build(cfg, folder):
    import transformers
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    kind, dims = SHAPES[cfg["model"]]
    conf = transformers.AutoConfig.for_model(kind, **dims)
    path = os.path.join(folder, cfg["model"])
    if not os.path.exists(path):
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(conf, dtype=torch.bfloat16).save_pretrained(path)
    q = cfg["quant"]
    if q == "int8":
        bnb = BitsAndBytesConfig(load_in_8bit=True)
    else:
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=q, bnb_4bit_compute_dtype=torch.bfloat16,
                                 bnb_4bit_use_double_quant=cfg["double_quant"])
    model = AutoModelForCausalLM.from_pretrained(path, quantization_config=bnb, dtype=torch.bfloat16, device_map="cpu",
                                                 attn_implementation="sdpa")
    model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg["checkpointing"],
                                            gradient_checkpointing_kwargs={"use_reentrant": False})
    lcfg = LoraConfig(r=cfg["r"], lora_alpha=2 * cfg["r"], target_modules=cfg["targets"], lora_dropout=0.0, bias="none",
                      task_type="CAUSAL_LM")
    model = get_peft_model(model, lcfg)
    return model


def optimizer(cfg, model):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg["optimizer"] == "adam8bit":
        import bitsandbytes as bnb
        return bnb.optim.AdamW8bit(params, lr=1e-4)
    return torch.optim.AdamW(params, lr=1e-4, foreach=False)


def measure(cfg, folder):
    from torch.profiler import ProfilerActivity, profile, record_function
    torch.manual_seed(0)
    b, s = cfg["batch"], cfg["seq_len"]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = build(cfg, folder)
        model.train()
        opt = optimizer(cfg, model)
        for it in (1, 2, 3):
            ids = torch.randint(0, 32000, (b, s))
            if it == 3:
                gc.collect()
            phase = (lambda n: record_function(f"phase::{n}")) if it == 3 else (lambda n: contextlib.nullcontext())
            with record_function(f"iter{it}"):
                with phase("zero_grad"):
                    opt.zero_grad(set_to_none=True)
                with phase("forward"):
                    loss = model(input_ids=ids, labels=ids).loss
                with phase("backward"):
                    loss.backward()
                with phase("optimizer"):
                    opt.step()
                del loss
            del ids
    ev = L._profile_events(prof)
    params = list(model.parameters())
    rec = dict(cfg)
    rec.update(ev)
    rec.update({
        "param_count_stored": sum(p.numel() for p in params),
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "trainable_param_count": sum(p.numel() for p in params if p.requires_grad),
        "method": "profiler_cpu",
        "torch_version": torch.__version__,
        "versions": {m: __import__(m).__version__ for m in ("transformers", "peft", "bitsandbytes")},
    })
    del model, opt
    gc.collect()
    return rec


def grid():
    out = []
    base = {"quant": "nf4", "double_quant": False, "r": 16, "optimizer": "adamw"}
    for model in SHAPES:
        for targets in (["q_proj", "v_proj"], "all-linear"):
            for ckpt in (False, True):
                for b, s in ((1, 256), (2, 512)):
                    out.append(dict(base, model=model, targets=targets, checkpointing=ckpt, batch=b, seq_len=s))
    out.append(dict(base, model="llama-h512-l2", targets="all-linear", checkpointing=True, batch=1, seq_len=256, optimizer="adam8bit"))
    out.append(dict(base, model="llama-h512-l2", targets="all-linear", checkpointing=False, batch=1, seq_len=256, double_quant=True))
    out.append(dict(base, model="qwen2-h512-l2", targets=["q_proj", "v_proj"], checkpointing=False, batch=2, seq_len=512, quant="fp4"))
    out.append(dict(base, model="llama-h512-l2", targets=["q_proj", "v_proj"], checkpointing=False, batch=1, seq_len=256, quant="int8"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--only", type=int)
    a = ap.parse_args()
    cfgs = grid() if a.only is None else [grid()[a.only]]
    with tempfile.TemporaryDirectory() as folder:
        for cfg in cfgs:
            try:
                print(json.dumps(measure(cfg, folder)), flush=True)
            except Exception as e:  # a setup bitsandbytes refuses on this CPU: say so, go on
                print(json.dumps(dict(cfg, error=f"{type(e).__name__}: {e}")), flush=True)


if __name__ == "__main__":
    main()
