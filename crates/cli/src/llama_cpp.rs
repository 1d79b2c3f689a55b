//! `vramcalc llama-cpp --gguf FILE`: what llama.cpp allocates per device, under llama.cpp's own
//! flag names (`-c`, `-ngl`, `-ctk`, …), formatted from `vramcalc_core::llama_cpp::Estimate`.
//!
//! clap takes one-letter short flags only, so `normalize_args` spells llama.cpp's multi-letter
//! short flags (`-ngl 20`, `-ctk=q8_0`) as their long names before clap parses, and only after the
//! `llama-cpp` subcommand.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::fmt::Write;
use std::io::Read;
use std::path::PathBuf;
use vramcalc_core::gguf::{GgmlType, GgufError, Header};
use vramcalc_core::llama_cpp::{fit, DeviceReport, Estimate, FlashAttn, GpuDevice, Params, SplitMode, Target};
use vramcalc_core::memory::device::gpu;
use vramcalc_core::units::parse_bytes;
use vramcalc_core::{format_bytes, ByteUnit};

/// llama.cpp's short flags and the long names this command gives them (`common/arg.cpp`).
const SHORT: &[(&str, &str)] = &[
    ("-c", "--ctx-size"),
    ("-b", "--batch-size"),
    ("-ub", "--ubatch-size"),
    ("-ctk", "--cache-type-k"),
    ("-ctv", "--cache-type-v"),
    ("-fa", "--flash-attn"),
    ("-np", "--parallel"),
    ("-ngl", "--n-gpu-layers"),
    ("-ot", "--override-tensor"),
    ("-ts", "--tensor-split"),
    ("-sm", "--split-mode"),
    ("-kvu", "--kv-unified"),
    ("-ncmoe", "--n-cpu-moe"),
];

/// Rewrites llama.cpp's short flags after the `llama-cpp` subcommand to their long names.
///
/// `vramcalc max --of context|gpu-layers` with `--gguf` (or `--hf-config … --quant`) is this
/// engine's reverse question: it becomes `llama-cpp --max-of …` (the solver's `max` of issue 26,
/// answered by llama.cpp's own allocation).
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let llama_setup = args.iter().any(|a| a == "--gguf" || a == "--quant" || a.to_str().is_some_and(|s| s.starts_with("--gguf=") || s.starts_with("--quant=")));
    if llama_setup && args.get(1).is_some_and(|a| a == "max") {
        args[1] = "llama-cpp".into();
        for a in args.iter_mut() {
            if a == "--of" {
                *a = "--max-of".into();
            } else if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--of=")) {
                *a = format!("--max-of={v}").into();
            }
        }
    }
    let mut seen = false;
    args.into_iter()
        .map(|a| {
            if !seen {
                seen = a == "llama-cpp";
                return a;
            }
            let Some(s) = a.to_str() else { return a };
            let (flag, value) = match s.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (s, None),
            };
            match SHORT.iter().find(|(short, _)| *short == flag) {
                Some((_, long)) => match value {
                    Some(v) => OsString::from(format!("{long}={v}")),
                    None => OsString::from(*long),
                },
                None => a,
            }
        })
        .collect()
}

