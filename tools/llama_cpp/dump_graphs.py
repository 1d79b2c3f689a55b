#!/usr/bin/env python3
"""Dumps the graphs llama.cpp reserves for every record of measured.jsonl and heldout.jsonl.

Reruns each record's setting (tools/measure_llama_cpp.py --child) under LD_PRELOAD of
graph_dump_shim.so (which includes size_shim.c), writing <out>/<model>-<index>.graph (every graph given to
ggml_gallocr_reserve_n) and <out>/<model>-<index>.size (the record's measured compute buffer);
the index counts measured records first, then the held-out ones. A few of these are kept in
crates/core/tests/data/llama_cpp/graphs/; point VRAMCALC_GRAPHS at <out> to check them all:

    gcc -shared -fPIC -O1 -I $LLAMA/ggml/include -I $LLAMA/ggml/src -o /tmp/gd/dump_shim.so tools/llama_cpp/graph_dump_shim.c -ldl
    /root/mvenv/bin/python tools/llama_cpp/dump_graphs.py /tmp/gd/all   # models from measure_llama_cpp.py in /tmp/vramcalc_gguf
    VRAMCALC_GRAPHS=/tmp/gd/all cargo test -p vramcalc-core --test llama_cpp_gallocr -- --nocapture
"""
import json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "crates/core/tests/data/llama_cpp")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import llama_cpp
    base = os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so")
    recs = [json.loads(l) for f in ("measured.jsonl", "heldout.jsonl") for l in open(os.path.join(DATA, f))]
    for i, r in enumerate(recs):
        path = os.path.join(out, f"{r['model']}-{i}.graph")
        if os.path.exists(path):
            os.remove(path)
        env = dict(os.environ, LD_PRELOAD="/tmp/gd/dump_shim.so", VRAMCALC_GGML_BASE=base,
                   VRAMCALC_GRAPH_DUMP=path, OMP_NUM_THREADS="1")
        model = os.path.join("/tmp/vramcalc_gguf", r["model"] + ".gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/measure_llama_cpp.py"), "--child", model, json.dumps(r["params"])],
                       env=env, capture_output=True, check=True)
        with open(path.replace(".graph", ".size"), "w") as f:
            f.write(str(sum(r["compute_buffers"].values())))
        print(i, r["model"], flush=True)


if __name__ == "__main__":
    main()
