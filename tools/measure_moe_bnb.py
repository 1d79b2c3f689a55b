#!/usr/bin/env python3
"""Which parameters of a MoE model bitsandbytes quantises under QLoRA loading, and whether peft's
default LoraConfig finds targets (issue 26's "found, not fixed": DeepSeek-V3 QLoRA reported 0
trainable parameters). Tiny random Mixtral and DeepSeek-V3 configs, saved and reloaded with
BitsAndBytesConfig(load_in_4bit, nf4) on the CPU. Output: crates/core/tests/data/moe_bnb_quantised.txt

    /root/mvenv/bin/python tools/measure_moe_bnb.py > crates/core/tests/data/moe_bnb_quantised.txt
"""
import tempfile
import warnings

import torch
import transformers
import bitsandbytes
import peft
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, DeepseekV3Config, DeepseekV3ForCausalLM, LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
print(f"# transformers {transformers.__version__}, bitsandbytes {bitsandbytes.__version__}, peft {peft.__version__}, torch {torch.__version__}")
MODELS = {
    # the dense contrast: peft's default LoraConfig finds q_proj, v_proj here
    "llama": (LlamaForCausalLM, LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256)),
    "mixtral": (MixtralForCausalLM, MixtralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256, num_local_experts=4, num_experts_per_tok=2)),
    "deepseek_v3": (DeepseekV3ForCausalLM, DeepseekV3Config(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, vocab_size=256, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)),
}
for name, (cls, cfg) in MODELS.items():
    with tempfile.TemporaryDirectory() as d:
        cls(cfg).save_pretrained(d)
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
        q = AutoModelForCausalLM.from_pretrained(d, quantization_config=bnb, device_map="cpu")
    for n, p in q.named_parameters():
        if "layers.1." in n:
            print(f"{name}\t{n}\t{type(p).__name__}\t{p.dtype}")
    try:
        targets = peft.get_peft_model(q, peft.LoraConfig(r=16)).peft_config["default"].target_modules
        print(f"{name}\tpeft default LoraConfig\tok {sorted(targets)}")
    except Exception as e:  # the answer we record, whatever it is
        print(f"{name}\tpeft default LoraConfig\t{type(e).__name__}")