#[derive(Args)]
pub struct LlamaCppArgs {
    /// The GGUF file (only its header is read: metadata and tensor infos).
    #[arg(long, required_unless_present = "hf_config", conflicts_with = "hf_config")]
    pub gguf: Option<PathBuf>,
    /// Without a file: a Hugging Face config.json (llama, mistral, qwen2, qwen3, qwen3_moe), its
    /// tensors typed as llama-quantize types them for `--quant`.
    #[arg(long = "hf-config", requires = "quant")]
    pub hf_config: Option<PathBuf>,
    /// The llama-quantize recipe for `--hf-config`: Q4_K_M, Q5_K_M, Q6_K, Q8_0, F16, …
    #[arg(long)]
    pub quant: Option<String>,
    /// `vramcalc max --of context|gpu-layers` for this engine: print `{"value": N, …}` (the largest
    /// context, or the most layers on the GPUs, whose every device fits) and exit 1 when none does.
    #[arg(long, value_parser = ["context", "gpu-layers"])]
    pub max_of: Option<String>,
    /// `-c`: context size (0: the model's context_length).
    #[arg(long = "ctx-size", default_value_t = 4096)]
    pub ctx_size: u64,
    /// `-b`: logical batch size.
    #[arg(long = "batch-size", default_value_t = 2048)]
    pub batch_size: u64,
    /// `-ub`: physical batch size (micro-batch).
    #[arg(long = "ubatch-size", default_value_t = 512)]
    pub ubatch_size: u64,
    /// `-ctk`: K cache type (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1).
    #[arg(long = "cache-type-k", default_value = "f16")]
    pub cache_type_k: String,
    /// `-ctv`: V cache type.
    #[arg(long = "cache-type-v", default_value = "f16")]
    pub cache_type_v: String,
    /// `-fa`: flash attention, on | off | auto.
    #[arg(long = "flash-attn", default_value = "auto")]
    pub flash_attn: String,
    /// `-np`: parallel sequences (server slots).
    #[arg(long = "parallel", default_value_t = 1)]
    pub parallel: u64,
    /// `--kv-unified`: one KV buffer shared by all sequences.
    #[arg(long = "kv-unified")]
    pub kv_unified: bool,
    /// `-ngl`: layers on the GPUs (a number, `all` or `auto`; default all when GPUs are given).
    #[arg(long = "n-gpu-layers")]
    pub n_gpu_layers: Option<String>,
    /// `--n-cpu-moe N`: keep the experts of the first N layers on the CPU.
    #[arg(long = "n-cpu-moe", default_value_t = 0)]
    pub n_cpu_moe: u64,
    /// `-ot PATTERN=CPU|CUDA<i>[,…]`: tensor buffer overrides (repeatable).
    #[arg(long = "override-tensor")]
    pub override_tensor: Vec<String>,
    /// `-ts N0,N1,…`: proportions of the layers per GPU.
    #[arg(long = "tensor-split")]
    pub tensor_split: Option<String>,
    /// `-sm none|layer|row`.
    #[arg(long = "split-mode", default_value = "layer")]
    pub split_mode: String,
    /// `--swa-full`: a full-size cache for sliding-window layers.
    #[arg(long = "swa-full")]
    pub swa_full: bool,
    /// `--no-mmap`: read the weights into allocated memory instead of mapping the file.
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
    /// `--no-op-offload`: keep the ops of CPU-held weights on the CPU for large batches too
    /// (llama.cpp's default, `--op-offload`, runs them on the first GPU, copying the weights).
    #[arg(long = "no-op-offload", overrides_with = "op_offload")]
    pub no_op_offload: bool,
    /// `--op-offload` (the default).
    #[arg(long = "op-offload", overrides_with = "no_op_offload")]
    pub op_offload: bool,
    #[command(flatten)]
    pub devices: Devices,
}

/// The cards and host a llama.cpp run is sized for, and how the answer prints (`llama-cpp` and
/// `ollama` alike).
#[derive(Args)]
pub struct Devices {
    /// A GPU id from `vramcalc gpus`, once per card (mixed cards allowed); none: CPU only.
    #[arg(long = "gpu")]
    pub gpu: Vec<String>,
    /// System RAM to check the host's buffers against (e.g. `64GiB`).
    #[arg(long)]
    pub ram: Option<String>,
    /// Print the estimate as JSON.
    #[arg(long)]
    pub json: bool,
    /// Byte units of the text: MB or MiB.
    #[arg(long, default_value = "MiB")]
    pub units: String,
}

impl Devices {
    pub fn gpus(&self) -> Result<Vec<GpuDevice>> {
        gpu_devices(&self.gpu)
    }

    pub fn ram(&self) -> Result<Option<u64>> {
        parse_ram(self.ram.as_deref())
    }

    pub fn unit(&self) -> ByteUnit {
        unit_of(&self.units)
    }
}

/// Reads the header, growing the read while the reader asks for more bytes.
pub fn read_header(path: &PathBuf) -> Result<Header> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let size = f.metadata()?.len();
    let mut buf = Vec::new();
    let mut want: u64 = 1 << 20;
    loop {
        let have = buf.len() as u64;
        if want > have {
            (&mut f).take(want - have).read_to_end(&mut buf)?;
        }
        match Header::parse_with_size(&buf, Some(size)) {
            Ok(h) => return Ok(h),
            Err(GgufError::NeedMore { at_least, .. }) if at_least <= size && (buf.len() as u64) < size => {
                want = at_least.max(want * 2).min(size);
            }
            Err(e) => return Err(anyhow!("{}: {e}", path.display())),
        }
    }
}

