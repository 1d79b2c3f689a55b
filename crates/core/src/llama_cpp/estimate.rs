//! One llama.cpp run's buffers, device by device.

use crate::gguf::Header;

use super::compute::{compute_bytes, output_bytes};
use super::hparams::Hparams;
use super::kv::{check_types, kv_buffers, Context};
use super::params::{GpuDevice, Params, SplitMode};
use super::placement::{layer_devices, model_buffers, place, Buft};
use super::error::LlamaError;
use super::gallocr::BufType;
use super::build::WeightSlots;

/// One device: the host (system RAM) or a GPU.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceReport {
    /// `CPU` (host memory) or `CUDA<i>`.
    pub backend: String,
    /// The GPU's name (`--gpu`), empty for the host.
    pub gpu: String,
    /// Model buffers by llama.cpp's buffer-type name (`CPU_Mapped`, `CUDA_Host`, `CUDA0`, …).
    pub model_buffers: Vec<(String, u64)>,
    pub model: u64,
    pub k: u64,
    pub v: u64,
    /// The recurrent state of Mamba-style layers: R (convolution) and S (SSM) bytes.
    pub r: u64,
    pub s: u64,
    pub compute: u64,
    pub output: u64,
    /// Layers (of `n_layer` + the output layer) whose weights are here.
    pub layers: u64,
    /// GPU memory, or the host RAM when given; `None` when not known.
    pub capacity: Option<u64>,
}

impl DeviceReport {
    pub fn kv(&self) -> u64 {
        self.k + self.v
    }
    /// The recurrent state (R + S).
    pub fn rs(&self) -> u64 {
        self.r + self.s
    }
    pub fn total(&self) -> u64 {
        self.model + self.kv() + self.rs() + self.compute + self.output
    }
    pub fn fits(&self) -> bool {
        self.capacity.is_none_or(|c| self.total() <= c)
    }
    pub fn is_host(&self) -> bool {
        self.gpu.is_empty()
    }
}

/// What llama.cpp allocates for one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Estimate {
    pub arch: String,
    pub n_layer: u32,
    pub ctx: Context,
    /// Flash attention as resolved (`-fa auto` is on: see [`FlashAttn::Auto`](super::params::FlashAttn::Auto)).
    pub flash_attn: bool,
    /// GPU layers as llama.cpp counts them (`-ngl`, at most `n_layer + 1`).
    pub n_gpu_layers: u64,
    /// The host first, then each GPU.
    pub devices: Vec<DeviceReport>,
}

impl Estimate {
    fn sum(&self, f: impl Fn(&DeviceReport) -> u64) -> u64 {
        self.devices.iter().map(f).sum()
    }
    pub fn model_bytes(&self) -> u64 {
        self.sum(|d| d.model)
    }
    pub fn k_bytes(&self) -> u64 {
        self.sum(|d| d.k)
    }
    pub fn v_bytes(&self) -> u64 {
        self.sum(|d| d.v)
    }
    pub fn kv_bytes(&self) -> u64 {
        self.k_bytes() + self.v_bytes()
    }
    /// The recurrent state, every device.
    pub fn rs_bytes(&self) -> u64 {
        self.sum(DeviceReport::rs)
    }
    pub fn compute_bytes(&self) -> u64 {
        self.sum(|d| d.compute)
    }
    pub fn output_bytes(&self) -> u64 {
        self.sum(|d| d.output)
    }
    pub fn total(&self) -> u64 {
        self.sum(DeviceReport::total)
    }
    /// Every device fits its capacity.
    pub fn fits(&self) -> bool {
        self.devices.iter().all(DeviceReport::fits)
    }
    pub fn gpus(&self) -> impl Iterator<Item = &DeviceReport> {
        self.devices.iter().filter(|d| !d.is_host())
    }
}

