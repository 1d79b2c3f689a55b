//! The scheduler's op offload with a GPU (`ggml_backend_sched`, `sched_assign.rs`): read from
//! source, not measured (no GPU here). Checked on the measured models' headers for what follows
//! from the mechanism itself: batches below 32 tokens and `--no-op-offload` keep the CPU's work
//! on the CPU, and with offload the first GPU holds a copy of the largest CPU weight it runs.
mod llama_cpp_common;
use llama_cpp_common as common;
use vramcalc_core::llama_cpp::{estimate, Estimate, GpuDevice, Params};

fn models() -> Vec<common::Record> {
    let mut seen = std::collections::HashSet::new();
    common::records_of("measured.jsonl").into_iter().filter(|r| seen.insert(r.model.clone())).collect()
}

fn run(r: &common::Record, p: &Params) -> Estimate {
    let gpu = GpuDevice { name: "gpu".into(), capacity: 24 << 30 };
    estimate(&r.header, p, &[gpu], None).unwrap()
}

/// Below `GGML_OP_OFFLOAD_MIN_BATCH` rows op offload changes nothing. `get_op_batch_size`
/// counts rows, so the per-head Q/K norms (qwen3, gemma3: heads × tokens) and gpt-oss's expert
/// biases (experts used × tokens) of 16 tokens are offloaded all the same.
#[test]
fn small_batches_are_not_offloaded() {
    for r in models() {
        let p = Params { n_gpu_layers: Some(2), n_ubatch: 16, n_batch: 16, ..common::params(&r.v) };
        let on = run(&r, &p);
        let off = run(&r, &Params { op_offload: false, ..p });
        let rows_per_token = r.header.tensors.iter().any(|t| t.name.contains("attn_q_norm") || t.name.contains("ffn_up_exps.bias"));
        assert_eq!(on.devices == off.devices, !rows_per_token, "{}", r.model);
    }
}

/// `-ngl 0 --no-op-offload`: nothing runs on the GPU; the host's compute buffer is the
/// CPU-only run's, exactly (every node on one backend: the graph is unchanged).
#[test]
fn no_op_offload_without_gpu_layers_is_the_cpu_run() {
    for r in models() {
        let p = Params { n_gpu_layers: Some(0), op_offload: false, ..common::params(&r.v) };
        let e = run(&r, &p);
        let cpu = estimate(&r.header, &p, &[], None).unwrap();
        assert_eq!(e.devices[1].compute, 0, "{}", r.model);
        assert_eq!(e.devices[0].compute, cpu.devices[0].compute, "{}", r.model);
    }
}

/// `-ngl 0` with op offload: the prompt's graph runs on the first GPU, which holds, while each
/// runs, a copy of every CPU weight of a matrix product — at least the largest, padded as CUDA
/// pads (last row to 512 elements, 128-byte alignment); the host keeps the graph inputs and the
/// token embeddings' rows (less than without a GPU).
#[test]
fn op_offload_copies_the_cpu_weights_to_the_first_gpu() {
    for r in models() {
        let p = Params { n_gpu_layers: Some(0), ..common::params(&r.v) };
        let e = run(&r, &p);
        let cpu = estimate(&r.header, &p, &[], None).unwrap();
        let largest = r
            .header
            .tensors
            .iter()
            .filter(|t| t.dims.len() >= 2 && t.name.contains("weight") && !t.name.starts_with("token_embd") && !t.name.contains("norm"))
            .map(|t| {
                let pad = if t.ggml_type.is_quantized() && t.ne(0) % 512 != 0 { t.ggml_type.row_bytes(512 - t.ne(0) % 512) } else { 0 };
                (t.n_bytes() + pad).div_ceil(128) * 128
            })
            .max()
            .unwrap();
        assert!(e.devices[1].compute >= largest, "{}: {} < {largest}", r.model, e.devices[1].compute);
        assert!(e.devices[0].compute < cpu.devices[0].compute, "{}", r.model);
        // Every layer offloaded: no CPU weight is read, and op offload has nothing to do.
        let full = Params { n_gpu_layers: None, ..p.clone() };
        assert_eq!(run(&r, &full).devices, run(&r, &Params { op_offload: false, ..full }).devices, "{}", r.model);
    }
}

/// `--n-cpu-moe` with op offload: the experts' products of a prompt run on the first GPU with
/// the expert tensors copied (the CPU runs none of them); with `--no-op-offload` they run on
/// the CPU, whose buffer then holds their activations.
#[test]
fn cpu_experts_are_offloaded_for_prompts() {
    let r = models().into_iter().find(|r| r.model == "qwen3moe-q8_0").unwrap();
    let p = Params { n_cpu_moe: 99, ..common::params(&r.v) };
    let on = run(&r, &p);
    let off = run(&r, &Params { op_offload: false, ..p.clone() });
    let all_gpu = run(&r, &Params { n_cpu_moe: 0, ..p });
    assert_eq!(on.devices[0].compute, all_gpu.devices[0].compute);
    assert!(on.devices[1].compute >= all_gpu.devices[1].compute);
    assert!(off.devices[0].compute >= all_gpu.devices[0].compute);
}

/// `-sm row`: the llama.cpp followed here has no CUDA split buffers (`make_gpu_buft_list`
/// throws), so an estimate with GPUs is refused; without GPUs the mode is never consulted.
#[test]
fn split_mode_row_is_refused_with_gpus() {
    use vramcalc_core::llama_cpp::SplitMode;
    let r = models().into_iter().next().unwrap();
    let p = Params { split_mode: SplitMode::Row, ..common::params(&r.v) };
    let gpu = GpuDevice { name: "gpu".into(), capacity: 24 << 30 };
    let err = estimate(&r.header, &p, &[gpu.clone(), gpu], None).unwrap_err().to_string();
    assert!(err.contains("split buffers"), "{err}");
    assert!(estimate(&r.header, &p, &[], None).is_ok());
}

/// `-sm none`: the main GPU alone is the model's device (`llama_prepare_model_devices`), so a
/// second card holds nothing and the first holds what a one-GPU run gives it, op offload
/// included (the scheduler's backends are that GPU and the CPU).
#[test]
fn split_mode_none_is_the_main_gpu_alone() {
    use vramcalc_core::llama_cpp::SplitMode;
    for r in models() {
        for ngl in [None, Some(2)] {
            let p = Params { split_mode: SplitMode::None, n_gpu_layers: ngl, ..common::params(&r.v) };
            let gpu = GpuDevice { name: "gpu".into(), capacity: 24 << 30 };
            let two = estimate(&r.header, &p, &[gpu.clone(), gpu], None).unwrap();
            let one = run(&r, &p);
            assert_eq!(two.devices[..2], one.devices[..], "{}", r.model);
            assert_eq!(two.devices[2].total(), 0, "{}", r.model);
        }
    }
}
