//! What the user wrote: a versioned, lenient serde JSON model spec. No memory logic here.
//!
//! ```json
//! {"version": 1, "name": "tiny", "input": {"shape": [3, 32, 32]},
//!  "layers": [{"kind": "conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": 3, "padding": 1},
//!             {"kind": "relu", "inplace": true}, {"kind": "flatten"},
//!             {"kind": "linear", "in_features": 8192, "out_features": 10}]}
//! ```
//! Layer tags are PyTorch's class names in snake_case, fields are PyTorch's constructor arguments
//! with PyTorch's defaults. Shapes never include the batch dimension.

use crate::error::{Error, Result};
use crate::graph::ValueId;
use crate::layer::{
    activation::{self, Dropout, Gelu, LeakyRelu, LogitSoftcap, Relu, Scale, Silu, Softmax},
    conv::{Conv1d, Conv2d, ConvTranspose2d},
    embedding::{ClsToken, Embedding, PositionalEmbedding},
    linear::{GatedMlp, Linear},
    norm::{BatchNorm, GroupNorm, LayerNorm, RmsNorm},
    pool::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d},
    reshape::{Flatten, SelectToken, Transpose},
    LayerResult,
};
use crate::layer::{
    attention::MultiheadAttention,
    transformer::TransformerLayer,
    mla::MultiHeadLatentAttention,
    moe::SparseMoe,
    recurrent::Recurrent,
    ssm::{Mamba2Mixer, MambaMixer},
    gated_delta::GatedDeltaNet,
    lightning::LightningAttention,
    disentangled::{DisentangledAttention, RelativeEmbeddings},
    swin::{PatchMerging, SwinBlock, TokenMean},
    audio::PositionalConv,
    seq2seq::{Contrastive, CrossAttention, RelativePositionBias, TokenInput},
    attention_pool::AttentionPool,
    vision::{ClsMeanPool, DropTokens, ImageInput, ImageTokens, IndexTokens, Keep, LayerScale, MergeTokens, TokenPool},
    tiled_vision::{TiledPatchEmbed, TiledVisionEncoder},
    gated_cross::GatedCrossAttentionLayer,
};
use crate::lower::Builder;
use crate::path::Slot;
use crate::serde_util::{from_fields, invalid_type, is_false, via_value};
use serde::{Deserialize, Serialize};

/// Current spec format version. Older versions are migrated on read.
pub const SPEC_VERSION: u32 = 1;

/// A whole model: its per-sample input and its layers, applied in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default = "spec_version")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub input: InputSpec,
    pub layers: Vec<Layer>,
    /// The training loss applied to the last layer's output.
    #[serde(default)]
    pub loss: Loss,
    /// The model's own names for its layers (PyTorch module names) by spec path:
    /// `{"layers[0]": "model.embed_tokens"}` (`crate::layer_names`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub names: LayerNames,
    /// The modules a quantised checkpoint keeps in the model dtype, matched by their names
    /// (its `quantization_config`'s skip list, written by the importer): an inference
    /// `--weights` format counts them unquantised (`formats::skip::SkipList`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unquantised: Option<crate::formats::skip::SkipList>,
}

/// Layers' own names (JSON strings) by spec path (`layers[1].body[0]`): see
/// `crate::layer_names`. A JSON map, whose code the web app's bundle has already.
pub type LayerNames = serde_json::Map<String, serde_json::Value>;

fn spec_version() -> u32 {
    SPEC_VERSION
}

/// The per-sample model input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Shape without the batch dimension; `[seq_len]` for token inputs.
    pub shape: Vec<u64>,
    /// `float32` images/features, or `int64` token ids.
    #[serde(default)]
    pub dtype: InputDType,
    /// Vocabulary size of token inputs (documentation and validation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_size: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InputDType {
    #[default]
    Float32,
    /// Token ids: the first dimension of `shape` is the sequence length.
    Int64,
}

/// The loss computed on the model output during training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// `nn.CrossEntropyLoss` on integer targets over the last dimension (per token for sequences).
    #[default]
    CrossEntropy,
    /// `nn.MSELoss` against a target of the output's shape.
    Mse,
    /// Hugging Face's causal-LM loss, `model(input_ids, labels=input_ids).loss`: the logits
    /// upcast to fp32 and cross-entropy against the input ids shifted by one.
    CausalLm,
}