fn ggml_type(flag: &str, s: &str) -> Result<GgmlType> {
    GgmlType::from_name(s).ok_or_else(|| anyhow!("{flag} {s}: unknown type (f16, q8_0, q4_0, …)"))
}

impl LlamaCppArgs {
    pub fn params(&self, n_gpus: usize) -> Result<Params> {
        use vramcalc_core::llama_cpp::flags;
        let flash_attn = FlashAttn::from_name(&self.flash_attn)?;
        let n_gpu_layers = self.n_gpu_layers.as_deref().map(flags::parse_gpu_layers).transpose()?.flatten();
        // `parse_tensor_buffer_overrides`: comma-separated PATTERN=BUFFER pairs, per -ot.
        let mut overrides = Vec::new();
        for spec in &self.override_tensor {
            overrides.extend(flags::parse_overrides(spec)?);
        }
        let tensor_split = self.tensor_split.as_deref().map(flags::parse_tensor_split).transpose()?.unwrap_or_default();
        let split_mode = SplitMode::from_name(&self.split_mode)?;
        if n_gpus == 0 && (n_gpu_layers.is_some_and(|n| n > 0) || !overrides.iter().all(|o| o.target == Target::Cpu)) {
            // llama.cpp ignores -ngl without a GPU; say so rather than pretend.
            eprintln!("vramcalc: no --gpu given: every buffer is on the CPU");
        }
        Ok(Params {
            n_ctx: self.ctx_size,
            n_batch: self.batch_size,
            n_ubatch: self.ubatch_size,
            type_k: ggml_type("-ctk", &self.cache_type_k)?,
            type_v: ggml_type("-ctv", &self.cache_type_v)?,
            flash_attn,
            n_parallel: self.parallel,
            kv_unified: self.kv_unified,
            n_gpu_layers,
            n_cpu_moe: self.n_cpu_moe,
            overrides,
            tensor_split,
            split_mode,
            swa_full: self.swa_full,
            mmap: !self.no_mmap,
            op_offload: !self.no_op_offload,
        })
    }

}

pub fn unit_of(s: &str) -> ByteUnit {
    if s.eq_ignore_ascii_case("mb") {
        ByteUnit::Mb
    } else {
        ByteUnit::Mib
    }
}

fn device_json(d: &DeviceReport) -> Value {
    json!({
        "name": if d.is_host() { "CPU".to_string() } else { format!("{} ({})", d.backend, d.gpu) },
        "backend": d.backend,
        "gpu": if d.is_host() { Value::Null } else { Value::from(d.gpu.clone()) },
        "model_buffers": d.model_buffers.iter().map(|(n, b)| json!({"buffer": n, "bytes": b})).collect::<Vec<_>>(),
        "model_buffer_bytes": d.model,
        "k_bytes": d.k,
        "v_bytes": d.v,
        "kv_bytes": d.kv(),
        "r_bytes": d.r,
        "s_bytes": d.s,
        "rs_bytes": d.rs(),
        "compute_buffer_bytes": d.compute,
        "output_buffer_bytes": d.output,
        "layers": d.layers,
        "total_bytes": d.total(),
        "capacity_bytes": d.capacity,
        "fits": d.fits(),
    })
}

pub fn run(a: &LlamaCppArgs) -> Result<(String, std::process::ExitCode)> {
    let (header, path) = match (&a.gguf, &a.hf_config) {
        (Some(g), _) => (read_header(g)?, g.display().to_string()),
        (None, Some(c)) => {
            let text = std::fs::read_to_string(c).with_context(|| format!("reading {}", c.display()))?;
            let config: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", c.display()))?;
            let q = a.quant.as_deref().unwrap_or("F16");
            let recipe = vramcalc_core::llama_cpp::synth::recipe(q)
                .ok_or_else(|| anyhow!("--quant {q}: not a llama-quantize recipe (Q4_0, Q8_0, Q4_K_M, Q5_K_M, Q6_K, F16, …)"))?;
            let h = vramcalc_core::llama_cpp::synth::header_from_config(&config, recipe).with_context(|| c.display().to_string())?;
            (h, format!("<{q} GGUF of {}>", c.display()))
        }
        (None, None) => bail!("give --gguf FILE or --hf-config FILE --quant NAME"),
    };
    let gpus = a.devices.gpus()?;
    let p = a.params(gpus.len())?;
    let ram = a.devices.ram()?;
    match &a.max_of {
        Some(of) => max_of(of, &header, &p, &gpus, ram, &path, a.devices.json),
        None => report(&header, &p, &gpus, ram, &path, a.devices.json, a.devices.unit(), None).map(|t| (t, std::process::ExitCode::SUCCESS)),
    }
}

