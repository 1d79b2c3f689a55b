//! Everything the views derive from the state, computed by the core: the estimate (rank 0's for a
//! multi-GPU job), the batch sweep, the largest batch that fits, the what-ifs of the whole job and
//! per-row lookups for the layer editor.
//! Pure; the app wraps these in `use_memo`. The app itself computes no memory.

use crate::charts::batch::sweep_points;
use crate::tree::{normalize_core_path, ListPath, NodePath};
use std::collections::HashMap;
use vramcalc_core::distributed::{DistConfig, DistPrepared, DistReport};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::whatif::job::{self, JobWhatIfs};
use vramcalc_core::{Error, Estimate, Shape, TrainConfig};

/// The estimate and the batch analysis for one model, setup, job and capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub estimate: Estimate,
    /// Rank 0's report of a multi-GPU job.
    pub distributed: Option<DistReport>,
    pub capacity: u64,
    /// Largest batch whose device total fits (`None`: not even batch 1).
    pub max_batch: Option<u64>,
    /// `(batch, peak, device_total)`.
    pub sweep: Vec<(u64, u64, u64)>,
}

pub fn analyse(spec: &ModelSpec, config: &TrainConfig, capacity: u64) -> Result<Report, Error> {
    PreparedCache::default().analyse(spec, config, &DistConfig::default(), capacity)
}

/// Keeps the resolved model of each setup the estimate used, with the batch left out: a
/// `DistPrepared` gives the estimate at any batch, so after a batch change (the most frequent
/// edit) nothing is resolved again. Emptied when the model changes; at most [`Self::MAX`] setups.
#[derive(Default)]
pub struct PreparedCache {
    spec: Option<ModelSpec>,
    /// Setup (batch 0) and job → its prepared model, most recently used last.
    prepared: Vec<((TrainConfig, DistConfig), DistPrepared)>,
}

impl PreparedCache {
    pub const MAX: usize = 16;

    /// The estimate with its batch analysis, like [`analyse`], reusing resolved models.
    pub fn analyse(&mut self, spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, capacity: u64) -> Result<Report, Error> {
        let prepared = self.prepared(spec, config, dist)?;
        let e = prepared.estimate_at(config.batch)?;
        let max_batch = prepared.max_batch(capacity);
        let sweep = sweep_points(config.batch, max_batch)
            .into_iter()
            .map(|b| {
                let (peak, total) = prepared.peak_at(b);
                (b, peak, total)
            })
            .collect();
        Ok(Report { estimate: e.estimate, distributed: e.distributed, capacity, max_batch, sweep })
    }

    /// The prepared model of `spec` under `cfg` (any batch) and `dist`, resolving it only when new.
    fn prepared(&mut self, spec: &ModelSpec, cfg: &TrainConfig, dist: &DistConfig) -> Result<&DistPrepared, Error> {
        if self.spec.as_ref() != Some(spec) {
            self.spec = Some(spec.clone());
            self.prepared.clear();
        }
        let key = (TrainConfig { batch: 0, ..*cfg }, *dist);
        match self.prepared.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let entry = self.prepared.remove(i);
                self.prepared.push(entry);
            }
            None => {
                let p = DistPrepared::new(spec, cfg, dist)?;
                if self.prepared.len() >= Self::MAX {
                    self.prepared.remove(0);
                }
                self.prepared.push((key, p));
            }
        }
        Ok(&self.prepared[self.prepared.len() - 1].1)
    }
}

/// The whole job's what-ifs (`whatif::job::what_ifs`), one step per change that applies; `pause`
/// runs before each (in the browser it yields to the page, so a 70B job's list, about a second
/// of work on a slow phone, never holds the page for long). `job` is the job's own `(peak,
/// device total)` (rank 0's: [`Report`]'s estimate), which the page has already computed: a
/// second estimate of it was a whole 70B resolve on a link's critical path.
pub async fn job_what_ifs<F: std::future::Future<Output = ()>>(
    spec: &ModelSpec,
    c: &TrainConfig,
    d: &DistConfig,
    capacity: Option<u64>,
    job: (u64, u64),
    pause: impl Fn() -> F,
) -> Option<JobWhatIfs> {
    let (peak, device_total) = job;
    let mut items = Vec::new();
    for change in job::Change::all().filter(|&ch| job::apply(ch, spec, c, d).is_some()) {
        pause().await;
        items.extend(job::what_if(change, spec, c, d, device_total, capacity));
    }
    Some(JobWhatIfs { peak, device_total, items })
}

/// What an editor row shows: the layer's output shape, parameters and saved bytes (summed over
/// the repetitions of a `repeat` body).
#[derive(Debug, Clone, PartialEq)]
pub struct RowReport {
    pub output_shape: Shape,
    pub params: u64,
    pub saved_bytes: u64,
}

