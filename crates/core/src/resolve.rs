//! Spec → resolved model: shape inference through every layer and lowering to the op graph.
//! Errors name the layer's path (`layers[3].body[1]`), its kind and what did not fit.

use crate::error::{Error, Result};
use crate::finetune::{self, FineTune, LinearRole, NameStyle};
use crate::graph::{GradRule, Graph, ValueId};
use crate::lower::{Builder, LowerOptions};
use crate::path::{LayerPath, Slot};
use crate::spec::{InputDType, Join, Layer, Loss, ModelSpec};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

mod image_text;
mod seq2seq;

/// Limits that keep an absurd spec from exhausting memory or time (a clear error instead).
pub const MAX_OPS: usize = 2_000_000;
pub const MAX_LAYERS: u64 = 200_000;
/// Per-sample output or parameter elements beyond which byte counts could overflow `u64`.
pub const MAX_ELEMENTS: u64 = 1 << 60;

/// One row of the per-layer table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// `layers[3].body[1]`.
    pub path: String,
    pub kind: String,
    /// Nesting depth (0 for top-level layers).
    pub depth: u32,
    /// Per-sample output shape (no batch dimension).
    pub output_shape: Shape,
    /// Parameters this layer owns (a block: its whole body).
    pub params: u64,
    /// Output elements per sample (the cs231n "memory" column).
    pub activation_values: u64,
    /// Whether this row is a block (its children follow it).
    pub block: bool,
    /// Of `params`, those that train (fine-tuning: frozen layers have 0; a LoRA-wrapped layer
    /// counts its adapters, which `params` includes).
    #[serde(default)]
    pub trainable_params: u64,
    /// The model's own name for this row (`model.layers.3`, `features.0`), where it has one
    /// (`crate::layer_names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The resolved model for one set of lowering options.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub graph: Graph,
    pub layers: Vec<LayerInfo>,
    /// The model's output value (before the loss).
    pub model_output: ValueId,
    pub input_shape: Shape,
}

