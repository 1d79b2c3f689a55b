//! Sparse mixture-of-experts feed-forward (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3), lowered
//! the way transformers 5.24 runs it in training.
//!
//! Per sample the input is `[S, D]`. A router scores the `E` experts per token and keeps the
//! `top_k` best; every expert is resident (its parameters, gradients and optimizer state exist
//! whether or not a token reaches it), stored as transformers stores them: two 3-d parameters,
//! `gate_up_proj [E, 2I, D]` and `down_proj [E, D, I]`.
//!
//! **Dispatch.** transformers 5.x runs the experts through `config._experts_implementation`, whose
//! default is `"grouped_mm"` (`PreTrainedModel.get_correct_experts_implementation`, for torch ≥ 2.9:
//! `is_grouped_mm_available`). `integrations/moe.py::grouped_mm_experts_forward` gathers every
//! (token, expert) pair, `R = tokens · top_k` rows, sorts them by expert and runs two
//! `torch.nn.functional.grouped_mm` calls over all experts at once:
//!
//! ```text
//! token_idx = arange(T).expand(k).reshape(-1)      # int64 [R]
//! selected  = hidden[token_idx]                    # [R, D]   (a local until return)
//! perm      = argsort(expert_ids); inv_perm = argsort(perm)
//! x_g       = selected[perm]; w_g = weights[perm]  # [R, D], [R]
//! gate_up   = grouped_mm(x_g.to(W.dtype), W1ᵀ)      # [R, 2I]  saves x_g, W1
//! h         = act(gate) * up                       # [R, I]   silu saves gate, mul saves both
//! out_g     = grouped_mm(h, W2ᵀ)                   # [R, D]   saves h, W2
//! out_g     = out_g * w_g[:, None]                 # [R, D]   saves both
//! out       = out_g[inv_perm].view(T, k, D).sum(1) # [R, D] → [T, D]
//! ```
//!
//! so the experts' saved activations are sized by `R` rows whatever the routing: transformers'
//! MoE is dropless (each token reaches exactly `top_k` experts) and `grouped_mm` runs all groups
//! in one kernel, so how evenly the router spreads tokens changes the work per expert, not the
//! memory. That is why there is no load-balance setting here: under the usual assumption of
//! uniform routing (each expert gets `tokens · top_k / E` rows) and under any imbalance the
//! figure is the same. `grouped_mm` is not autocast-enabled: it casts its input to the weights'
//! dtype, so under AMP (fp32 weights) the experts run in fp32.
//!
//! Routers (`router`): `softmax` (Qwen2/3-MoE `TopKRouter`: fp32 softmax, top-k, weights cast back
//! to the logits' dtype), `softmax_fp32` (Mixtral `MixtralTopKRouter`: the weights stay fp32, so
//! the weighted expert output is fp32 too), `grouped_sigmoid` (DeepSeek-V3 `DeepseekV3TopkRouter`:
//! an fp32 linear, sigmoid scores plus the `e_score_correction_bias` buffer, group-limited top-k,
//! `gather`, optional normalisation, `routed_scaling_factor`).

use super::activation::{add, mul, softmax, unary, Saves};
use super::linear::GatedMlp;
use super::linear_op::linear;
use super::{expect_last, positive, LayerResult};
use crate::graph::{GradRule, Lin, ValueId};
use crate::lower::Builder;
use crate::serde_util::{is_false, t};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// How the router turns scores into the top-k routing weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Router {
    /// fp32 softmax over the experts, top-k, weights cast back to the logits' dtype (Qwen-MoE).
    #[default]
    Softmax,
    /// As `softmax`, but the weights stay fp32 (Mixtral).
    SoftmaxFp32,
    /// DeepSeek-V3: fp32 linear, sigmoid, bias-corrected group-limited top-k.
    GroupedSigmoid,
    /// GPT-OSS `GptOssTopKRouter`, Granite-MoE `GraniteMoeTopKRouter`: a linear (with
    /// `router_bias`, GPT-OSS's `[E]` bias), top-k of the logits, softmax over the k values in the
    /// logits' dtype.
    TopkSoftmax,
}

/// The experts' gated activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ExpertActivation {
    /// `silu(gate) * up` over `gate_up.chunk(2)`.
    #[default]
    Silu,
    /// GPT-OSS `GptOssExperts._apply_gate`: interleaved `gate_up[..., ::2]` / `[..., 1::2]`,
    /// `gate.clamp(max=limit)`, `up.clamp(-limit, limit)`, `glu = gate * sigmoid(gate * alpha)`,
    /// `(up + 1) * glu`.
    ClampedSwiglu,
}