/// `max --of context|gpu-layers` under llama.cpp: the value, the command line that runs it, and
/// exit code 1 when even the smallest does not fit.
fn max_of(of: &str, header: &Header, p: &Params, gpus: &[GpuDevice], ram: Option<u64>, path: &str, as_json: bool) -> Result<(String, std::process::ExitCode)> {
    if gpus.is_empty() {
        bail!("--of {of} needs --gpu NAME (the card to fit)");
    }
    let limit = vramcalc_core::llama_cpp::Hparams::from_header(header)?.n_ctx_train.max(p.n_ctx);
    let value = match of {
        "context" => fit::max_context(header, p, gpus, ram, limit)?,
        _ => fit::max_gpu_layers(header, p, gpus, ram)?.map(|(n, _)| n),
    };
    let Some(value) = value else {
        let message = format!("even the smallest {of} does not fit");
        if as_json {
            let v = json!({"of": of, "value": null, "fits": false, "engine": "llama.cpp", "error": message});
            return Ok((serde_json::to_string_pretty(&v)? + "\n", std::process::ExitCode::from(1)));
        }
        eprintln!("vramcalc: {path}: {message}");
        return Ok((String::new(), std::process::ExitCode::from(1)));
    };
    let mut at = p.clone();
    if of == "context" {
        at.n_ctx = value;
    } else {
        at.n_gpu_layers = Some(value);
    }
    let n_layer = vramcalc_core::llama_cpp::estimate(header, &at, gpus, ram)?.n_layer;
    let command = fit::server_command(path, &at, n_layer);
    let text = if as_json {
        serde_json::to_string_pretty(&json!({"value": value, "of": of, "engine": "llama.cpp", "command": command}))? + "\n"
    } else {
        format!("largest {of} that fits under llama.cpp: {value}\n{command}\n")
    };
    Ok((text, std::process::ExitCode::SUCCESS))
}


pub fn parse_ram(ram: Option<&str>) -> Result<Option<u64>> {
    ram.map(|r| parse_bytes(r).ok_or_else(|| anyhow!("--ram {r}: not a size"))).transpose()
}

pub fn gpu_devices(ids: &[String]) -> Result<Vec<GpuDevice>> {
    ids.iter()
        .map(|id| {
            let g = gpu(id).ok_or_else(|| anyhow!("unknown GPU {id:?} (run `vramcalc gpus`)"))?;
            Ok(GpuDevice { name: g.id.to_string(), capacity: g.bytes })
        })
        .collect()
}

