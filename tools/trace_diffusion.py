#!/usr/bin/env python3
"""Debugging aid for tools/measure_diffusion.py: runs one record's forward under FakeTensorMode
with a dispatch mode that keeps every output storage by weak reference, and prints the live bytes
after each op and the storages alive at the peak (which op made them, their size).

    /root/mvenv/bin/python tools/trace_diffusion.py vae4-decode [index]
"""
import sys, weakref, gc
import torch
from torch.utils._python_dispatch import TorchDispatchMode
sys.path.insert(0, "tools")
import measure_diffusion as M


class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live, self.n, self.peak, self.at, self.log = {}, 0, 0, None, []
        self.limit = int(next((a[8:] for a in sys.argv if a.startswith("--limit=")), 10**9))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        rets = func._schema.returns
        for i, t in enumerate(outs):
            # a view (`t`, `view`, `transpose`: an aliasing return) shares its input's storage
            if i < len(rets) and rets[i].alias_info is not None:
                continue
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                k = st._cdata
                if k not in self.live:
                    self.live[k] = (st.nbytes(), str(func), tuple(t.shape), t.dtype)
                    weakref.finalize(st, self.live.pop, k, None)
        total = sum(v[0] for v in self.live.values())
        self.n += 1
        self.log.append((self.n, str(func), total))
        if total > self.peak and self.n <= self.limit:
            self.peak, self.at = total, (self.n, str(func), dict(self.live))
        return out


def main():
    name = sys.argv[1]
    idx = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    rec = [r for r in M.grid() if r["name"] == name][idx]
    from torch._subclasses.fake_tensor import FakeTensorMode
    cfg, dt = rec["config"], M.DT[rec["dtype"]]
    with FakeTensorMode():
        torch.set_default_dtype(dt)
        m = M.build(cfg).eval()
        torch.set_default_dtype(torch.float32)
        if rec.get("tiling") and cfg.get("_class_name") == "AutoencoderKLWan":
            t = rec["tiling"]  # as tools/measure_diffusion.py sets Wan's tiles
            m.enable_tiling() if t == 1 else m.enable_tiling(t, t, t * 3 // 4, t * 3 // 4)
        elif rec.get("tiling"):
            m.enable_tiling()
        if rec.get("slicing"):
            m.enable_slicing()
        call, ins = M.inputs(cfg, rec, dt)
        base = sum(p.numel() * p.element_size() for p in m.parameters()) + sum(b.numel() * b.element_size() for b in m.buffers())
        base += sum(i.numel() * i.element_size() for i in ins)
        L = Live()
        with torch.no_grad(), L:
            out = call(m)
        print("weights+inputs", base, "activation peak", L.peak, "total", base + L.peak, "at op", L.at[0], L.at[1])
        report(L, 25)


def report(L, top):
    """The storages alive at the peak (`--top=N` of them, largest first); `-v`: every op's total."""
    for k, v in sorted(L.at[2].items(), key=lambda kv: -kv[1][0])[:int(next((a[6:] for a in sys.argv if a.startswith("--top=")), top))]:
        print(f"  {v[0]:>12} {v[1]:<45} {v[2]} {v[3]}")
    if "-v" in sys.argv:
        for n, f, t in L.log:
            print(n, f, t)


if __name__ == "__main__":
    main()
