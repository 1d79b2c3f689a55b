//! State-space language models: `mamba` (`MambaForCausalLM`, `modeling_mamba.py`) and `mamba2`
//! (`Mamba2ForCausalLM`, `modeling_mamba2.py`), as transformers 5.24 builds them:
//! `backbone.embeddings`, `backbone.layers.<i>` (`norm` RMSNorm, then the mixer, added to the
//! residual), `backbone.norm_f`, `lm_head` (tied to the embeddings by default for Mamba, not for
//! Mamba-2). The mixers are the `mamba_mixer` and `mamba2_mixer` layers (`layer/ssm.rs`).

use crate::error::{Error, Result};
use crate::import::decoder::MAX_DEFAULT_SEQ_LEN;
use crate::import::fields::{pick, Fields};
use crate::layer::embedding::Embedding;
use crate::layer::linear::Linear;
use crate::layer::norm::RmsNorm;
use crate::layer::ssm::{Mamba2Mixer, MambaMixer};
use crate::spec::{InputDType, InputSpec, Layer, Loss, ModelSpec, SPEC_VERSION};
use serde_json::Value;

/// Fields of `MambaConfig` / `Mamba2Config` that change neither parameters nor memory: weight
/// initialisation, the kernels' scan switches, `time_step_limit` (a clamp) and
/// `residual_in_fp32` (the residual is upcast in place of the add's own promotion; modelled as
/// the compute dtype). `MambaConfig.__post_init__` writes `intermediate_size` from `expand`
/// (a saved one is overwritten on load). `n_layer` is an older name the published Mamba configs
/// carry beside `num_hidden_layers`; `MambaConfig` stores it and nothing reads it.
const INERT: &[&str] = &[
    "initializer_range", "time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme",
    "time_step_floor", "rescale_prenorm_residual", "use_mambapy", "use_associative_scan", "time_step_limit",
    "residual_in_fp32", "hidden_act", "layer_norm_epsilon", "expand", "intermediate_size", "n_layer",
];

/// `time_step_rank`: `"auto"` is `ceil(hidden_size / 16)` (`__post_init__`).
pub(super) fn time_step_rank(c: &Fields, key: &str, h: u64) -> Result<u64> {
    match c.get(key) {
        None => Ok(h.div_ceil(16)),
        Some(Value::String(s)) if s == "auto" => Ok(h.div_ceil(16)),
        Some(_) => c.size(key, 1),
    }
}

/// `silu` (what the kernels and their fallbacks implement).
pub(super) fn silu(c: &Fields, key: &str) -> Result<()> {
    match c.str(key)?.unwrap_or("silu") {
        "silu" | "swish" => Ok(()),
        other => Err(Error::Import(format!("field `{key}`: `{other}` is not modelled (silu)"))),
    }
}

/// `expand × hidden_size`, as `int(config.expand * hidden_size)`.
pub(super) fn expanded(c: &Fields, key: &str, h: u64) -> Result<u64> {
    let e = c.float(key, 2.0)?;
    let i = (e * h as f64) as u64;
    if i == 0 {
        return Err(Error::Import(format!("field `{key}` ({e}) × hidden_size ({h}) leaves no channels")));
    }
    Ok(i)
}