/// Resolves `spec` with an optional sequence-length override for token/sequence inputs.
pub fn resolve(spec: &ModelSpec, seq_len: Option<u64>, opts: LowerOptions) -> Result<Resolved> {
    let mut shape = spec.input.shape.clone();
    if shape.is_empty() {
        return Err(Error::Input("`shape` needs at least one dimension (without the batch)".into()));
    }
    if shape.contains(&0) {
        return Err(Error::Input(format!("every dimension must be at least 1, got {:?}", shape)));
    }
    if let Some(s) = seq_len {
        if s == 0 {
            return Err(Error::Config("sequence length must be at least 1".into()));
        }
        if spec.is_sequence_input() {
            shape[0] = s;
        }
    }
    let input_shape = Shape::from(shape);
    if input_shape.numel() >= 1 << 40 {
        return Err(Error::TooLarge(format!("an input of {} values per sample", input_shape.numel())));
    }
    let mut b = Builder::new(opts);
    b.prompt_len = seq_len.filter(|_| !spec.is_sequence_input());
    let dtype = match spec.input.dtype {
        InputDType::Int64 => DType::I64,
        InputDType::Float32 => b.float_dtype(),
    };
    let x = b.input(input_shape.clone(), dtype);
    if spec.layers.is_empty() {
        return Err(Error::Input("the model has no layers yet: add one".into()));
    }
    let head = spec.layers.iter().rposition(|l| matches!(l, Layer::Linear(_)));
    let first_block = spec.layers.iter().position(Layer::is_block).unwrap_or(spec.layers.len());
    let first_repeat = spec.layers.iter().position(|l| matches!(l, Layer::Repeat { .. }));
    // `--loss chunked`: the head and the loss become one fused op (`layer/fused_ce.rs`)
    let fuse_head = (opts.training
        && opts.finetune.loss == finetune::LossKernel::Chunked
        && matches!(spec.loss, Loss::CausalLm | Loss::CrossEntropy)
        && head == Some(spec.layers.len() - 1))
        .then_some(spec.layers.len() - 1);
    let sp = (opts.sequence_parallel > 1).then_some(crate::layer::seq_parallel::Region::Before);
    let mut r = Resolver { b, layers: Vec::new(), count: 0, freeze: Freezing { head, first_block, first_repeat }, fuse_head, fused_loss: None, sp };
    let out = match lm_head_keeps(spec, opts) {
        // `generate()`'s `logits_to_keep`: the LM head reads `hidden_states[:, -k:, :]`, a view
        // (`modeling_utils.slice_logits_to_keep`)
        // (the logits' element-wise scalings after the head then see those positions only)
        Some((keep, at)) => {
            let (body, tail) = spec.layers.split_at(at);
            let h = r.sequence(body, x, &LayerPath::default(), Slot::Layers, None, 0)?;
            let s = r.b.shape(h).clone();
            let mut h = match s.0.first() {
                Some(&n) if s.rank() == 2 && n > keep => r.b.view(h, Shape::new([keep, s.last()])),
                _ => h,
            };
            for (i, layer) in tail.iter().enumerate() {
                h = r.layer(layer, h, &LayerPath::default().child_in_repetition(Slot::Layers, None, at + i), 0)?;
            }
            h
        }
        None => r.sequence(&spec.layers, x, &LayerPath::default(), Slot::Layers, None, 0)?,
    };
    if let Some(sp) = r.sp {
        sp.finish().map_err(Error::Config)?;
    }
    let loss = match (opts.training, r.fused_loss) {
        (true, Some(loss)) => loss,
        (true, None) => r.loss(spec.loss, out, x)?,
        (false, _) => out,
    };
    check_lora_targets(spec, &opts.finetune, &r.b)?;
    // `keep`: referenced until the model's forward (its loss included) returns
    for v in std::mem::take(&mut r.b.forward_locals) {
        r.b.hold(v);
    }
    let mut graph = r.b.g;
    graph.output = loss;
    let mut layers = r.layers;
    if !spec.names.is_empty() {
        for l in &mut layers {
            l.name = l.path.parse().ok().and_then(|p| crate::layer_names::full_name(spec, &p));
        }
    }
    Ok(Resolved { graph, layers, model_output: out, input_shape })
}