/// A sparse MoE feed-forward block: router, `num_experts` SwiGLU experts, optional shared expert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseMoe {
    pub hidden_size: u64,
    pub num_experts: u64,
    /// Experts per token (`num_experts_per_tok`).
    pub top_k: u64,
    /// Each expert's SwiGLU width (`moe_intermediate_size`; Mixtral's `intermediate_size`).
    pub intermediate_size: u64,
    #[serde(default)]
    pub router: Router,
    /// Renormalise the top-k weights to sum to 1 (`norm_topk_prob`; Mixtral always does).
    #[serde(default = "t")]
    pub norm_topk_prob: bool,
    /// Expert groups of the `grouped_sigmoid` router (`n_group`) and how many a token may use
    /// (`topk_group`).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub n_group: u64,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub topk_group: u64,
    /// Width of a dense SwiGLU expert every token also goes through (DeepSeek's
    /// `moe_intermediate_size · n_shared_experts`, Qwen2-MoE's `shared_expert_intermediate_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_intermediate_size: Option<u64>,
    /// Qwen2-MoE's `shared_expert_gate`: `sigmoid(Linear(D, 1)(x)) · shared_expert(x)`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared_expert_gate: bool,
    /// Biases of the experts' projections (GPT-OSS: `gate_up_proj_bias [E, 2I]`,
    /// `down_proj_bias [E, D]`, gathered per routed row and added).
    #[serde(default, skip_serializing_if = "is_false")]
    pub expert_bias: bool,
    /// A bias on the router's linear (GPT-OSS).
    #[serde(default, skip_serializing_if = "is_false")]
    pub router_bias: bool,
    /// The experts' gated activation (default `silu`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub activation: ExpertActivation,
    /// Biases on the shared expert's three projections (ERNIE 4.5's `use_bias`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared_bias: bool,
    /// ERNIE 4.5's `gate.moe_statics.e_score_correction_bias`: a `[1, E]` parameter with
    /// `requires_grad=False` (counted by `parameters()`, never trained), added to the routing
    /// probabilities before the top-k (`Ernie4_5_MoeStatics`, `modeling_ernie4_5_moe.py`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub router_stats: bool,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn one() -> u64 {
    1
}
fn is_one(v: &u64) -> bool {
    *v == 1
}

