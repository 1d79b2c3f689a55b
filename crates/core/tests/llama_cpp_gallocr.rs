//! `llama_cpp::gallocr` on the graphs llama.cpp itself reserved: each graph that
//! `ggml_gallocr_reserve_n` was given, dumped by `tools/llama_cpp/graph_dump_shim.c`
//! (`tools/llama_cpp/dump_graphs.py`; a few kept in `tests/data/llama_cpp/graphs/*.graph`), allocated
//! here must need exactly the compute buffer llama.cpp logged for that run; the graphs built here
//! must be those graphs node by node; and every measured run of a modelled architecture must get
//! its compute buffer to the byte.

use std::collections::HashMap;
use vramcalc_core::gguf::GgmlType;
use vramcalc_core::llama_cpp::gallocr::{reserve, BufType};
use vramcalc_core::llama_cpp::ggml::{Graph, Op, Tensor};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/llama_cpp/graphs");

fn op_of(name: &str) -> Op {
    match name {
        "NONE" => Op::None,
        "ADD" => Op::Add,
        "ADD_ID" => Op::AddId,
        "MUL" => Op::Mul,
        "DIV" => Op::Div,
        "SCALE" => Op::Scale,
        "RMS_NORM" => Op::RmsNorm,
        "ROPE" => Op::Rope,
        "SOFT_MAX" => Op::SoftMax,
        "CLAMP" => Op::Clamp,
        "FILL" => Op::Fill,
        "VIEW" => Op::View,
        "RESHAPE" => Op::Reshape,
        "PERMUTE" => Op::Permute,
        "TRANSPOSE" => Op::Transpose,
        "GET_ROWS" => Op::GetRows,
        "SET_ROWS" => Op::SetRows,
        "MUL_MAT" => Op::MulMat,
        "MUL_MAT_ID" => Op::MulMatId,
        "CONT" => Op::Cont,
        "CPY" => Op::Cpy,
        "NORM" => Op::Norm,
        "FLASH_ATTN_EXT" => Op::FlashAttnExt,
        "ARGSORT" => Op::Argsort,
        "TOP_K" => Op::TopK,
        "SUM_ROWS" => Op::SumRows,
        "CONCAT" => Op::Concat,
        "REPEAT" => Op::Repeat,
        // The GLU ops print their own names too.
        "SWIGLU" | "GEGLU" | "REGLU" | "GEGLU_ERF" | "GEGLU_QUICK" | "SWIGLU_OAI" => Op::Glu,
        // The unary ops print their own names (`ggml_op_desc`).
        "TANH" | "SILU" | "GELU" | "SIGMOID" | "RELU" | "EXP" | "SOFTPLUS" | "GELU_QUICK" | "ABS" | "NEG" => Op::Unary,
        _ => Op::Other,
    }
}

/// The graphs of one dump: `GRAPH n_nodes n_leafs`, then `L`/`N` lines (see the shim).
pub fn parse(text: &str) -> Vec<Graph> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(h) = lines.next() {
        assert!(h.starts_with("GRAPH"), "{h}");
        let mut g = Graph::default();
        let mut id: HashMap<String, usize> = HashMap::new();
        let mut rows = Vec::new();
        while let Some(l) = lines.peek() {
            if l.starts_with("GRAPH") {
                break;
            }
            rows.push(lines.next().unwrap().to_string());
        }
        // First pass: the tensors (every source is itself a node or a leaf); second: the links.
        let f: Vec<Vec<String>> = rows.iter().map(|r| r.split(' ').map(str::to_string).collect()).collect();
        for x in &f {
            let ty = GgmlType::from_id(x[5].parse().unwrap()).unwrap();
            let ne: [u64; 4] = std::array::from_fn(|i| x[6 + i].parse().unwrap());
            let nb: [u64; 4] = std::array::from_fn(|i| x[10 + i].parse().unwrap());
            let t = g.push(Tensor {
                op: op_of(&x[4]),
                ty,
                ne,
                nb,
                flags: x[14].parse::<u8>().unwrap() & 3,
                external: x[15] == "1" || x[16] == "1",
                view_src: None,
                src: vec![],
                backend: x[29].parse().unwrap(),
            });
            id.insert(x[2].clone(), t);
            if x[0] == "L" {
                g.leafs.push(t);
            } else {
                g.nodes.push(t);
            }
        }
        for (i, x) in f.iter().enumerate() {
            g.t[i].view_src = (x[17] != "(nil)").then(|| id[&x[17]]);
            g.t[i].src = (19..29).filter(|&j| x[j] != "(nil)").map(|j| id[&x[j]]).collect();
        }
        out.push(g);
    }
    out
}