/// Refuses a LoRA setup peft refuses: targets that match no linear (peft's `inject_adapter`
/// raises `ValueError: Target modules {…} not found in the base model` or
/// `NoMatchingPeftModuleError`), and the default targets on a mixture-of-experts model, for which
/// peft 0.21 has none: `LoraConfig()` raises `NoMatchingPeftModuleError` on Mixtral and
/// DeepSeek-V3 (measured: `tests/data/moe_bnb_quantised.txt`; transformers 5's MoE conversion,
/// `utils/transformers_weight_conversion.py::_convert_peft_config_moe`, turns the unset
/// `target_modules` into an empty set before the default mapping applies), and `ValueError:
/// Please specify target_modules` on the MoE types its mapping lacks (`utils/constants.py`:
/// no qwen2_moe, qwen3_moe, deepseek, gpt_oss, llama4_text). And `all-linear` on the MoE models
/// that conversion applies to (Mixtral's and Qwen-MoE's routers, DeepSeek's; not the linear
/// `topk_softmax` routers of GPT-OSS, Granite-MoE, Llama 4): peft then adapts the fused expert
/// parameters too (measured: the same record), which the core does not model.
fn check_lora_targets(spec: &ModelSpec, ft: &FineTune, b: &Builder) -> Result<()> {
    if !ft.has_adapters() {
        return Ok(());
    }
    let converted = spec.layers.iter().any(|l| l.any(&|l| matches!(l, Layer::SparseMoe(m) if m.router != crate::layer::moe::Router::TopkSoftmax)));
    // `_MOE_TARGET_MODULE_MAPPING`: the v4 names peft turns into the fused expert and router parameters
    let expert_names = ["all-linear", "gate", "gate_proj", "up_proj", "down_proj", "w1", "w2", "w3"];
    let usable: Vec<&str> = b.linear_names.iter().copied().filter(|n| !converted || !expert_names.contains(n)).collect();
    let names = if usable.is_empty() { "none".to_string() } else { usable.join(", ") };
    if ft.lora_targets.is_empty() && needs_lora_targets(spec) {
        let or_all = if converted { "" } else { " or all-linear" };
        return Err(Error::Config(format!(
            "LoRA on a mixture-of-experts model needs --lora-targets: peft has no default target modules for it \
             (peft 0.21's LoraConfig() raises NoMatchingPeftModuleError); name some of its linears ({names}){or_all}"
        )));
    }
    if let Some(t) = ft.lora_targets.iter().find(|t| converted && expert_names.contains(t)) {
        return Err(Error::Config(format!(
            "--lora-targets {t} on this mixture-of-experts model: peft 0.21 turns it into LoRA on the fused expert and router \
             parameters (target_parameters gate_up_proj, down_proj, gate.weight), which is not modelled; name its attention linears instead ({names})"
        )));
    }
    if b.g.adapters.is_empty() {
        let targets = if ft.lora_targets.is_empty() {
            format!("peft's default targets ({})", finetune::names::default_targets(b.style).join(", "))
        } else {
            format!("`{}`", ft.lora_targets.as_str())
        };
        return Err(Error::Config(format!(
            "--lora-targets: {targets} match no linear of this model (peft raises NoMatchingPeftModuleError); its linears: {names}"
        )));
    }
    Ok(())
}

/// Whether a LoRA setup on `spec` must name its targets: a mixture-of-experts model, for which
/// peft has no default (see [`check_lora_targets`]).
pub fn needs_lora_targets(spec: &ModelSpec) -> bool {
    spec.layers.iter().any(|l| l.any(&|l| matches!(l, Layer::SparseMoe(_))))
}

/// The LoRA targets a setup the core proposes (what fits, the cheapest fix, the what-ifs) takes
/// on `spec`: peft's default (empty) where it has one, else the attention projections, as the
/// common Mixtral and DeepSeek QLoRA recipes name them (the names a model lacks match nothing).
pub fn proposed_lora_targets(spec: &ModelSpec) -> finetune::NameList {
    if !needs_lora_targets(spec) {
        return finetune::NameList::EMPTY;
    }
    finetune::NameList::parse(finetune::names::ATTENTION_TARGETS).unwrap_or_default()
}

/// Positions the final `linear` (the LM head) computes in a generation forward, when limited,
/// and the head's index: the last layer, or the last `linear` followed only by element-wise
/// scalings of the logits (Granite's `logits / logits_scaling`, Cohere's `logits *
/// logit_scale`, Gemma 2's soft-cap), which transformers applies to the sliced logits
/// (`modeling_granite.py` / `modeling_cohere.py` `ForCausalLM.forward`: `lm_head(hidden_states[:,
/// slice_indices, :])` first).
fn lm_head_keeps(spec: &ModelSpec, opts: LowerOptions) -> Option<(u64, usize)> {
    let keep = opts.generation?.logits_to_keep;
    let at = spec.layers.iter().rposition(|l| !matches!(l, Layer::Scale(_) | Layer::LogitSoftcap(_)))?;
    (keep > 0 && matches!(spec.layers[at], Layer::Linear(_))).then_some((keep, at))
}

/// One list of layers being lowered: the block's path, its slot and repetition, its depth.
struct List<'a> {
    layers: &'a [Layer],
    parent: &'a LayerPath,
    slot: &'a Slot,
    repetition: Option<u64>,
    depth: u32,
}

