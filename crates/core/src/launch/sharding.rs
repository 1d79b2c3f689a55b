//! The multi-GPU job as its launcher's config: a DeepSpeed ZeRO JSON (`deepspeed/runtime/config.py`,
//! `zero/config.py`: `zero_optimization.stage`, `offload_optimizer`, `offload_param`) or an
//! accelerate config (`accelerate config` YAML: `distributed_type`, `fsdp_config` with
//! `fsdp_version: 2`, `mixed_precision`, `num_processes`).

use crate::config::{Precision, TrainConfig};
use crate::distributed::{DistConfig, Offload, Strategy};
use crate::error::{Error, Result};
use serde_json::{json, Value};

/// The DeepSpeed config of a ZeRO job: batch sizes per GPU and in all, precision, the stage and
/// its offload. DeepSpeed checks `train_batch_size = micro × accumulation × data-parallel ranks`.
pub fn deepspeed_json(c: &TrainConfig, d: &DistConfig) -> Result<Value> {
    let stage = match d.strategy {
        Strategy::Zero1 => 1,
        Strategy::Zero2 => 2,
        Strategy::Zero3 => 3,
        s => return Err(Error::Config(format!("a DeepSpeed config is for ZeRO (--strategy zero1|zero2|zero3), not {s}"))),
    };
    let micro = c.micro_batch();
    let accum = c.grad_accum.max(1);
    let mut zero = json!({"stage": stage, "overlap_comm": true, "contiguous_gradients": true});
    if matches!(d.offload, Offload::Optimizer | Offload::Params) {
        zero["offload_optimizer"] = json!({"device": "cpu", "pin_memory": true});
    }
    if d.offload == Offload::Params {
        zero["offload_param"] = json!({"device": "cpu", "pin_memory": true});
    }
    let is = |ps: &[Precision]| ps.contains(&c.precision);
    Ok(json!({
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "train_batch_size": micro * accum * d.dp(),
        "bf16": {"enabled": is(&[Precision::Bf16, Precision::AmpBf16])},
        "fp16": {"enabled": is(&[Precision::Fp16, Precision::AmpFp16])},
        "zero_optimization": zero,
    }))
}

/// The accelerate config YAML of the job (DDP, FSDP2, or DeepSpeed pointing at `ds_config.json`).
pub fn accelerate_yaml(c: &TrainConfig, d: &DistConfig) -> Result<String> {
    let mixed = match c.precision {
        Precision::AmpBf16 | Precision::Bf16 => "bf16",
        Precision::AmpFp16 | Precision::Fp16 => "fp16",
        Precision::Fp32 => match d.fsdp_param_dtype {
            Some(crate::distributed::MpDtype::Bf16) => "bf16",
            Some(crate::distributed::MpDtype::Fp16) => "fp16",
            _ => "no",
        },
    };
    let mut y = String::new();
    y.push_str("compute_environment: LOCAL_MACHINE\n");
    let kind = match d.strategy {
        Strategy::Ddp if d.gpus > 1 => "MULTI_GPU",
        Strategy::Ddp => "NO",
        Strategy::Fsdp => "FSDP",
        Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3 => "DEEPSPEED",
        Strategy::Tp => return Err(Error::Config("tensor parallelism is Megatron's or torch's DTensor, not an accelerate config".into())),
    };
    y.push_str(&format!("distributed_type: {kind}\n"));
    y.push_str(&format!("mixed_precision: {mixed}\n"));
    y.push_str(&format!("num_machines: {}\n", d.gpus.div_ceil(super::GPUS_PER_NODE).max(1)));
    y.push_str(&format!("num_processes: {}\n", d.gpus.max(1)));
    match d.strategy {
        Strategy::Fsdp => {
            y.push_str("fsdp_config:\n");
            y.push_str("  fsdp_version: 2\n");
            y.push_str("  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
            y.push_str(&format!("  fsdp_reshard_after_forward: {}\n", d.reshard_after_forward));
            y.push_str(&format!("  fsdp_activation_checkpointing: {}\n", c.checkpointing));
            y.push_str("  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
        }
        Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3 => {
            y.push_str("deepspeed_config:\n");
            y.push_str("  deepspeed_config_file: ds_config.json\n");
        }
        _ => {}
    }
    Ok(y)
}