/// A language model of `n` pre-norm residual blocks around `mixer`.
fn stack(name: String, lm: bool, vocab: u64, norm: RmsNorm, n: u64, mixer: Layer, tied: bool) -> ModelSpec {
    let h = norm.normalized_shape;
    let norm = || Layer::RmsNorm(norm.clone());
    let mut layers = vec![
        Layer::Embedding(Embedding { num_embeddings: vocab, embedding_dim: h, padding_idx: None, tied_weight: false }),
        Layer::Repeat { times: n, body: vec![Layer::Residual { body: vec![norm(), mixer], shortcut: None, inplace: false }] },
        norm(),
    ];
    if lm {
        layers.push(Layer::Linear(Linear { in_features: h, out_features: vocab, bias: false, tied_weight: tied }));
    }
    let modules = crate::import::decoder::DecoderModules { embed: "backbone.embeddings", layers: "backbone.layers", norm: "backbone.norm_f", head: "lm_head" };
    ModelSpec {
        version: SPEC_VERSION,
        name: Some(name),
        input: InputSpec { shape: vec![MAX_DEFAULT_SEQ_LEN], dtype: InputDType::Int64, vocab_size: Some(vocab) },
        layers,
        loss: Loss::CrossEntropy,
        names: modules.names(1..2, Some(2), lm.then_some(3)),
        unquantised: None,
    }
}

fn layers(c: &Fields, default: u64) -> Result<u64> {
    super::dense::layer_count(c, "num_hidden_layers", default)
}

/// `MambaConfig` (transformers): defaults are mamba-130m's widths with 32 layers.
pub(super) fn mamba(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["MambaForCausalLM", "MambaModel"], "MambaModel");
    let h = c.size("hidden_size", 768)?;
    silu(c, "hidden_act")?;
    let mixer = MambaMixer {
        hidden_size: h,
        intermediate_size: expanded(c, "expand", h)?,
        state_size: c.size("state_size", 16)?,
        conv_kernel: c.size("conv_kernel", 4)?,
        time_step_rank: time_step_rank(c, "time_step_rank", h)?,
        conv_bias: c.flag("use_conv_bias", true)?,
        bias: c.flag("use_bias", false)?,
        inner_norms: false,
    };
    let vocab = c.size("vocab_size", 50280)?;
    let n = layers(c, 32)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    let tied = c.flag("tie_word_embeddings", true)?;
    c.refuse_unknown("mamba", INERT)?;
    Ok(stack(name, class == "MambaForCausalLM", vocab, RmsNorm { normalized_shape: h, eps, t5: false }, n, Layer::MambaMixer(mixer), tied))
}

/// `Mamba2Config` (transformers): defaults are Mamba-Codestral-7B's (128 heads of 64, 8 groups).
pub(super) fn mamba2(c: &Fields, arch: Option<&str>) -> Result<ModelSpec> {
    let (class, name) = pick(arch, &["Mamba2ForCausalLM", "Mamba2Model"], "Mamba2Model");
    let h = c.size("hidden_size", 4096)?;
    silu(c, "hidden_act")?;
    let heads = c.size("num_heads", 128)?;
    let head_dim = c.size("head_dim", 64)?;
    let inner = expanded(c, "expand", h)?;
    // Mamba2Config.validate_architecture
    if inner != heads.saturating_mul(head_dim) {
        return Err(Error::Import(format!("hidden_size × expand ({inner}) must equal num_heads × head_dim ({})", heads.saturating_mul(head_dim))));
    }
    time_step_rank(c, "time_step_rank", h)?;
    let mixer = Mamba2Mixer {
        hidden_size: h,
        num_heads: heads,
        head_dim,
        state_size: c.size("state_size", 128)?,
        n_groups: c.size("n_groups", 8)?,
        conv_kernel: c.size("conv_kernel", 4)?,
        chunk_size: c.size("chunk_size", 256)?,
        conv_bias: c.flag("use_conv_bias", true)?,
        bias: c.flag("use_bias", false)?,
        out_bias: None,
        gated_norm: true,
    };
    let vocab = c.size("vocab_size", 32768)?;
    let n = layers(c, 64)?;
    let eps = c.float("layer_norm_epsilon", 1e-5)?;
    let tied = c.flag("tie_word_embeddings", false)?;
    c.refuse_unknown("mamba2", INERT)?;
    Ok(stack(name, class == "Mamba2ForCausalLM", vocab, RmsNorm { normalized_shape: h, eps, t5: false }, n, Layer::Mamba2Mixer(mixer), tied))
}