/// Formats one run's estimate with its reverse answers; `extra` adds fields to the JSON and
/// lines to the text (Ollama's settings).
#[allow(clippy::too_many_arguments)]
pub fn report(header: &Header, p: &Params, gpus: &[GpuDevice], ram: Option<u64>, path: &str, as_json: bool, unit: ByteUnit, extra: Option<(Value, String)>) -> Result<String> {
    let e = vramcalc_core::llama_cpp::estimate(header, p, gpus, ram)?;
    let p = p.clone();
    let max_ctx_limit = vramcalc_core::llama_cpp::Hparams::from_header(header)?.n_ctx_train.max(p.n_ctx);
    let (max_ctx, max_ngl) = if gpus.is_empty() && ram.is_none() {
        (None, None)
    } else {
        (fit::max_context(header, &p, gpus, ram, max_ctx_limit)?, fit::max_gpu_layers(header, &p, gpus, ram)?)
    };
    let command = fit::server_command(path, &p, e.n_layer);
    if as_json {
        let mut v = json!({
            "arch": e.arch,
            "n_layer": e.n_layer,
            "n_ctx": e.ctx.n_ctx,
            "n_ctx_seq": e.ctx.n_ctx_seq,
            "n_seq": e.ctx.n_seq,
            "n_stream": e.ctx.n_stream,
            "swa_cells": e.ctx.swa_cells,
            "n_batch": e.ctx.n_batch,
            "n_ubatch": e.ctx.n_ubatch,
            "flash_attn": e.flash_attn,
            "n_gpu_layers": e.n_gpu_layers,
            "model_buffer_bytes": e.model_bytes(),
            "kv_bytes": e.kv_bytes(),
            "k_bytes": e.k_bytes(),
            "v_bytes": e.v_bytes(),
            "rs_bytes": e.rs_bytes(),
            "compute_buffer_bytes": e.compute_bytes(),
            "output_buffer_bytes": e.output_bytes(),
            "total_bytes": e.total(),
            "fits": e.fits(),
            "devices": e.devices.iter().map(device_json).collect::<Vec<_>>(),
            "max_context": max_ctx,
            "max_gpu_layers": max_ngl.as_ref().map(|(n, _)| *n),
            "host_bytes_at_max_gpu_layers": max_ngl.as_ref().map(|(_, e)| e.devices[0].total()),
            "command": command,
        });
        if let (Some((Value::Object(x), _)), Some(o)) = (&extra, v.as_object_mut()) {
            o.extend(x.clone());
        }
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    Ok(text(&e, unit, max_ctx, max_ngl.as_ref(), &command) + &extra.map(|(_, t)| t).unwrap_or_default())
}

fn text(e: &Estimate, u: ByteUnit, max_ctx: Option<u64>, max_ngl: Option<&(u64, Estimate)>, command: &str) -> String {
    let f = |b: u64| format_bytes(b, u);
    let mut s = String::new();
    let streams = if e.ctx.n_stream > 1 { format!("{} streams of {} cells", e.ctx.n_stream, e.ctx.n_ctx_seq) } else { format!("{} cells", e.ctx.n_ctx_seq) };
    let _ = writeln!(s, "llama.cpp: {} ({} layers), n_ctx {} ({streams}), n_ubatch {}, flash attention {}, {}/{} layers on GPU",
        e.arch, e.n_layer, e.ctx.n_ctx, e.ctx.n_ubatch, if e.flash_attn { "on" } else { "off" }, e.n_gpu_layers, e.n_layer + 1);
    if e.ctx.swa_cells > 0 {
        let _ = writeln!(s, "sliding-window layers: {} cells each", e.ctx.swa_cells);
    }
    let _ = writeln!(s, "{:<22} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  fits", "device", "model", "K", "V", "compute", "output", "total", "capacity");
    for d in &e.devices {
        let name = if d.is_host() { "CPU (RAM)".to_string() } else { format!("{} {}", d.backend, d.gpu) };
        let cap = d.capacity.map_or("-".into(), f);
        let _ = writeln!(s, "{name:<22} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {cap:>11}  {}",
            f(d.model), f(d.k), f(d.v), f(d.compute), f(d.output), f(d.total()), if d.capacity.is_none() { "-" } else if d.fits() { "yes" } else { "NO" });
        for (b, bytes) in &d.model_buffers {
            let _ = writeln!(s, "  {b} model buffer {}", f(*bytes));
        }
        if d.rs() > 0 {
            let _ = writeln!(s, "  recurrent state R {}, S {} (in the total)", f(d.r), f(d.s));
        }
    }
    let _ = writeln!(s, "{:<22} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}", "total", f(e.model_bytes()), f(e.k_bytes()), f(e.v_bytes()), f(e.compute_bytes()), f(e.output_bytes()), f(e.total()));
    if let Some(c) = max_ctx {
        let _ = writeln!(s, "largest context that fits: -c {c}");
    } else if e.gpus().next().is_some() {
        let _ = writeln!(s, "largest context that fits: none (not even -c 256)");
    }
    if let Some((n, at)) = max_ngl {
        let _ = writeln!(s, "most GPU layers that fit: -ngl {n} of {} (host RAM then {})", e.n_layer + 1, f(at.devices[0].total()));
    }
    let _ = writeln!(s, "command: {command}");
    s
}
