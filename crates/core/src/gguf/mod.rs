//! GGUF files as llama.cpp reads them: the header (metadata and tensor infos) from a file's
//! first bytes, and every ggml type's block layout. No I/O: the caller hands in bytes (a local
//! file's first megabytes, an HTTP `Range` of a hub file) and grows them while the reader answers
//! [`GgufError::NeedMore`].
//!
//! | file | what |
//! |---|---|
//! | `types` | `enum ggml_type` with `blck_size` and `type_size` (`ggml.c`'s `type_traits`) |
//! | `value` | metadata values (`enum gguf_type`) |
//! | `reader` | the header reader and its errors (`gguf.cpp`'s checks) |

mod reader;
mod types;
mod value;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod writer;

pub use reader::{GgufError, Header, TensorInfo, DEFAULT_ALIGNMENT, MAX_DIMS, MAX_NAME};
pub use types::{GgmlType, GGML_TYPE_COUNT};
pub use value::{Array, Value, ValueType};
