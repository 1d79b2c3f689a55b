#!/usr/bin/env python3
"""Debugging aid for tools/measure_diffusion_lora.py: runs one record's LoRA step (iteration 3)
under FakeTensorMode with tools/trace_diffusion.py's dispatch mode, and prints the storages
created in that step that are alive at its peak (activations, saved tensors, gradients,
optimizer temporaries; the weights and the optimizer state predate the step).

    /root/mvenv/bin/python tools/trace_diffusion_lora.py flux [index] [--top=N]
"""
import sys
import torch
sys.path.insert(0, "tools")
sys.path.insert(0, "/work/shared/reference/llm")
import measure_diffusion_lora as ML
import trace_diffusion as T


def main():
    name = sys.argv[1]
    idx = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else 0
    rec = [r for r in ML.grid() if r["name"] == name][idx]
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        _, _, _, _, step = ML.setup(rec)
        for _ in range(2):
            step()
        Lv = T.Live()
        with Lv:
            step()
        print("step peak (new storages)", Lv.peak, "at op", Lv.at[0], Lv.at[1])
        T.report(Lv, 40)


if __name__ == "__main__":
    main()