#[test]
fn gallocr_sizes_llama_cpps_own_graphs_exactly() {
    let mut n = 0;
    // VRAMCALC_GRAPHS: another folder of dumps (as tools/llama_cpp/dump_graphs.py writes them).
    let dir = std::env::var("VRAMCALC_GRAPHS").unwrap_or_else(|_| DATA.to_string());
    let mut bad = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "graph") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let want: u64 = std::fs::read_to_string(p.with_extension("size")).unwrap().trim().parse().unwrap();
        let graphs = parse(&text);
        let got = graphs.iter().map(|g| reserve(g, &[BufType::CPU])[0]).max().unwrap();
        println!("{}: {} graphs, got {got}, llama.cpp {want}", p.display(), graphs.len());
        if got != want {
            bad.push(p.display().to_string());
        }
        n += 1;
    }
    assert!(n >= 1);
    assert!(bad.is_empty(), "{bad:?}");
}

mod llama_cpp_common;
use llama_cpp_common as common;

/// The graph built here against the one llama.cpp reserved, node by node (op, type, shape);
/// `VRAMCALC_GRAPHS` points at dumps named `<model>-<record index>.graph` (measured records
/// first, then the held-out ones).
#[test]
fn built_graphs_match_llama_cpps_node_by_node() {
    let dir = std::env::var("VRAMCALC_GRAPHS").unwrap_or_else(|_| DATA.to_string());
    let mut recs = common::records_of("measured.jsonl");
    recs.extend(common::records_of("heldout.jsonl"));
    let mut checked = 0;
    let mut bad = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let path = format!("{dir}/{}-{i}.graph", r.model);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let want = parse(&text);
        let p = common::params(&r.v);
        let Some(got) = vramcalc_core::llama_cpp::reserve_graphs(&r.header, &p).unwrap() else { continue };
        checked += 1;
        for (gi, (a, b)) in got.iter().zip(want.iter()).enumerate() {
            let sig = |g: &Graph, n: usize| {
                let t = &g.t[g.nodes[n]];
                (t.op, t.ty.id, t.ne)
            };
            let m = a.nodes.len().min(b.nodes.len());
            if let Some(k) = (0..m).find(|&k| sig(a, k) != sig(b, k)).or((a.nodes.len() != b.nodes.len()).then_some(m)) {
                let show = |g: &Graph| (k.saturating_sub(2)..(k + 3).min(g.nodes.len())).map(|j| format!("{j}:{:?}", sig(g, j))).collect::<Vec<_>>();
                bad.push(format!("{path} graph {gi}: node {k} of {}/{}: built {:?}\n   llama.cpp {:?}", a.nodes.len(), b.nodes.len(), show(a), show(b)));
                break;
            }
        }
    }
    for b in bad.iter().take(6) {
        println!("{b}");
    }
    println!("{checked} checked, {} differ", bad.len());
    assert!(bad.is_empty());
}

/// The compute buffer of every measured run of a modelled architecture, to the byte: the graph
/// built here, allocated by `gallocr`, against llama.cpp's logged buffer (CPU backend).
#[test]
fn compute_buffers_of_modelled_architectures_are_exact() {
    let mut recs = common::records_of("measured.jsonl");
    let n_measured = recs.len();
    recs.extend(common::records_of("heldout.jsonl"));
    let (mut exact, mut modelled) = (0, 0);
    for (i, r) in recs.iter().enumerate() {
        let p = common::params(&r.v);
        if vramcalc_core::llama_cpp::reserve_graphs(&r.header, &p).unwrap().is_none() {
            continue;
        }
        modelled += 1;
        let e = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[], None).unwrap();
        let want: u64 = r.v["compute_buffers"].as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum();
        let set = if i < n_measured { "measured" } else { "held out" };
        assert_eq!(e.compute_bytes(), want, "{set} {} {}", r.model, r.v["params"]);
        exact += 1;
    }
    println!("{exact} of {modelled} modelled runs exact");
    assert!(modelled >= 204, "{modelled}");
}

