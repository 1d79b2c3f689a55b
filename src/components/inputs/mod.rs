//! Labelled form controls. Each keeps what the user typed while it is invalid and shows why next
//! to the field; valid values are sent up immediately (live estimate on every keystroke).
//!
//! One component per file: [`number_field`], [`select_field`], [`check_field`], and the log-scale [`batch_slider`].

mod check;
mod number;
mod select;
mod slider;

pub use check::{check_field, CheckProps};
pub use number::{number_field, NumberProps};
pub use select::{select_field, SelectProps};
pub use slider::{batch_slider, slider_batch, slider_pos};

/// `(value, label)` options from a core enum's `ALL` and `name()`.
pub fn enum_options<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Vec<(String, String)> {
    all.iter().map(|&v| (name(v).to_string(), name(v).to_string())).collect()
}
