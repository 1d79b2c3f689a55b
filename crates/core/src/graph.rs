//! The resolved model: primitive ops over values and storages, with per-sample sizes.
//!
//! A *value* is a tensor; a *storage* is the memory behind it. Views and in-place ops create new
//! values over an existing storage, so the simulation counts each storage once however many values
//! (or saving ops) refer to it. Parameters are values too, so tied weights and autocast weight copies
//! need no special cases. Sizes are linear in the batch: `fixed + per_sample × batch` bytes.

use crate::units::{DType, Shape};

pub type ValueId = u32;
pub type StorageId = u32;
/// An op's list of value or storage ids, inline up to four (nearly every op's).
pub type Ids = smallvec::SmallVec<[u32; 4]>;

/// Bytes as a linear function of the batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lin {
    pub fixed: u64,
    pub per_sample: u64,
}

impl Lin {
    pub const ZERO: Lin = Lin { fixed: 0, per_sample: 0 };
    pub fn at(self, batch: u64) -> u64 {
        self.fixed.saturating_add(self.per_sample.saturating_mul(batch))
    }
    /// Saturating sum.
    pub fn plus(self, o: Lin) -> Lin {
        Lin { fixed: self.fixed.saturating_add(o.fixed), per_sample: self.per_sample.saturating_add(o.per_sample) }
    }
}

/// What a storage holds, which decides its lifetime and its category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageClass {
    /// The batch (inputs and targets): exists before the step and after it.
    Input,
    /// A trainable parameter.
    Param,
    /// A buffer (BatchNorm running statistics).
    Buffer,
    /// Created by the forward pass.
    Activation,
    /// A half-precision copy of a parameter made by autocast; cached until the forward ends.
    ParamCast,
    /// KV cache memory allocated by this forward that outlives it (`layer/kv_cache.rs`).
    KvNew,
    /// KV cache memory that exists before this forward and outlives it (a static cache).
    KvResident,
    /// A cache tensor of an earlier forward that this one replaces (a dynamic cache's old K or
    /// V): it exists at the start and dies after its last reader (the `cat`).
    KvPast,
}

impl StorageClass {
    /// Held by the KV cache (the breakdown's `kv_cache`).
    pub fn is_kv(self) -> bool {
        matches!(self, StorageClass::KvNew | StorageClass::KvResident | StorageClass::KvPast)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Storage {
    pub bytes: Lin,
    pub class: StorageClass,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub storage: StorageId,
    /// Per-sample shape; the full tensor has a leading batch dimension when `batched`.
    pub shape: Shape,
    pub batched: bool,
    pub dtype: DType,
    pub requires_grad: bool,
}

impl Value {
    pub fn bytes(&self) -> Lin {
        let b = self.shape.numel().saturating_mul(self.dtype.size());
        if self.batched {
            Lin { fixed: 0, per_sample: b }
        } else {
            Lin { fixed: b, per_sample: 0 }
        }
    }
}

/// How an op's backward produces its input gradients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradRule {
    /// New gradient tensors for the inputs (most ops).
    Alloc,
    /// The incoming gradient is passed on unchanged (views, `add`): no new memory
    /// where the input has the output's size.
    Alias,
    /// Each input's gradient is a view of the incoming one (`torch.cat`: `cat_tensors_backward`
    /// narrows it), which stays alive while any slice does.
    Slices,
}

/// One primitive op (an aten op or a fused kernel) in forward order.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub name: &'static str,
    /// Row of the per-layer table ([`crate::resolve::Resolved::layers`]) of the layer that emitted it.
    pub layer: u32,
    pub inputs: Ids,
    pub outputs: Ids,
    /// Storages this op allocates in the forward pass (outputs and extras such as masks).
    pub allocs: Ids,
    /// Storages kept for backward (only for ops recorded by autograd).
    pub saved: Ids,
    pub grad: GradRule,
    /// Recorded by autograd (training, and some input requires grad).
    pub recorded: bool,
    /// Workspace alive only while the op runs, forward and backward.
    pub fwd_scratch: Lin,
    pub bwd_scratch: Lin,
    /// Activation-checkpointing unit this op belongs to.
    pub unit: Option<u32>,
}

/// The op graph of a model for one set of lowering options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    pub storages: Vec<Storage>,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    /// The loss (training) or model output (inference).
    pub output: ValueId,
    /// Parameter values in creation order (for optimizer state and step temporaries).
    pub params: Vec<ValueId>,
    /// `(storage, op)`: the storage stays alive at least until forward op `op` (a Python variable
    /// or a module's caller still refers to it).
    pub holds: Vec<(StorageId, u32)>,
    /// LoRA adapter weights (also in `params`).
    pub adapters: Vec<ValueId>,
    /// A `reshape` folds the batch into a strided dimension (`Builder::fold_batch`): a copy
    /// here, a view at a batch of one, so this graph holds from batch 2 on.
    pub folds_batch: bool,
}

impl Graph {
    pub fn value(&self, v: ValueId) -> &Value {
        &self.values[v as usize]
    }
    pub fn storage_of(&self, v: ValueId) -> StorageId {
        self.values[v as usize].storage
    }
    pub fn param_numel(&self) -> u64 {
        self.params.iter().map(|&p| self.value(p).shape.numel()).fold(0, u64::saturating_add)
    }
    /// Bytes of all parameters as stored (a quantised weight: its packed layout).
    pub fn param_bytes(&self) -> u64 {
        self.params.iter().map(|&p| self.storages[self.storage_of(p) as usize].bytes.fixed).fold(0, u64::saturating_add)
    }
    /// Parameters that train (`requires_grad=True`).
    pub fn trainable_params(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.params.iter().copied().filter(|&p| self.value(p).requires_grad)
    }

    /// Elements of the trainable parameters.
    pub fn trainable_numel(&self) -> u64 {
        self.trainable_params().map(|p| self.value(p).shape.numel()).fold(0, u64::saturating_add)
    }
    /// Stored bytes of the frozen parameters.
    pub fn frozen_param_bytes(&self) -> u64 {
        self.params.iter().filter(|&&p| !self.value(p).requires_grad).map(|&p| self.storages[self.storage_of(p) as usize].bytes.fixed).fold(0, u64::saturating_add)
    }
    /// Bytes of the LoRA adapters.
    pub fn adapter_bytes(&self) -> u64 {
        self.adapters.iter().map(|&p| self.value(p).bytes().fixed).fold(0, u64::saturating_add)
    }
    /// Bytes of the buffers at `batch` samples: a module's (`m.buffers()`) are batch-independent,
    /// a communication buffer holding activations (sequence parallelism's gather) is not.
    pub fn buffer_bytes(&self, batch: u64) -> u64 {
        self.storages
            .iter()
            .filter(|s| s.class == StorageClass::Buffer)
            .map(|s| s.bytes.at(batch))
            .fold(0, u64::saturating_add)
    }
}
