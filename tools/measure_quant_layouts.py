#!/usr/bin/env python3
"""The bytes each tensor has once transformers has put a quantised checkpoint's layout in place.

For every `quantization_config` below this builds a tiny model of the class a user loads
(`LlamaForCausalLM`, `Qwen3MoeForCausalLM` with fused experts) and runs the quantizer's own module
replacement, the step `from_pretrained` runs before it copies the checkpoint tensors in:

* fp8 with `weight_block_size`: `integrations/finegrained_fp8.py` `replace_with_fp8_linear`
  (`FP8Linear`, `FP8Experts` for `.experts`), skips from `get_modules_to_not_convert`;
* compressed-tensors: `apply_quantization_config(model, cfg, run_compressed=False)` then
  `ModelCompressor.compress_model`, as `CompressedTensorsHfQuantizer._process_model_before_weight_loading`
  does, and again after one forward (compressed-tensors decompresses on the first forward);
* bitsandbytes 4-bit and 8-bit: `replace_with_bnb_linear`, then the weights quantised on CPU
  (bitsandbytes 0.50 has a CPU backend), the quant_state's tensors counted;
* a saved bitsandbytes 4-bit checkpoint loaded back (`QuantState.from_dict`);
* mxfp4: `Mxfp4GptOssExperts(config)` as `replace_with_mxfp4_linear` builds it (the function itself
  fetches a hub kernel first, which this machine cannot).

GPTQ and AWQ need gptqmodel / the AWQ kernels (CUDA builds), not installed: those layouts are read
from source in `crates/core/src/formats/mod.rs`.

Every tensor that is a parameter or buffer is counted (`numel * element_size`, meta tensors too),
shared storages once. Output: `crates/core/tests/data/quant_layouts.json`.

    /root/mvenv/bin/python tools/measure_quant_layouts.py
"""
import copy
import json
import os
import sys

import torch

torch.set_num_threads(1)
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "core", "tests", "data", "quant_layouts.json")

LLAMA = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 640,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 512, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
QWEN3_MOE = {
    "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "intermediate_size": 640,
    "moe_intermediate_size": 192, "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
    "max_position_embeddings": 512, "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "torch_dtype": "bfloat16",
}


def tensors(model):
    seen, out = set(), {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if t is None:
            continue
        key = (t.device.type, t.data_ptr()) if t.device.type != "meta" else ("meta", name)
        if key in seen:
            continue
        seen.add(key)
        out[name] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "bytes": t.numel() * t.element_size()}
    return out


def bnb_state_tensors(model):
    """bitsandbytes keeps absmax, code and the nested state on `weight.quant_state`, not as parameters."""
    extra = {}
    for name, m in model.named_modules():
        qs = getattr(getattr(m, "weight", None), "quant_state", None)
        if qs is None:
            continue
        parts = {"absmax": qs.absmax, "code": qs.code}
        if qs.nested:
            parts.update({"offset": qs.offset, "nested_absmax": qs.state2.absmax, "nested_code": qs.state2.code})
        for k, t in parts.items():
            extra[f"{name}.weight.quant_state.{k}"] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "bytes": t.numel() * t.element_size()}
    return extra


def base_model(cfg, dtype=torch.bfloat16, device="meta"):
    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "architectures"})
    config.architectures = cfg["architectures"]
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model


def record(name, cfg, q, model, note, after_forward=None):
    t = tensors(model)
    rec = {"case": name, "config": cfg, "quantization_config": q, "note": note, "total_bytes": sum(v["bytes"] for v in t.values()), "tensors": t}
    if after_forward is not None:
        rec["total_bytes_after_forward"] = after_forward
    return rec


def fp8_case(name, cfg, q):
    from transformers.integrations.finegrained_fp8 import replace_with_fp8_linear
    from transformers.quantizers.base import get_keys_to_not_convert
    from transformers.utils.quantization_config import FineGrainedFP8Config

    model = base_model(cfg)
    qc = FineGrainedFP8Config(**{k: v for k, v in q.items() if k != "quant_method"})
    skips = q.get("modules_to_not_convert")
    skips = get_keys_to_not_convert(model) if skips is None else skips  # HfQuantizer.get_modules_to_not_convert
    replace_with_fp8_linear(model, modules_to_not_convert=skips, quantization_config=qc, pre_quantized=True)
    # the checkpoint tensors load into these parameters as they are (float ones in the model dtype)
    return record(name, cfg, q, model, "finegrained_fp8.replace_with_fp8_linear on meta")


