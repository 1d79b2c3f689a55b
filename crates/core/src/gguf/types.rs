//! Every ggml tensor type a GGUF file can name, with its block size and bytes per block.
//!
//! Read from source (llama.cpp as vendored by llama-cpp-python 0.3.36): the ids are
//! `enum ggml_type` in `ggml/include/ggml.h`; `blck_size` and `type_size` are the `type_traits`
//! table in `ggml/src/ggml.c`, whose `type_size` is `sizeof(block_*)` from
//! `ggml/src/ggml-common.h` (each checked there by a `static_assert`; the sizes below were printed
//! by a C program including that header). Removed ids (4, 5, 31–33, 36–38) have `blck_size` 0
//! there, and `gguf.cpp` refuses a tensor of such a type; so does [`GgmlType::from_id`].

/// A ggml tensor type: `blck` elements stored in `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// The `enum ggml_type` value.
    pub id: u32,
    /// ggml's `type_name`.
    pub name: &'static str,
    /// Elements per block (`blck_size`).
    pub blck: u64,
    /// Bytes per block (`type_size`).
    pub bytes: u64,
}

/// A type crosses serde as its `ggml_type` id (the web app's worker); an id ggml does not have
/// is an error.
impl serde::Serialize for GgmlType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u32(self.id)
    }
}

impl<'de> serde::Deserialize<'de> for GgmlType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let id = u32::deserialize(d)?;
        GgmlType::from_id(id).ok_or_else(|| serde::de::Error::custom(format!("no ggml type has id {id}")))
    }
}

macro_rules! types {
    ($($konst:ident = $id:literal, $name:literal, $blck:literal, $bytes:literal;)*) => {
        impl GgmlType {
            $(pub const $konst: GgmlType = GgmlType { id: $id, name: $name, blck: $blck, bytes: $bytes };)*
            /// All types of `ggml_type` that exist (ids in increasing order).
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$konst),*];
        }
    };
}

types! {
    F32 = 0, "f32", 1, 4;
    F16 = 1, "f16", 1, 2;
    Q4_0 = 2, "q4_0", 32, 18;
    Q4_1 = 3, "q4_1", 32, 20;
    Q5_0 = 6, "q5_0", 32, 22;
    Q5_1 = 7, "q5_1", 32, 24;
    Q8_0 = 8, "q8_0", 32, 34;
    Q8_1 = 9, "q8_1", 32, 36;
    Q2_K = 10, "q2_K", 256, 84;
    Q3_K = 11, "q3_K", 256, 110;
    Q4_K = 12, "q4_K", 256, 144;
    Q5_K = 13, "q5_K", 256, 176;
    Q6_K = 14, "q6_K", 256, 210;
    Q8_K = 15, "q8_K", 256, 292;
    IQ2_XXS = 16, "iq2_xxs", 256, 66;
    IQ2_XS = 17, "iq2_xs", 256, 74;
    IQ3_XXS = 18, "iq3_xxs", 256, 98;
    IQ1_S = 19, "iq1_s", 256, 50;
    IQ4_NL = 20, "iq4_nl", 32, 18;
    IQ3_S = 21, "iq3_s", 256, 110;
    IQ2_S = 22, "iq2_s", 256, 82;
    IQ4_XS = 23, "iq4_xs", 256, 136;
    I8 = 24, "i8", 1, 1;
    I16 = 25, "i16", 1, 2;
    I32 = 26, "i32", 1, 4;
    I64 = 27, "i64", 1, 8;
    F64 = 28, "f64", 1, 8;
    IQ1_M = 29, "iq1_m", 256, 56;
    BF16 = 30, "bf16", 1, 2;
    TQ1_0 = 34, "tq1_0", 256, 54;
    TQ2_0 = 35, "tq2_0", 256, 66;
    MXFP4 = 39, "mxfp4", 32, 17;
    NVFP4 = 40, "nvfp4", 64, 36;
    Q1_0 = 41, "q1_0", 128, 18;
    Q2_0 = 42, "q2_0", 64, 18;
}

/// `GGML_TYPE_COUNT`: ids at or above it are not types.
pub const GGML_TYPE_COUNT: u32 = 43;

impl GgmlType {
    /// The type of an `enum ggml_type` value, `None` for removed or unknown ids.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.id == id)
    }

    /// The type named as ggml names it (`q8_0`, `q4_K`, `f16`), case-insensitively, as
    /// llama.cpp's `-ctk`/`-ctv` take them.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.name.eq_ignore_ascii_case(name))
    }

    /// `ggml_row_size`: bytes of a row of `n` elements (`n` a multiple of the block; rounded down
    /// otherwise, as ggml does).
    pub const fn row_bytes(self, n: u64) -> u64 {
        n / self.blck * self.bytes
    }

    /// Whether ggml quantizes in blocks (`blck > 1`).
    pub const fn is_quantized(self) -> bool {
        self.blck > 1
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}
