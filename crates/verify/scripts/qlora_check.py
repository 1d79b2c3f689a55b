#!/usr/bin/env python3
"""QLoRA / quantised-base training steps on a CUDA GPU, measured the way
shared/reference/llm/measure_llm.py measures (3 iterations, peak of the 3rd from
torch.cuda.max_memory_allocated after reset_peak_memory_stats), next to vramcalc's estimate.

vramcalc's bitsandbytes figures are modelled from the bitsandbytes source
(crates/core/src/layer/bnb.rs); this script is what turns them into measured ones.
Needs torch (CUDA), transformers, peft and bitsandbytes; the vramcalc binary as $VRAMCALC.

    python3 crates/verify/scripts/qlora_check.py --out target/qlora-check.jsonl

The model is `LlamaForCausalLM(LlamaConfig(hidden 1024, 4 layers, 16 heads, 4 KV heads,
intermediate 2816, vocab 32000))` (shared/reference/llm's llama-h1024-l4), saved with random
weights and reloaded with `from_pretrained(quantization_config=BitsAndBytesConfig(...),
torch_dtype=bf16)`, the path users take. `prepare_model_for_kbit_training` is NOT called (it
upcasts the unquantised parameters to fp32); LoRA via `get_peft_model` with peft's defaults.
"""
import argparse, json, os, subprocess, sys, tempfile

CONFIGS = [
    # (base format, double quant, r, targets, dropout, checkpointing, batch, seq, optimizer)
    ("nf4", False, 16, "all-linear", 0.0, False, 2, 512, "adamw"),
    ("nf4", True, 16, "all-linear", 0.0, False, 2, 512, "adamw"),
    ("nf4", True, 16, "all-linear", 0.05, True, 4, 1024, "paged-adamw8bit"),
    ("fp4", False, 8, "q_proj,v_proj", 0.0, False, 2, 512, "adamw"),
    ("int8", False, 16, "all-linear", 0.0, False, 2, 512, "adamw"),
    ("bf16", False, 16, "all-linear", 0.0, False, 2, 512, "adamw"),
]
HF = dict(hidden_size=1024, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
          intermediate_size=2816, vocab_size=32000)


def measure(base, dq, r, targets, dropout, ckpt, batch, seq, opt, path):
    import torch
    from transformers import BitsAndBytesConfig, LlamaForCausalLM
    from peft import LoraConfig, get_peft_model
    q = None
    if base in ("nf4", "fp4"):
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=base, bnb_4bit_use_double_quant=dq,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    elif base == "int8":
        q = BitsAndBytesConfig(load_in_8bit=True)
    model = LlamaForCausalLM.from_pretrained(path, quantization_config=q, torch_dtype=torch.bfloat16,
                                             device_map={"": 0}, attn_implementation="sdpa")
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    tg = "all-linear" if targets == "all-linear" else targets.split(",")
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=tg, lora_dropout=dropout,
                                             bias="none", task_type="CAUSAL_LM"))
    params = [p for p in model.parameters() if p.requires_grad]
    if opt == "paged-adamw8bit":
        import bitsandbytes as bnb
        optim = bnb.optim.PagedAdamW8bit(params)
    else:
        optim = torch.optim.AdamW(params)
    ids = torch.randint(0, HF["vocab_size"], (batch, seq), device="cuda")
    for it in range(3):
        if it == 2:
            torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        optim.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        optim.step()
    torch.cuda.synchronize()
    trainable = sum(p.numel() for p in params)
    peak = torch.cuda.max_memory_allocated()
    del model, optim
    torch.cuda.empty_cache()
    return peak, trainable


def estimate(base, dq, r, targets, dropout, ckpt, batch, seq, opt, cfg_path):
    exe = os.environ.get("VRAMCALC", "target/release/vramcalc")
    args = [exe, "estimate", "--hf-config", cfg_path, "--batch", str(batch), "--seq-len", str(seq),
            "--precision", "bf16", "--optimizer", "adamw" if opt == "adamw" else opt,
            "--finetune", "lora" if base == "bf16" else "qlora", "--lora-r", str(r), "--lora-alpha", str(2 * r),
            "--lora-targets", targets, "--lora-dropout", str(dropout), "--base-format", base, "--json"]
    if dq:
        args.append("--double-quant")
    if ckpt:
        args.append("--checkpointing")
    return json.loads(subprocess.check_output(args))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="target/qlora-check.jsonl")
    a = ap.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    tmp = tempfile.mkdtemp()
    cfg = LlamaConfig(**HF, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(tmp)
    cfg_path = os.path.join(tmp, "config.json")
    rows = []
    with open(a.out, "w") as out:
        for c in CONFIGS:
            peak, trainable = measure(*c, tmp)
            est = estimate(*c, cfg_path)
            err = (est["peak_bytes"] - peak) / peak * 100
            rec = dict(config=dict(zip(["base", "double_quant", "r", "targets", "dropout", "checkpointing", "batch",
                                        "seq", "optimizer"], c)), measured_peak_bytes=peak, trainable=trainable,
                       estimated_peak_bytes=est["peak_bytes"], estimated_trainable=est["trainable_params"],
                       difference_percent=err, gpu=torch.cuda.get_device_name(0))
            out.write(json.dumps(rec) + "\n")
            rows.append(f"| {' '.join(map(str, c))} | {peak / 2**20:,.1f} | {est['peak_bytes'] / 2**20:,.1f} | {err:+.1f} % "
                        f"| {trainable:,} / {est['trainable_params']:,} |")
    print("| base dq r targets dropout ckpt batch seq optimizer | measured MiB | estimated MiB | diff | trainable measured / estimated |")
    print("|---|---:|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
