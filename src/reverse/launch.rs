//! The command that runs the setup on screen (issue 26), from the same settings the estimate
//! used, through `vramcalc_core::launch` (the CLI's `vramcalc launch --for …`): `vllm serve …`
//! for a language model served, generated or run for inference; for training `torchrun …` with
//! the job's accelerate config (DDP, FSDP2) or DeepSpeed ZeRO JSON, and the peft snippet of a
//! fine-tuning setup.

use crate::llm::answers::{serve_config, serve_context};
use crate::state::{Model, SetupMode};
use vramcalc_core::distributed::Strategy;
use vramcalc_core::finetune::Method;
use vramcalc_core::launch::{self, python, sharding};
use vramcalc_core::solve::{self, Variable};

/// One command or config: what it is (`vllm`, `torchrun`, `accelerate`, `deepspeed`, `peft`:
/// the CLI's `--for` names) and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub kind: &'static str,
    pub text: String,
}

/// The Hugging Face id the commands name: the hub model's, a preset's repository, else `MODEL`.
pub fn model_id(m: &Model) -> String {
    if let Some(h) = &m.hub {
        return h.split('@').next().unwrap_or(h).to_string();
    }
    m.preset.as_deref().and_then(launch::hub_id).unwrap_or("MODEL").to_string()
}

/// The commands of the model's setup on a GPU of `capacity` bytes, in the order to run them.
pub fn commands(m: &Model, capacity: u64) -> Vec<Command> {
    let (c, d, spec) = (&m.config, &m.dist, &m.spec);
    let id = model_id(m);
    let mut out = Vec::new();
    let lm = spec.is_token_input();
    match m.mode() {
        SetupMode::Serve | SetupMode::Infer | SetupMode::Generate if lm => {
            let mut cfg = serve_config(spec, c, d, capacity);
            cfg.context = serve_context(spec, c);
            // the context the page asks for; the longest that fits when it asks for more
            if let Ok(a) = solve::max_serving(spec, &cfg, Variable::Context) {
                cfg.context = cfg.context.min(a.value.max(1));
            }
            out.push(Command { kind: "vllm", text: launch::shell_line(&launch::vllm_serve(&id, &cfg)) });
        }
        SetupMode::Train | SetupMode::FineTune => {
            if c.finetune.method != Method::Full && lm {
                if let Ok(t) = python::peft_snippet(&id, c) {
                    out.push(Command { kind: "peft", text: t });
                }
            }
            if d.gpus > 1 {
                if matches!(d.strategy, Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3) {
                    if let Ok(v) = sharding::deepspeed_json(c, d) {
                        out.push(Command { kind: "deepspeed", text: serde_json::to_string_pretty(&v).unwrap_or_default() + "\n" });
                    }
                }
                if let Ok(y) = sharding::accelerate_yaml(c, d) {
                    out.push(Command { kind: "accelerate", text: y });
                }
                out.push(Command { kind: "torchrun", text: launch::shell_line(&launch::torchrun(d.gpus, "train.py")) });
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Engine;
    use vramcalc_core::distributed::DistConfig;

    fn llama(mode: SetupMode) -> Model {
        let mut m = Model::preset("llama-3.1-8b").unwrap();
        m.config = vramcalc_core::TrainConfig { batch: 4, seq_len: Some(4096), precision: vramcalc_core::Precision::Bf16, ..Default::default() };
        m.config = mode.apply(&m.spec, &m.config);
        m.engine = mode.engine();
        m
    }

    /// The serve line parses back to the settings vLLM was sized with (argv, as the CLI's tests do).
    #[test]
    fn serving_runs_vllm_with_the_pages_settings() {
        let m = llama(SetupMode::Serve);
        let cmds = commands(&m, 80 << 30);
        assert_eq!(cmds.len(), 1);
        let argv: Vec<&str> = cmds[0].text.split(' ').collect();
        let flag = |k: &str| argv.iter().position(|a| *a == k).map(|i| argv[i + 1]);
        assert_eq!(&argv[..3], ["vllm", "serve", "meta-llama/Llama-3.1-8B"]);
        assert_eq!((flag("--max-model-len"), flag("--max-num-seqs"), flag("--dtype")), (Some("4096"), Some("4"), Some("bfloat16")));
        assert_eq!(m.engine, Engine::Vllm);
    }

    #[test]
    fn fine_tuning_on_several_gpus_gives_peft_deepspeed_and_torchrun() {
        let mut m = llama(SetupMode::FineTune);
        m.dist = DistConfig { gpus: 4, strategy: Strategy::Zero3, ..Default::default() };
        let cmds = commands(&m, 80 << 30);
        let kinds: Vec<&str> = cmds.iter().map(|c| c.kind).collect();
        assert_eq!(kinds, ["peft", "deepspeed", "accelerate", "torchrun"]);
        assert!(cmds[0].text.contains("LoraConfig(") && cmds[0].text.contains("r=16"));
        let ds: serde_json::Value = serde_json::from_str(&cmds[1].text).unwrap();
        assert_eq!(ds["zero_optimization"]["stage"], 3);
        assert_eq!(cmds[3].text, "torchrun --standalone --nnodes 1 --nproc-per-node 4 train.py");
        // one GPU of full training: nothing to launch beyond `python train.py`
        assert!(commands(&llama(SetupMode::Train), 80 << 30).is_empty());
    }
}
