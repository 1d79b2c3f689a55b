// LD_PRELOAD shim for tools/llama_cpp/dump_graphs.py: appends every graph ggml_gallocr_reserve_n
// is given (the scheduler's graph: leafs, then nodes, with the backend ids) to $VRAMCALC_GRAPH_DUMP.
// One line per tensor: kind (L/N) index ptr op op_desc type ne0..3 nb0..3 flags has_data has_buffer
// view_src view_offs src0..9 backend name  (read by crates/core/tests/llama_cpp_gallocr.rs).
// Build (needs ggml's internal header for struct ggml_cgraph):
//   gcc -shared -fPIC -O1 -I <llama.cpp>/ggml/include -I <llama.cpp>/ggml/src -o /tmp/gd/dump_shim.so graph_dump_shim.c -ldl
// It includes size_shim.c (its `real_sym` and the exact buffer sizes), so one LD_PRELOAD serves both.
#include "size_shim.c"
#include "ggml.h"
#include "ggml-impl.h"
#include "ggml-alloc.h"

static const char * (*op_desc)(const struct ggml_tensor *);
static void dump_t(FILE * f, const char * kind, int i, struct ggml_tensor * t, int bid) {
    fprintf(f, "%s %d %p %d %s %d %lld %lld %lld %lld %zu %zu %zu %zu %d %d %d %p %zu", kind, i, (void*)t, t->op, op_desc(t), t->type,
        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], t->nb[0], t->nb[1], t->nb[2], t->nb[3],
        t->flags, t->data != NULL, t->buffer != NULL, (void*)t->view_src, t->view_offs);
    for (int j = 0; j < GGML_MAX_SRC; j++) fprintf(f, " %p", (void*)t->src[j]);
    fprintf(f, " %d %s\n", bid, t->name[0] ? t->name : "-");
}

bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * g, const int * nids, const int * lids) {
    static bool (*real)(ggml_gallocr_t, struct ggml_cgraph *, const int *, const int *);
    if (!real) { real = real_sym("ggml_gallocr_reserve_n"); op_desc = real_sym("ggml_op_desc"); }
    const char * path = getenv("VRAMCALC_GRAPH_DUMP");
    if (path) {
        FILE * f = fopen(path, "a");
        fprintf(f, "GRAPH %d %d\n", g->n_nodes, g->n_leafs);
        for (int i = 0; i < g->n_leafs; i++) dump_t(f, "L", i, g->leafs[i], lids ? lids[i] : 0);
        for (int i = 0; i < g->n_nodes; i++) dump_t(f, "N", i, g->nodes[i], nids ? nids[i] : 0);
        fclose(f);
    }
    return real(galloc, g, nids, lids);
}
