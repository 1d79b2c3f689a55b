//! The "what fits my GPU" table: each row's verdict and margin are its setup's estimate, and its
//! reverse figure is the solver's answer for that setup.

use vramcalc_core::serve::{self, ServeConfig};
use vramcalc_core::solve::fits::{self, FitsOptions, Workload};
use vramcalc_core::solve::{self, Setup, Variable};

const RTX_4090: u64 = 24564 << 20;

#[test]
fn rows_agree_with_the_estimate_and_the_solver() {
    let ids = ["gpt2", "qwen2.5-0.5b", "llama-3.1-8b", "resnet18"];
    let specs: Vec<_> = ids.iter().map(|id| vramcalc_core::import::preset(id).unwrap()).collect();
    let o = FitsOptions { seq_len: Some(512), ..FitsOptions::default() };
    for w in Workload::ALL {
        let models: Vec<(&str, &vramcalc_core::ModelSpec)> = ids.iter().copied().zip(&specs).filter(|(id, _)| !w.needs_lm() || *id != "resnet18").collect();
        let rows = fits::table(&models, w, RTX_4090, &o);
        assert!(rows.len() >= 2 * w.formats().len(), "{w:?}: {} rows", rows.len());
        let mut some_fit = false;
        for r in &rows {
            let spec = models.iter().find(|m| m.0 == r.model).unwrap().1;
            some_fit |= r.fits;
            assert_eq!(r.reverse_of, w.reverse());
            if w == Workload::Serve {
                let cfg = ServeConfig { weights: Some(vramcalc_core::formats::WeightFormat::parse(&r.format).unwrap()), ..ServeConfig::new(RTX_4090, 512) };
                let c = serve::capacity(spec, &cfg).unwrap();
                assert_eq!(r.fits, c.max_concurrency >= 1, "{r:?}");
                assert_eq!(r.reverse_value.unwrap_or(0), c.max_concurrency, "{r:?}");
                continue;
            }
            if w == Workload::LlamaCpp {
                // llama.cpp's own estimate: checked in `solve/fits_llama.rs`
                assert_eq!(r.fits, r.margin_bytes >= 0, "{r:?}");
                assert_eq!(r.fits, r.reverse_value.is_some(), "{r:?}");
                continue;
            }
            let config = fits::config_of(w, &r.format, &o).unwrap();
            let e = vramcalc_core::estimate(spec, &config).unwrap();
            assert_eq!(r.device_total_bytes, e.device_total_bytes, "{r:?}");
            assert_eq!(r.fits, e.device_total_bytes <= RTX_4090, "{r:?}");
            assert_eq!(r.margin_bytes, RTX_4090 as i64 - e.device_total_bytes as i64);
            let solved = solve::max_value(&Setup::new(spec, config), Variable::Batch, RTX_4090).ok().map(|a| a.value);
            assert_eq!(r.reverse_value, solved, "{r:?}");
        }
        assert!(some_fit, "{w:?}: nothing fits a 4090?");
    }
}

/// Smaller formats never need more: along each workload's formats that only shrink the weights
/// (bf16 → int8 → nf4), the device total does not rise.
#[test]
fn smaller_weights_fit_more() {
    let spec = vramcalc_core::import::preset("llama-3.1-8b").unwrap();
    let o = FitsOptions { seq_len: Some(1024), ..FitsOptions::default() };
    let t = |f: &str| fits::row("llama-3.1-8b", &spec, Workload::Infer, f, RTX_4090, &o).unwrap();
    let (bf16, int8, nf4) = (t("bf16"), t("int8"), t("nf4"));
    assert!(bf16.device_total_bytes > int8.device_total_bytes && int8.device_total_bytes > nf4.device_total_bytes);
    assert!(bf16.reverse_value <= int8.reverse_value && int8.reverse_value <= nf4.reverse_value);
}

/// Mixed cards: a training row is rank 0 of DDP over them on the smallest, vLLM runs tensor
/// parallel over all (each rank held to the smallest), llama.cpp splits the layers by memory.
#[test]
fn mixed_cards() {
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    let o = FitsOptions { seq_len: Some(512), ..FitsOptions::default() };
    let (big, small) = (RTX_4090, 16_311u64 << 20);
    let r = fits::row_on("qwen2.5-0.5b", &spec, Workload::Lora, "bf16", &[big, small], &o).unwrap();
    let config = fits::config_of(Workload::Lora, "bf16", &o).unwrap();
    let dist = vramcalc_core::distributed::DistConfig { gpus: 2, ..Default::default() };
    let e = vramcalc_core::distributed::estimate(&spec, &config, &dist).unwrap().estimate;
    assert_eq!(r.device_total_bytes, e.device_total_bytes);
    assert_eq!(r.margin_bytes, small as i64 - e.device_total_bytes as i64);
    let s = fits::row_on("qwen2.5-0.5b", &spec, Workload::Serve, "bf16", &[small, big], &o).unwrap();
    let cfg = ServeConfig { tensor_parallel: 2, weights: Some(vramcalc_core::formats::WeightFormat::parse("bf16").unwrap()), ..ServeConfig::new(small, 512) };
    assert_eq!(s.reverse_value, Some(serve::capacity(&spec, &cfg).unwrap().max_concurrency));
    // a 70B model in Q2_K fits two cards together, not the smaller alone
    let big_spec = vramcalc_core::import::preset("llama-3.1-70b").unwrap();
    let one = fits::row_on("llama-3.1-70b", &big_spec, Workload::LlamaCpp, "q2_k", &[small], &o).unwrap();
    let two = fits::row_on("llama-3.1-70b", &big_spec, Workload::LlamaCpp, "q2_k", &[big, small], &o).unwrap();
    assert!(!one.fits && two.fits, "{one:?} {two:?}");
}
