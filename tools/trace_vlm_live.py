#!/usr/bin/env python3
"""The live storages at each phase's peak of `tools/trace_vlm_generate.py`'s `generate()`.

Runs `trace_vlm_generate.py` unchanged (same arguments, same JSON line on stdout) with a tracker
that, at the prefill's and the decode's peak, lists every live storage: its bytes, the shape and
dtype of the tensor that made it, the aten op, and the innermost `modeling_*`, `generation/utils`,
`cache_utils` or `masking_utils` line it came from. Parameters and buffers are summed, not
listed (a 4-d parameter, the patch conv, is listed as an `input`). What the test docs of
`crates/core/tests/generate_vlm2.rs` call "traced" was read from this list, against the
estimate's own live set at its peak.

    /root/mvenv/bin/python tools/trace_vlm_live.py tools/generate_configs/gemma3_vlm.json --batch 2 --seq-len 80 --new-tokens 12 --attn sdpa

The lists go to stderr.
"""
import os
import sys
import traceback

import torch
from torch.utils._pytree import tree_flatten

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_hf  # noqa: E402

SOURCES = ("modeling_", "generation/utils", "cache_utils", "masking_utils")


class LiveAtPeak(trace_hf.LiveBytes):
    """`LiveBytes` that remembers the live storages at each phase's peak (a phase ends where
    `trace_vlm_generate.py` resets `peak`)."""

    def __init__(self):
        self._peak = 0
        self.at_peak = None  # (bytes, op, [(nbytes, info)])
        self.phases = []
        self.info = {}
        self.op = "input"
        super().__init__()

    @property
    def peak(self):
        return self._peak

    @peak.setter
    def peak(self, v):
        if self.at_peak is not None and v < self._peak:
            self.phases.append(self.at_peak)
            self.at_peak = None
        self._peak = v

    def track(self, t):
        key = t.untyped_storage()._cdata
        if key not in self.live:
            where = next((f"{os.path.basename(f.filename)}:{f.lineno} {f.line}" for f in reversed(traceback.extract_stack()[:-2])
                          if any(s in f.filename for s in SOURCES)), "")
            self.info[key] = (self.op, tuple(t.shape), str(t.dtype).replace("torch.", ""), where)
        super().track(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.op = func.overloadpacket.__name__
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t)
        total = self.total()
        if total > self._peak:
            self._peak = total
            self.at_peak = (total, self.op, [(n, self.info.get(k)) for k, (r, n) in self.live.items() if r() is not None])
        return out


def main():
    made = []

    class Tracker(LiveAtPeak):
        def __init__(self):
            super().__init__()
            made.append(self)

    trace_hf.LiveBytes = Tracker
    import trace_vlm_generate  # noqa: E402  (imports `LiveBytes` from `trace_hf`: the tracker above)

    trace_vlm_generate.main()
    t = made[0]
    for name, (total, op, items) in zip(["prefill", "decode"], t.phases + ([t.at_peak] if t.at_peak else [])):
        print(f"== {name}: peak {total} B after {op}", file=sys.stderr)
        resident = 0
        for n, info in sorted(items, key=lambda x: -x[0]):
            # parameters and buffers (tracked before generate(), made by no op, at most 2-d floats)
            if info and info[0] == "input" and len(info[1]) <= 2 and info[2] != "int64":
                resident += n
                continue
            print(f"{n:>12} {info}", file=sys.stderr)
        print(f"{resident:>12} parameters and buffers", file=sys.stderr)


if __name__ == "__main__":
    main()
