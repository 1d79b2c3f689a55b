//! The op vocabulary layers are lowered to: one method per aten-level op, each stating what it
//! allocates and what it saves for backward (PyTorch's `derivatives.yaml`, observed on torch 2.x).
//!
//! Autocast is applied here, as PyTorch applies it per op: matmul-like ops cast their inputs to the
//! half dtype (weights once per forward, cached), fp32-list ops cast to fp32, the rest run in
//! their inputs' widest dtype.

use crate::graph::{GradRule, Graph, Ids, Lin, Op, StorageClass, Storage, Value, ValueId};
use crate::config::{AttentionImpl, AutocastDevice, Device, Framework, Precision};
use crate::finetune::{FineTune, LinearRole, NameStyle};
use crate::units::{DType, Shape};
use std::collections::HashMap;

/// Settings that change which ops run (as opposed to how big they are).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LowerOptions {
    pub training: bool,
    pub precision: Precision,
    pub autocast_device: AutocastDevice,
    pub device: Device,
    pub attention: AttentionImpl,
    pub checkpointing: bool,
    /// `torch.autocast(cache_enabled=…)`: casts of trainable parameters are kept until the
    /// outermost autocast context exits (the forward's end); off, each use casts afresh.
    pub autocast_cache: bool,
    /// Force every ReLU in place (`Some(true)`) or out of place (`Some(false)`).
    pub inplace_relu: Option<bool>,
    pub framework: Framework,
    /// Which parameters train, LoRA adapters, the base's storage format.
    pub finetune: FineTune,
    /// One forward of `generate()` against a KV cache (`layer/kv_cache.rs`); `None` otherwise.
    pub generation: Option<crate::generation::GenStep>,
    /// Megatron's sequence parallelism over this many tensor-parallel ranks (`layer/seq_parallel.rs`);
    /// 1: off.
    pub sequence_parallel: u64,
    /// The (micro-)batch is one: a `reshape` that folds the batch into a strided dimension is a
    /// view, where a larger batch copies ([`Builder::fold_batch`]).
    pub batch_of_one: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            training: true,
            precision: Precision::Fp32,
            autocast_device: AutocastDevice::Cuda,
            device: Device::Cuda,
            attention: AttentionImpl::Sdpa,
            checkpointing: false,
            autocast_cache: true,
            inplace_relu: None,
            framework: Framework::PytorchEager,
            finetune: FineTune::default(),
            generation: None,
            sequence_parallel: 1,
            batch_of_one: false,
        }
    }
}

/// How autocast treats an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastPolicy {
    /// matmul, linear, conv: inputs cast to the half dtype.
    Lower,
    /// Ops autocast runs in fp32 on this device (softmax, layer_norm on CUDA; losses).
    Fp32,
    /// Everything else: the widest input dtype.
    Promote,
}

/// What an op keeps for backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Save {
    Nothing,
    Input,
    Output,
}

