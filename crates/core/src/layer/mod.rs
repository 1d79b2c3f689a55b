//! One file per layer family: each config struct (PyTorch's constructor arguments and defaults)
//! and its lowering to primitive ops with shape checks.

pub mod activation;
pub mod args;
pub mod attention;
pub mod conv;
pub mod embedding;
pub mod linear;
pub mod norm;
pub mod pool;
pub mod recurrent;
pub mod reshape;

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
