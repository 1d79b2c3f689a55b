//! What diffusers' offload modes keep on the GPU while one component runs, read from
//! `pipelines/pipeline_utils.py` and accelerate's `hooks.py`:
//!
//! - `enable_model_cpu_offload()`: `cpu_offload_with_hook` chains the components in
//!   `model_cpu_offload_seq`; a component's `CpuOffload.pre_forward` first offloads the previous
//!   one (`prev_module_hook.offload()`), then moves itself to the GPU: one component's weights
//!   on the GPU at a time, the rest in CPU RAM.
//! - `enable_sequential_cpu_offload()`: `cpu_offload(model, offload_buffers=False)` puts an
//!   `AlignDevicesHook` on every leaf module; its weights come to the GPU for that module's
//!   forward and go back to `meta` after it. Buffers stay on the GPU. All weights in CPU RAM.
//! - `enable_group_offload(offload_type="block_level", num_blocks_per_group=1)`
//!   (`hooks/group_offloading.py`): each block of a `ModuleList` is onloaded for its forward and
//!   offloaded after it; the modules outside any block are one group onloaded for the
//!   component's forward. Without `use_stream` nothing is prefetched. The unmatched group
//!   lists a top-level child's buffers twice (as a module's, `group_module.buffers()`, and as a
//!   buffer with no grouped parent, `_gather_buffers_with_no_group_offloading_parent`), and
//!   `_offload_to_memory`'s `group_module.to(offload_device)` replaces a module's buffers
//!   (`Module._apply`: `self._buffers[key] = fn(buf)`) while the listed ones are moved by
//!   `.data`: after one onload and offload the two are different tensors, both onloaded from
//!   then on. A component run more than once (the denoiser's steps, an encoder run for the
//!   prompt and the negative prompt) has its buffers twice on the GPU (`Weights::repeat`;
//!   measured: SD3's `pos_embed` twice in `diffusion_pipeline.jsonl`). Its CPU copies are not
//!   modelled: the CPU RAM is the weights' before the call (the measured `cpu_peak_bytes` of
//!   tiny SD3 holds `pos_embed` three times: 19 % above its `cpu_bytes_before_call`).
//! - `enable_sequential_cpu_offload()` keeps its CPU copy of the weights in
//!   `cpu_offload`'s `state_dict`: parameters and persistent buffers (`Weights::persistent`).

/// An offload mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Offload {
    /// Every component on the GPU (`pipe.to("cuda")`).
    #[default]
    None,
    /// `enable_model_cpu_offload()`.
    Model,
    /// `enable_sequential_cpu_offload()`.
    Sequential,
    /// `enable_group_offload(offload_type="block_level", num_blocks_per_group=1)`.
    Group,
}

crate::config::names!(Offload { None = "none", Model = "model", Sequential = "sequential", Group = "group" });

/// One component's weights as each mode onloads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Weights {
    /// Parameters (as stored).
    pub all: u64,
    /// Persistent buffers.
    pub buffers: u64,
    /// What sequential offload's onloads add to the component's activation peak (at most the
    /// largest leaf module's parameters: `Forward::seq_weights`).
    pub leaf: u64,
    /// What block-level group offload's onloads add to it (at most the weights outside the
    /// blocks plus the largest block's: `Forward::group_weights`).
    pub group: u64,
    /// Persistent buffers (in the `state_dict`: sequential offload's CPU copy holds them).
    pub persistent: u64,
    /// Buffers block-level group offload holds twice (a component run more than once).
    pub repeat: u64,
}

impl Offload {
    /// GPU bytes of one component's weights while it runs (`running`) or while another does.
    pub fn on_gpu(self, w: &Weights, running: bool) -> u64 {
        match (self, running) {
            (Offload::None, _) => w.all + w.buffers,
            (Offload::Model, true) => w.all + w.buffers,
            (Offload::Model, false) => 0,
            (Offload::Sequential, true) => w.leaf + w.buffers,
            (Offload::Sequential, false) => w.buffers,
            (Offload::Group, true) => w.group + w.buffers + w.repeat,
            (Offload::Group, false) => 0,
        }
    }

    /// CPU RAM bytes of one component's weights in this mode (while `running` or not).
    pub fn on_cpu(self, w: &Weights, running: bool) -> u64 {
        match (self, running) {
            (Offload::None, _) => 0,
            (Offload::Model, true) => 0,
            (Offload::Model, false) => w.all + w.buffers,
            (Offload::Sequential, _) => w.all + w.persistent,
            (Offload::Group, _) => w.all + w.buffers,
        }
    }
}
