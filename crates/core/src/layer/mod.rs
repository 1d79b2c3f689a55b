//! One file per layer family: each config struct (PyTorch's constructor arguments and defaults)
//! and its lowering to primitive ops with shape checks.

pub mod activation;
pub mod args;
pub mod attention;
mod attention_windows;
pub mod bnb;
pub mod conv;
pub mod embedding;
pub mod fused_ce;
pub mod gated_delta;
pub mod gated_delta_infer;
pub mod lightning;
pub mod disentangled;
pub mod swin;
pub mod audio;
pub mod kv_cache;
pub mod linear;
pub mod linear_op;
pub mod lora;
pub mod lora_kohya;
pub mod mla;
pub mod moe;
pub mod norm;
pub mod pool;
pub mod recurrent;
pub mod reshape;
pub mod sdpa;
pub mod ssm;
pub mod state_cache;
pub mod seq_parallel;
pub mod transformer;
pub mod seq2seq;
pub mod vision;
pub mod attention_pool;
pub mod tiled_vision;
pub mod gated_cross;

/// A layer's complaint about its input or settings; `resolve` adds the path and kind.
pub type LayerResult<T> = std::result::Result<T, String>;

/// Checks that the last dimension of `shape` is `expected`.
pub(crate) fn expect_last(shape: &crate::units::Shape, expected: u64, what: &str) -> LayerResult<()> {
    if shape.rank() == 0 {
        return Err(format!("expected an input with a last dimension of {expected} {what}, got a scalar"));
    }
    if shape.last() != expected {
        return Err(format!("expected {expected} {what}, got {} (input shape {shape})", shape.last()));
    }
    Ok(())
}

pub(crate) fn positive(v: u64, name: &str) -> LayerResult<()> {
    if v == 0 {
        Err(format!("`{name}` must be at least 1"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    //! What the layer tests beside each family share: one layer resolved on a per-sample input
    //! (no batch dimension), in training, fp32, on CUDA — as PyTorch would build the module.

    use crate::lower::LowerOptions;
    use crate::resolve::{resolve, Resolved};
    use crate::spec::ModelSpec;
    use serde_json::{json, Value};

    /// One layer's resolved row and graph.
    pub(crate) struct One {
        /// Per-sample output shape.
        pub shape: Vec<u64>,
        /// Trainable parameters (`sum(p.numel() for p in m.parameters())`).
        pub params: u64,
        /// Buffer bytes (`sum(b.numel() * b.element_size() for b in m.buffers())`).
        pub buffer_bytes: u64,
        pub resolved: Resolved,
    }

    fn build(layer: Value, input: Value) -> crate::Result<One> {
        let spec = ModelSpec::from_json(&json!({"input": input, "layers": [layer]}).to_string())?;
        let resolved = resolve(&spec, None, LowerOptions::default())?;
        let row = &resolved.layers[0];
        Ok(One {
            shape: row.output_shape.0.to_vec(),
            params: row.params,
            buffer_bytes: resolved.graph.buffer_bytes(1),
            resolved,
        })
    }

    /// `layer` applied to a float32 input of per-sample `shape`.
    pub(crate) fn one(layer: Value, shape: &[u64]) -> One {
        build(layer.clone(), json!({"shape": shape})).unwrap_or_else(|e| panic!("{layer}: {e}"))
    }

    /// `layer` applied to `seq` int64 token ids.
    pub(crate) fn ids(layer: Value, seq: u64) -> One {
        build(layer.clone(), json!({"shape": [seq], "dtype": "int64"})).unwrap_or_else(|e| panic!("{layer}: {e}"))
    }

    /// The error `layer` gives on a float32 input of per-sample `shape`.
    pub(crate) fn error(layer: Value, shape: &[u64]) -> String {
        match build(layer.clone(), json!({"shape": shape})) {
            Ok(o) => panic!("{layer} on {shape:?} resolved to {:?}, expected an error", o.shape),
            Err(e) => e.to_string(),
        }
    }
}