impl SparseMoe {
    fn check(&self) -> LayerResult<()> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_experts, "num_experts")?;
        positive(self.top_k, "top_k")?;
        positive(self.intermediate_size, "intermediate_size")?;
        positive(self.n_group, "n_group")?;
        positive(self.topk_group, "topk_group")?;
        if self.top_k > self.num_experts {
            return Err(format!("top_k ({}) must be at most num_experts ({})", self.top_k, self.num_experts));
        }
        if self.router == Router::GroupedSigmoid {
            if !self.num_experts.is_multiple_of(self.n_group) {
                return Err(format!("num_experts ({}) must be divisible by n_group ({})", self.num_experts, self.n_group));
            }
            let per_group = self.num_experts / self.n_group;
            if self.topk_group > self.n_group || self.top_k > self.topk_group.saturating_mul(per_group) {
                return Err(format!(
                    "top_k ({}) needs topk_group ({}) ≤ n_group ({}) groups of {per_group} experts holding at least top_k",
                    self.top_k, self.topk_group, self.n_group
                ));
            }
            // `.topk(2)` inside each group
            if per_group < 2 {
                return Err(format!("each of the n_group ({}) groups needs at least 2 experts", self.n_group));
            }
        } else if self.n_group != 1 || self.topk_group != 1 {
            return Err("n_group and topk_group belong to the grouped_sigmoid router".into());
        }
        if self.shared_intermediate_size == Some(0) {
            return Err("`shared_intermediate_size` must be at least 1 (omit it for no shared expert)".into());
        }
        if self.router_bias && self.router != Router::TopkSoftmax {
            return Err("`router_bias` belongs to the topk_softmax router".into());
        }
        if self.shared_expert_gate && self.shared_intermediate_size.is_none() {
            return Err("`shared_expert_gate` needs a shared expert (`shared_intermediate_size`)".into());
        }
        Ok(())
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        self.check()?;
        let seq = sequence_len(b, x, self.hidden_size)?;
        let shared = |i| GatedMlp { hidden_size: self.hidden_size, intermediate_size: i, bias: self.shared_bias, gelu_new_dropout: None };
        // Qwen2MoeSparseMoeBlock.forward runs the shared expert first; DeepseekV3MoE last;
        // ERNIE 4.5 (the one with `router_stats`) first too, ungated:
        // `Ernie4_5_MoeSparseMoeBlock.forward` keeps `shared_output` through the routed experts
        let early_shared = match self.shared_intermediate_size {
            Some(i) if self.shared_expert_gate || self.router_stats => Some(shared(i).lower(b, x)?),
            _ => None,
        };
        let (weights, wdt) = self.route(b, x, seq);
        let mut out = self.experts(b, x, weights, wdt, seq);
        if let (Some(sh), false) = (early_shared, self.shared_expert_gate) {
            // final_hidden_states + shared_output
            out = add(b, out, sh);
        } else if let Some(sh) = early_shared {
            // F.sigmoid(self.shared_expert_gate(x)) * shared_expert_output; expert_output += ...
            let gw = b.param(Shape::new([1, self.hidden_size]));
            let g = linear(b, x, gw, None);
            let g = unary(b, "sigmoid", g, Saves::Output);
            let gated = mul(b, g, sh);
            out = b.inplace("add_", out, Some(gated), false, GradRule::Alias);
        } else if let Some(i) = self.shared_intermediate_size {
            // hidden_states + self.shared_experts(residuals)
            let sh = shared(i).lower(b, x)?;
            out = add(b, out, sh);
        }
        Ok(out)
    }

    /// The router: returns the flat `[S·k]` routing weights and their dtype.
    fn route(&self, b: &mut Builder, x: ValueId, seq: u64) -> (ValueId, DType) {
        let (e, k) = (self.num_experts, self.top_k);
        let idx = (Shape::new([seq, k]), true, DType::I64);
        let w = b.param(Shape::new([e, self.hidden_size]));
        if self.router_stats {
            // `nn.Parameter(..., requires_grad=False)`: a frozen parameter. Its `[S, E]` sum with
            // the probabilities lives only inside `torch.topk(...)` (not modelled)
            let was = b.frozen;
            b.frozen = true;
            b.param(Shape::new([1, e]));
            b.frozen = was;
        }
        let (top, wdt) = if self.router == Router::GroupedSigmoid {
            // e_score_correction_bias: a buffer, converted with the model by `.to(dtype)`
            let dt = b.param_dtype();
            b.buffer(e, dt);
            // F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))
            let xf = b.cast(x, DType::F32);
            let wf = b.cast(w, DType::F32);
            let logits = linear(b, xf, wf, None);
            let scores = unary(b, "sigmoid", logits, Saves::Output);
            // route_tokens_to_experts: scores + bias, group top-2 sums, group mask, masked_fill
            // and top-k run on [S, E] temporaries that die with the function.
            let tmp = seq.saturating_mul(e).saturating_mul(4 + 4 + 1 + 4);
            b.last_fwd_scratch(Lin { fixed: 0, per_sample: tmp });
            // topk_weights = scores.gather(1, topk_indices): saves the indices
            let dt = b.dtype(scores);
            (b.op("gather", &[scores], &[(Shape::new([seq, k]), dt)], &[], false, &[idx], GradRule::Alloc)[0], dt)
        } else if self.router == Router::TopkSoftmax {
            // F.linear(hidden_states, self.weight, self.bias); topk; softmax(top values, dtype=their dtype)
            let bias = self.router_bias.then(|| b.param(Shape::new([e])));
            let logits = linear(b, x, w, bias);
            let dt = b.dtype(logits);
            let top = b.op("topk", &[logits], &[(Shape::new([seq, k]), dt)], &[], false, &[idx], GradRule::Alloc)[0];
            (softmax(b, top, None), dt)
        } else {
            let logits = linear(b, x, w, None);
            // softmax(router_logits.float()) / softmax(router_logits, dtype=torch.float)
            let lf = b.cast(logits, DType::F32);
            let probs = b.op("softmax", &[lf], &[(Shape::new([seq, e]), DType::F32)], &[], true, &[], GradRule::Alloc)[0];
            let top = b.op("topk", &[probs], &[(Shape::new([seq, k]), DType::F32)], &[], false, &[idx], GradRule::Alloc)[0];
            let wdt = if self.router == Router::Softmax { b.dtype(logits) } else { DType::F32 };
            (top, wdt)
        };
        let mut top = top;
        if self.router == Router::TopkSoftmax {
            // the softmax over the k values is the routing weight as it is
        } else if self.norm_topk_prob {
            // router_top_value /= router_top_value.sum(dim=-1, keepdim=True) (and DeepSeek's
            // `* routed_scaling_factor`): [S, k] tensors, one op for the chain
            let dt = b.dtype(top);
            top = b.op("normalize_topk", &[top], &[(Shape::new([seq, k]), dt)], &[top], true, &[], GradRule::Alloc)[0];
        } else if self.router == Router::GroupedSigmoid {
            top = unary(b, "mul_scalar", top, Saves::Nothing);
        }
        // reshape(-1) to [S·k] is a view; `experts` reads the weights whole
        (b.cast(top, wdt), wdt)
    }

    /// `grouped_mm_experts_forward` (see the module docs).
    fn experts(&self, b: &mut Builder, x: ValueId, weights: ValueId, wdt: DType, seq: u64) -> ValueId {
        let (e, d, i) = (self.num_experts, self.hidden_size, self.intermediate_size);
        let rows = seq.saturating_mul(self.top_k);
        let w1 = b.param(Shape::new([e, i.saturating_mul(2), d]));
        let w2 = b.param(Shape::new([e, d, i]));
        let xdt = b.dtype(x);
        let index = (Shape::new([rows]), true, DType::I64);
        // hidden_states[token_idx] saves token_idx; [perm] and [inv_perm] save theirs
        let selected = b.op("index", &[x], &[(Shape::new([rows, d]), xdt)], &[], false, std::slice::from_ref(&index), GradRule::Alloc)[0];
        let xg = b.op("index", &[selected], &[(Shape::new([rows, d]), xdt)], &[], false, std::slice::from_ref(&index), GradRule::Alloc)[0];
        let wg = b.op("index", &[weights], &[(Shape::new([rows]), wdt)], &[], false, &[], GradRule::Alloc)[0];
        // grouped_mm is not autocast-enabled: `input.to(weight.dtype)`
        let pdt = b.param_dtype();
        let xin = b.cast(xg, pdt);
        let (b1, b2) = if self.expert_bias {
            (Some(b.param(Shape::new([e, i.saturating_mul(2)]))), Some(b.param(Shape::new([e, d]))))
        } else {
            (None, None)
        };
        let mut gate_up = grouped_mm(b, xin, w1, Shape::new([rows, i.saturating_mul(2)]));
        let mut first_bias = None;
        if let Some(bias) = b1 {
            // `_grouped_linear(…, bias=gate_up_proj_bias[expert_ids_g])`: a gathered [R, 2I] copy, added
            let (sum, g) = gathered_bias_add(b, gate_up, bias, rows, i.saturating_mul(2));
            (gate_up, first_bias) = (sum, Some(g));
        }
        let h = match self.activation {
            ExpertActivation::Silu => {
                // gate_up.chunk(2): views, read here through gate_up itself. silu saves gate
                // (gate_up's storage), `act * up` saves act and up.
                let act = b.op("silu", &[gate_up], &[(Shape::new([rows, i]), pdt)], &[gate_up], false, &[], GradRule::Alloc)[0];
                b.op("mul", &[act, gate_up], &[(Shape::new([rows, i]), pdt)], &[act, gate_up], false, &[], GradRule::Alloc)[0]
            }
            ExpertActivation::ClampedSwiglu => clamped_swiglu(b, gate_up, rows, i, pdt),
        };
        if let Some(g) = first_bias {
            // `selected_biases` is rebound to the down projection's only now
            b.hold(g);
        }
        let mut out = grouped_mm(b, h, w2, Shape::new([rows, d]));
        if let Some(bias) = b2 {
            let (sum, g) = gathered_bias_add(b, out, bias, rows, d);
            out = sum;
            b.hold(g);
        }
        let proj_out = out;
        let out = mul(b, out, wg);
        let odt = b.dtype(out);
        let out = b.op("index", &[out], &[(Shape::new([rows, d]), odt)], &[], false, &[index], GradRule::Alloc)[0];
        let summed = b.op("sum", &[out], &[(Shape::new([seq, d]), odt)], &[], false, &[], GradRule::Alloc)[0];
        let res = b.cast(summed, xdt);
        if b.opts.training {
            // `selected_hidden_states` is a Python local until the function returns
            b.hold(selected);
        } else {
            // no grad: what nothing saves lives as long as its name, to the return
            // (`grouped_mm_experts_forward` of transformers 5.24 `integrations/moe.py`): the
            // gathered `selected_hidden_states_g` [R, D] and the down projection's `proj_out`
            // [R, D]; the routing-weighted product dies when `weighted_out` is rebound
            b.hold(xg);
            b.hold(proj_out);
        }
        res
    }
}