/// Declares [`Layer`] from one table, so a new kind is one row here plus its file in `layer/`.
/// From each row come the enum variant (with its JSON tag), [`Layer::kind`], [`Layer::KINDS`],
/// the deserializer's arm, [`Layer::example`] and the lowering in [`Layer::lower_leaf`].
///
/// A leaf row: `Variant(config: Config) = "tag", "example fields as JSON", |builder, input| lowering;`
/// (a kind without settings has no `(config: Config)`). A block row: `Variant { fields } =
/// "tag", "example";` — blocks contain layers, so `resolve` lowers them.
macro_rules! layer_kinds {
    (
        leaves { $( $(#[$doc:meta])* $v:ident $(($l:ident: $p:ty))? = $tag:literal, $example:literal,
            |$b:ident, $x:ident| $lower:expr; )* }
        blocks { $( $(#[$bdoc:meta])* $bv:ident { $( $(#[$fm:meta])* $f:ident: $ft:ty ),* $(,)? }
            = $btag:literal, $bexample:literal; )* }
    ) => {
        /// One layer or block. The tag is `kind`. `Deserialize` is written by hand below.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "kind")]
        pub enum Layer {
            $( $(#[$doc])* #[serde(rename = $tag)] $v $(($p))?, )*
            $( $(#[$bdoc])* #[serde(rename = $btag)] $bv { $( $(#[$fm])* $f: $ft ),* }, )*
        }

        impl Layer {
            /// Every `kind` tag, for menus and docs: the leaves, then the blocks.
            pub const KINDS: &'static [&'static str] = &[$($tag,)* $($btag,)*];

            /// The kinds that contain no other layers.
            pub const LEAF_KINDS: &'static [&'static str] = &[$($tag),*];

            /// The `kind` tag as written in JSON.
            pub fn kind(&self) -> &'static str {
                match self {
                    $( Layer::$v { .. } => $tag, )*
                    $( Layer::$bv { .. } => $btag, )*
                }
            }

            /// The fields (without `kind`) of the example of `kind`, as JSON text.
            fn example_fields(kind: &str) -> Option<&'static str> {
                match kind {
                    $( $tag => Some($example), )*
                    $( $btag => Some($bexample), )*
                    _ => None,
                }
            }

            /// Lowers a leaf layer to ops; blocks contain layers and are lowered by `resolve`.
            pub(crate) fn lower_leaf(&self, builder: &mut Builder, input: ValueId) -> LayerResult<ValueId> {
                match self {
                    $( Layer::$v $(($l))? => {
                        let ($b, $x) = (builder, input);
                        $lower
                    } )*
                    $( Layer::$bv { .. } => Err(format!("{} is a block: resolve lowers its layers", $btag)), )*
                }
            }
        }

        /// The body of `Layer::deserialize`: a map's `kind` picks the payload read from the rest.
        fn layer_from_fields(kind: &str, rest: serde_json::Map<String, serde_json::Value>) -> serde_json::Result<Layer> {
            Ok(match kind {
                $( $tag => Layer::$v $((from_fields::<$p>(rest)?))?, )*
                $( $btag => {
                    /// The block's fields (`Layer` itself has no derived `Deserialize`).
                    #[derive(Deserialize)]
                    struct Fields { $( $(#[$fm])* $f: $ft ),* }
                    let Fields { $($f),* } = from_fields(rest)?;
                    Layer::$bv { $($f),* }
                } )*
                other => return Err(serde::de::Error::unknown_variant(other, Layer::KINDS)),
            })
        }
    };
}

layer_kinds! {
leaves {
    Linear(l: Linear) = "linear", r#"{"in_features":128,"out_features":128}"#, |b, x| l.lower(b, x);
    Conv1d(l: Conv1d) = "conv1d", r#"{"in_channels":16,"out_channels":16,"kernel_size":3,"padding":1}"#, |b, x| l.lower(b, x);
    Conv2d(l: Conv2d) = "conv2d", r#"{"in_channels":16,"out_channels":16,"kernel_size":3,"padding":1}"#, |b, x| l.lower(b, x);
    ConvTranspose2d(l: ConvTranspose2d) = "conv_transpose2d", r#"{"in_channels":16,"out_channels":16,"kernel_size":2,"stride":2}"#, |b, x| l.lower(b, x);
    BatchNorm1d(l: BatchNorm) = "batch_norm1d", r#"{"num_features":128}"#, |b, x| l.lower(b, x, false);
    BatchNorm2d(l: BatchNorm) = "batch_norm2d", r#"{"num_features":16}"#, |b, x| l.lower(b, x, true);
    LayerNorm(l: LayerNorm) = "layer_norm", r#"{"normalized_shape":128}"#, |b, x| l.lower(b, x);
    GroupNorm(l: GroupNorm) = "group_norm", r#"{"num_groups":4,"num_channels":16}"#, |b, x| l.lower(b, x);
    RmsNorm(l: RmsNorm) = "rms_norm", r#"{"normalized_shape":128}"#, |b, x| l.lower(b, x);
    Relu(l: Relu) = "relu", "{}", |b, x| l.lower(b, x);
    LeakyRelu(l: LeakyRelu) = "leaky_relu", "{}", |b, x| l.lower(b, x);
    Gelu(l: Gelu) = "gelu", "{}", |b, x| l.lower(b, x);
    Silu(l: Silu) = "silu", "{}", |b, x| l.lower(b, x);
    Tanh = "tanh", "{}", |b, x| Ok(activation::unary(b, "tanh", x, activation::Saves::Output));
    Sigmoid = "sigmoid", "{}", |b, x| Ok(activation::unary(b, "sigmoid", x, activation::Saves::Output));
    Softmax(l: Softmax) = "softmax", r#"{"dim":-1}"#, |b, x| l.lower(b, x);
    Dropout(l: Dropout) = "dropout", "{}", |b, x| l.lower(b, x);
    /// `x * factor` by a constant (Gemma's embedding scale).
    Scale(l: Scale) = "scale", r#"{"factor":2.0}"#, |b, x| l.lower(b, x);
    /// `tanh(x / cap) * cap` (Gemma 2's final logits).
    LogitSoftcap(l: LogitSoftcap) = "logit_softcap", r#"{"cap":30.0}"#, |b, x| l.lower(b, x);
    MaxPool2d(l: MaxPool2d) = "max_pool2d", r#"{"kernel_size":2}"#, |b, x| l.lower(b, x);
    AvgPool2d(l: AvgPool2d) = "avg_pool2d", r#"{"kernel_size":2}"#, |b, x| l.lower(b, x);
    AdaptiveAvgPool2d(l: AdaptiveAvgPool2d) = "adaptive_avg_pool2d", r#"{"output_size":1}"#, |b, x| l.lower(b, x);
    Flatten(l: Flatten) = "flatten", "{}", |b, x| l.lower(b, x);
    Transpose(l: Transpose) = "transpose", r#"{"dim0":1,"dim1":2}"#, |b, x| l.lower(b, x);
    /// `x[:, index]` over the sequence dimension (BERT pooler, ViT head) or the last time step.
    SelectToken(l: SelectToken) = "select_token", "{}", |b, x| l.lower(b, x);
    Embedding(l: Embedding) = "embedding", r#"{"num_embeddings":1000,"embedding_dim":128}"#, |b, x| l.lower(b, x);
    /// Adds a learned per-position embedding (BERT/GPT-2 positions, BERT token types).
    PositionalEmbedding(l: PositionalEmbedding) = "positional_embedding", r#"{"num_embeddings":512,"embedding_dim":128}"#, |b, x| l.lower(b, x);
    /// Prepends a learned class token (ViT).
    ClsToken(l: ClsToken) = "cls_token", r#"{"embedding_dim":128}"#, |b, x| l.lower(b, x);
    /// SwiGLU feed-forward (LLaMA): `down(silu(gate(x)) * up(x))`.
    GatedMlp(l: GatedMlp) = "gated_mlp", r#"{"hidden_size":128,"intermediate_size":344}"#, |b, x| l.lower(b, x);
    Lstm(l: Recurrent) = "lstm", r#"{"input_size":128,"hidden_size":128}"#, |b, x| l.lower(b, x, 4);
    Gru(l: Recurrent) = "gru", r#"{"input_size":128,"hidden_size":128}"#, |b, x| l.lower(b, x, 3);
    Rnn(l: Recurrent) = "rnn", r#"{"input_size":128,"hidden_size":128}"#, |b, x| l.lower(b, x, 1);
    /// Multi-head self-attention including its projections.
    MultiheadAttention(l: MultiheadAttention) = "multihead_attention", r#"{"embed_dim":128,"num_heads":4}"#, |b, x| l.lower(b, x);
    /// Sparse mixture-of-experts feed-forward: router, resident experts, optional shared expert.
    SparseMoe(l: SparseMoe) = "sparse_moe", r#"{"hidden_size":128,"num_experts":8,"top_k":2,"intermediate_size":256}"#, |b, x| l.lower(b, x);
    /// DeepSeek's multi-head latent attention (low-rank Q and KV projections, decoupled RoPE).
    MultiHeadLatentAttention(l: MultiHeadLatentAttention) = "multi_head_latent_attention", r#"{"hidden_size":128,"num_heads":4,"kv_lora_rank":32,"qk_rope_head_dim":16,"qk_nope_head_dim":32,"v_head_dim":32}"#, |b, x| l.lower(b, x);
    /// Sets the output aside as the memory (the encoder's) and starts a stream of `seq_len` token
    /// ids (the decoder's input).
    TokenInput(l: TokenInput) = "token_input", r#"{"seq_len":8}"#, |b, x| l.lower(b, x);
    /// Writes the memory a `token_input` set aside (a vision tower's image tokens) into the token
    /// embeddings at the image placeholders (vision-language models).
    ImageTokens(l: ImageTokens) = "image_tokens", r#"{"embed_dim":128}"#, |b, x| l.lower(b, x);
    /// Sets the prompt's token embeddings aside and takes up the image again (the memory of the
    /// `token_input` before): the vision tower runs with the embeddings alive, as the model's forward runs it.
    ImageInput(l: ImageInput) = "image_input", "{}", |b, x| l.lower(b, x);
    /// Keeps its input referenced until the model's forward returns (a vision tower's outputs in `image_outputs`).
    Keep(l: Keep) = "keep", "{}", |b, x| l.lower(b, x);
    /// `x[index]`: the tokens permuted by an int64 index, a copy (Qwen2.5-VL's window order and back).
    IndexTokens(l: IndexTokens) = "index_tokens", "{}", |b, x| l.lower(b, x);
    /// Average pooling of a square patch grid's tokens (Gemma 3's projector): `[grid², D]` → `[(grid/kernel)², D]`.
    TokenPool(l: TokenPool) = "token_pool", r#"{"grid":4,"kernel":2}"#, |b, x| l.lower(b, x);
    /// Concatenates `group` consecutive tokens into one (Qwen2.5-VL's patch merger): `[N, D]` → `[N/group, group·D]`.
    MergeTokens(l: MergeTokens) = "merge_tokens", r#"{"group":4}"#, |b, x| l.lower(b, x);
    /// `x[:, count:]`: drops the first `count` tokens (LLaVA drops CLIP's class token).
    DropTokens(l: DropTokens) = "drop_tokens", r#"{"count":1}"#, |b, x| l.lower(b, x);
    /// A learned per-channel scale `x * gamma` (DINOv2's and ConvNeXt's layer scale).
    LayerScale(l: LayerScale) = "layer_scale", r#"{"dim":128}"#, |b, x| l.lower(b, x);
    /// `cat([x[:, 0], x[:, 1:].mean(1)])`: `[S, D]` → `[2·D]` (DINOv2's classifier input).
    ClsMeanPool(l: ClsMeanPool) = "cls_mean_pool", "{}", |b, x| l.lower(b, x);
    /// SigLIP's attention-pooling head: a learned probe attends to `[P, D]` tokens, then LayerNorm, MLP and residual → `[D]`.
    AttentionPool(l: AttentionPool) = "attention_pool", r#"{"embed_dim":128,"num_heads":4,"intermediate_size":512}"#, |b, x| l.lower(b, x);
    /// Attention to the memory a `token_input` set aside (encoder–decoder cross-attention).
    CrossAttention(l: CrossAttention) = "cross_attention", r#"{"embed_dim":128,"num_heads":4}"#, |b, x| l.lower(b, x);
    /// T5's relative position bias of the layers that follow (`multihead_attention` with `position_bias`).
    RelativePositionBias(l: RelativePositionBias) = "relative_position_bias", r#"{"num_buckets":32,"num_heads":4}"#, |b, x| l.lower(b, x);
    /// CLIP's head: the similarity of the memory's embedding and the input's, times `logit_scale.exp()`.
    Contrastive(l: Contrastive) = "contrastive", r#"{"embed_dim":128}"#, |b, x| l.lower(b, x);
    /// Mamba's selective state-space mixer (`MambaMixer`): a fixed conv + SSM state per sequence in generation.
    MambaMixer(l: MambaMixer) = "mamba_mixer", r#"{"hidden_size":128,"intermediate_size":256,"time_step_rank":8}"#, |b, x| l.lower(b, x);
    /// Mamba-2's mixer (`Mamba2Mixer`, also Bamba's and Falcon-H1's): heads, groups, chunked scan.
    Mamba2Mixer(l: Mamba2Mixer) = "mamba2_mixer", r#"{"hidden_size":128,"num_heads":8,"head_dim":32,"state_size":16}"#, |b, x| l.lower(b, x);
    /// Gated DeltaNet linear attention (Qwen3-Next's `linear_attention` layers): a fixed recurrent state.
    GatedDeltaNet(l: GatedDeltaNet) = "gated_delta_net", r#"{"hidden_size":128,"num_k_heads":2,"num_v_heads":4,"head_k_dim":32,"head_v_dim":32}"#, |b, x| l.lower(b, x);
    /// MiniMax's lightning attention (its `linear_attention` layers): block-wise linear attention, a fixed `[H, d, d]` state.
    LightningAttention(l: LightningAttention) = "lightning_attention", r#"{"hidden_size":128,"num_heads":4,"block_size":32}"#, |b, x| l.lower(b, x);
    /// DeBERTa's relative-position embeddings (`rel_embeddings`, optional LayerNorm), read by the `disentangled_attention` layers after it.
    RelativeEmbeddings(l: RelativeEmbeddings) = "relative_embeddings", r#"{"num_embeddings":64,"hidden_size":128}"#, |b, x| l.lower(b, x);
    /// DeBERTa-v2's `DisentangledSelfAttention`: content scores plus gathered content-to-position and position-to-content scores; `[S, H·d]` context out.
    DisentangledAttention(l: DisentangledAttention) = "disentangled_attention", r#"{"hidden_size":128,"num_heads":4}"#, |b, x| l.lower(b, x);
    /// Swin's `SwinLayer` on a `[H·W, dim]` token map: (shifted) window attention with its relative position bias, MLP; one activation-checkpointing unit.
    SwinBlock(l: SwinBlock) = "swin_block", r#"{"dim":128,"num_heads":4,"resolution":[4,4],"window_size":2,"shift":true,"intermediate_size":256}"#, |b, x| b.in_unit(|b| l.lower(b, x));
    /// Swin's `SwinPatchMerging`: `[H·W, C]` → `[⌈H/2⌉·⌈W/2⌉, 2C]`.
    PatchMerging(l: PatchMerging) = "patch_merging", r#"{"dim":128,"resolution":[4,4]}"#, |b, x| l.lower(b, x);
    /// The mean over the tokens (`AdaptiveAvgPool1d(1)` of a `[L, C]` map): `[C]`.
    TokenMean(l: TokenMean) = "token_mean", r#"{}"#, |b, x| l.lower(b, x);
    /// wav2vec 2.0's positional convolution: a weight-normed grouped `Conv1d` over `[T, hidden]` (its `g` and `v` are the parameters), GELU.
    PositionalConv(l: PositionalConv) = "positional_conv", r#"{"hidden_size":128,"kernel_size":4,"groups":4}"#, |b, x| l.lower(b, x);
    /// Llama 3.2 Vision's tiles (`[T·C, S, S]`) → `[T·L, D]` tokens: patch conv, pre-tile embedding, class token, gated positions, LayerNorm, padding to 8.
    TiledPatchEmbed(l: TiledPatchEmbed) = "tiled_patch_embed", r#"{"hidden_size":32,"num_channels":1,"patch_size":4,"num_tiles":16,"num_aspect_ratios":3}"#, |b, x| l.lower(b, x);
    /// Llama 3.2 Vision's local and gated global encoders over all tiles; the `intermediate_layers`' outputs concatenated to the last: `[T·(P+1), D·(1+k)]`.
    TiledVisionEncoder(l: TiledVisionEncoder) = "tiled_vision_encoder", r#"{"layer":{"d_model":128,"nhead":4,"dim_feedforward":512,"norm_first":true},"num_layers":2,"num_global_layers":1,"intermediate_layers":[0],"num_tiles":2,"tile_tokens":5,"num_aspect_ratios":3}"#, |b, x| l.lower(b, x);
    /// Llama 3.2 Vision's gated cross-attention decoder layer: text attends to the image tokens (the memory), tanh gates on both branches; one activation-checkpointing unit.
    GatedCrossAttentionLayer(l: GatedCrossAttentionLayer) = "gated_cross_attention_layer", r#"{"hidden_size":128,"num_heads":4,"num_kv_heads":2,"intermediate_size":256}"#, |b, x| b.in_unit(|b| l.lower(b, x));
    /// `nn.TransformerEncoderLayer`-style block (also BERT, GPT-2, ViT, LLaMA layers); one
    /// activation-checkpointing unit.
    TransformerEncoderLayer(l: TransformerLayer) = "transformer_encoder_layer", r#"{"d_model":128,"nhead":4,"dim_feedforward":512}"#,
        |b, x| b.in_unit(|b| l.lower(b, x, false));
    /// Decoder-only (causal) transformer layer: a `transformer_encoder_layer` with a causal mask.
    TransformerDecoderLayer(l: TransformerLayer) = "transformer_decoder_layer", r#"{"d_model":128,"nhead":4,"dim_feedforward":512}"#,
        |b, x| b.in_unit(|b| l.lower(b, x, true));
}
blocks {
    /// Layers applied in order. `checkpoint: true` makes it one activation-checkpointing unit.
    Sequential {
        layers: Vec<Layer>,
        #[serde(default, skip_serializing_if = "is_false")]
        checkpoint: bool,
    } = "sequential", r#"{"layers":[]}"#;
    /// `body(x) + shortcut(x)`; the shortcut is the identity when absent.
    Residual {
        body: Vec<Layer>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shortcut: Option<Vec<Layer>>,
        /// `out += identity` (torchvision) instead of `out = out + identity`.
        #[serde(default, skip_serializing_if = "is_false")]
        inplace: bool,
    } = "residual", r#"{"body":[]}"#;
    /// `body` applied `times` times; each repetition is an activation-checkpointing unit.
    Repeat { times: u64, body: Vec<Layer> } = "repeat", r#"{"times":2,"body":[]}"#;
    /// Branches applied to the same input, joined by concatenation or sum.
    Parallel {
        branches: Vec<Vec<Layer>>,
        #[serde(default)]
        join: Join,
    } = "parallel", r#"{"branches":[[],[]]}"#;
    /// Layers applied in order with their parameters frozen (`requires_grad=False`: no
    /// gradient, no optimizer state). Any layer written with `"trainable": false` reads as this
    /// block around it.
    Frozen { layers: Vec<Layer> } = "frozen", r#"{"layers":[]}"#;
    /// Layers run on the block's input whose output nothing downstream reads; the block passes
    /// its input on. Autograd records them, but the loss's backward never reaches them: what
    /// they save lives only while their output does (to the forward's end where a layer inside
    /// `keep`s it), and their parameters get no gradient and no optimizer state (LLaVA's vision
    /// layers after `vision_feature_layer`).
    Discarded { layers: Vec<Layer> } = "discarded", r#"{"layers":[]}"#;
}
}

/// Written by hand instead of derived with `#[serde(tag = "kind")]`, which buffers through
/// serde's private `Content` and so instantiates every payload's `Deserialize` once per
/// deserializer. Here every payload is read from one buffered `Value` (see `serde_util::via_value`).
/// Same JSON and errors as the derive, except for error positions and the list form
/// `[kind, field values…]`, which is not accepted (see `layer_from_value`).
impl<'de> Deserialize<'de> for Layer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        via_value(d, layer_from_value)
    }
}

/// The non-generic body of `Layer::deserialize`.
fn layer_from_value(value: serde_json::Value) -> serde_json::Result<Layer> {
    use serde::de::Error as _;
    use serde_json::Value;
    // A map with a `kind` entry. (The derive also took a sequence `[kind, fields…]`, which
    // nothing writes; reading only maps drops every payload's `visit_seq`, see `from_fields`.)
    let (kind, rest) = match value {
        Value::Object(mut map) => match map.remove("kind") {
            Some(kind) => (kind, map),
            None => return Err(serde_json::Error::missing_field("kind")),
        },
        other => return Err(invalid_type(other, "internally tagged enum Layer")),
    };
    let kind = match kind {
        Value::String(kind) => kind,
        other => return Err(invalid_type(other, "variant identifier")),
    };
    let mut rest = rest;
    match rest.remove("trainable") {
        None | Some(Value::Bool(true)) => layer_from_fields(&kind, rest),
        Some(Value::Bool(false)) => Ok(Layer::Frozen { layers: vec![layer_from_fields(&kind, rest)?] }),
        Some(other) => Err(invalid_type(other, "`trainable`: true or false")),
    }
}

/// How parallel branches are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(Default)]
pub enum Join {
    /// `torch.cat` along the channel (first per-sample) dimension.
    #[default]
    Concat,
    Add,
}


impl Layer {
    /// Whether this layer contains other layers.
    pub fn is_block(&self) -> bool {
        matches!(self, Layer::Sequential { .. } | Layer::Residual { .. } | Layer::Repeat { .. } | Layer::Parallel { .. } | Layer::Frozen { .. } | Layer::Discarded { .. })
    }

    /// A block's child lists in order, each with the slot its paths name; empty for a leaf.
    pub fn children(&self) -> Vec<(Slot, &Vec<Layer>)> {
        match self {
            Layer::Sequential { layers, .. } | Layer::Frozen { layers } | Layer::Discarded { layers } => vec![(Slot::Layers, layers)],
            Layer::Residual { body, shortcut, .. } => {
                let mut lists = vec![(Slot::Body, body)];
                lists.extend(shortcut.iter().map(|s| (Slot::Shortcut, s)));
                lists
            }
            Layer::Repeat { body, .. } => vec![(Slot::Body, body)],
            Layer::Parallel { branches, .. } => branches.iter().enumerate().map(|(i, b)| (Slot::Branch(i), b)).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether this layer or any layer inside it satisfies `pred`.
    pub fn any(&self, pred: &impl Fn(&Layer) -> bool) -> bool {
        pred(self) || self.children().into_iter().any(|(_, list)| list.iter().any(|l| l.any(pred)))
    }

    /// A layer of `kind` with PyTorch defaults and small example sizes, for "add layer" menus.
    pub fn example(kind: &str) -> Option<Layer> {
        let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_str(Layer::example_fields(kind)?).ok()?;
        fields.insert("kind".into(), kind.into());
        layer_from_value(fields.into()).ok()
    }
}

impl ModelSpec {
    /// The model's name as the CLI, the app and the downloads show it.
    pub fn display_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| "custom model".into())
    }

    /// Reads a spec from JSON text, with an error that says where the text is wrong.
    pub fn from_json(text: &str) -> Result<ModelSpec> {
        let spec: ModelSpec = serde_json::from_str(text).map_err(|e| Error::Parse(e.to_string()))?;
        if spec.version > SPEC_VERSION {
            return Err(Error::Parse(format!(
                "spec version {} is newer than this vramcalc understands ({SPEC_VERSION})",
                spec.version
            )));
        }
        Ok(spec)
    }

    pub fn to_json_pretty(&self) -> String {
        // Serialising plain data structs to a String cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Token-id input (language models).
    pub fn is_token_input(&self) -> bool {
        self.input.dtype == InputDType::Int64
    }

    /// Whether `generate()` can be simulated: token ids in, an image-text model whose prompt's
    /// embeddings take the image tokens (`image_input`), or an image model whose text layers
    /// read the image through gated cross-attention (Llama 3.2 Vision: the image is the input,
    /// the prompt is the cache's text).
    pub fn can_generate(&self) -> bool {
        self.is_token_input() || self.image_prompt() || self.encoder_decoder() || self.layers.iter().any(|l| l.any(&|l: &Layer| matches!(l, Layer::GatedCrossAttentionLayer(_))))
    }

    /// An encoder–decoder (T5, BART, Whisper): a `token_input` (not a prompt's) before
    /// `cross_attention` layers; its input is the encoder's (token ids, or Whisper's frames).
    pub fn encoder_decoder(&self) -> bool {
        let start = self.layers.iter().position(|l| matches!(l, Layer::TokenInput(t) if !t.prompt));
        start.is_some_and(|k| self.layers[k..].iter().any(|l| l.any(&|l| matches!(l, Layer::CrossAttention(_)))))
    }

    /// The prompt comes with `token_type_ids` (a `token_input`'s `token_type_ids`).
    pub fn token_type_ids(&self) -> bool {
        self.layers.iter().any(|l| matches!(l, Layer::TokenInput(t) if t.token_type_ids))
    }

    /// An image-text model that embeds its prompt before the vision tower (`image_input`): the
    /// image is the input, the prompt's length is the estimate's sequence length.
    pub fn image_prompt(&self) -> bool {
        !self.is_token_input() && self.layers.iter().any(|l| matches!(l, Layer::ImageInput(_)))
    }

    /// Token ids, or a `[seq_len, features]` sequence: the first dimension is a sequence length
    /// that `TrainConfig::seq_len` overrides.
    pub fn is_sequence_input(&self) -> bool {
        self.is_token_input() || self.input.shape.len() == 2
    }

    /// The sequence length the model runs at with `seq_len` as the override (`None` for inputs
    /// that are not sequences).
    pub fn seq_len(&self, seq_len: Option<u64>) -> Option<u64> {
        self.is_sequence_input().then(|| seq_len.or(self.input.shape.first().copied()).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_an_example_that_round_trips() {
        for kind in Layer::KINDS {
            let layer = Layer::example(kind).unwrap_or_else(|| panic!("no example for {kind}"));
            assert_eq!(layer.kind(), *kind);
            let json = serde_json::to_string(&layer).unwrap();
            let back: Layer = serde_json::from_str(&json).unwrap();
            assert_eq!(back, layer, "{json}");
        }
    }

    #[test]
    fn layer_deserialize_matches_the_derived_format() {
        let err = |json: &str| serde_json::from_str::<Layer>(json).unwrap_err().to_string();
        assert!(err(r#"{"kind": "lineer"}"#).starts_with("unknown variant `lineer`, expected one of `linear`, "));
        assert_eq!(err(r#"{"in_features": 1}"#), "missing field `kind`");
        assert_eq!(err(r#"["linear", 2, 3]"#), "invalid type: sequence, expected internally tagged enum Layer");
        assert_eq!(err("3"), "invalid type: integer `3`, expected internally tagged enum Layer");
        assert_eq!(err(r#"{"kind": 3}"#), "invalid type: integer `3`, expected variant identifier");
        assert_eq!(err(r#"{"kind": "linear", "in_features": 1}"#), "missing field `out_features`");
        assert!(err(r#"{"kind": "relu", "foo": 1}"#).starts_with("unknown field `foo`"));
        assert!(err(r#"{"kind": "relu", "kind": "gelu"}"#).starts_with("duplicate field `kind`"));
        let nested = r#"{"kind": "sequential", "layers": [{"kind": "dropout", "p": 0.1, "p": 0.2}]}"#;
        assert!(err(nested).starts_with("duplicate field `p`"), "{}", err(nested));
        // unit variants ignore other fields
        let ok = |json: &str| serde_json::from_str::<Layer>(json).unwrap();
        assert_eq!(ok(r#"{"kind": "tanh", "foo": 1}"#), Layer::Tanh);
        // nested blocks, and the same result through `serde_json::Value`
        let json = r#"{"kind": "repeat", "times": 2, "body": [{"kind": "residual", "body": [{"kind": "sequential",
            "layers": [{"kind": "tanh"}], "checkpoint": true}], "shortcut": [{"kind": "parallel", "branches": [[]],
            "join": "add"}]}]}"#;
        let layer = ok(json);
        assert_eq!(serde_json::from_value::<Layer>(serde_json::from_str(json).unwrap()).unwrap(), layer);
        assert_eq!(serde_json::from_str::<Layer>(&serde_json::to_string(&layer).unwrap()).unwrap(), layer);
    }

    #[test]
    fn parse_error_says_where() {
        let err = ModelSpec::from_json(r#"{"input": {"shape": [3]}, "layers": [{"kind": "lineer"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("lineer"), "{err}");
    }
}
