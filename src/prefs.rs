//! Display preferences (language, byte unit, theme): persisted, not part of undo.

use crate::i18n::Lang;
use serde::{Deserialize, Serialize};
use vramcalc_core::ByteUnit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// Follows `prefers-color-scheme`.
    #[default]
    Auto,
    Light,
    Dark,
}

impl Theme {
    pub const ALL: [Theme; 3] = [Theme::Auto, Theme::Light, Theme::Dark];
    pub fn name(self) -> &'static str {
        match self {
            Theme::Auto => "auto",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }
}

/// Display preferences: persisted, not part of undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefs {
    #[serde(default)]
    pub lang: Lang,
    /// Binary (MiB/GiB) unless the user picks MB: `nvidia-smi` and PyTorch count in MiB.
    #[serde(default = "binary")]
    pub unit: ByteUnit,
    #[serde(default)]
    pub theme: Theme,
}

fn binary() -> ByteUnit {
    ByteUnit::Mib
}

impl Default for Prefs {
    fn default() -> Prefs {
        Prefs { lang: Lang::default(), unit: binary(), theme: Theme::default() }
    }
}