struct Resolver {
    b: Builder,
    layers: Vec<LayerInfo>,
    count: u64,
    freeze: Freezing,
    /// Top-level index of a head lowered with the loss as one fused op.
    fuse_head: Option<usize>,
    /// That fused op's loss.
    fused_loss: Option<ValueId>,
    /// Sequence parallelism: where the lowering stands against the split region.
    sp: Option<crate::layer::seq_parallel::Region>,
}

/// Where the top-level landmarks of the spec are, for the fine-tuning setup's freezing rules.
struct Freezing {
    /// The last top-level linear: the output head (`lm_head`, `classifier`, `fc`).
    head: Option<usize>,
    /// The first top-level block: the layers before it are the input embeddings.
    first_block: usize,
    /// The first top-level `repeat` (the transformer's blocks).
    first_repeat: Option<usize>,
}

impl Freezing {
    /// The module names a top-level layer answers to in `--train-only` and freeze paths.
    fn top_names(&self, i: usize, layer: &Layer) -> &'static [&'static str] {
        match layer {
            Layer::Linear(_) if Some(i) == self.head => finetune::names::module_names(LinearRole::Head, NameStyle::Llama),
            Layer::Linear(_) => &["pooler", "dense"],
            Layer::Embedding(_) | Layer::PositionalEmbedding(_) => &["embeddings", "embed_tokens", "wte", "wpe", "word_embeddings"],
            Layer::Repeat { .. } => &["layers", "layer", "encoder", "h", "blocks"],
            Layer::RmsNorm(_) | Layer::LayerNorm(_) if i > self.first_block => &["norm", "ln_f", "final_layer_norm"],
            _ if i < self.first_block => &["embeddings"],
            _ => &[],
        }
    }

    /// Whether top-level layer `i` (at `path`) freezes under the `--finetune freeze` rules.
    /// `--freeze-first K` freezes the input embeddings here; the first K repetitions (or blocks)
    /// are decided where they are lowered.
    fn top_frozen(&self, ft: &FineTune, i: usize, layer: &Layer, path: &str) -> bool {
        let names = self.top_names(i, layer);
        let named = |list: &finetune::NameList| list.iter().any(|n| names.contains(&n) || path_under(path, n));
        let mut frozen = !ft.train_only.is_empty() && !named(&ft.train_only);
        if let Some(k) = ft.freeze_first {
            frozen |= i < self.first_block;
            if self.first_repeat.is_none() && layer.is_block() {
                frozen |= self.block_rank(i) < k;
            }
        }
        frozen || named(&ft.freeze_paths)
    }

    /// How many top-level blocks come before block `i` (for `--freeze-first` without a repeat).
    fn block_rank(&self, i: usize) -> u64 {
        i.saturating_sub(self.first_block) as u64
    }
}

/// `path` is `prefix` or inside it (`layers[3]` holds `layers[3].body[0]`).
fn path_under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

impl Resolver {
    /// A resolver of layers lowered aside (no fine-tuning landmarks, no fused head).
    fn new(b: Builder) -> Resolver {
        Resolver { b, layers: Vec::new(), count: 0, freeze: Freezing { head: None, first_block: 0, first_repeat: None }, fuse_head: None, fused_loss: None, sp: None }
    }

    /// Lowers the list `slot` (repetition `repetition`) of the block at `parent`.
    fn sequence(&mut self, layers: &[Layer], x: ValueId, parent: &LayerPath, slot: Slot, repetition: Option<u64>, depth: u32) -> Result<ValueId> {
        let list = List { layers, parent, slot: &slot, repetition, depth };
        if let Some(out) = self.image_text_generation(&list, x)? {
            return Ok(out);
        }
        match self.encoder_decoder_generation(&list, x)? {
            Some(out) => Ok(out),
            None => self.run(&list, 0..layers.len(), x),
        }
    }

    /// Lowers `list.layers[range]` in order on `x`.
    fn run(&mut self, list: &List, range: std::ops::Range<usize>, mut x: ValueId) -> Result<ValueId> {
        for i in range {
            x = self.layer(&list.layers[i], x, &list.parent.child_in_repetition(list.slot.clone(), list.repetition, i), list.depth)?;
        }
        Ok(x)
    }