/// Sizes one run: the model in `header`, llama.cpp's settings `p`, the GPUs (none: CPU only) and
/// the host RAM if known.
pub fn estimate(header: &Header, p: &Params, gpus: &[GpuDevice], host_ram: Option<u64>) -> Result<Estimate, LlamaError> {
    let hp = Hparams::from_header(header)?;
    check_types(&hp, p)?;
    if p.split_mode == SplitMode::Row && !gpus.is_empty() {
        // `make_gpu_buft_list`: CUDA's registry exports no `ggml_backend_split_buffer_type`.
        return Err(LlamaError::Params(
            "-sm row: llama.cpp fails to load (\"device CUDA0 does not support split buffers\"): its CUDA backend no longer has row-split buffers (removed upstream, #24216); use -sm layer (the default) or -sm none".into(),
        ));
    }
    let ctx = Context::new(&hp, p)?;
    let layer_dev = layer_devices(&hp, p, gpus)?;
    let placed = place(header, &hp, p, gpus)?;
    let flash_attn = p.flash_attn_on();

    let mut devices = vec![DeviceReport {
        backend: "CPU".into(),
        gpu: String::new(),
        model_buffers: Vec::new(),
        model: 0,
        k: 0,
        v: 0,
        r: 0,
        s: 0,
        compute: 0,
        output: 0,
        layers: 0,
        capacity: host_ram,
    }];
    for (i, g) in gpus.iter().enumerate() {
        devices.push(DeviceReport { backend: format!("CUDA{i}"), gpu: g.name.clone(), capacity: Some(g.capacity), ..devices[0].clone() });
    }
    let slot = |b: Buft| b.gpu().map_or(0, |i| i + 1);
    for (b, bytes) in model_buffers(header, &placed) {
        let d = &mut devices[slot(b)];
        d.model_buffers.push((b.name(), bytes));
        d.model += bytes;
    }
    for (b, kv) in kv_buffers(&hp, p, &ctx, &layer_dev) {
        let d = &mut devices[slot(b)];
        d.k += kv.k;
        d.v += kv.v;
    }
    for (b, rs) in super::recurrent::rs_buffers(&hp, &ctx, &layer_dev) {
        let d = &mut devices[slot(b)];
        d.r += rs.r;
        d.s += rs.s;
    }
    for dev in &layer_dev {
        devices[dev.map_or(0, |i| i + 1)].layers += 1;
    }
    // The output buffer is host memory wherever the output layer is.
    devices[0].output = output_bytes(&hp, &ctx);
    let n = hp.n_layer as usize;
    let out_dev = layer_dev[n].map_or(0, |i| i + 1);
    let slots: Vec<usize> = layer_dev.iter().map(|d| d.map_or(0, |i| i + 1)).collect();
    let weights = weight_slots(&placed, &slots);
    if let Some(graphs) = super::models::graphs_placed(header, &hp, &ctx, p, &slots, Some(&weights)) {
        // The graph llama.cpp reserves, allocated as ggml-alloc does (`models`, `gallocr`).
        // `llama_context`'s condition for pipeline parallelism (`cparams.pipeline_parallel`).
        let all_on_gpus = layer_dev.iter().all(Option::is_some);
        let pipeline = gpus.len() > 1 && all_on_gpus && p.split_mode == SplitMode::Layer && p.overrides.is_empty() && p.n_cpu_moe == 0;
        let n_copies = if pipeline { super::sched::PIPELINE_COPIES } else { 1 };
        // The scheduler's backends are the model's devices (`-sm none`: the main GPU alone).
        let n_backend_gpus = if p.split_mode == SplitMode::None { gpus.len().min(1) } else { gpus.len() };
        let graphs: Vec<_> = graphs
            .into_iter()
            .map(|mut g| {
                super::sched_assign::assign(&mut g, n_backend_gpus, p.op_offload);
                super::sched::split(g, n_copies)
            })
            .collect();
        let types: Vec<_> = (0..devices.len()).map(|i| if i == 0 { BufType::CPU } else { BufType::CUDA }).collect();
        for (d, bytes) in devices.iter_mut().zip(super::models::compute_buffers(&graphs, &types)) {
            d.compute = bytes;
        }
        let n_gpu_layers = layer_dev.iter().filter(|d| d.is_some()).count() as u64;
        return Ok(Estimate { arch: hp.arch.clone(), n_layer: hp.n_layer, ctx, flash_attn, n_gpu_layers, devices });
    }
    for (slot, d) in devices.iter_mut().enumerate() {
        let has_layers = layer_dev[..n].iter().any(|x| x.map_or(0, |i| i + 1) == slot);
        let head = out_dev == slot;
        d.compute = if has_layers || head {
            compute_bytes(&hp, &ctx, flash_attn, has_layers, head)
        } else if slot == 0 {
            // The host backend with every layer on GPUs: the input embeddings (`inp_embd`,
            // get_rows of n_ubatch rows), read from source, not measured.
            hp.n_embd * ctx.n_ubatch * 4
        } else {
            0
        };
    }
    let n_gpu_layers = layer_dev.iter().filter(|d| d.is_some()).count() as u64;
    Ok(Estimate { arch: hp.arch.clone(), n_layer: hp.n_layer, ctx, flash_attn, n_gpu_layers, devices })
}

/// Each weight's backend (0 the host, `i + 1` GPU `i`) by name; the tied output's copy of
/// `token_embd` apart (the output layer's duplicate).
fn weight_slots(placed: &[super::placement::Placed], layer_slots: &[usize]) -> WeightSlots {
    let slot = |b: Buft| b.gpu().map_or(0, |i| i + 1);
    let mut w = WeightSlots::default();
    for p in placed {
        if p.tensor.name == "token_embd.weight" && w.by_name.contains_key("token_embd.weight") {
            w.tied_output = Some(slot(p.buft));
            continue;
        }
        w.by_name.entry(p.tensor.name.clone()).or_insert(slot(p.buft));
    }
    if w.tied_output.is_none() {
        // Deduplicated: the output layer uses the input's copy, in the same buffer type.
        w.tied_output = w.by_name.get("token_embd.weight").copied().or(layer_slots.last().copied());
    }
    w
}
