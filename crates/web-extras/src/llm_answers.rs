//! What the LLM panel answers below its fields (issues 14–15), as HTML: for a multi-GPU job, the
//! fewest GPUs on which it fits and rank 0's device total against the number of GPUs (a bar
//! chart); for a language model in inference or generate mode, its serving capacity under vLLM on
//! the chosen GPU (`vramcalc_core::serve`), with the batch as the concurrency and the sequence as
//! the context. The figures are the CLI's (`vramcalc fewest-gpus`, `vramcalc serve`).

use crate::llm_form::escape;
use vramcalc_core::distributed::{first_gpus, DistConfig, GpuSteps};
use vramcalc_core::formats::KvDtype;
use vramcalc_core::serve::{self, ServeConfig};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::whatif::finetune::FineTuneTrick;
use vramcalc_core::whatif_gen::GenTrick;
use vramcalc_core::{format_bytes, thousands, ByteUnit, Mode, Precision, TrainConfig};

/// The largest job the panel tries (the CLI's `fewest-gpus --max-gpus` default).
const MAX_GPUS: u64 = 4096;
/// The world sizes of the chart.
const CHART_GPUS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The answers' HTML (empty when none applies).
pub fn answers(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: u64, unit: ByteUnit, zh: bool) -> String {
    if capacity == 0 {
        return String::new();
    }
    let tr = |en: &'static str, cn: &'static str| if zh { cn } else { en };
    let b = |x: u64| format_bytes(x, unit);
    let mut out = figures(spec, c, d, &b, &tr);
    if c.mode == Mode::Train && !d.is_default() {
        // filled by `gpus`, step by step, once the panel is on the page
        out.push_str(&format!(r#"<div class="gpu-chart" data-testid="gpu-answers"><p class="small muted">{}</p></div>"#, tr("Sizing the job…", "正在计算所需 GPU…")));
    }
    if c.mode != Mode::Train && spec.is_token_input() {
        out.push_str(&serving(spec, c, d, capacity, &b, &tr));
    }
    if c.mode != Mode::Infer && spec.is_token_input() && d.is_default() {
        out.push_str(&what_ifs(spec, c, d, &b, &tr, zh));
    }
    out
}

/// The LLM what-ifs, each with its peak, its saving and a button that applies it (`data-apply`:
/// the settings it gives, which the panel sends to the app): for training, the fine-tuning ones
/// (`vramcalc_core::whatif::finetune`: LoRA instead of full training, QLoRA instead of LoRA, the
/// loss kernels); for generation, the KV cache ones (`vramcalc_core::whatif_gen`: static or paged
/// cache, half the prompt, an fp8 cache).
fn what_ifs(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, b: &Bytes, tr: &Tr, zh: bool) -> String {
    let Ok(base) = vramcalc_core::estimate(spec, c) else { return String::new() };
    let list: Vec<(&'static str, &'static str, u64, TrainConfig)> = match c.mode {
        Mode::Train => vramcalc_core::whatif::finetune::what_ifs(spec, c)
            .unwrap_or_default()
            .into_iter()
            .map(|w| {
                let label = match w.trick {
                    t if !zh => t.describe(),
                    FineTuneTrick::LoraR16 => "LoRA r=16 代替全量微调",
                    FineTuneTrick::Qlora => "QLoRA（NF4 基座）代替 LoRA",
                    FineTuneTrick::ChunkedLoss => "分块线性交叉熵（Liger）",
                    FineTuneTrick::Bf16Logits => "logits 保持半精度",
                };
                (w.trick.id(), label, w.peak, w.config)
            })
            .collect(),
        Mode::Generate => vramcalc_core::whatif_gen::what_ifs(spec, c)
            .unwrap_or_default()
            .into_iter()
            .map(|w| {
                let label = match w.trick {
                    t if !zh => t.describe(),
                    GenTrick::StaticCache => "静态 KV 缓存",
                    GenTrick::PagedCache => "分页 KV 缓存（16 token 一块）",
                    GenTrick::ShorterPrompt => "提示长度减半",
                    GenTrick::Fp8KvCache => "fp8 KV 缓存",
                };
                (w.trick.id(), label, w.peak, w.config)
            })
            .collect(),
        Mode::Infer => Vec::new(),
    };
    if list.is_empty() {
        return String::new();
    }
    let items: String = list
        .iter()
        .map(|(id, label, peak, config)| {
            let saving = base.peak_bytes.saturating_sub(*peak);
            let settings = serde_json::Value::Object(crate::llm_form::settings(config, d)).to_string();
            format!(
                r#"<li>{label}: <b data-testid="llm-whatif-{id}" data-bytes="{peak}">{}</b> (−{}) <button type="button" data-apply="{}" data-testid="llm-apply-{id}">{}</button></li>"#,
                b(*peak),
                b(saving),
                escape(&settings),
                tr("Apply", "应用")
            )
        })
        .collect();
    format!(r#"<div class="ft-whatifs" data-testid="llm-whatifs"><h3>{}</h3><ul class="small">{items}</ul></div>"#, tr("What-ifs for this setup", "此设置的假设方案"))
}

type Tr<'a> = dyn Fn(&'static str, &'static str) -> &'static str + 'a;
type Bytes<'a> = dyn Fn(u64) -> String + 'a;

/// What the LLM settings give (the estimate of the setup, rank 0's for a multi-GPU job):
/// trainable parameters under fine-tuning, the generation's prefill and decode peaks and its KV
/// cache, and for a job on several GPUs the host memory offload keeps.
fn figures(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, b: &Bytes, tr: &Tr) -> String {
    let tuned = c.mode == Mode::Train && !c.finetune.is_default();
    if !tuned && c.mode != Mode::Generate && d.is_default() {
        return String::new();
    }
    let Ok(r) = vramcalc_core::distributed::estimate(spec, c, d) else { return String::new() };
    let e = &r.estimate;
    let fig = |label: &str, testid: &str, bytes: u64| {
        format!(r#"<span class="figure-inline">{label}: <b data-testid="{testid}" data-bytes="{bytes}">{}</b></span> "#, b(bytes))
    };
    let mut out = String::new();
    if tuned {
        let percent = e.trainable_params as f64 * 100.0 / e.params.max(1) as f64;
        out += &format!(
            r#"<span>{}: <b data-testid="trainable" data-count="{}">{}</b> ({percent:.2} %)</span> "#,
            tr("Trainable", "可训练参数"),
            e.trainable_params,
            thousands(e.trainable_params)
        );
        // the parameters' bytes, kept apart as the breakdown keeps them
        let bk = &e.breakdown;
        out += &fig(tr("frozen weights", "冻结权重"), "frozen-bytes", bk.frozen_parameters);
        if bk.adapter_parameters > 0 {
            out += &fig(tr("adapters", "适配器"), "adapter-bytes", bk.adapter_parameters);
        }
    }
    if let Some(g) = &e.generation {
        out += &fig(tr("Prefill peak", "预填充峰值"), "prefill-peak", g.prefill_peak_bytes);
        out += &fig(tr("Decode peak", "解码峰值"), "decode-peak", g.decode_peak_bytes);
    }
    if e.breakdown.kv_cache > 0 {
        out += &fig(tr("KV cache", "KV 缓存"), "kv-cache-bytes", e.breakdown.kv_cache);
    }
    if let Some(dr) = &r.distributed {
        out += &format!(r#"<span data-testid="rank0" data-gpus="{}">{} / {}</span> "#, d.gpus, tr("Rank 0", "0 号进程"), d.gpus);
        out += &fig(tr("Host memory (offload)", "主机内存（卸载）"), "host-memory", dr.host_bytes);
    }
    let mut html = format!(r#"<p class="small llm-figures" data-testid="llm-figures">{out}</p>"#);
    if let Some(dr) = &r.distributed {
        html += &rank_breakdown(&dr.breakdown, e.peak_bytes, b, tr);
    }
    if let Some(g) = e.generation.as_ref().filter(|g| g.decode_series.len() > 1) {
        html += &decode_chart(&g.decode_series, b, tr);
    }
    html
}

/// What the strategy puts into rank 0's peak (`DistBreakdown`: the parameters it keeps sharded
/// and gathered, its gradient shards and buckets, its collectives' buffers), the parts present:
/// a bar of the peak, one segment per part and one for the rest (activations, optimizer state,
/// …), with the figures as its legend.
fn rank_breakdown(x: &vramcalc_core::distributed::DistBreakdown, peak: u64, b: &Bytes, tr: &Tr) -> String {
    let parts = [
        ("sharded-parameters", tr("sharded parameters", "分片参数"), x.sharded_parameters, "#4e79a7"),
        ("gathered-parameters", tr("gathered (unsharded) parameters", "聚合（未分片）参数"), x.unsharded_parameters, "#f28e2b"),
        ("sharded-gradients", tr("sharded gradients", "分片梯度"), x.sharded_gradients, "#e15759"),
        ("gradient-buckets", tr("gradient buckets", "梯度桶"), x.gradient_buckets, "#76b7b2"),
        ("all-gather-buffers", tr("all-gather buffers", "all-gather 缓冲"), x.all_gather_buffers, "#59a14f"),
        ("reduce-scatter-buffers", tr("reduce-scatter buffers", "reduce-scatter 缓冲"), x.reduce_scatter_buffers, "#b07aa1"),
    ];
    let present: Vec<_> = parts.iter().filter(|p| p.2 > 0).collect();
    let rest = present.iter().fold(peak, |left, p| left.saturating_sub(p.2));
    let rest_label = tr("the rest (activations, optimizer state, …)", "其余（激活、优化器状态等）");
    let swatch = |colour: &str| format!(r#"<i aria-hidden="true" style="display:inline-block;width:.8em;height:.8em;margin-right:.3em;background:{colour}"></i>"#);
    let segment = |id: &str, label: &str, bytes: u64, colour: &str| {
        format!(r#"<span data-testid="rank-bar-{id}" data-bytes="{bytes}" title="{label}: {}" style="flex:{bytes} 1 0;min-width:1px;background:{colour}"></span>"#, b(bytes))
    };
    let mut bar: String = present.iter().map(|(id, label, bytes, colour)| segment(id, label, *bytes, colour)).collect();
    bar += &segment("rest", rest_label, rest, "#bab0ac");
    let mut items: String = present
        .iter()
        .map(|(id, label, bytes, colour)| format!(r#"<li>{}{label}: <b data-testid="rank-{id}" data-bytes="{bytes}">{}</b></li>"#, swatch(colour), b(*bytes)))
        .collect();
    items += &format!(r#"<li>{}{rest_label}: <b data-testid="rank-rest" data-bytes="{rest}">{}</b></li>"#, swatch("#bab0ac"), b(rest));
    format!(
        r#"<div class="rank-breakdown" data-testid="rank-breakdown"><h3>{}</h3><div role="img" aria-label="{}" data-testid="chart-rank" style="display:flex;height:1.1em;border-radius:3px;overflow:hidden">{bar}</div><ul class="small">{items}</ul></div>"#,
        tr("Rank 0's peak, by what the strategy allocates", "0 号进程的峰值中，并行策略分配的部分"),
        tr("Rank 0's peak by part", "0 号进程峰值的组成"),
    )
}

/// Memory over the decode steps (`GenerationReport::decode_series`): the peak of each step as
/// the cache grows.
fn decode_chart(series: &[(u64, u64)], b: &Bytes, tr: &Tr) -> String {
    let (w, h) = (360.0, 100.0);
    let (first, last) = (series[0].0 as f64, series[series.len() - 1].0 as f64);
    let lo = series.iter().map(|p| p.1).min().unwrap_or(0) as f64;
    let hi = series.iter().map(|p| p.1).max().unwrap_or(1) as f64;
    let x = |s: u64| (s as f64 - first) / (last - first).max(1.0) * w;
    let y = |v: u64| h - 4.0 - (v as f64 - lo) / (hi - lo).max(1.0) * (h - 8.0);
    let path: String = series.iter().enumerate().map(|(i, p)| format!("{}{:.1},{:.1}", if i == 0 { "M" } else { "L" }, x(p.0), y(p.1))).collect();
    let label = tr("Memory over the decode steps (peak of each step)", "解码各步的显存（每步峰值）");
    format!(
        r#"<div class="decode-chart"><svg class="chart" viewBox="0 0 {w} {}" role="img" aria-label="{label}" data-testid="chart-decode" data-steps="{}" data-last="{}"><title>{label}</title><path class="line" d="{path}"></path><text x="0" y="{}" class="axis-label">{} {}</text><text x="{w}" y="{}" text-anchor="end" class="axis-label">{} {}</text></svg><p class="small muted">{}: {} → {}</p></div>"#,
        h + 14.0,
        series.len(),
        series[series.len() - 1].1,
        h + 12.0,
        tr("step", "步"),
        series[0].0,
        h + 12.0,
        tr("step", "步"),
        series[series.len() - 1].0,
        label,
        b(series[0].1),
        b(series[series.len() - 1].1),
    )
}

/// The fewest GPUs that fit and the per-GPU chart, one world size per step
/// (`distributed::GpuSteps`); `pause` runs before each step (in the browser it yields to the page,
/// so a large model's sizes never hold up typing). `None` when `stop` says a newer request came.
#[allow(clippy::too_many_arguments)] // the panel's request, and the two hooks that let the page breathe
pub async fn gpus<F: std::future::Future<Output = ()>>(
    spec: &ModelSpec,
    c: &TrainConfig,
    d: &DistConfig,
    capacity: u64,
    unit: ByteUnit,
    zh: bool,
    pause: impl Fn() -> F,
    stop: impl Fn() -> bool,
) -> Option<String> {
    let tr = |en: &'static str, cn: &'static str| if zh { cn } else { en };
    let b = |x: u64| format_bytes(x, unit);
    let chart_end = *CHART_GPUS.last().unwrap_or(&1);
    let first = first_gpus(d);
    let mut points = Vec::new();
    let mut fewest: Option<Result<Option<(u64, u64)>, String>> = None;
    let mut steps = GpuSteps::new(spec, c, d, 1);
    loop {
        pause().await;
        if stop() {
            return None;
        }
        let Some((n, peak)) = steps.step() else { break };
        if n >= first && fewest.is_none() {
            match &peak {
                Ok((_, total)) if *total <= capacity => {
                    pause().await;
                    fewest = Some(Ok(Some((n, steps.max_batch(capacity).unwrap_or(c.batch)))));
                }
                Err(e) => fewest = Some(Err(e.to_string())),
                _ => {}
            }
        }
        if let (Ok((peak, total)), true) = (peak, n <= chart_end) {
            points.push((n, peak, total));
        }
        if (fewest.is_some() && n >= chart_end) || n >= MAX_GPUS {
            break;
        }
    }
    let fewest = match fewest.unwrap_or(Ok(None)) {
        Ok(Some((n, batch))) => format!(
            r#"<p class="small" data-testid="fewest-gpus" data-gpus="{n}" data-batch="{batch}">{} <b>{n}</b> ({}) · {} <b>{batch}</b></p>"#,
            tr("Fewest GPUs that fit:", "能放下的最少 GPU 数："),
            d.strategy.name(),
            tr("largest batch per GPU there:", "此时每卡最大批大小：")
        ),
        Ok(None) => format!(r#"<p class="small" data-testid="fewest-gpus" data-gpus="">{} {MAX_GPUS}</p>"#, tr("Does not fit on up to", "最多")),
        Err(e) => format!(r#"<p class="small error" data-testid="fewest-gpus">{}</p>"#, escape(&e)),
    };
    let top = points.iter().map(|p| p.2).max().unwrap_or(0).max(capacity).max(1);
    let (w, h, bar) = (360u64, 120u64, 40u64);
    let y = |v: u64| h - (v as f64 / top as f64 * (h - 16) as f64) as u64;
    let bars: String = points
        .iter()
        .enumerate()
        .map(|(i, &(n, _, total))| {
            let x = 8 + i as u64 * (bar + 10);
            let cls = if total <= capacity { "fits" } else { "over" };
            format!(
                r#"<rect class="{cls}" x="{x}" y="{}" width="{bar}" height="{}" data-gpus="{n}" data-bytes="{total}"><title>{n} × GPU: {}</title></rect><text x="{}" y="{}" text-anchor="middle">{n}</text>"#,
                y(total),
                h - y(total),
                b(total),
                x + bar / 2,
                h + 12
            )
        })
        .collect();
    let cap = y(capacity);
    Some(format!(
        r#"{fewest}<svg class="chart" viewBox="0 0 {w} {}" role="img" aria-label="{label}" data-testid="chart-gpus"><title>{label}</title>{bars}<line class="capacity" x1="0" x2="{w}" y1="{cap}" y2="{cap}"></line></svg>"#,
        h + 16,
        label = tr("Rank 0's device total against the number of GPUs (line: the GPU's memory)", "0 号进程的显存总量与 GPU 数（线：单卡显存）"),
    ))
}

/// Serving capacity under vLLM: the batch as the concurrency, the sequence as the context.
fn serving(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: u64, b: &Bytes, tr: &Tr) -> String {
    let g = &c.generate;
    let context = match c.mode {
        Mode::Generate => g.prompt_len.or(spec.seq_len(c.seq_len)).unwrap_or(1).saturating_add(g.new_tokens),
        _ => spec.seq_len(c.seq_len).unwrap_or(1),
    };
    let precision = if c.precision == Precision::Fp16 { Precision::Fp16 } else { Precision::Bf16 };
    let default_kv = if precision == Precision::Fp16 { KvDtype::Fp16 } else { KvDtype::Bf16 };
    let cfg = ServeConfig {
        tensor_parallel: if d.strategy == vramcalc_core::distributed::Strategy::Tp { d.tp_degree() } else { 1 },
        concurrency: Some(c.batch),
        kv_dtype: g.kv_dtype.and_then(|k| KvDtype::parse(k.name())).unwrap_or(default_kv),
        precision,
        weights: c.weights,
        ..ServeConfig::new(capacity, context)
    };
    let cap = match serve::capacity(spec, &cfg) {
        Ok(cap) => cap,
        Err(e) => return format!(r#"<p class="small error" data-testid="serve-error">{}</p>"#, escape(&e.to_string())),
    };
    let longest = cap.max_context_at_concurrency.map_or_else(|| "—".to_string(), thousands);
    // vLLM's accounting of one GPU, in its order (`vramcalc serve` prints the same rows)
    let graphs = if cap.cuda_graph_in_budget { cap.cuda_graph_bytes } else { 0 };
    let rows = [
        (format!("{} × {}", tr("GPU memory", "GPU 显存"), cap.gpu_memory_utilization), cap.requested_bytes, "serve-requested"),
        (format!("− {} ({})", tr("weights", "权重"), cap.weights_format), cap.weights_bytes, "serve-weights"),
        (format!("− {}*", tr("activation peak of the profile run", "分析运行的激活峰值")), cap.activation_peak_bytes, "serve-activations"),
        (format!("− {}*", tr("non-torch memory", "非 torch 显存")), cap.non_torch_bytes, "serve-non-torch"),
        (format!("− {}*", tr("CUDA graphs", "CUDA graph")), graphs, "serve-cuda-graphs"),
        (format!("= {} ({})", tr("KV cache pool", "KV 缓存池"), cap.kv_dtype), cap.kv_pool_bytes, "serve-kv-pool"),
    ];
    let table: String = rows
        .iter()
        .map(|(label, bytes, id)| format!(r#"<tr><td>{}</td><td class="num" data-testid="{id}" data-bytes="{bytes}">{}</td></tr>"#, escape(label), b(*bytes)))
        .collect();
    let outside = if cap.cuda_graph_in_budget {
        String::new()
    } else {
        format!(
            " {} {}*, {} {}*.",
            tr("Outside the budget: CUDA graphs", "预算之外：CUDA graph"),
            b(cap.cuda_graph_bytes),
            tr("the CUDA context", "CUDA 上下文"),
            b(vramcalc_core::memory::device::CUDA_CONTEXT_BYTES)
        )
    };
    format!(
        r#"<div class="serve" data-testid="serve"><h3>{}</h3><table class="small"><tbody>{table}</tbody></table><p class="small"><b data-testid="serve-tokens" data-count="{}">{}</b> {} ({} {}) · <b data-testid="serve-max-concurrency" data-count="{}">{}</b> {} · <b data-testid="serve-max-context" data-count="{}">{longest}</b> {}</p><p class="small muted">{}{outside}</p></div>"#,
        tr("Serving with vLLM (per GPU)", "用 vLLM 服务（每卡）"),
        cap.kv_tokens,
        thousands(cap.kv_tokens),
        tr("tokens of KV cache", "个 token 的 KV 缓存"),
        b(cap.kv_bytes_per_token),
        tr("per token", "每 token"),
        cap.max_concurrency,
        thousands(cap.max_concurrency),
        escape(&format!("{} {}", tr("sequences of", "条序列，每条"), thousands(context))),
        cap.max_context_at_concurrency.unwrap_or(0),
        escape(&format!("{} {} {}", tr("tokens of context at", "token 上下文，并发"), thousands(c.batch), tr("concurrent sequences", "条"))),
        tr(
            "* modelled from vLLM's profiling code (gpu_worker.py, gpu_model_runner.py); the batch is the concurrency, the sequence the context (vramcalc serve).",
            "* 按 vLLM 的显存分析代码建模（gpu_worker.py、gpu_model_runner.py）；批大小即并发数，序列长度即上下文（vramcalc serve）。"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;
    use vramcalc_core::distributed::Strategy;

    /// A newer request stops the sizing.
    #[test]
    fn sizing_stops_for_a_newer_request() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 4, seq_len: Some(256), ..Default::default() };
        let d = DistConfig { gpus: 2, strategy: Strategy::Zero3, ..Default::default() };
        assert_eq!(block_on(gpus(&spec, &c, &d, 8 << 30, ByteUnit::Mib, false, || std::future::ready(()), || true)), None);
    }

    #[test]
    fn a_multi_gpu_job_gets_the_fewest_gpus_and_a_bar_per_world_size() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 4, seq_len: Some(256), ..Default::default() };
        let d = DistConfig { gpus: 2, strategy: Strategy::Zero3, ..Default::default() };
        let html = block_on(gpus(&spec, &c, &d, 8 << 30, ByteUnit::Mib, false, || std::future::ready(()), || false)).unwrap();
        assert!(answers(&spec, &c, &d, 8 << 30, ByteUnit::Mib, false).contains("gpu-answers"));
        let (n, batch) = vramcalc_core::distributed::fewest_gpus(&spec, &c, &d, 8 << 30, MAX_GPUS).unwrap().unwrap();
        assert!(html.contains(&format!(r#"data-gpus="{n}" data-batch="{batch}""#)), "{html}");
        for (gpus, _, total) in vramcalc_core::distributed::sweep_gpus(&spec, &c, &d, &CHART_GPUS) {
            assert!(html.contains(&format!(r#"data-gpus="{gpus}" data-bytes="{total}""#)), "{gpus}: {html}");
        }
        assert!(!answers(&spec, &c, &DistConfig::default(), 8 << 30, ByteUnit::Mib, false).contains("fewest-gpus"), "one GPU: no job to size");
    }

    /// Rank 0's host memory under offload and a LoRA setup's trainable count, as the CLI's
    /// `estimate --gpus --strategy --offload` and `--finetune lora` give them.
    #[test]
    fn the_figures_are_the_estimates() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 2, seq_len: Some(64), ..Default::default() };
        let d = DistConfig { gpus: 4, strategy: Strategy::Zero3, offload: vramcalc_core::distributed::Offload::Optimizer, ..Default::default() };
        let report = vramcalc_core::distributed::estimate(&spec, &c, &d).unwrap().distributed.unwrap();
        let host = report.host_bytes;
        assert!(host > 0);
        let html = answers(&spec, &c, &d, 80 << 30, ByteUnit::Mib, false);
        assert!(html.contains(&format!(r#"data-testid="host-memory" data-bytes="{host}""#)) && html.contains(r#"data-gpus="4""#), "{html}");
        let sharded = report.breakdown.sharded_parameters;
        assert!(sharded > 0 && html.contains(&format!(r#"data-testid="rank-sharded-parameters" data-bytes="{sharded}""#)), "{html}");
        // the bar of rank 0's peak: its segments add up to the peak
        let peak = vramcalc_core::distributed::estimate(&spec, &c, &d).unwrap().estimate.peak_bytes;
        let segments: u64 = html
            .split(r#"data-testid="rank-bar-"#)
            .skip(1)
            .map(|s| s.split(r#"data-bytes=""#).nth(1).and_then(|b| b.split('"').next()).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(segments, peak);
        assert!(html.contains(r#"data-testid="rank-bar-sharded-parameters""#), "{html}");
        // generation: the decode steps' chart ends at the decode peak
        let mut g = TrainConfig { mode: Mode::Generate, batch: 1, ..Default::default() };
        (g.generate.prompt_len, g.generate.new_tokens) = (Some(64), 32);
        let e = vramcalc_core::estimate(&spec, &g).unwrap().generation.unwrap();
        let html = answers(&spec, &g, &DistConfig::default(), 80 << 30, ByteUnit::Mib, false);
        let last = e.decode_series.last().unwrap().1;
        assert_eq!(last, e.decode_peak_bytes);
        assert!(html.contains(&format!(r#"data-last="{last}""#)), "{html}");
        let mut lora = c;
        lora.finetune.method = vramcalc_core::finetune::Method::Lora;
        let e = vramcalc_core::estimate(&spec, &lora).unwrap();
        let html = answers(&spec, &lora, &DistConfig::default(), 80 << 30, ByteUnit::Mib, false);
        assert!(html.contains(&format!(r#"data-testid="trainable" data-count="{}""#, e.trainable_params)), "{html}");
        let (frozen, adapters) = (e.breakdown.frozen_parameters, e.breakdown.adapter_parameters);
        assert!(frozen > 0 && adapters > 0);
        assert!(html.contains(&format!(r#"data-testid="frozen-bytes" data-bytes="{frozen}""#)) && html.contains(&format!(r#"data-testid="adapter-bytes" data-bytes="{adapters}""#)), "{html}");
    }

    #[test]
    fn inference_of_a_language_model_gets_its_serving_capacity() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { mode: Mode::Infer, batch: 8, seq_len: Some(1024), ..Default::default() };
        let html = answers(&spec, &c, &DistConfig::default(), 24 << 30, ByteUnit::Mib, true);
        let want = serve::capacity(&spec, &ServeConfig { concurrency: Some(8), ..ServeConfig::new(24 << 30, 1024) }).unwrap();
        assert!(html.contains(&format!(r#"data-testid="serve-kv-pool" data-bytes="{}""#, want.kv_pool_bytes)), "{html}");
        assert!(html.contains(&format!(r#"data-testid="serve-max-concurrency" data-count="{}""#, want.max_concurrency)));
        assert!(html.contains("用 vLLM"));
        let cnn = vramcalc_core::presets::build("resnet18").unwrap();
        assert!(answers(&cnn, &c, &DistConfig::default(), 24 << 30, ByteUnit::Mib, false).is_empty());
    }

    /// Full training of a language model offers LoRA r=16 (and the loss kernels); "Apply" carries
    /// the settings the what-if gives, which read back as its setup.
    #[test]
    fn full_training_of_a_language_model_offers_the_fine_tuning_what_ifs() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 2, seq_len: Some(128), ..Default::default() };
        let html = answers(&spec, &c, &DistConfig::default(), 24 << 30, ByteUnit::Mib, false);
        let list = vramcalc_core::whatif::finetune::what_ifs(&spec, &c).unwrap();
        let lora = list.iter().find(|w| w.trick == FineTuneTrick::LoraR16).unwrap();
        assert!(html.contains(&format!(r#"data-testid="llm-whatif-lora-r16" data-bytes="{}""#, lora.peak)), "{html}");
        let settings = escape(&serde_json::Value::Object(crate::llm_form::settings(&lora.config, &DistConfig::default())).to_string());
        assert!(html.contains(&format!(r#"data-apply="{settings}""#)), "{html}");
        let mut back = serde_json::to_value(c).unwrap();
        back.as_object_mut().unwrap().extend(crate::llm_form::settings(&lora.config, &DistConfig::default()));
        assert_eq!(serde_json::from_value::<TrainConfig>(back).unwrap(), lora.config);
    }
}