/// Settings never used while the graphs were written (`tools/measure_llama_cpp.py --fresh`:
/// 32 k context, `-ub 64` and `-ub 2048`, two sequences with q8_0 K and q4_0 V, a unified cache
/// with a quantized K and no flash attention), every model: the compute buffer to the byte, and
/// the KV and output buffers and the total with it.
#[test]
fn fresh_settings_are_exact() {
    let recs = common::records_of("fresh.jsonl");
    assert!(recs.len() >= 80, "{}", recs.len());
    let sum = |v: &serde_json::Value| -> u64 { v.as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum() };
    for r in &recs {
        let p = common::params(&r.v);
        let e = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[], None).unwrap();
        let what = format!("{} {}", r.model, r.v["params"]);
        assert_eq!(e.compute_bytes(), sum(&r.v["compute_buffers"]), "compute: {what}");
        assert_eq!(e.kv_bytes(), sum(&r.v["kv_buffers"]), "KV: {what}");
        assert_eq!(e.output_bytes(), sum(&r.v["output_buffers"]), "output: {what}");
        let total: u64 = ["model_buffers", "kv_buffers", "compute_buffers", "output_buffers"].iter().map(|k| sum(&r.v[*k])).sum();
        assert_eq!(e.total(), total, "total: {what}");
    }
}

/// qwen2moe (shared expert with a sigmoid gate) and mistral3, moved onto the graph after the
/// others: written from source (`models/qwen2moe.cpp`, `models/mistral3.cpp`) before
/// `tools/measure_llama_cpp.py --more` measured them (every model at `configs()` and the fresh
/// settings; the `ho-` models other sizes and types): every buffer to the byte.
#[test]
fn more_architectures_are_exact() {
    let recs = common::records_of("more.jsonl");
    assert!(recs.len() >= 342, "{}", recs.len());
    let sum = |v: &serde_json::Value| -> u64 { v.as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum() };
    let mut bad = Vec::new();
    for r in &recs {
        let p = common::params(&r.v);
        assert!(vramcalc_core::llama_cpp::reserve_graphs(&r.header, &p).unwrap().is_some(), "{} has a graph", r.model);
        let e = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[], None).unwrap();
        let what = format!("{} {}", r.model, r.v["params"]);
        assert_eq!(e.model_bytes(), sum(&r.v["model_buffers"]), "model: {what}");
        assert_eq!(e.kv_bytes(), sum(&r.v["kv_buffers"]), "KV: {what}");
        assert_eq!(e.output_bytes(), sum(&r.v["output_buffers"]), "output: {what}");
        let (got, want) = (e.compute_bytes(), sum(&r.v["compute_buffers"]));
        if got != want {
            bad.push(format!("compute {got} vs {want} ({:+.3} %): {what}", 100.0 * (got as f64 / want as f64 - 1.0)));
        }
    }
    for b in bad.iter().take(8) {
        println!("{b}");
    }
    assert!(bad.is_empty(), "{} of {} differ", bad.len(), recs.len());
}

/// The device split (`llama_cpp/sched.rs`, read from source, not measured): with every layer on
/// one GPU the host's compute buffer holds the graph inputs (for `-fa on` the f16 mask
/// `n_kv × n_ubatch`, `inp_embd` and the embedding rows `get_rows` writes on the CPU) and the GPU
/// the rest; each of two GPUs needs less than one GPU alone, and pipeline parallelism's four
/// copies of the inputs make the host's buffer about four times larger.
#[test]
fn the_split_over_devices_follows_the_scheduler() {
    use vramcalc_core::llama_cpp::GpuDevice;
    let recs = common::records_of("measured.jsonl");
    let r = recs.iter().find(|r| r.model == "llama-q8_0" && r.v["params"]["fa"] == "on" && r.v["params"]["type_k"] == "f16").unwrap();
    let p = common::params(&r.v);
    let gpu = |n: &str| GpuDevice { name: n.into(), capacity: 24 << 30 };
    let cpu = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[], None).unwrap();
    let one = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[gpu("a")], None).unwrap();
    let two = vramcalc_core::llama_cpp::estimate(&r.header, &p, &[gpu("a"), gpu("b")], None).unwrap();
    let (n_kv, t, e) = (cpu.ctx.n_ctx_seq, cpu.ctx.n_ubatch, 512);
    let inputs = n_kv * t * 2 + e * t * 4 * 2;
    let host = one.devices[0].compute;
    assert!(host >= inputs && host < inputs + (64 << 10), "host {host}, inputs {inputs}");
    let g1 = one.devices[1].compute;
    assert!(g1 + host >= cpu.compute_bytes() && g1 <= cpu.compute_bytes() + n_kv * t * 2 + (64 << 10), "{g1} vs CPU-only {}", cpu.compute_bytes());
    for d in &two.devices[1..] {
        assert!(d.compute > 0 && d.compute <= g1 + 4 * (n_kv * t * 2 + e * t * 4), "{} vs {g1}", d.compute);
    }
    // Four copies of the inputs (mask and `inp_embd`), one of the rows `get_rows` writes.
    let host2 = two.devices[0].compute;
    let pinned = 4 * (n_kv * t * 2 + e * t * 4) + e * t * 4;
    assert!(host2 >= pinned && host2 <= pinned + (256 << 10), "pipelined host {host2}, expected {pinned}");
}