/// Row reports by editor path (`layers[3].body[1]`), and the total saved bytes (for shares).
pub fn row_reports(est: &Estimate) -> (HashMap<String, RowReport>, u64) {
    let mut map: HashMap<String, RowReport> = HashMap::with_capacity(est.layers.len());
    let mut total = 0u64;
    for l in &est.layers {
        if l.info.depth == 0 {
            total = total.saturating_add(l.saved_bytes);
        }
        let key = normalize_core_path(&l.info.path);
        map.entry(key)
            .and_modify(|r| {
                r.params = r.params.saturating_add(l.info.params);
                r.saved_bytes = r.saved_bytes.saturating_add(l.saved_bytes);
            })
            .or_insert(RowReport { output_shape: l.info.output_shape.clone(), params: l.info.params, saved_bytes: l.saved_bytes });
    }
    (map, total)
}

/// The per-sample shape a layer inserted into `list` at `index` (or appended) would receive,
/// from the row reports of the last good estimate (to fit a new layer's input size).
pub fn input_shape_for(
    spec: &ModelSpec,
    config: &TrainConfig,
    list: &ListPath,
    index: Option<usize>,
    rows: &HashMap<String, RowReport>,
) -> Option<Vec<u64>> {
    let len = crate::tree::list(spec, list)?.len();
    let at = index.unwrap_or(len).min(len);
    if at > 0 {
        return rows.get(&list.node(at - 1).to_string()).map(|r| r.output_shape.0.to_vec());
    }
    if list.parent.is_empty() {
        let mut shape = spec.input.shape.clone();
        if let (Some(s), Some(first)) = (spec.seq_len(config.seq_len), shape.first_mut()) {
            *first = s;
        }
        return Some(shape);
    }
    // The first layer of a block's list gets the block's input.
    let parent = NodePath(list.parent.clone());
    input_shape_for(spec, config, &parent.list()?, parent.index(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    /// The list computed step by step is the core's, for a multi-GPU job and a single GPU.
    #[test]
    fn the_jobs_what_ifs_step_by_step_are_the_cores() {
        use vramcalc_core::distributed::Strategy;
        let spec = presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 4, seq_len: Some(256), precision: vramcalc_core::Precision::AmpBf16, ..Default::default() };
        for d in [DistConfig::default(), DistConfig { gpus: 4, strategy: Strategy::Fsdp, ..Default::default() }] {
            let steps = std::cell::Cell::new(0);
            // the job's figures as the page has them: its report's
            let report = PreparedCache::default().analyse(&spec, &c, &d, 8 << 30).unwrap();
            let figures = (report.estimate.peak_bytes, report.estimate.device_total_bytes);
            assert_eq!(figures, job::job_peak(&spec, &c, &d).unwrap());
            let stepped = crate::test_util::block_on(job_what_ifs(&spec, &c, &d, Some(8 << 30), figures, || {
                steps.set(steps.get() + 1);
                std::future::ready(())
            }));
            let whole = job::what_ifs(&spec, &c, &d, Some(8 << 30)).unwrap();
            assert!(!whole.items.is_empty());
            assert_eq!(stepped, Some(whole));
            assert!(steps.get() > 2, "{} steps", steps.get());
        }
    }

    /// One core in the browser (issue 23): mixture-of-experts, encoder–decoder and fine-tuning
    /// setups are estimated by the app's own core, as the CLI estimates them.
    #[test]
    fn every_kind_of_model_and_setup_is_estimated_by_the_apps_core() {
        let moe = vramcalc_core::ModelSpec::from_json(
            r#"{"input":{"shape":[16,64]},"layers":[{"kind":"sparse_moe","hidden_size":64,"num_experts":4,"top_k":2,"intermediate_size":128}]}"#,
        )
        .unwrap();
        let t5 = vramcalc_core::ModelSpec::from_json(
            r#"{"input":{"shape":[8,16]},"layers":[{"kind":"token_input","seq_len":4},{"kind":"embedding","num_embeddings":10,"embedding_dim":16},{"kind":"cross_attention","embed_dim":16,"num_heads":2}]}"#,
        )
        .unwrap();
        let mut lora = TrainConfig::default();
        lora.finetune.method = vramcalc_core::finetune::Method::Lora;
        for (spec, cfg) in [(moe, TrainConfig::default()), (t5, TrainConfig::default()), (presets::build("gpt2").unwrap(), lora)] {
            let r = analyse(&spec, &cfg, 24 << 30).unwrap();
            assert_eq!(r.estimate, vramcalc_core::estimate(&spec, &cfg).unwrap());
        }
    }

    /// A multi-GPU job's report is rank 0's, the CLI's `estimate --gpus --strategy`.
    #[test]
    fn a_jobs_report_is_rank_0s() {
        let spec = presets::build("gpt2").unwrap();
        let cfg = TrainConfig { batch: 2, seq_len: Some(128), ..Default::default() };
        let d = DistConfig { gpus: 4, strategy: vramcalc_core::distributed::Strategy::Zero3, ..Default::default() };
        let r = PreparedCache::default().analyse(&spec, &cfg, &d, 24 << 30).unwrap();
        let want = vramcalc_core::distributed::estimate(&spec, &cfg, &d).unwrap();
        assert_eq!((r.estimate, r.distributed), (want.estimate, want.distributed));
    }

    #[test]
    fn vgg16_report() {
        let spec = presets::build("vgg16").unwrap();
        let r = analyse(&spec, &TrainConfig::default(), 24 << 30).unwrap();
        assert_eq!(r.estimate.params, 138_357_544);
        let mb = r.max_batch.unwrap();
        assert!(r.sweep.iter().any(|s| s.0 == mb) && r.sweep.iter().any(|s| s.0 == 32));
        let at_max = r.sweep.iter().find(|s| s.0 == mb).unwrap();
        assert!(at_max.2 <= 24 << 30);
        assert!(r.sweep.windows(2).all(|w| w[0].1 <= w[1].1), "peak grows with batch");
    }

    #[test]
    fn cached_reports_equal_fresh_ones_across_batch_changes() {
        let mut cache = PreparedCache::default();
        let spec = presets::build("resnet18").unwrap();
        for batch in [32, 8, 512, 1, 33] {
            let cfg = TrainConfig { batch, ..Default::default() };
            assert_eq!(cache.analyse(&spec, &cfg, &DistConfig::default(), 24 << 30), analyse(&spec, &cfg, 24 << 30), "batch {batch}");
        }
        assert_eq!(cache.prepared.len(), 1, "one setup, resolved once");
        let bad = TrainConfig { batch: 2, grad_accum: 4, ..Default::default() };
        assert!(cache.analyse(&spec, &bad, &DistConfig::default(), 24 << 30).is_err());
    }

    #[test]
    fn input_shapes_for_new_layers() {
        let spec = presets::build("vgg16").unwrap();
        let cfg = TrainConfig::default();
        let est = vramcalc_core::estimate(&spec, &cfg).unwrap();
        let (rows, _) = row_reports(&est);
        let top = ListPath::top();
        assert_eq!(input_shape_for(&spec, &cfg, &top, Some(0), &rows), Some(vec![3, 224, 224]));
        assert_eq!(input_shape_for(&spec, &cfg, &top, None, &rows), Some(vec![1000]));
        let r = presets::build("resnet18").unwrap();
        let est = vramcalc_core::estimate(&r, &cfg).unwrap();
        let (rows, _) = row_reports(&est);
        // first layer inside the first stage gets the max-pool's output
        let stage = ListPath { parent: NodePath::top(4).0, slot: crate::tree::Slot::Layers };
        assert_eq!(input_shape_for(&r, &cfg, &stage, Some(0), &rows), Some(vec![64, 56, 56]));
    }

    #[test]
    fn row_reports_cover_repeats() {
        let spec = presets::build("bert-base").unwrap();
        let est = vramcalc_core::estimate(&spec, &TrainConfig::default()).unwrap();
        let (rows, total) = row_reports(&est);
        assert!(total > 0);
        assert!(rows.keys().all(|k| !k.contains('#')));
        let top: u64 = est.layers.iter().filter(|l| l.info.depth == 0).map(|l| l.saved_bytes).sum();
        assert_eq!(top, total);
    }
}

#[cfg(test)]
mod timing {
    /// `cargo test -p vramcalc-web --release -- --ignored --nocapture timing`: how long a live
    /// update takes natively (the browser's wasm is about 1.5–3× slower).
    #[test]
    #[ignore]
    fn timing() {
        for id in ["resnet152", "bert-large", "vgg16"] {
            let spec = vramcalc_core::presets::build(id).unwrap();
            let cfg = Default::default();
            let t = std::time::Instant::now();
            let est = vramcalc_core::estimate(&spec, &cfg).unwrap();
            let t_est = t.elapsed();
            let t = std::time::Instant::now();
            let r = super::analyse(&spec, &cfg, 24 << 30).unwrap();
            let t_all = t.elapsed();
            let t = std::time::Instant::now();
            let w = vramcalc_core::whatif::what_ifs(&spec, &cfg).unwrap();
            let t_w = t.elapsed();
            println!("{id}: estimate {t_est:?}, analyse {t_all:?} ({} sweep points), what-ifs {t_w:?} ({}), peak {}", r.sweep.len(), w.len(), est.peak_bytes);
        }
    }
}
