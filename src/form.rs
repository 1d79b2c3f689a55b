//! The settings forms of the llama.cpp and image-pipeline panels as data: which fields a setup
//! shows, each with its kind and current text. The panels' logic (`crate::local`,
//! `crate::pipeline`) lists them and reads a field's text back into typed settings (tested
//! natively); `components::workload_form` only draws them.

/// How a field is edited.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `(value, label)` options.
    Select(Vec<(String, String)>),
    /// A whole number (the text is checked by the panel's `with`).
    Number,
    Check,
    /// Free text (a byte size, a list).
    Text,
}

/// One field: its id (also its `data-testid`), kind and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub id: &'static str,
    pub kind: Kind,
    pub value: String,
}

impl Field {
    pub fn select(id: &'static str, options: Vec<(String, String)>, value: impl Into<String>) -> Field {
        Field { id, kind: Kind::Select(options), value: value.into() }
    }
    pub fn number(id: &'static str, value: u64) -> Field {
        Field { id, kind: Kind::Number, value: value.to_string() }
    }
    pub fn check(id: &'static str, value: bool) -> Field {
        Field { id, kind: Kind::Check, value: value.to_string() }
    }
    pub fn text(id: &'static str, value: impl Into<String>) -> Field {
        Field { id, kind: Kind::Text, value: value.into() }
    }
}

/// `(name, name)` options.
pub fn named<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    names.into_iter().map(|n| (n.to_string(), n.to_string())).collect()
}

/// A whole number in `lo..=hi`, or why not.
pub fn whole(text: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("expected a whole number from {lo} to {hi}")),
    }
}

/// `true`/`false` from a check box.
pub fn flag(text: &str) -> bool {
    text == "true"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_are_bounded() {
        assert_eq!(whole(" 12 ", 1, 100), Ok(12));
        assert!(whole("0", 1, 100).is_err());
        assert!(whole("101", 1, 100).is_err());
        assert!(whole("1.5", 1, 100).is_err());
        assert!(whole("", 0, 1).is_err());
    }
}
