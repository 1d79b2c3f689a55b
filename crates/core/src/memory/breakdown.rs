//! The peak's bytes by category, the figure every view breaks down.

use serde::{Deserialize, Serialize};

/// Bytes by category at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Breakdown {
    pub parameters: u64,
    pub buffers: u64,
    pub gradients: u64,
    pub optimizer_state: u64,
    pub activations: u64,
    pub temporaries: u64,
    pub input: u64,
    /// Of `parameters`: the frozen ones (`requires_grad=False`, a quantised base as stored).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub frozen_parameters: u64,
    /// Of `parameters`: the LoRA adapters.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub adapter_parameters: u64,
    /// Of `activations`: autocast's half-precision copies of the weights, cached until the
    /// forward ends (`cached_cast` in `aten/src/ATen/autocast_mode.cpp`). Under FSDP they are of
    /// the gathered weights, so they do not shrink with the world size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight_casts: u64,
    /// Keys and values held by the KV cache (`--mode generate`; 0 otherwise). Not a [`Category`]
    /// yet, so `entries()` leaves it out: views that list it read it here.
    #[serde(default)]
    pub kv_cache: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Breakdown {
    pub fn total(&self) -> u64 {
        [self.parameters, self.buffers, self.gradients, self.optimizer_state, self.activations, self.temporaries, self.input, self.kv_cache]
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// `(category, bytes)` pairs in display order.
    pub fn entries(&self) -> [(Category, u64); 7] {
        Category::ALL.map(|c| (c, self.get(c)))
    }

    /// The bytes of one category.
    pub fn get(&self, c: Category) -> u64 {
        match c {
            Category::Parameters => self.parameters,
            Category::Buffers => self.buffers,
            Category::Gradients => self.gradients,
            Category::OptimizerState => self.optimizer_state,
            Category::Activations => self.activations,
            Category::Temporaries => self.temporaries,
            Category::Input => self.input,
        }
    }

    pub(crate) fn slot(&mut self, c: Category) -> &mut u64 {
        match c {
            Category::Parameters => &mut self.parameters,
            Category::Buffers => &mut self.buffers,
            Category::Gradients => &mut self.gradients,
            Category::OptimizerState => &mut self.optimizer_state,
            Category::Activations => &mut self.activations,
            Category::Temporaries => &mut self.temporaries,
            Category::Input => &mut self.input,
        }
    }
}

/// A category of the breakdown. Serialises as the [`Breakdown`] field it names
/// (`"optimizer_state"`), so views key on the enum and JSON keeps its field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameters,
    Buffers,
    Gradients,
    OptimizerState,
    Activations,
    Temporaries,
    Input,
}

impl Category {
    /// Display order.
    pub const ALL: [Category; 7] = [
        Category::Parameters,
        Category::Buffers,
        Category::Gradients,
        Category::OptimizerState,
        Category::Activations,
        Category::Temporaries,
        Category::Input,
    ];

    /// The JSON key: the [`Breakdown`] field's name.
    pub fn key(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Buffers => "buffers",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer_state",
            Category::Activations => "activations",
            Category::Temporaries => "temporaries",
            Category::Input => "input",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_serialise_as_the_breakdown_keys() {
        let b = Breakdown { parameters: 1, buffers: 2, gradients: 3, optimizer_state: 4, activations: 5, temporaries: 6, input: 7, ..Breakdown::default() };
        let json = serde_json::to_value(b).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = Category::ALL.iter().map(|c| c.key()).chain(["kv_cache"]).collect();
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        for (c, bytes) in b.entries() {
            assert_eq!(serde_json::to_value(c).unwrap(), c.key());
            assert_eq!(json[c.key()], bytes);
        }
    }
}
