#!/usr/bin/env python3
"""Which parameters of a MoE model bitsandbytes quantises under QLoRA loading, what they store, and
whether peft's default LoraConfig finds targets (issue 26's "found, not fixed": DeepSeek-V3 QLoRA
reported 0 trainable parameters). Tiny random Llama, Mixtral and DeepSeek-V3 configs, saved and
reloaded with BitsAndBytesConfig(load_in_4bit, nf4, bf16 compute) in bf16 on the CPU, then
`peft.prepare_model_for_kbit_training` (what QLoRA scripts call). Output, tab-separated:

    MODEL  config  <the saved config.json on one line>
    MODEL  param  NAME  CLASS  DTYPE_LOADED  DTYPE_PREPARED  SHAPE  STORED_BYTES
    MODEL  lora  TARGETS  RESULT   (ok TARGET_MODULES ADAPTED_MODULES TRAINABLE_NUMEL | the error's class)

STORED_BYTES of a `Params4bit`: its packed uint8 data plus its `quant_state`'s absmax and code
tensors (what the weight keeps resident); of any other parameter `numel * element_size` after
prepare. Read by `crates/core/tests/qlora_moe.rs`.

    /root/mvenv/bin/python tools/measure_moe_bnb.py > crates/core/tests/data/moe_bnb_quantised.txt
"""
import json
import os
import tempfile
import warnings

import torch
import transformers
import bitsandbytes
import peft
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
torch.manual_seed(0)
print(f"# transformers {transformers.__version__}, bitsandbytes {bitsandbytes.__version__}, peft {peft.__version__}, torch {torch.__version__}")
MODELS = {
    # the dense contrast: peft's default LoraConfig finds q_proj, v_proj here
    "llama": (LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256)),
    "mixtral": (MixtralForCausalLM, MixtralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256, num_local_experts=4, num_experts_per_tok=2)),
    "deepseek_v3": (DeepseekV3ForCausalLM, DeepseekV3Config(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, vocab_size=256, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)),
}


ATTENTION = "q_proj,k_proj,v_proj,o_proj,q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj"


def stored_bytes(p):
    n = p.numel() * p.element_size()
    qs = getattr(p, "quant_state", None)
    if qs is not None:
        n += qs.absmax.numel() * qs.absmax.element_size() + qs.code.numel() * qs.code.element_size()
        if qs.nested:
            n += qs.offset.numel() * qs.offset.element_size() + qs.state2.absmax.numel() * 4 + qs.state2.code.numel() * 4
    return n


def load(d):
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    return AutoModelForCausalLM.from_pretrained(d, quantization_config=bnb, device_map="cpu", dtype=torch.bfloat16)


for name, (cls, cfg) in MODELS.items():
    with tempfile.TemporaryDirectory() as d:
        cls(cfg).to(torch.bfloat16).save_pretrained(d)
        with open(os.path.join(d, "config.json")) as f:
            print(f"{name}\tconfig\t{json.dumps(json.load(f), separators=(',', ':'))}")
        q = load(d)
        loaded = {n: p.dtype for n, p in q.named_parameters()}
        q = peft.prepare_model_for_kbit_training(q, use_gradient_checkpointing=False)
        for n, p in q.named_parameters():
            shape = "x".join(str(s) for s in (p.quant_state.shape if hasattr(p, "quant_state") and p.quant_state is not None else p.shape))
            print(f"{name}\tparam\t{n}\t{type(p).__name__}\t{loaded[n]}\t{p.dtype}\t{shape}\t{stored_bytes(p)}")
        # peft's default, all-linear, and the attention projections the core proposes for a MoE
        # model (`finetune::names::ATTENTION_TARGETS`; the names a model lacks match nothing)
        for targets in (None, "all-linear", ATTENTION):
            try:
                kw = {} if targets is None else {"target_modules": targets.split(",") if "," in targets else targets}
                m = peft.get_peft_model(load(d), peft.LoraConfig(r=16, **kw))
                adapted = sorted({k.rsplit(".", 1)[-1] for k, mod in m.named_modules() if hasattr(mod, "lora_A")})
                trainable = sum(p.numel() for p in m.parameters() if p.requires_grad)
                found = sorted(m.peft_config["default"].target_modules)
                print(f"{name}\tlora\t{targets or 'default'}\tok {','.join(found)} {','.join(adapted)} {trainable}")
            except Exception as e:  # the answer we record, whatever it is
                print(f"{name}\tlora\t{targets or 'default'}\t{type(e).__name__}")
