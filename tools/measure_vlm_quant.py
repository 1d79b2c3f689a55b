#!/usr/bin/env python3
"""Which modules of an image-text model a quantiser keeps unquantised, and the bytes it leaves:
`tools/measure_quant_layouts.py`'s bitsandbytes and compressed-tensors cases (transformers 5.24's
own module replacement, the weights quantised on CPU) on the tiny Qwen2.5-VL of
`tools/qwen_vl_configs/tiny.json` (`Qwen2_5_VLForConditionalGeneration`: the tower under
`model.visual`, the text model under `model.language_model`), with the skip lists users write:

* bitsandbytes 4-bit without `llm_int8_skip_modules` (the default skips, `get_keys_to_not_convert`:
  the untied `lm_head`), with `["model.visual", "lm_head"]`, and with `["visual"]` — which
  `should_convert_module` matches to no module of transformers 5's tree (the hub checkpoints'
  `visual.` keys are renamed `model.visual.` on load, the skip list is not): all linears, `lm_head`
  too, are quantised;
* compressed-tensors W4A16 with `ignore: ["lm_head", "re:model\\.visual\\..*"]`;
* fp8 with 128 × 128 blocks and the hub's names (`["visual.blocks.0", "model.layers.1.mlp",
  "lm_head"]`), through the quantizer itself: `FineGrainedFP8HfQuantizer._process_model_before_weight_loading`
  first renames the list by the class's checkpoint renamings (`_normalize_modules_to_not_convert`:
  `model.visual.blocks.0`, `model.language_model.layers.1.mlp`), then `replace_with_fp8_linear`.

Output: `crates/core/tests/data/vlm_quant_layouts.json` (same record layout as `quant_layouts.json`).

    /root/mvenv/bin/python tools/measure_vlm_quant.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import measure_quant_layouts as mql  # noqa: E402
import transformers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "crates", "core", "tests", "data", "vlm_quant_layouts.json")
QWEN_VL = dict(json.load(open(os.path.join(HERE, "qwen_vl_configs", "tiny.json"))), torch_dtype="bfloat16")


def base_model(cfg, dtype=torch.bfloat16, device="meta"):
    """The class of the config's `architectures` (AutoModelForCausalLM has no Qwen2.5-VL)."""
    config = transformers.AutoConfig.for_model(cfg["model_type"], **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    with torch.device(device):
        model = getattr(transformers, cfg["architectures"][0])._from_config(config, dtype=dtype)
    return model


def fp8_quantizer_case(name, cfg, q):
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer
    from transformers.utils.quantization_config import FineGrainedFP8Config

    from transformers.modeling_utils import local_torch_dtype

    model = base_model(cfg)
    qc = FineGrainedFP8Config(**{k: v for k, v in q.items() if k != "quant_method"})
    quantizer = FineGrainedFP8HfQuantizer(qc, pre_quantized=True)
    # `from_pretrained` runs `preprocess_model` inside the model's init context, the checkpoint
    # dtype the default (`local_torch_dtype`): `FP8Linear`'s `torch.empty(out_features)` bias is bf16
    with local_torch_dtype(torch.bfloat16, cfg["architectures"][0]):
        quantizer._process_model_before_weight_loading(model)
    rec = mql.record(name, cfg, q, model, "FineGrainedFP8HfQuantizer._process_model_before_weight_loading on meta")
    rec["modules_to_not_convert_as_loaded"] = quantizer.quantization_config.modules_to_not_convert
    return rec


def main():
    mql.base_model = base_model
    nf4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": False, "bnb_4bit_compute_dtype": "bfloat16"}
    w4a16 = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head", "re:model\\.visual\\..*"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32, "dynamic": False, "observer": "minmax"}, "input_activations": None, "output_activations": None}},
    }
    cases = [
        mql.bnb_case("bnb-nf4-qwen-vl", QWEN_VL, nf4),
        mql.bnb_case("bnb-nf4-qwen-vl-skip-visual", QWEN_VL, dict(nf4, llm_int8_skip_modules=["model.visual", "lm_head"])),
        mql.bnb_case("bnb-nf4-qwen-vl-bare-visual", QWEN_VL, dict(nf4, llm_int8_skip_modules=["visual"])),
        mql.ct_case("ct-w4a16-qwen-vl-ignore-visual", QWEN_VL, w4a16),
        fp8_quantizer_case("fp8-block-qwen-vl-hub-names", QWEN_VL, {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128],
                                                                   "modules_to_not_convert": ["visual.blocks.0", "model.layers.1.mlp", "lm_head"]}),
    ]
    for c in cases:
        c.pop("total_bytes_after_forward", None)
        c.pop("forward_error", None)
    json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "cases": cases}, open(OUT, "w"), indent=1, sort_keys=True)
    for c in cases:
        print(c["case"], c["total_bytes"])


if __name__ == "__main__":
    main()