/// Hostile metadata never panics the graph or the allocator: every integer of each measured
/// model's header set to extremes, each in turn (`estimate` may refuse, never panic).
#[test]
fn extreme_metadata_never_panics() {
    use vramcalc_core::gguf::Value;
    let mut recs = common::records_of("measured.jsonl");
    recs.extend(common::records_of("recurrent.jsonl"));
    recs.extend(common::records_of("more.jsonl"));
    let mut seen = std::collections::HashSet::new();
    let mut runs = 0;
    for r in &recs {
        if !seen.insert(r.model.clone()) {
            continue;
        }
        let p = common::params(&r.v);
        for i in 0..r.header.metadata.len() {
            if !matches!(r.header.metadata[i].1, Value::U32(_) | Value::U64(_) | Value::I32(_)) {
                continue;
            }
            for x in [0u64, 1, 3, 1 << 31, u64::from(u32::MAX), u64::MAX] {
                let mut h = r.header.clone();
                h.metadata[i].1 = Value::U64(x);
                let _ = vramcalc_core::llama_cpp::estimate(&h, &p, &[], None);
                // And with a GPU holding one layer: the scheduler's passes and op offload.
                let gpu = vramcalc_core::llama_cpp::GpuDevice { name: "g".into(), capacity: 24 << 30 };
                let partial = vramcalc_core::llama_cpp::Params { n_gpu_layers: Some(1), ..p.clone() };
                let _ = vramcalc_core::llama_cpp::estimate(&h, &partial, &[gpu], None);
                runs += 1;
            }
        }
    }
    assert!(runs > 1500, "{runs}");
}

/// Mamba and Mamba-2 (`recurrent.jsonl`): the graphs built here against llama.cpp's reserved
/// ones (`rec-<model>-<index>.graph`, dumped as `tools/llama_cpp/dump_graphs.py` does, a few kept),
/// node by node, and llama.cpp's graphs allocated here against its logged buffer.
#[test]
fn recurrent_graphs_match_llama_cpps() {
    let dir = std::env::var("VRAMCALC_GRAPHS").unwrap_or_else(|_| DATA.to_string());
    let recs = common::records_of("recurrent.jsonl");
    let mut checked = 0;
    for (i, r) in recs.iter().enumerate() {
        let path = format!("{dir}/rec-{}-{i}.graph", r.model);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let want = parse(&text);
        let p = common::params(&r.v);
        let got = vramcalc_core::llama_cpp::reserve_graphs(&r.header, &p).unwrap().unwrap();
        for (gi, (a, b)) in got.iter().zip(want.iter()).enumerate() {
            let sig = |g: &Graph, n: usize| {
                let t = &g.t[g.nodes[n]];
                (t.op, t.ty.id, t.ne)
            };
            let m = a.nodes.len().min(b.nodes.len());
            let k = (0..m).find(|&k| sig(a, k) != sig(b, k)).or((a.nodes.len() != b.nodes.len()).then_some(m));
            if let Some(k) = k {
                let show = |g: &Graph| (k.saturating_sub(3)..(k + 3).min(g.nodes.len())).map(|j| format!("{j}:{:?}", sig(g, j))).collect::<Vec<_>>();
                panic!("{path} graph {gi}: node {k} of {}/{}: built {:?}\n   llama.cpp {:?}", a.nodes.len(), b.nodes.len(), show(a), show(b));
            }
        }
        let measured: u64 = r.v["compute_buffers"].as_object().unwrap().values().map(|x| x.as_u64().unwrap()).sum();
        let theirs = want.iter().map(|g| reserve(g, &[BufType::CPU])[0]).max().unwrap();
        assert_eq!(theirs, measured, "{path}");
        checked += 1;
    }
    println!("{checked} recurrent graphs checked");
    assert!(checked >= 2, "{checked}");
}
