"""peft LoRA on BertForSequenceClassification (BERT-base, seq 128), measured with
shared/reference/llm/measure_llm.py's method (MemTracker under FakeTensorMode, 3 iterations, the
3rd measured) and record schema, for vramcalc's BERT module names (`query`, `value`, `dense`).

    python crates/core/tests/data/measure_bert_lora.py /work/shared/reference/llm \
        > crates/core/tests/data/finetune_bert_lora.jsonl

LoraConfig has no task_type, so the classifier stays frozen (with task_type=SEQ_CLS peft would
add a trainable copy of it, `modules_to_save`); only the adapters train.
"""
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/..")
import measure_llm as L  # noqa: E402
import measure as M  # noqa: E402

CONFIGS = [
    dict(batch=8, attn_impl="eager", targets=["query", "value"], r=8, dropout=0.0),
    dict(batch=8, attn_impl="sdpa", targets=["query", "value"], r=16, dropout=0.1),
    dict(batch=4, attn_impl="eager", targets=["query", "key", "value", "dense"], r=8, dropout=0.05),
]


def builder(cfg):
    from peft import LoraConfig, get_peft_model
    bundle = M.build_bundle({"model": "bert-base", "batch": cfg["batch"], "seq_len": 128,
                             "attn_impl": cfg["attn_impl"], "checkpointing": False}, "cpu")
    ft = cfg["finetune"]
    bundle.model = get_peft_model(bundle.model, LoraConfig(r=ft["r"], lora_alpha=2 * ft["r"], target_modules=ft["targets"],
                                                           lora_dropout=ft["dropout"], bias="none"))
    return bundle


for c in CONFIGS:
    cfg = L.normalize_cfg({"family": "frozen", "model": "bert-base", "batch": c["batch"], "seq_len": 128,
                           "attn_impl": c["attn_impl"], "finetune": {"method": "frozen", "frozen": "none"}})
    cfg["finetune"] = {"method": "lora", "r": c["r"], "alpha": 2 * c["r"], "targets": c["targets"], "dropout": c["dropout"]}
    res = L.measure_train_fake(cfg, builder)
    res.pop("bundle")
    rec = {"family": "lora", "model": "bert-base", "batch": c["batch"], "seq_len": 128, "attn_impl": c["attn_impl"],
           "precision": "fp32", "weights_dtype": "fp32", "mode": "train", "checkpointing": False, "cuda_emulation": False,
           "method": "memtracker_fake", "device": "cpu", "optimizer": {"name": "adamw", "momentum": None, "foreach": None,
           "foreach_resolved": res.get("foreach_resolved")}, "finetune": cfg["finetune"], "config": c}
    rec.update({k: v for k, v in res.items() if k != "foreach_resolved"})
    print(json.dumps(rec), flush=True)
