//! A layer's address in a spec's tree of blocks, as errors and per-layer reports print it:
//! `layers[3].body[1]`, `layers[2].branches[0][1]`, `layers[5].shortcut[0]`. The resolved model
//! also writes which repetition of a `repeat` body a row comes from: `layers[2].body#5[1]`.

use std::fmt;
use std::str::FromStr;

/// Which child list of a block (or the model's top-level `layers`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// The model's `layers`, or a `sequential` block's.
    Layers,
    /// A `residual` or `repeat` block's body.
    Body,
    Shortcut,
    Branch(usize),
}

/// One nesting level: the list and the index in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Step {
    pub slot: Slot,
    pub index: usize,
    /// Which repetition of a `repeat` body (resolved paths only; the spec has the body once).
    pub repetition: Option<u64>,
}

/// A layer's position: one step per nesting level, the first in the model's `layers`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LayerPath(pub Vec<Step>);

impl LayerPath {
    /// `layers[index]`.
    pub fn top(index: usize) -> LayerPath {
        LayerPath(vec![Step { slot: Slot::Layers, index, repetition: None }])
    }

    /// The layer at `index` of this block's `slot` list.
    pub fn child(&self, slot: Slot, index: usize) -> LayerPath {
        self.child_in_repetition(slot, None, index)
    }

    /// The layer at `index` of repetition `repetition` of this block's `slot` list.
    pub fn child_in_repetition(&self, slot: Slot, repetition: Option<u64>, index: usize) -> LayerPath {
        let mut steps = self.0.clone();
        steps.push(Step { slot, index, repetition });
        LayerPath(steps)
    }

    /// The list this layer sits in.
    pub fn list(&self) -> Option<ListPath> {
        let (last, parent) = self.0.split_last()?;
        Some(ListPath { parent: parent.to_vec(), slot: last.slot.clone() })
    }

    /// Its index in that list.
    pub fn index(&self) -> Option<usize> {
        self.0.last().map(|s| s.index)
    }

    /// Nesting depth (0 for a top-level layer).
    pub fn depth(&self) -> usize {
        self.0.len().saturating_sub(1)
    }

    /// The same layer with repetitions addressed as the body they repeat
    /// (`layers[2].body#5[1]` → `layers[2].body[1]`): every repetition maps to one spec layer.
    pub fn without_repetitions(&self) -> LayerPath {
        LayerPath(self.0.iter().map(|s| Step { repetition: None, ..s.clone() }).collect())
    }
}

/// A list of layers: the model's top level, or one child list of the block at `parent`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListPath {
    pub parent: Vec<Step>,
    pub slot: Slot,
}

impl ListPath {
    /// The model's `layers`.
    pub fn top() -> ListPath {
        ListPath { parent: Vec::new(), slot: Slot::Layers }
    }

    /// The layer at `index` of this list.
    pub fn node(&self, index: usize) -> LayerPath {
        LayerPath(self.parent.clone()).child(self.slot.clone(), index)
    }
}

impl fmt::Display for LayerPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            write_step(f, s, i == 0, true)?;
        }
        Ok(())
    }
}

/// Writes one step as [`LayerPath`] prints it (`layers[3]` first, then `.body#5[1]`, …), with
/// its repetition or without it (the spec path a resolved row comes from).
pub fn write_step(out: &mut impl fmt::Write, s: &Step, first: bool, repetition: bool) -> fmt::Result {
    match (&s.slot, first) {
        (Slot::Layers, true) => out.write_str("layers")?,
        (Slot::Layers, false) => out.write_str(".layers")?,
        (Slot::Body, _) => out.write_str(".body")?,
        (Slot::Shortcut, _) => out.write_str(".shortcut")?,
        (Slot::Branch(b), _) => write!(out, ".branches[{b}]")?,
    }
    if let (Some(r), true) = (s.repetition, repetition) {
        write!(out, "#{r}")?;
    }
    write!(out, "[{}]", s.index)
}

/// A path that is not in the format [`LayerPath`] prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError(pub String);

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a layer path: `{}`", self.0)
    }
}

impl std::error::Error for PathError {}

/// Reads what [`Display`](fmt::Display) writes.
impl FromStr for LayerPath {
    type Err = PathError;

    fn from_str(text: &str) -> Result<LayerPath, PathError> {
        let err = || PathError(text.to_string());
        let mut rest = text.strip_prefix("layers").ok_or_else(err)?;
        let mut steps = Vec::new();
        let mut slot = Slot::Layers;
        loop {
            let mut repetition = None;
            if let Some(r) = rest.strip_prefix('#') {
                let digits = r.find('[').ok_or_else(err)?;
                repetition = Some(r[..digits].parse().map_err(|_| err())?);
                rest = &r[digits..];
            }
            let (index, after) = bracketed(rest).ok_or_else(err)?;
            steps.push(Step { slot, index: usize::try_from(index).map_err(|_| err())?, repetition });
            if after.is_empty() {
                return Ok(LayerPath(steps));
            }
            let after = after.strip_prefix('.').ok_or_else(err)?;
            (slot, rest) = if let Some(r) = after.strip_prefix("layers") {
                (Slot::Layers, r)
            } else if let Some(r) = after.strip_prefix("shortcut") {
                (Slot::Shortcut, r)
            } else if let Some(r) = after.strip_prefix("body") {
                (Slot::Body, r)
            } else if let Some(r) = after.strip_prefix("branches") {
                let (b, r) = bracketed(r).ok_or_else(err)?;
                (Slot::Branch(usize::try_from(b).map_err(|_| err())?), r)
            } else {
                return Err(err());
            };
        }
    }
}

/// `[n]rest` → `(n, rest)`.
fn bracketed(text: &str) -> Option<(u64, &str)> {
    let inner = text.strip_prefix('[')?;
    let close = inner.find(']')?;
    let digits = &inner[..close];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &inner[close + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_print_and_parse_back() {
        let p = LayerPath::top(3).child(Slot::Body, 1);
        assert_eq!(p.to_string(), "layers[3].body[1]");
        let p = LayerPath::top(2).child(Slot::Branch(0), 1).child(Slot::Shortcut, 0).child(Slot::Layers, 4);
        assert_eq!(p.to_string(), "layers[2].branches[0][1].shortcut[0].layers[4]");
        let r = LayerPath::top(2).child_in_repetition(Slot::Body, Some(11), 1);
        assert_eq!(r.to_string(), "layers[2].body#11[1]");
        assert_eq!(r.without_repetitions().to_string(), "layers[2].body[1]");
        assert_eq!(p.list().unwrap().node(4), p);
        assert_eq!((p.index(), p.depth()), (Some(4), 3));
        assert_eq!(ListPath::top().node(2), LayerPath::top(2));
        for p in [p, r] {
            assert_eq!(p.to_string().parse::<LayerPath>(), Ok(p));
        }
        for bad in ["", "layers", "layers[]", "layers[1", "layers[1].", "layers[1].foo[2]", "layers[-1]", "x[1]", "layers[1]x", "layers[1].body#[2]", "layers[1].branches[0]"] {
            assert!(bad.parse::<LayerPath>().is_err(), "{bad}");
        }
    }
}
