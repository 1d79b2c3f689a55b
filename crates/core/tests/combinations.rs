//! Answers that must agree with each other, over random combinations of model, fine-tuning
//! method, strategy, world size, precision and mode:
//! - gradient, bucket and optimizer bytes follow the trainable parameters (a frozen base has
//!   none, whatever the strategy);
//! - a sharded strategy's per-rank states never exceed the same job's states on one GPU;
//! - a what-if's figures are the same job's figures with its one change, and no what-if that
//!   saves nothing is offered.

use vramcalc_core::distributed::{self, DistConfig, Strategy};
use vramcalc_core::finetune::{FineTune, Method};
use vramcalc_core::whatif::job::{self, Change};
use vramcalc_core::{Mode, ModelSpec, Precision, TrainConfig};

fn llama(hidden: u64, layers: u64, vocab: u64) -> ModelSpec {
    let v = serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": hidden / 64, "num_key_value_heads": 1, "intermediate_size": hidden * 3 + 8, "vocab_size": vocab, "tie_word_embeddings": false});
    vramcalc_core::import::hf::from_config(v.as_object().unwrap()).unwrap()
}

fn finetune(m: usize) -> FineTune {
    match m {
        0 => FineTune::default(),
        1 => FineTune { method: Method::Lora, lora_r: 8, lora_alpha: 16.0, ..FineTune::default() },
        2 => FineTune { method: Method::Qlora, lora_r: 8, lora_alpha: 16.0, ..FineTune::default() },
        _ => FineTune { method: Method::Freeze, freeze_first: Some(1), ..FineTune::default() },
    }
}

const STRATEGIES: [Strategy; 5] = [Strategy::Ddp, Strategy::Zero1, Strategy::Zero2, Strategy::Zero3, Strategy::Fsdp];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]

    #[test]
    fn states_follow_the_trainable_parameters(h in 1u64..4, layers in 2u64..4, m in 0usize..4, s in 0usize..5, n_log in 1u32..5,
        prec in 0usize..3, view in proptest::bool::ANY) {
        let spec = llama(h * 64, layers, 517);
        let precision = [Precision::Fp32, Precision::Bf16, Precision::AmpBf16][prec];
        let c = TrainConfig { batch: 2, seq_len: Some(32), precision, finetune: finetune(m), ..TrainConfig::default() };
        let strategy = STRATEGIES[s];
        let n = 1u64 << n_log;
        let d = DistConfig { gpus: n, strategy, gradient_as_bucket_view: view, ..DistConfig::default() };
        let one = vramcalc_core::estimate(&spec, &c).unwrap();
        let e = distributed::estimate(&spec, &c, &d).unwrap_or_else(|e| panic!("{d:?} {c:?}: {e}"));
        let r = e.distributed.as_ref().unwrap();
        let ms = distributed::model_states(&spec, &c, &d).unwrap().unwrap();
        // one gradient's worth of trainable bytes: what DDP buckets, what one GPU's `.grad`s hold
        let g = &vramcalc_core::Prepared::new(&spec, &c).unwrap().resolved.graph;
        let trainable_grads: u64 = g.trainable_params().map(|p| g.value(p).bytes().fixed).sum();
        match strategy {
            Strategy::Ddp => {
                proptest::prop_assert_eq!(r.breakdown.gradient_buckets, trainable_grads);
                proptest::prop_assert_eq!(ms.optimizer, one.optimizer_state_bytes);
            }
            _ => {
                // sharded: never more than the same job on one GPU (ZeRO's fp32 master copies of
                // a half model are DeepSpeed's own extra and counted apart)
                proptest::prop_assert!(ms.gradients <= trainable_grads, "{:?}: grads {} > {}", strategy, ms.gradients, trainable_grads);
                proptest::prop_assert!(ms.parameters <= one.param_bytes, "{:?}: params {} > {}", strategy, ms.parameters, one.param_bytes);
                if strategy == Strategy::Fsdp || precision == Precision::Fp32 || precision == Precision::AmpBf16 {
                    proptest::prop_assert!(ms.optimizer <= one.optimizer_state_bytes, "{:?}: optimizer {} > {}", strategy, ms.optimizer, one.optimizer_state_bytes);
                }
                if one.trainable_params == 0 {
                    proptest::prop_assert_eq!(ms.gradients, 0);
                }
            }
        }
        // a frozen base adds nothing trainable: the same job in full fine-tuning has more states
        if m != 0 {
            let full = TrainConfig { finetune: FineTune::default(), ..c };
            let fs = distributed::model_states(&spec, &full, &d).unwrap().unwrap();
            proptest::prop_assert!(ms.gradients <= fs.gradients && ms.optimizer <= fs.optimizer);
        }
    }

    #[test]
    fn a_what_if_is_the_same_job_with_one_change(h in 1u64..3, m in 0usize..4, s in 0usize..5, n_log in 0u32..4, prec in 0usize..3,
        ckpt in proptest::bool::ANY, generate in proptest::bool::ANY) {
        let spec = llama(h * 64, 2, 517);
        let precision = [Precision::Fp32, Precision::Bf16, Precision::AmpBf16][prec];
        let mode = if generate && n_log == 0 { Mode::Generate } else { Mode::Train };
        let c = TrainConfig { batch: 8, seq_len: Some(64), precision, checkpointing: ckpt, mode,
            finetune: if mode == Mode::Train { finetune(m) } else { FineTune::default() }, ..TrainConfig::default() };
        let d = DistConfig { gpus: 1 << n_log, strategy: STRATEGIES[s], ..DistConfig::default() };
        let w = job::what_ifs(&spec, &c, &d, None).unwrap();
        proptest::prop_assert_eq!((w.peak, w.device_total), job::job_peak(&spec, &c, &d).unwrap());
        for i in &w.items {
            proptest::prop_assert!(i.saves > 0 && i.device_total < w.device_total, "{:?} saves nothing", i.change);
            proptest::prop_assert_eq!((i.peak, i.device_total), job::job_peak(&spec, &i.config, &i.dist).unwrap());
            proptest::prop_assert_eq!(Some((i.config, i.dist)), job::apply(i.change, &spec, &c, &d));
            // only a strategy change touches the strategy
            if !matches!(i.change, Change::Dist(_)) {
                proptest::prop_assert_eq!(i.dist, d);
            }
        }
    }
}
