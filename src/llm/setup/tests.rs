use super::*;
use vramcalc_core::finetune::Method;
use vramcalc_core::Mode;

fn fields(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig) -> Vec<Field> {
    super::fields(spec, c, d, SetupMode::of(c, crate::state::Engine::Pytorch))
}

fn ids(f: &[Field]) -> Vec<&'static str> {
    f.iter().map(|f| f.id).collect()
}

/// Typing into the fields sets the core's typed setup, as the CLI's flags give it.
#[test]
fn fields_set_the_cores_typed_settings() {
    let spec = vramcalc_core::presets::build("gpt2").unwrap();
    let (mut c, mut d) = (TrainConfig::default(), DistConfig::default());
    for (f, v) in [("finetune", "qlora"), ("lora-r", "16"), ("lora-alpha", "32"), ("lora-targets", "all-linear"), ("double-quant", "on")] {
        (c, d) = with(&c, &d, f, v).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    let ft = c.finetune;
    assert_eq!((ft.method, ft.lora_r, ft.lora_alpha, ft.double_quant), (Method::Qlora, 16, 32.0, true));
    assert_eq!(ft.lora_targets.as_str(), "all-linear");
    let f = fields(&spec, &c, &d);
    assert_eq!(ids(&f), ["finetune", "base-format", "double-quant", "lora-r", "lora-alpha", "lora-dropout", "lora-targets", "gpus", "strategy", "offload"]);
    let Kind::Checks(options) = &f[6].kind else { panic!("{:?}", f[6]) };
    assert_eq!(options[1], "c_attn", "GPT-2's fused Q/K/V");
    assert_eq!(&f[6].ticked, options, "all-linear ticks every linear");
}

/// Each keystroke's text is read whole: "3" then "32" is 32, never "328" (issue 23).
#[test]
fn typing_a_number_keystroke_by_keystroke_gives_the_number() {
    let (mut c, d) = (TrainConfig::default(), DistConfig::default());
    (c, _) = with(&c, &d, "finetune", "lora").unwrap();
    for text in ["3", "32"] {
        (c, _) = with(&c, &d, "lora-alpha", text).unwrap();
    }
    assert_eq!(c.finetune.lora_alpha, 32.0);
    let mut g = TrainConfig { mode: Mode::Generate, ..Default::default() };
    for text in ["5", "51", "512"] {
        (g, _) = with(&g, &d, "new-tokens", text).unwrap();
    }
    assert_eq!(g.generate.new_tokens, 512);
    assert!(with(&g, &d, "new-tokens", "").is_err(), "an empty field is kept as a draft");
}

#[test]
fn the_checklist_toggles_names_and_all_linear() {
    assert_eq!(toggle_target(&["q_proj"], "v_proj"), "q_proj,v_proj");
    assert_eq!(toggle_target(&["q_proj", "v_proj"], "q_proj"), "v_proj");
    assert_eq!(toggle_target(&["q_proj"], "all-linear"), "all-linear");
    assert_eq!(toggle_target(&["all-linear", "q_proj", "v_proj"], "all-linear"), "", "back to peft's default");
    assert_eq!(toggle_target(&["all-linear", "q_proj", "v_proj"], "q_proj"), "v_proj");
}

#[test]
fn a_bad_value_names_what_is_expected_and_changes_nothing() {
    let (c, d) = (TrainConfig::default(), DistConfig::default());
    for (f, v) in [("lora-r", "0"), ("gpus", "eight"), ("lora-dropout", "1.5"), ("weights", "q9"), ("nonsense", "1")] {
        assert!(!with(&c, &d, f, v).unwrap_err().is_empty(), "{f}");
    }
}

#[test]
fn fields_follow_the_mode_precision_and_parallelism() {
    let spec = vramcalc_core::presets::build("gpt2").unwrap();
    let d = DistConfig::default();
    let generate = TrainConfig { mode: Mode::Generate, ..Default::default() };
    // generation's lengths first; the prompt shows the length it runs at (GPT-2's 1024)
    let f = fields(&spec, &generate, &d);
    assert_eq!(ids(&f), ["prompt-len", "new-tokens", "weights", "kv-cache", "kv-dtype", "gpus", "strategy"]);
    assert_eq!(f[0].value, "1024");
    // serving: no prompt, no cache kind (vLLM pages it), no offload
    let serve = super::fields(&spec, &TrainConfig { mode: Mode::Infer, ..Default::default() }, &d, SetupMode::Serve);
    assert_eq!(ids(&serve), ["weights", "kv-dtype", "gpus", "strategy"]);
    let (g, _) = with(&generate, &d, "kv-dtype", "fp8").unwrap();
    assert_eq!(g.generate.kv_dtype, KvDType::parse("fp8"));
    let amp = TrainConfig { precision: Precision::AmpBf16, ..Default::default() };
    assert!(ids(&fields(&spec, &amp, &d)).contains(&"autocast-cache"));
    assert!(!ids(&fields(&spec, &TrainConfig::default(), &d)).contains(&"autocast-cache"), "no autocast, no cache");
    assert!(!with(&amp, &d, "autocast-cache", "off").unwrap().0.autocast_cache);
    let (_, tp) = with(&TrainConfig::default(), &d, "strategy", "tp").unwrap();
    assert!(!ids(&fields(&spec, &TrainConfig::default(), &tp)).contains(&"sequence-parallel"), "one GPU: no TP degree");
    let (_, tp4) = with(&TrainConfig::default(), &tp, "gpus", "4").unwrap();
    assert_eq!(*ids(&fields(&spec, &TrainConfig::default(), &tp4)).last().unwrap(), "sequence-parallel");
    assert!(with(&TrainConfig::default(), &tp4, "sequence-parallel", "on").unwrap().1.sequence_parallel);
}