/// `out + bias[expert_ids_g]`: the index gathers a `[R, n]` copy of the per-expert bias (its
/// backward needs only the indices, int64 `[R]`); the add saves nothing.
fn gathered_bias_add(b: &mut Builder, out: ValueId, bias: ValueId, rows: u64, n: u64) -> (ValueId, ValueId) {
    let dt = b.dtype(bias);
    let index = (Shape::new([rows]), true, DType::I64);
    let g = b.op("index", &[bias], &[(Shape::new([rows, n]), dt)], &[], false, &[index], GradRule::Alloc)[0];
    // one row per routed token: per sample, though gathered from a parameter
    b.set_batched(g);
    (add(b, out, g), g)
}

/// GPT-OSS `_apply_gate` on `[R, 2I]` (see [`ExpertActivation::ClampedSwiglu`]): the strided
/// halves are views; each clamp saves its input for the mask of its backward (`clamp_backward`:
/// `self`), `gate * alpha` saves nothing, sigmoid its output, each product both operands, `up + 1`
/// nothing.
fn clamped_swiglu(b: &mut Builder, gate_up: ValueId, rows: u64, i: u64, dt: DType) -> ValueId {
    let half = || (Shape::new([rows, i]), dt);
    let gate = b.op("clamp", &[gate_up], &[half()], &[gate_up], false, &[], GradRule::Alloc)[0];
    let up = b.op("clamp", &[gate_up], &[half()], &[gate_up], false, &[], GradRule::Alloc)[0];
    let scaled = unary(b, "mul_scalar", gate, Saves::Nothing);
    let sig = unary(b, "sigmoid", scaled, Saves::Output);
    let glu = mul(b, gate, sig);
    let up1 = unary(b, "add_scalar", up, Saves::Nothing);
    let out = mul(b, up1, glu);
    // `gate_up`, `gate`, `up` and `glu` are the function's locals until it returns (what no
    // backward keeps, in generation, is alive until then too)
    for v in [gate_up, gate, up, glu] {
        b.hold(v);
    }
    out
}