def ct_case(name, cfg, q):
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config

    model = base_model(cfg, device="cpu")
    from transformers.utils.quantization_config import CompressedTensorsConfig

    qc = CompressedTensorsConfig.from_dict(q)
    qc.post_init()
    comp = ModelCompressor.from_compression_config(qc)  # CompressedTensorsHfQuantizer.__init__
    apply_quantization_config(model, copy.deepcopy(comp.quantization_config), run_compressed=False)
    comp.compress_model(model=model)
    rec = record(name, cfg, q, model, "compressed_tensors apply_quantization_config + compress_model (as CompressedTensorsHfQuantizer)")
    after = None
    try:
        with torch.no_grad():
            model(torch.zeros(1, 4, dtype=torch.long))
        after = sum(v["bytes"] for v in tensors(model).values())
    except Exception as e:  # a kernel the CPU lacks (fp4/fp8 matmuls): say so
        rec["forward_error"] = f"{type(e).__name__}: {e}"[:300]
    if after is not None:
        rec["total_bytes_after_forward"] = after
    return rec


def bnb_case(name, cfg, q):
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    from transformers.quantizers.base import get_keys_to_not_convert
    from transformers.utils.quantization_config import BitsAndBytesConfig

    dense = base_model(cfg, device="cpu")
    model = copy.deepcopy(dense)
    qc = BitsAndBytesConfig(**{k: v for k, v in q.items() if k != "quant_method"})
    skips = q.get("llm_int8_skip_modules")
    skips = get_keys_to_not_convert(model) if skips is None else skips
    replace_with_bnb_linear(model, modules_to_not_convert=skips, quantization_config=qc)
    # materialise: copy the dense weights in, then quantise by moving to the device (CPU backend)
    import bitsandbytes as bnb

    sd = dense.state_dict()
    for mname, m in model.named_modules():
        if isinstance(m, bnb.nn.Linear4bit):
            w = sd[f"{mname}.weight"]
            m.weight = bnb.nn.Params4bit(w, requires_grad=False, compress_statistics=qc.bnb_4bit_use_double_quant, quant_type=qc.bnb_4bit_quant_type, quant_storage=torch.uint8, blocksize=64)
            m.weight = m.weight.to("cpu") if m.weight.quant_state is not None else m.weight._quantize("cpu")
        elif isinstance(m, bnb.nn.Linear8bitLt):
            w = sd[f"{mname}.weight"]
            m.weight = bnb.nn.Int8Params(w, requires_grad=False, has_fp16_weights=False)
            m.weight = m.weight._quantize("cpu")
        if hasattr(m, "bias") and m.bias is not None and f"{mname}.bias" in sd and m.bias.device.type == "meta":
            m.bias = torch.nn.Parameter(sd[f"{mname}.bias"], requires_grad=False)
    for pname, p in list(model.named_parameters()):
        if p.device.type == "meta":
            raise RuntimeError(f"{pname} still on meta")
    t = tensors(model)
    t.update(bnb_state_tensors(model))
    scb = {f"{n}.weight.SCB": m.weight.SCB for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear8bitLt) and getattr(m.weight, "SCB", None) is not None}
    for k, s in scb.items():
        t[k] = {"dtype": str(s.dtype).replace("torch.", ""), "shape": list(s.shape), "bytes": s.numel() * s.element_size()}
    return {"case": name, "config": cfg, "quantization_config": q, "note": f"replace_with_bnb_linear + Params4bit/Int8Params quantised on CPU (bitsandbytes {bnb.__version__})", "total_bytes": sum(v["bytes"] for v in t.values()), "tensors": t}


def bnb_prequantised_case(name, cfg, q):
    """A checkpoint saved quantised (`save_pretrained` of a model loaded with the config), loaded
    back by `from_pretrained` as a user loads a published bitsandbytes checkpoint."""
    import tempfile

    from transformers.utils.quantization_config import BitsAndBytesConfig

    model = base_model(cfg, device="cpu")
    qc = BitsAndBytesConfig(**{k: v for k, v in q.items() if k != "quant_method"})
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d + "/dense")
        quantised = AutoModelForCausalLM.from_pretrained(d + "/dense", quantization_config=qc, device_map="cpu", dtype=torch.bfloat16)
        quantised.save_pretrained(d + "/q")
        loaded = AutoModelForCausalLM.from_pretrained(d + "/q", device_map="cpu")
    t = tensors(loaded)
    t.update(bnb_state_tensors(loaded))
    return {"case": name, "config": cfg, "quantization_config": q, "note": "from_pretrained of a saved bitsandbytes 4-bit checkpoint (QuantState.from_dict)", "total_bytes": sum(v["bytes"] for v in t.values()), "tensors": t}


def mxfp4_case(name):
    from transformers import GptOssConfig
    from transformers.integrations.mxfp4 import Mxfp4GptOssExperts

    cfg = {"hidden_size": 256, "intermediate_size": 256, "num_local_experts": 4}
    config = GptOssConfig(hidden_size=256, intermediate_size=256, num_local_experts=4, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=1000)
    with torch.device("meta"):
        experts = Mxfp4GptOssExperts(config)
    rec = record(name, cfg, {"quant_method": "mxfp4"}, experts, "integrations/mxfp4.py Mxfp4GptOssExperts (blocks as parameters; the scales go to the triton PrecisionConfig, uint8 [E, out, in/32])")
    return rec