    fn layer(&mut self, layer: &Layer, x: ValueId, at: &LayerPath, depth: u32) -> Result<ValueId> {
        let path = &at.to_string();
        let top = if depth == 0 { at.index() } else { None };
        let x = match self.sp.as_mut() {
            Some(sp) => {
                let head = matches!(layer, Layer::Linear(_)) && top.is_some() && top == self.freeze.head;
                // a split on entering the region belongs to the layers before (the embedding's)
                sp.enter(&mut self.b, layer.kind(), top == Some(0), head, x)
                    .map_err(|m| Error::Config(format!("{path} ({}): {m}", layer.kind())))?
            }
            None => x,
        };
        self.count += 1;
        if self.count > MAX_LAYERS || self.b.g.ops.len() > MAX_OPS {
            return Err(Error::TooLarge(format!(
                "the model has more than {MAX_LAYERS} layers or {MAX_OPS} ops (at {path})"
            )));
        }
        let row = self.layers.len();
        self.layers.push(LayerInfo {
            path: path.to_string(),
            kind: layer.kind().to_string(),
            depth,
            output_shape: Shape::default(),
            params: 0,
            activation_values: 0,
            block: false,
            trainable_params: 0,
            name: None,
        });
        let trainable_before = self.b.trainable_numel;
        let params_before = self.b.param_numel;
        self.b.set_layer(row as u32);
        let parent_frozen = self.b.frozen;
        let ft = self.b.opts.finetune;
        self.b.frozen = parent_frozen
            || matches!(layer, Layer::Frozen { .. })
            || ft.has_adapters()
            || match (ft.method, top) {
                (finetune::Method::Freeze, Some(i)) => self.freeze.top_frozen(&ft, i, layer, path),
                (finetune::Method::Freeze, None) => ft.freeze_paths.iter().any(|p| path_under(path, p)),
                _ => false,
            };
        if let (Layer::Linear(_), Some(i)) = (layer, top) {
            self.b.role = Some(if Some(i) == self.freeze.head { LinearRole::Head } else { LinearRole::Other });
        }
        let out = self.lower_layer(layer, x, at, depth, row, path, top);
        self.b.frozen = parent_frozen;
        self.b.role = None;
        let out = out?;
        // peft with checkpointing: `model.enable_input_require_grads()` makes the input
        // embeddings' output require a gradient (a forward hook, `modeling_utils.py`)
        if matches!(layer, Layer::Embedding(_)) && top.is_some() && ft.has_adapters() && self.b.opts.checkpointing && self.b.opts.training {
            self.b.g.values[out as usize].requires_grad = true;
        }
        // the caller holds the module's input until the module returns (Llama 3.2 Vision's
        // tower, one module split in two layers, holds its own: `layer/tiled_vision.rs`)
        if !matches!(layer, Layer::TiledVisionEncoder(_)) {
            self.b.hold(x);
        }
        let shape = self.b.shape(out).clone();
        if shape.numel() > MAX_ELEMENTS || self.b.param_numel > MAX_ELEMENTS {
            return Err(Error::TooLarge(format!(
                "{path} ({}): more than 2^60 values in its output or parameters; bytes would not fit in 64 bits",
                layer.kind()
            )));
        }
        let params = self.b.param_numel - params_before;
        let info = &mut self.layers[row];
        info.activation_values = shape.numel();
        info.output_shape = shape;
        info.params = params;
        info.trainable_params = self.b.trainable_numel - trainable_before;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn lower_layer(&mut self, layer: &Layer, x: ValueId, at: &LayerPath, depth: u32, row: usize, path: &str, top: Option<usize>) -> Result<ValueId> {
        let err = |message: String| Error::Layer { path: path.to_string(), kind: layer.kind().to_string(), message };
        let out = match layer {
            Layer::Sequential { layers, checkpoint } => {
                self.layers[row].block = true;
                let opened = *checkpoint && self.b.begin_unit();
                let out = self.sequence(layers, x, at, Slot::Layers, None, depth + 1);
                if opened {
                    self.b.end_unit();
                }
                out?
            }
            Layer::Residual { body, shortcut, inplace } => {
                self.layers[row].block = true;
                let y = self.sequence(body, x, at, Slot::Body, None, depth + 1)?;
                let s = match shortcut {
                    Some(sc) => self.sequence(sc, x, at, Slot::Shortcut, None, depth + 1)?,
                    None => x,
                };
                let (ys, ss) = (self.b.shape(y).clone(), self.b.shape(s).clone());
                if ys != ss {
                    return Err(err(format!("body output {ys} does not match shortcut output {ss}")));
                }
                self.b.set_layer(row as u32);
                if *inplace && self.b.g.storages[self.b.g.storage_of(y) as usize].class == crate::graph::StorageClass::Activation {
                    self.b.inplace("add_", y, Some(s), false, crate::graph::GradRule::Alias)
                } else {
                    crate::layer::activation::add(&mut self.b, y, s)
                }
            }
            Layer::Frozen { layers } => {
                self.layers[row].block = true;
                self.sequence(layers, x, at, Slot::Layers, None, depth + 1)?
            }
            Layer::Discarded { layers } => {
                // nothing reads the output: the backward never reaches these ops (`memory::reach`)
                self.layers[row].block = true;
                self.sequence(layers, x, at, Slot::Layers, None, depth + 1)?;
                x
            }
            Layer::Repeat { times, body } => {
                self.layers[row].block = true;
                if *times == 0 {
                    return Err(err("`times` must be at least 1".into()));
                }
                if times.saturating_mul(body.len().max(1) as u64) > MAX_LAYERS {
                    return Err(Error::TooLarge(format!("{path} repeats {} layers {times} times", body.len())));
                }
                let mut y = x;
                let ft = self.b.opts.finetune;
                let frozen = self.b.frozen;
                let freeze_first = match ft.freeze_first {
                    Some(k) if ft.method == finetune::Method::Freeze && top.is_some() && top == self.freeze.first_repeat => k,
                    _ => 0,
                };
                for i in 0..*times {
                    self.b.frozen = frozen || i < freeze_first;
                    let opened = self.b.begin_unit();
                    // one repetition is one decoder layer: what its blocks leave in its locals
                    // lives until it returns (a local of a block outside is not its to keep)
                    self.b.layer_locals.clear();
                    let r = self.sequence(body, y, at, Slot::Body, Some(i), depth + 1);
                    for v in std::mem::take(&mut self.b.layer_locals) {
                        self.b.hold(v);
                    }
                    // ... and its caller's loop (`hidden_states = decoder_layer(hidden_states,
                    // ...)`) holds its input until it returns: past its first block where it
                    // has several (OLMo 2's `residual + post_norm(attn(x))`, then the MLP's)
                    self.b.hold(y);
                    if opened {
                        self.b.end_unit();
                    }
                    y = r?;
                }
                y
            }
            Layer::Parallel { branches, join } => {
                self.layers[row].block = true;
                if branches.is_empty() {
                    return Err(err("needs at least one branch".into()));
                }
                let mut outs = Vec::new();
                for (i, br) in branches.iter().enumerate() {
                    outs.push(self.sequence(br, x, at, Slot::Branch(i), None, depth + 1)?);
                }
                self.b.set_layer(row as u32);
                self.join(&outs, *join).map_err(err)?
            }
            Layer::Linear(l) if top.is_some() && top == self.fuse_head => {
                self.b.role = None;
                self.b.param_role = Some(LinearRole::Head);
                let loss = crate::layer::fused_ce::fused_linear_cross_entropy(&mut self.b, l, x);
                self.b.param_role = None;
                let loss = loss.map_err(err)?;
                self.fused_loss = Some(loss);
                loss
            }
            leaf => leaf.lower_leaf(&mut self.b, x).map_err(err)?,
        };
        Ok(out)
    }

    fn join(&mut self, outs: &[ValueId], join: Join) -> std::result::Result<ValueId, String> {
        let first = self.b.shape(outs[0]).clone();
        match join {
            Join::Add => {
                let mut acc = outs[0];
                for &o in &outs[1..] {
                    if self.b.shape(o) != &first {
                        return Err(format!("branch outputs {} and {} cannot be added", first, self.b.shape(o)));
                    }
                    acc = crate::layer::activation::add(&mut self.b, acc, o);
                }
                Ok(acc)
            }
            Join::Concat => {
                let mut channels = 0u64;
                for &o in outs {
                    let s = self.b.shape(o);
                    if s.rank() != first.rank() || s.0[1..] != first.0[1..] {
                        return Err(format!("branch outputs {} and {} differ beyond the channel dimension", first, s));
                    }
                    channels = channels.saturating_add(s.0[0]);
                }
                let mut shape = first.0.clone();
                shape[0] = channels;
                let (ins, dt) = self.b.autocast(crate::lower::CastPolicy::Promote, outs);
                Ok(self.b.op("cat", &ins, &[(Shape(shape), dt)], &[], false, &[], crate::graph::GradRule::Alloc)[0])
            }
        }
    }

    /// The loss: `cross_entropy` = `log_softmax` (saved, N×C) + `nll_loss`; or `mse_loss`.
    /// `input` is the model's input (the labels of a causal LM).
    fn loss(&mut self, loss: Loss, out: ValueId, input: ValueId) -> Result<ValueId> {
        let b = &mut self.b;
        b.set_layer(self.layers.len().saturating_sub(1) as u32);
        let shape = b.shape(out).clone();
        let scalar = Shape::new([]);
        Ok(match loss {
            Loss::CrossEntropy => {
                let rows = Shape::new([shape.numel() / shape.last().max(1)]);
                let target = b.input(rows, DType::I64);
                let (ins, dt) = b.autocast(crate::lower::CastPolicy::Fp32, &[out]);
                let logp = b.op("log_softmax", &ins, &[(shape, dt)], &[], true, &[], crate::graph::GradRule::Alloc)[0];
                let l = b.op("nll_loss", &[logp, target], &[(scalar, DType::F32)], &[logp], false, &[], crate::graph::GradRule::Alloc)[0];
                unbatch(b, l)
            }
            Loss::CausalLm => causal_lm_loss(b, out, input),
            Loss::Mse => {
                let target = b.input(shape, b.dtype(out));
                let (ins, _) = b.autocast(crate::lower::CastPolicy::Fp32, &[out, target]);
                let l = b.op("mse_loss", &ins, &[(scalar, DType::F32)], &ins, false, &[], crate::graph::GradRule::Alloc)[0];
                unbatch(b, l)
            }
        })
    }
}

/// transformers 5.24 `loss/loss_utils.py`, `ForCausalLMLoss`, called by `LlamaForCausalLM.forward`
/// (and every `…ForCausalLM`) with `labels=input_ids`:
/// `logits = logits.float()` (a new fp32 copy under half weights, nothing saved; its backward casts
/// the gradient back to the logits' dtype), `labels = pad(labels, (0, 1), value=-100)` and
/// `shift_labels = labels[..., 1:].contiguous()` (int64; the contiguous copy is `nll_loss`'s saved
/// target), then `cross_entropy` in fp32: `log_softmax` (output saved) and `nll_loss`. The model's
/// `logits` stay referenced by the forward (and its output) until the loss is computed.
fn causal_lm_loss(b: &mut Builder, logits: ValueId, input: ValueId) -> ValueId {
    let shape = b.shape(logits).clone();
    let rows = Shape::new([shape.numel() / shape.last().max(1)]);
    let target = if b.dtype(input) == DType::I64 && b.shape(input).numel() == rows.numel() {
        let padded = Shape::new([rows.numel().saturating_add(1)]);
        let padded = b.op("constant_pad_nd", &[input], &[(padded, DType::I64)], &[], false, &[], GradRule::Alloc)[0];
        b.op("contiguous", &[padded], &[(rows, DType::I64)], &[], false, &[], GradRule::Alloc)[0]
    } else {
        b.input(rows, DType::I64)
    };
    // `--loss bf16-logits`: no `logits.float()`, the loss runs in the logits' dtype
    let upcast = if b.opts.finetune.loss == finetune::LossKernel::Bf16Logits { logits } else { b.cast(logits, DType::F32) };
    let dt = b.dtype(upcast);
    let logp = b.op("log_softmax", &[upcast], &[(shape, dt)], &[], true, &[], GradRule::Alloc)[0];
    let l = b.op("nll_loss", &[logp, target], &[(Shape::new([]), DType::F32)], &[logp, target], false, &[], GradRule::Alloc)[0];
    b.hold(logits);
    unbatch(b, l)
}

/// A reduced loss is one scalar for the whole batch, not one per sample.
fn unbatch(b: &mut Builder, v: ValueId) -> ValueId {
    let s = b.g.storage_of(v) as usize;
    b.g.values[v as usize].batched = false;
    b.g.storages[s].bytes = b.g.values[v as usize].bytes();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::InputSpec;

    /// Every kind's example lowers on one of a few typical inputs: a kind whose row lacks an
    /// example or whose lowering does not handle it fails here.
    #[test]
    fn every_kind_has_an_example_that_lowers() {
        let inputs = [
            (vec![128], InputDType::Float32),
            (vec![16, 128], InputDType::Float32),
            (vec![16, 8, 8], InputDType::Float32),
            (vec![16, 8], InputDType::Float32),
            (vec![8, 128], InputDType::Float32),
            (vec![8], InputDType::Int64),
        ];
        for kind in Layer::KINDS {
            let layer = Layer::example(kind).unwrap_or_else(|| panic!("{kind} has no example"));
            let lowers = inputs.iter().any(|(shape, dtype)| {
                let input = InputSpec { shape: shape.clone(), dtype: *dtype, vocab_size: None };
                // cross-attention reads the memory a `token_input` sets aside: the test input is it
                let layers = match *kind {
                    "contrastive" => vec![Layer::example("token_input").unwrap(), serde_json::from_str(r#"{"kind": "embedding", "num_embeddings": 16, "embedding_dim": 128}"#).unwrap(), serde_json::from_str(r#"{"kind": "select_token"}"#).unwrap(), layer.clone()],
                    "image_tokens" => vec![
                        Layer::example("token_input").unwrap(),
                        serde_json::from_str(r#"{"kind": "embedding", "num_embeddings": 16, "embedding_dim": 128}"#).unwrap(),
                        layer.clone(),
                    ],
                    "image_input" => vec![
                        Layer::example("token_input").unwrap(),
                        serde_json::from_str(r#"{"kind": "embedding", "num_embeddings": 16, "embedding_dim": 128}"#).unwrap(),
                        layer.clone(),
                    ],
                    "cross_attention" | "gated_cross_attention_layer" => vec![
                        Layer::example("token_input").unwrap(),
                        serde_json::from_str(r#"{"kind": "embedding", "num_embeddings": 16, "embedding_dim": 128}"#).unwrap(),
                        layer.clone(),
                    ],
                    _ => vec![layer.clone()],
                };
                let spec = ModelSpec { version: 1, name: None, input, layers, loss: Loss::Mse, names: Default::default(), unquantised: None };
                resolve(&spec, None, LowerOptions::default()).is_ok()
            });
            assert!(lowers, "{kind}: its example lowers on none of the test inputs");
        }
        assert!(Layer::LEAF_KINDS.iter().all(|k| Layer::KINDS.contains(k)));
    }
}
