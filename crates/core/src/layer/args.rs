//! PyTorch's argument types shared by layer configs: `kernel_size`/`stride`/`dilation` as an
//! integer or a pair, and convolution padding.

use serde::de::Visitor;
use serde::{Deserialize, Serialize};

/// An integer or a pair, as PyTorch accepts for `kernel_size`, `stride`, `padding`, `dilation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair(pub [u64; 2]);

impl Pair {
    pub const fn splat(v: u64) -> Pair {
        Pair([v, v])
    }
}

impl Serialize for Pair {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.0[0] == self.0[1] {
            s.serialize_u64(self.0[0])
        } else {
            self.0.serialize(s)
        }
    }
}

/// `Pair` and `Padding` are read by plain visitors rather than `#[serde(untagged)]`, which
/// buffers through serde's private `Content` and pulls its deserializers into the wasm bundle.
impl<'de> Deserialize<'de> for Pair {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(PairVisitor)
    }
}

/// An integer, or a list of one or two integers.
struct PairVisitor;

impl<'de> Visitor<'de> for PairVisitor {
    type Value = Pair;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an integer or a pair of integers")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Pair, E> {
        Ok(Pair::splat(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Pair, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<u64>()? {
            items.push(v);
        }
        match items[..] {
            [v] => Ok(Pair::splat(v)),
            [a, b] => Ok(Pair([a, b])),
            _ => Err(serde::de::Error::custom(format!(
                "expected an integer or a pair of integers, got a list of {}",
                items.len()
            ))),
        }
    }
}

/// Convolution padding: explicit, or PyTorch's `"same"` / `"valid"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Padding {
    Explicit(Pair),
    Named(NamedPadding),
}

impl<'de> Deserialize<'de> for Padding {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(PaddingVisitor)
    }
}

/// A [`Pair`], `"same"` or `"valid"`.
struct PaddingVisitor;

impl<'de> Visitor<'de> for PaddingVisitor {
    type Value = Padding;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an integer, a pair of integers, \"same\" or \"valid\"")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Padding, E> {
        Ok(Padding::Explicit(Pair::splat(v)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<Padding, A::Error> {
        PairVisitor.visit_seq(seq).map(Padding::Explicit)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Padding, E> {
        match v {
            "same" => Ok(Padding::Named(NamedPadding::Same)),
            "valid" => Ok(Padding::Named(NamedPadding::Valid)),
            _ => Err(E::unknown_variant(v, &["same", "valid"])),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamedPadding {
    Same,
    Valid,
}

impl Default for Padding {
    fn default() -> Self {
        Padding::Explicit(Pair::splat(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_accepts_int_and_list() {
        let p: Pair = serde_json::from_str("3").unwrap();
        assert_eq!(p, Pair([3, 3]));
        let p: Pair = serde_json::from_str("[3, 5]").unwrap();
        assert_eq!(p, Pair([3, 5]));
        assert_eq!(serde_json::from_str::<Pair>("[4]").unwrap(), Pair([4, 4]));
        let err = serde_json::from_str::<Pair>("[1,2,3]").unwrap_err().to_string();
        assert!(err.starts_with("expected an integer or a pair of integers, got a list of 3"), "{err}");
        assert!(serde_json::from_str::<Pair>("-1").is_err());
        assert!(serde_json::from_str::<Pair>("[1, -1]").is_err());
        assert!(serde_json::from_str::<Pair>("2.0").is_err());
        assert!(serde_json::from_str::<Pair>(r#""same""#).is_err());
    }

    #[test]
    fn padding_accepts_pairs_and_names() {
        let p = |json: &str| serde_json::from_value::<Padding>(serde_json::from_str(json).unwrap());
        assert_eq!(p("2").unwrap(), Padding::Explicit(Pair([2, 2])));
        assert_eq!(p("[1, 2]").unwrap(), Padding::Explicit(Pair([1, 2])));
        assert_eq!(p(r#""same""#).unwrap(), Padding::Named(NamedPadding::Same));
        assert_eq!(p(r#""valid""#).unwrap(), Padding::Named(NamedPadding::Valid));
        assert!(p(r#""full""#).unwrap_err().to_string().starts_with("unknown variant `full`"));
        assert!(p("[1, 2, 3]").is_err());
        assert!(p("null").is_err());
        for padding in [Padding::Explicit(Pair([1, 2])), Padding::Explicit(Pair([3, 3])), Padding::Named(NamedPadding::Same)] {
            assert_eq!(p(&serde_json::to_string(&padding).unwrap()).unwrap(), padding);
        }
    }
}