def main():
    cases = []
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
    cases.append(fp8_case("fp8-block-llama", LLAMA, fp8))
    cases.append(fp8_case("fp8-block-qwen3moe", QWEN3_MOE, dict(fp8, modules_to_not_convert=["lm_head", "model.layers.0.mlp.gate", "model.layers.1.mlp.gate"])))
    w4a16 = lambda sym, strategy="group", gs=128: {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": sym, "strategy": strategy, "group_size": gs if strategy == "group" else None, "dynamic": False, "observer": "minmax"}, "input_activations": None, "output_activations": None}},
    }
    cases.append(ct_case("ct-w4a16-llama", LLAMA, w4a16(True)))
    cases.append(ct_case("ct-w4a16-asym-llama", LLAMA, w4a16(False)))
    cases.append(ct_case("ct-w4a16-moe", QWEN3_MOE, dict(w4a16(True), ignore=["lm_head", "re:.*mlp.gate$"])))
    w8a8 = {
        "quant_method": "compressed-tensors", "format": "int-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False, "observer": "minmax"},
                                      "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}}},
    }
    cases.append(ct_case("ct-w8a8-int8-llama", LLAMA, w8a8))
    # skip lists that keep modules the role-based formats would quantise (issue 25): a regex
    # prefix, an exact name, a transformers key that matches by suffix and one that matches nothing
    cases.append(ct_case("ct-w4a16-llama-ignore", LLAMA, dict(w4a16(True), ignore=["lm_head", "re:model\\.layers\\.0\\..*", "model.layers.1.mlp.up_proj"])))
    cases.append(ct_case("ct-w4a16-moe-ignore-attn", QWEN3_MOE, dict(w4a16(True), ignore=["lm_head", "re:.*mlp.gate$", "re:.*self_attn.*"])))
    cases.append(fp8_case("fp8-block-llama-skip", LLAMA, dict(fp8, modules_to_not_convert=["lm_head", "model.layers.0.self_attn", "down_proj"])))
    # a list without `lm_head`: the loader quantises the head too (no default skips then)
    cases.append(ct_case("ct-w4a16-llama-head", LLAMA, dict(w4a16(True), ignore=["re:.*mlp.down_proj$"])))
    cases.append(fp8_case("fp8-block-llama-head", LLAMA, dict(fp8, modules_to_not_convert=["model.layers.0.self_attn"])))
    cases.append(fp8_case("fp8-block-qwen3moe-skip-experts", QWEN3_MOE, dict(fp8, modules_to_not_convert=["lm_head", "mlp.gate", "model.layers.1.mlp.experts"])))
    fp8dyn = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel", "dynamic": False, "observer": "minmax"},
                                      "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}}},
    }
    cases.append(ct_case("ct-fp8-dynamic-llama", LLAMA, fp8dyn))
    nvfp4 = {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16, "dynamic": False, "observer": "minmax"},
                                      "input_activations": {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16, "dynamic": "local", "observer": "minmax"}}},
    }
    cases.append(ct_case("ct-nvfp4-llama", LLAMA, nvfp4))
    for nm, q in [
        ("bnb-nf4-llama", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16"}),
        ("bnb-nf4-dq-llama", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}),
        ("bnb-int8-llama", {"quant_method": "bitsandbytes", "load_in_8bit": True}),
        ("bnb-nf4-llama-skip", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16", "llm_int8_skip_modules": ["lm_head", "model.layers.1.mlp", "mlp"]}),
        ("bnb-nf4-llama-head", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16", "llm_int8_skip_modules": ["model.layers.1.mlp"]}),
        ("bnb-int8-llama-head", {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["model.layers.0.self_attn"]}),
        ("bnb-nf4-moe", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16"}),
    ]:
        try:
            cases.append(bnb_case(nm, QWEN3_MOE if nm.endswith("moe") else LLAMA, q))
        except Exception as e:
            print(f"{nm}: {type(e).__name__}: {e}", file=sys.stderr)
    try:
        cases.append(bnb_prequantised_case("bnb-nf4-dq-prequantised-llama", LLAMA, {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}))
    except Exception as e:
        print(f"bnb-nf4-dq-prequantised-llama: {type(e).__name__}: {e}", file=sys.stderr)
    cases.append(mxfp4_case("mxfp4-experts"))
    meta = {"transformers": transformers.__version__, "torch": torch.__version__}
    try:
        import compressed_tensors

        meta["compressed_tensors"] = compressed_tensors.__version__
    except Exception:
        pass
    with open(OUT, "w") as f:
        json.dump({"versions": meta, "cases": cases}, f, indent=1, sort_keys=True)
    for c in cases:
        print(c["case"], c["total_bytes"], c.get("total_bytes_after_forward", ""), c.get("forward_error", ""))


if __name__ == "__main__":
    main()
