#!/usr/bin/env python3
"""Debugging aid for tools/measure_diffusion_lora.py: runs one record's LoRA step (iteration 3)
under FakeTensorMode with tools/trace_diffusion.py's dispatch mode, and prints the storages
created in that step that are alive at its peak (activations, saved tensors, gradients,
optimizer temporaries; the weights and the optimizer state predate the step).

    /root/mvenv/bin/python tools/trace_diffusion_lora.py flux [index] [--top=N]
"""
import sys
import torch
import torch.nn.functional as F
sys.path.insert(0, "tools")
sys.path.insert(0, "/work/shared/reference/llm")
import measure_diffusion as D
import measure_diffusion_lora as ML
import trace_diffusion as T


def main():
    name = sys.argv[1]
    idx = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("-") else 0
    rec = [r for r in ML.grid() if r["name"] == name][idx]
    from peft import LoraConfig
    from torch._subclasses.fake_tensor import FakeTensorMode
    cfg, dt = rec["config"], D.DT[rec["dtype"]]
    with FakeTensorMode():
        torch.set_default_dtype(dt)
        m = D.build(cfg)
        torch.set_default_dtype(torch.float32)
        m.train()
        m.requires_grad_(False)
        import measure_llm as L
        with L.fake_safe_module_to():
            m.add_adapter(LoraConfig(r=rec["lora_r"], lora_alpha=rec["lora_r"], init_lora_weights="gaussian",
                                     target_modules=["to_k", "to_q", "to_v", "to_out.0"]))
        for p in m.parameters():
            if p.requires_grad:
                p.data = p.to(torch.float32)
        if rec.get("checkpointing"):
            m.enable_gradient_checkpointing()
        call, ins = D.inputs(cfg, rec, dt)
        opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4, foreach=True)

        def step():
            opt.zero_grad(set_to_none=True)
            pred = call(m)
            loss = F.mse_loss(pred.float(), torch.zeros_like(pred).float())
            loss.backward()
            opt.step()

        for _ in range(2):
            step()
        Lv = T.Live()
        with Lv:
            step()
        print("step peak (new storages)", Lv.peak, "at op", Lv.at[0], Lv.at[1])
        top = int(next((a[6:] for a in sys.argv if a.startswith("--top=")), 40))
        for k, v in sorted(Lv.at[2].items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"  {v[0]:>12} {v[1]:<45} {v[2]} {v[3]}")
        if "-v" in sys.argv:
            for n, f, t in Lv.log:
                print(n, f, t)


if __name__ == "__main__":
    main()