/// The sequence length of a `[S, hidden]` input, or the complaint about its shape.
pub(crate) fn sequence_len(b: &Builder, x: ValueId, hidden: u64) -> LayerResult<u64> {
    let s = &b.shape(x).0;
    if s.len() != 2 {
        return Err(format!("expected a [S, {hidden}] input, got {}", b.shape(x)));
    }
    expect_last(b.shape(x), hidden, "features")?;
    Ok(s[0])
}

/// `torch.nn.functional.grouped_mm(x, Wᵀ, offs)`: saves both operands (the weight is a parameter).
fn grouped_mm(b: &mut Builder, x: ValueId, w: ValueId, out: Shape) -> ValueId {
    let dt = b.dtype(w);
    b.op("grouped_mm", &[x, w], &[(out, dt)], &[x, w], false, &[], GradRule::Alloc)[0]
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn mixtral_block_params() {
        // MixtralSparseMoeBlock(hidden 4096, intermediate 14336, 8 experts): gate.weight 8·4096 =
        // 32,768, experts.gate_up_proj 8·28672·4096 = 939,524,096, experts.down_proj
        // 8·4096·14336 = 469,762,048: 1,409,318,912
        let m = one(json!({"kind": "sparse_moe", "hidden_size": 4096, "num_experts": 8, "top_k": 2,
            "intermediate_size": 14336, "router": "softmax_fp32"}), &[16, 4096]);
        assert_eq!((m.shape, m.params), (vec![16, 4096], 1_409_318_912));
    }

    #[test]
    fn shared_experts_and_gate_params() {
        // Qwen2MoeSparseMoeBlock (Qwen1.5-MoE-A2.7B sizes): 60 experts of 1408, router 60·2048,
        // shared expert 3·2048·5632 and shared_expert_gate 2048:
        // 60·3·2048·1408 + 122,880 + 34,603,008 + 2,048 = 553,766,912
        let m = one(json!({"kind": "sparse_moe", "hidden_size": 2048, "num_experts": 60, "top_k": 4,
            "intermediate_size": 1408, "norm_topk_prob": false, "shared_intermediate_size": 5632,
            "shared_expert_gate": true}), &[8, 2048]);
        assert_eq!(m.params, 60 * 3 * 2048 * 1408 + 60 * 2048 + 3 * 2048 * 5632 + 2048);
        // DeepseekV3MoE: 256 experts of 2048, one shared expert, router 256·7168, and the
        // e_score_correction_bias buffer (256 float32)
        let m = one(json!({"kind": "sparse_moe", "hidden_size": 7168, "num_experts": 256, "top_k": 8,
            "intermediate_size": 2048, "router": "grouped_sigmoid", "n_group": 8, "topk_group": 4,
            "shared_intermediate_size": 2048}), &[4, 7168]);
        assert_eq!(m.params, 257 * 3 * 7168 * 2048 + 256 * 7168);
        assert_eq!(m.buffer_bytes, 256 * 4);
    }

    #[test]
    fn routed_activations_scale_with_top_k_not_experts() {
        // the saved activations of the experts are sized by tokens·top_k rows: doubling the
        // experts (uniform routing halves each one's tokens) leaves them unchanged, doubling
        // top_k roughly doubles them
        let saved = |e: u64, k: u64| {
            let m = one(json!({"kind": "sparse_moe", "hidden_size": 64, "num_experts": e, "top_k": k,
                "intermediate_size": 128}), &[32, 64]);
            let g = &m.resolved.graph;
            let mut s: Vec<u32> = g.ops.iter().flat_map(|o| o.saved.iter().copied()).collect();
            s.sort_unstable();
            s.dedup();
            s.iter().map(|&s| g.storages[s as usize].bytes.per_sample).sum::<u64>()
        };
        let base = saved(8, 2);
        let router = |e: u64| 32 * e * 4 + 32 * 64 * 4; // softmax output and the router's input
        assert_eq!(saved(16, 2) - router(16), base - router(8));
        assert!(saved(8, 4) > 2 * base - 2 * router(8) - 32 * 64 * 4, "{} vs {base}", saved(8, 4));
    }

    #[test]
    fn saved_for_backward_follows_grouped_mm_experts_forward() {
        // S = 32 tokens, D = 64, E = 8, k = 2, I = 128, fp32: R = S·k = 64 routed rows. Saved per
        // sample: router input x (S·D) and softmax output (S·E); topk indices (S·k int64); the
        // renormalisation's input and output (2·S·k); token_idx, perm, inv_perm (3·R int64);
        // grouped_mm #1 its input x_g (R·D); silu and mul gate_up (R·2I) and act (R·I);
        // grouped_mm #2 h (R·I); the routing-weight mul out_g (R·D) and w_g (R)
        // (after a linear, so that its input requires grad as in a model; the MoE's ops only)
        let m = one(json!({"kind": "sequential", "layers": [{"kind": "linear", "in_features": 64, "out_features": 64},
            {"kind": "sparse_moe", "hidden_size": 64, "num_experts": 8, "top_k": 2, "intermediate_size": 128}]}), &[32, 64]);
        let g = &m.resolved.graph;
        let mut saved: Vec<u32> = g.ops.iter().filter(|o| o.layer == 2 && !matches!(o.name, "log_softmax" | "nll_loss")).flat_map(|o| o.saved.iter().copied()).collect();
        saved.sort_unstable();
        saved.dedup();
        let per_sample: u64 = saved.iter().map(|&s| g.storages[s as usize].bytes.per_sample).sum();
        let (s, d, e, k, i, r) = (32u64, 64u64, 8u64, 2u64, 128u64, 64u64);
        let want = 4 * (s * d + s * e) + 8 * s * k + 4 * 2 * s * k + 8 * 3 * r
            + 4 * (r * d + r * 2 * i + r * i + r * i + r * d + r);
        assert_eq!(per_sample, want);
        assert_eq!(want, 175_872);
    }

    #[test]
    fn moe_refuses_what_transformers_cannot_build() {
        let e = error(json!({"kind": "sparse_moe", "hidden_size": 64, "num_experts": 4, "top_k": 5, "intermediate_size": 8}), &[4, 64]);
        assert!(e.contains("top_k (5) must be at most num_experts (4)"), "{e}");
        let e = error(json!({"kind": "sparse_moe", "hidden_size": 64, "num_experts": 10, "top_k": 2, "intermediate_size": 8,
            "router": "grouped_sigmoid", "n_group": 4}), &[4, 64]);
        assert!(e.contains("divisible by n_group"), "{e}");
        let e = error(json!({"kind": "sparse_moe", "hidden_size": 64, "num_experts": 4, "top_k": 2, "intermediate_size": 8}), &[4, 32]);
        assert!(e.contains("expected 64 features, got 32"), "{e}");
    }
}
