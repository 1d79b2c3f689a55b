//! Autograd's reach: which recorded ops the loss's backward runs, which parameters it gives a
//! `.grad`, and how long the nodes it never reaches keep what they saved.
//!
//! The engine runs only the nodes reachable from the loss's `grad_fn`
//! (`torch/csrc/autograd/engine.cpp`, `compute_dependencies`). A recorded op whose outputs no
//! reached op reads (a module whose output the model discards: the spec's `discarded` block) is
//! not run, its parameters' `.grad` stays `None`, and its saved tensors die with its node.

use crate::graph::{Graph, StorageClass, StorageId, ValueId};

/// Per op: whether the backward from [`Graph::output`] reaches it.
pub fn backward(g: &Graph) -> Vec<bool> {
    let mut needed = vec![false; g.values.len()];
    if let Some(n) = needed.get_mut(g.output as usize) {
        *n = true;
    }
    let mut reach = vec![false; g.ops.len()];
    for (i, op) in g.ops.iter().enumerate().rev() {
        if !op.recorded || !op.outputs.iter().any(|&o| needed[o as usize]) {
            continue;
        }
        reach[i] = true;
        for &v in &op.inputs {
            if g.value(v).requires_grad {
                needed[v as usize] = true;
            }
        }
    }
    reach
}

/// The trainable parameters the backward gives a gradient: all but those read only by ops it
/// does not reach (a parameter no op reads is a count the spec lowers without an op, and keeps
/// its gradient). The others keep `.grad = None`, which `torch.optim`'s optimizers skip
/// (`_init_group`: `if p.grad is not None`): no state and no step temporaries for them.
pub fn grad_params(g: &Graph) -> Vec<ValueId> {
    let reach = backward(g);
    // per value: read by a reached op (1), read only by others (2)
    let mut read = vec![0u8; g.values.len()];
    for (op, &r) in g.ops.iter().zip(&reach) {
        for &v in &op.inputs {
            let m = &mut read[v as usize];
            *m = if r || *m == 1 { 1 } else { 2 };
        }
    }
    g.trainable_params().filter(|&p| read[p as usize] != 2).collect()
}

/// Autograd nodes the backward does not reach live as long as a tensor refers to them: their
/// outputs' `grad_fn` and the nodes after them. So what such an op saves (in a checkpointing
/// unit: the unit's inputs, which the checkpoint keeps) lives until the last use of any output
/// downstream of it among those ops, then dies with the node — in the forward, when the model
/// drops a discarded module's output.
pub(super) fn hold_unreached(g: &Graph, reach: &[bool], last_use: &mut [u32]) {
    // per value: the last forward op at which an unreached node downstream of it is referenced
    let mut life = vec![0u32; g.values.len()];
    for (i, op) in g.ops.iter().enumerate().rev() {
        if !op.recorded || reach[i] {
            continue;
        }
        let until = op.outputs.iter().map(|&o| last_use[g.storage_of(o) as usize].max(life[o as usize])).fold(i as u32, u32::max);
        for &v in &op.inputs {
            if g.value(v).requires_grad {
                life[v as usize] = life[v as usize].max(until);
            }
        }
        let kept: Vec<StorageId> = match op.unit {
            None => op.saved.to_vec(),
            Some(_) => op.inputs.iter().map(|&v| g.storage_of(v)).filter(|&s| g.storages[s as usize].class == StorageClass::Activation).collect(),
        };
        for s in kept {
            last_use[s as usize] = last_use[s as usize].max(until);
        }
    }
}

