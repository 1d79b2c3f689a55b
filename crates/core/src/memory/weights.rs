//! `--weights`: a resolved inference graph's parameters in a stored format, shared by the
//! single forward (`memory::Prepared`) and each forward of generation (`memory::generate`).

use crate::error::Result;
use crate::resolve::Resolved;
use crate::spec::ModelSpec;

/// Stores `r`'s parameters in format `w`, the modules the spec's `unquantised` names in the
/// compute dtype (`formats::apply`).
pub(crate) fn weights_in(spec: &ModelSpec, r: &mut Resolved, w: crate::formats::WeightFormat) -> Result<()> {
    let dtype = r.graph.params.first().map(|&p| r.graph.value(p).dtype).unwrap_or_default();
    let rows: Vec<(&str, u32)> = r.layers.iter().map(|l| (l.kind.as_str(), l.depth)).collect();
    let names: Vec<Option<&str>> = r.layers.iter().map(|l| l.name.as_deref()).collect();
    let matcher = spec.unquantised.as_ref().map(|s| s.matcher()).transpose()?;
    crate::formats::apply::apply(&mut r.graph, &rows, w, dtype, matcher.as_ref().map(|m| (m, names.as_slice())))
}