pub struct Builder {
    pub g: Graph,
    pub opts: LowerOptions,
    layer: u32,
    unit: Option<u32>,
    next_unit: u32,
    cast_cache: HashMap<(ValueId, DType), ValueId>,
    /// The first embedding's weight, for `tied_weight` linears.
    pub tied_embedding: Option<ValueId>,
    /// Running count of parameter elements (per-layer counts without rescanning).
    pub param_numel: u64,
    /// Tensors the model computes once per forward and passes to every layer, by op name and
    /// shape (see `per_forward`).
    per_forward: Vec<(&'static str, Shape, ValueId)>,
    /// The first stream's output that a `token_input` layer set aside: what `cross_attention`
    /// and `contrastive` layers read (the encoder's output, the other tower's embedding).
    pub memory: Option<ValueId>,
    /// The estimate's sequence length when the spec's input is not a sequence (an image): a
    /// `token_input` with `prompt` runs at it (a vision-language model's prompt).
    pub prompt_len: Option<u64>,
    /// The current stack's relative position bias (`relative_position_bias`, T5).
    pub position_bias: Option<ValueId>,
    /// Running count of trainable parameter elements.
    pub trainable_numel: u64,
    /// Parameters created now are frozen (`requires_grad=False`), unless `train_only` names them.
    pub frozen: bool,
    /// Role of the linear about to be lowered, set by its caller (`Linear::lower` takes it).
    pub role: Option<LinearRole>,
    /// Role of the linear whose parameters are being created.
    pub param_role: Option<LinearRole>,
    /// Naming style of the current transformer layer.
    pub style: NameStyle,
    /// Weights stored in a bitsandbytes format: `(value, format)`.
    pub quantised: Vec<(ValueId, crate::finetune::BaseFormat)>,
    /// The short module names (`q_proj`, `dense`) of the named linears lowered so far, each once:
    /// what a LoRA setup whose targets match nothing can be told to pick from.
    pub linear_names: Vec<&'static str>,
    /// Into how many parts the residual stream's token dimension is split right now (sequence
    /// parallelism: `t` between the embedding and the output head, else 1).
    pub seq_shards: u64,
    /// Persistent buffers shared by name and dtype (see [`Builder::shared_buffer`]).
    shared_buffers: Vec<(&'static str, DType, u32)>,
    /// Values a decoder layer keeps in a local until it returns, from a block inside it (the
    /// eager attention probabilities of `hidden_states, _ = self.self_attn(...)`): a `repeat`
    /// holds them to the end of each repetition (one decoder layer), see `resolve.rs`.
    pub layer_locals: Vec<ValueId>,
    /// A kohya-ss/sd-scripts LoRA step (`layer/lora_kohya.rs`); `None` otherwise.
    pub kohya: Option<crate::finetune::kohya::Kohya>,
    /// `memory` holds the prompt's token embeddings, set aside by `image_input` while the
    /// vision tower runs (`layer/vision.rs`), not the first stream's output.
    pub prompt_aside: bool,
    /// Values the model's forward keeps referenced until it returns (`keep`: a vision tower's
    /// outputs in the returned `image_outputs`): held to the forward's last op by `resolve`.
    pub forward_locals: Vec<ValueId>,
    /// This forward's image tokens attend to each other (Gemma 3's `token_type_ids`, see
    /// `layer/vision.rs`): every attention layer's mask is one per sample.
    pub image_blocks: bool,
}

impl Builder {
    pub fn new(opts: LowerOptions) -> Self {
        Builder { g: Graph::default(), opts, layer: 0, unit: None, next_unit: 0, cast_cache: HashMap::new(), tied_embedding: None, param_numel: 0, per_forward: Vec::new(), trainable_numel: 0, frozen: false, role: None, param_role: None, style: NameStyle::default(), quantised: Vec::new(), linear_names: Vec::new(), memory: None, prompt_len: None, position_bias: None, seq_shards: 1, shared_buffers: Vec::new(), layer_locals: Vec::new(), kohya: None, prompt_aside: false, forward_locals: Vec::new(), image_blocks: false }
    }

    pub fn set_layer(&mut self, layer: u32) {
        self.layer = layer;
    }

    /// Starts a checkpointing unit (if checkpointing is on and none is open); returns whether it did.
    pub fn begin_unit(&mut self) -> bool {
        if !self.opts.checkpointing || !self.opts.training || self.unit.is_some() {
            return false;
        }
        self.unit = Some(self.next_unit);
        self.next_unit += 1;
        true
    }

    pub fn end_unit(&mut self) {
        self.unit = None;
    }

    /// A tensor the model's forward computes once, outside any checkpointing unit, and passes
    /// to every layer (Hugging Face's rotary tables, the eager causal mask): the first call for
    /// `name` and `shape` emits it with `make`, later calls reuse it. A checkpointed layer keeps
    /// it as an input until its backward.
    pub fn per_forward(&mut self, name: &'static str, shape: &Shape, make: impl FnOnce(&mut Builder) -> ValueId) -> ValueId {
        if let Some(&(_, _, v)) = self.per_forward.iter().find(|(n, s, _)| *n == name && s == shape) {
            return v;
        }
        let unit = self.unit.take();
        let v = make(self);
        self.unit = unit;
        self.per_forward.push((name, shape.clone(), v));
        v
    }

    /// Makes `v` one tensor per sample (an op without batched inputs that still has a batch dim).
    pub fn set_batched(&mut self, v: ValueId) {
        let s = self.g.storage_of(v) as usize;
        self.g.values[v as usize].batched = true;
        self.g.storages[s].bytes = self.g.values[v as usize].bytes();
    }

    /// Runs `f` as one checkpointing unit (when checkpointing is on and none is open).
    pub fn in_unit<T>(&mut self, f: impl FnOnce(&mut Builder) -> T) -> T {
        let opened = self.begin_unit();
        let out = f(self);
        if opened {
            self.end_unit();
        }
        out
    }

    pub fn training(&self) -> bool {
        self.opts.training
    }

    /// The dtype parameters are stored in. Training on a quantised base, every parameter that
    /// is not quantised is fp32: peft's `prepare_model_for_kbit_training` (`utils/other.py`,
    /// which TRL's and the peft examples' QLoRA scripts call) casts each fp16/bf16 parameter that
    /// is not a `Params4bit` to float32 — embeddings, norms, the LM head — so the hidden states
    /// run in fp32 between the 4-bit matmuls (measured: `tests/reference_qlora.rs`).
    pub fn param_dtype(&self) -> DType {
        if self.kbit_prepared() {
            return DType::F32;
        }
        if let Some(k) = self.kohya {
            return k.weights;
        }
        self.compute_dtype()
    }

    /// Training on a bitsandbytes base (the model `prepare_model_for_kbit_training` prepared).
    pub fn kbit_prepared(&self) -> bool {
        self.opts.training && self.opts.finetune.quant_format().is_some_and(crate::finetune::BaseFormat::is_quantised)
    }

    /// The dtype the precision computes in (bitsandbytes' `bnb_4bit_compute_dtype`).
    pub fn compute_dtype(&self) -> DType {
        match self.opts.precision {
            Precision::Fp16 => DType::F16,
            Precision::Bf16 => DType::Bf16,
            _ => DType::F32,
        }
    }

    /// Floating dtype of activations entering the network.
    pub fn float_dtype(&self) -> DType {
        if let Some(k) = self.kohya {
            // kohya's `weight_dtype`, whatever the frozen weights are stored in (`--fp8_base`)
            return k.base;
        }
        self.param_dtype()
    }

    fn autocast_half(&self) -> Option<DType> {
        match self.opts.precision {
            Precision::AmpFp16 => Some(DType::F16),
            Precision::AmpBf16 => Some(DType::Bf16),
            _ => None,
        }
    }

    /// Whether autocast runs softmax / layer_norm in fp32 (CUDA's op list) or leaves them (CPU's).
    pub fn norm_policy(&self) -> CastPolicy {
        match self.opts.autocast_device {
            AutocastDevice::Cuda => CastPolicy::Fp32,
            AutocastDevice::Cpu => CastPolicy::Promote,
        }
    }

    fn new_storage(&mut self, bytes: Lin, class: StorageClass) -> u32 {
        self.g.storages.push(Storage { bytes, class });
        (self.g.storages.len() - 1) as u32
    }

    fn new_value(&mut self, shape: Shape, batched: bool, dtype: DType, rg: bool, class: StorageClass) -> ValueId {
        let v = Value { storage: 0, shape, batched, dtype, requires_grad: rg };
        let s = self.new_storage(v.bytes(), class);
        self.g.values.push(Value { storage: s, ..v });
        (self.g.values.len() - 1) as ValueId
    }

    fn alias_value(&mut self, of: ValueId, shape: Shape, rg: bool) -> ValueId {
        let base = self.g.value(of).clone();
        self.g.values.push(Value { shape, requires_grad: rg, ..base });
        (self.g.values.len() - 1) as ValueId
    }

    pub fn value(&self, v: ValueId) -> &Value {
        self.g.value(v)
    }
    pub fn shape(&self, v: ValueId) -> &Shape {
        &self.g.value(v).shape
    }
    pub fn dtype(&self, v: ValueId) -> DType {
        self.g.value(v).dtype
    }

    /// The model input (batched, no grad).
    pub fn input(&mut self, shape: Shape, dtype: DType) -> ValueId {
        // kohya's `noisy_latents.requires_grad_(True)` (`layer/lora_kohya.rs`)
        let rg = match &mut self.kohya {
            Some(k) if k.grad_inputs > 0 && self.opts.training => {
                k.grad_inputs -= 1;
                true
            }
            _ => false,
        };
        self.new_value(shape, true, dtype, rg, StorageClass::Input)
    }

    /// A parameter of `shape`: trainable unless the current context freezes it.
    pub fn param(&mut self, shape: Shape) -> ValueId {
        let dt = self.param_dtype();
        let trainable = !self.param_frozen();
        self.param_numel = self.param_numel.saturating_add(shape.numel());
        if trainable {
            self.trainable_numel = self.trainable_numel.saturating_add(shape.numel());
        }
        let v = self.new_value(shape, false, dt, trainable, StorageClass::Param);
        self.g.params.push(v);
        v
    }

    /// Whether a parameter created now is frozen: the context is, and `train_only` does not name
    /// the linear being built.
    pub fn param_frozen(&self) -> bool {
        let ft = &self.opts.finetune;
        self.frozen
            && !(ft.method == crate::finetune::Method::Freeze
                && !ft.train_only.is_empty()
                && self.param_role.is_some_and(|r| crate::finetune::names::is_target(r, self.style, &ft.train_only)))
    }

    /// A LoRA adapter weight: trainable, in the adapter dtype (peft's `autocast_adapter_dtype`).
    pub fn adapter_param(&mut self, shape: Shape, dtype: DType) -> ValueId {
        self.param_numel = self.param_numel.saturating_add(shape.numel());
        self.trainable_numel = self.trainable_numel.saturating_add(shape.numel());
        let v = self.new_value(shape, false, dtype, true, StorageClass::Param);
        self.g.params.push(v);
        self.g.adapters.push(v);
        v
    }

    /// Replaces a parameter's storage size (a quantised layout) and records its format.
    pub fn set_quantised(&mut self, v: ValueId, bytes: u64, format: crate::finetune::BaseFormat) {
        let s = self.g.storage_of(v) as usize;
        self.g.storages[s].bytes = Lin { fixed: bytes, per_sample: 0 };
        self.quantised.push((v, format));
    }

    pub fn quant_format_of(&self, v: ValueId) -> Option<crate::finetune::BaseFormat> {
        self.quantised.iter().find(|(q, _)| *q == v).map(|&(_, f)| f)
    }

    /// A non-trainable buffer (running statistics).
    pub fn buffer(&mut self, numel: u64, dtype: DType) {
        let bytes = numel.saturating_mul(dtype.size());
        self.new_storage(Lin { fixed: bytes, per_sample: 0 }, StorageClass::Buffer);
    }

    /// A buffer that lives across steps, shared by every caller asking for `name` in `dtype` and
    /// grown to the largest request: Megatron's `GlobalMemoryBuffer.get_tensor(shape, dtype, name)`
    /// (`megatron/core/utils.py`), which re-allocates only when a request outgrows it and never
    /// frees it. In a steady-state step it exists from the start.
    pub fn shared_buffer(&mut self, name: &'static str, dtype: DType, bytes: Lin) {
        match self.shared_buffers.iter().find(|(n, d, _)| *n == name && *d == dtype) {
            Some(&(_, _, s)) => {
                let have = &mut self.g.storages[s as usize].bytes;
                *have = Lin { fixed: have.fixed.max(bytes.fixed), per_sample: have.per_sample.max(bytes.per_sample) };
            }
            None => {
                let s = self.new_storage(bytes, StorageClass::Buffer);
                self.shared_buffers.push((name, dtype, s));
            }
        }
    }

    /// The general op: `outputs` are new storages; `extras` are saved-only tensors (masks, stats).
    #[allow(clippy::too_many_arguments)]
    pub fn op(
        &mut self,
        name: &'static str,
        inputs: &[ValueId],
        outputs: &[(Shape, DType)],
        save_inputs: &[ValueId],
        save_outputs: bool,
        extras: &[(Shape, bool, DType)],
        grad: GradRule,
    ) -> Vec<ValueId> {
        let rg = self.opts.training && inputs.iter().any(|&i| self.g.value(i).requires_grad);
        let batched = inputs.iter().any(|&i| self.g.value(i).batched);
        let mut outs = Vec::with_capacity(outputs.len());
        let mut allocs = Ids::new();
        for (shape, dt) in outputs {
            let v = self.new_value(shape.clone(), batched, *dt, rg, StorageClass::Activation);
            allocs.push(self.g.storage_of(v));
            outs.push(v);
        }
        let mut saved = Ids::new();
        if rg {
            saved.extend(save_inputs.iter().map(|&i| self.g.storage_of(i)));
            if save_outputs {
                saved.extend(outs.iter().map(|&o| self.g.storage_of(o)));
            }
            for (shape, b, dt) in extras {
                let bytes = Value { storage: 0, shape: shape.clone(), batched: *b, dtype: *dt, requires_grad: false }.bytes();
                let s = self.new_storage(bytes, StorageClass::Activation);
                allocs.push(s);
                saved.push(s);
            }
        }
        // a storage saved twice (an input that is also saved as an output) is kept once; the
        // order does not matter, and not sorting keeps a sort out of the web app's bundle
        let mut unique = Ids::new();
        for s in saved {
            if !unique.contains(&s) {
                unique.push(s);
            }
        }
        let saved = unique;
        self.g.ops.push(Op {
            name,
            layer: self.layer,
            inputs: Ids::from_slice(inputs),
            outputs: Ids::from_slice(&outs),
            allocs,
            saved,
            grad,
            recorded: rg,
            fwd_scratch: Lin::ZERO,
            bwd_scratch: Lin::ZERO,
            unit: self.unit,
        });
        outs
    }

    /// Keeps `v`'s storage alive until the last op emitted so far (a Python local or a module
    /// caller still holds it, e.g. `h = norm(h + x)` keeps the old `h` during `norm`).
    pub fn hold(&mut self, v: ValueId) {
        if let Some(last) = self.g.ops.len().checked_sub(1) {
            let s = self.g.storage_of(v);
            self.g.holds.push((s, last as u32));
        }
    }

    /// Adds forward workspace (a transient output that is dropped at once) to the last op.
    pub fn last_fwd_scratch(&mut self, bytes: Lin) {
        if let Some(op) = self.g.ops.last_mut() {
            op.fwd_scratch = op.fwd_scratch.plus(bytes);
        }
    }

    /// Adds backward workspace to the last op.
    pub fn last_bwd_scratch(&mut self, bytes: Lin) {
        if let Some(op) = self.g.ops.last_mut() {
            op.bwd_scratch = op.bwd_scratch.plus(bytes);
        }
    }

    /// A view (reshape of a contiguous tensor, transpose, select): same storage, no memory.
    pub fn view(&mut self, x: ValueId, shape: Shape) -> ValueId {
        self.view_with_grad(x, shape, GradRule::Alias)
    }

    /// `x.reshape(shape)` where `shape` merges the batch into `x`'s first per-sample dimension
    /// and `x` is strided so that the two merge only at a batch of one: a size-1 dimension
    /// merges with any stride (`computeStride` in `aten/src/ATen/TensorUtils.cpp`), so there
    /// `reshape` is a view; from batch 2 it is a copy (`clone`, then `_unsafe_view`). `matmul`
    /// of 4-d tensors folds its batch dims this way (`_matmul_impl`: `expand(...).reshape(
    /// {batch·heads, m, p})`), and so does Wan's VAE (`permute(0, 2, 1, 3, 4).reshape(b·t, ...)`).
    /// The graph is then per sample only from batch 2: `Graph::folds_batch` tells
    /// `memory::Prepared` to lower a second one with `batch_of_one` for a batch of one.
    pub fn fold_batch(&mut self, x: ValueId, shape: Shape) -> ValueId {
        self.g.folds_batch = true;
        if self.opts.batch_of_one {
            return self.view(x, shape);
        }
        let dt = self.dtype(x);
        self.op("clone", &[x], &[(shape, dt)], &[], false, &[], GradRule::Alias)[0]
    }

    /// A view whose backward follows `grad` (`select` allocates a full-size zero gradient).
    pub fn view_with_grad(&mut self, x: ValueId, shape: Shape, grad: GradRule) -> ValueId {
        let rg = self.g.value(x).requires_grad;
        let out = self.alias_value(x, shape, rg);
        if rg {
            self.g.ops.push(Op {
                name: "view",
                layer: self.layer,
                inputs: smallvec::smallvec![x],
                outputs: smallvec::smallvec![out],
                allocs: Ids::new(),
                saved: Ids::new(),
                grad,
                recorded: true,
                fwd_scratch: Lin::ZERO,
                bwd_scratch: Lin::ZERO,
                unit: self.unit,
            });
        }
        out
    }

    /// An in-place op writing into `x`'s storage (`relu_`, `add_`).
    pub fn inplace(&mut self, name: &'static str, x: ValueId, other: Option<ValueId>, save_output: bool, grad: GradRule) -> ValueId {
        let rg = self.opts.training
            && (self.g.value(x).requires_grad || other.is_some_and(|o| self.g.value(o).requires_grad));
        let shape = self.g.value(x).shape.clone();
        let out = self.alias_value(x, shape, rg);
        let mut inputs: Ids = smallvec::smallvec![x];
        inputs.extend(other);
        let saved = if rg && save_output { smallvec::smallvec![self.g.storage_of(out)] } else { Ids::new() };
        self.g.ops.push(Op {
            name,
            layer: self.layer,
            inputs,
            outputs: smallvec::smallvec![out],
            allocs: Ids::new(),
            saved,
            grad,
            recorded: rg,
            fwd_scratch: Lin::ZERO,
            bwd_scratch: Lin::ZERO,
            unit: self.unit,
        });
        out
    }

    /// Casts to `dtype` (autocast's `_to_copy`); parameter casts are cached for the forward.
    pub fn cast(&mut self, x: ValueId, dtype: DType) -> ValueId {
        if self.g.value(x).dtype == dtype {
            return x;
        }
        // autocast caches casts of leaf tensors that require grad (`cached_cast` in
        // aten/src/ATen/autocast_mode.cpp), when `cache_enabled`
        let is_param = self.opts.autocast_cache
            && self.g.storages[self.g.storage_of(x) as usize].class == StorageClass::Param
            // kohya's frozen fp8 weights (`--fp8_base`) do not require grad: cast at each use
            && (self.kohya.is_none() || self.g.value(x).requires_grad);
        if is_param {
            if let Some(&c) = self.cast_cache.get(&(x, dtype)) {
                return c;
            }
        }
        let shape = self.g.value(x).shape.clone();
        let out = self.op("to_copy", &[x], &[(shape, dtype)], &[], false, &[], GradRule::Alloc)[0];
        if is_param {
            let s = self.g.storage_of(out);
            self.g.storages[s as usize].class = StorageClass::ParamCast;
            self.cast_cache.insert((x, dtype), out);
        }
        out
    }

    /// Casts the inputs of an op as autocast would and returns them with the op's compute dtype.
    pub fn autocast(&mut self, policy: CastPolicy, xs: &[ValueId]) -> (Vec<ValueId>, DType) {
        let widest = xs
            .iter()
            .map(|&x| self.dtype(x))
            .filter(|d| matches!(d, DType::F32 | DType::F16 | DType::Bf16))
            .max_by_key(|d| d.size())
            .unwrap_or(DType::F32);
        let target = match (self.autocast_half(), policy) {
            (Some(h), CastPolicy::Lower) => h,
            (Some(_), CastPolicy::Fp32) => DType::F32,
            _ => widest,
        };
        let cast: Vec<ValueId> = xs
            .iter()
            .map(|&x| if is_float(self.dtype(x)) { self.cast(x, target) } else { x })
            .collect();
        (cast, target)
    }
}

pub fn is_float(d: DType) -> bool {
    // fp8 is a floating type to autocast (`is_autocast_eligible`: `is_floating_point()`)
    matches!(d, DType::F32 | DType::F16 | DType::Bf16 | DType::F8E4m3)
}
