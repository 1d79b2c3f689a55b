// LD_PRELOAD shim for tools/measure_llama_cpp.py: llama.cpp logs its buffers in MiB with two
// decimals; this prints the exact byte counts behind those lines. It wraps the ggml calls that
// libllama makes across the shared-library boundary to read a buffer's size:
//   ggml_backend_buffer_get_size   (model, KV and output buffer lines)
//   ggml_backend_sched_get_buffer_size (compute buffer lines)
// Run with VRAMCALC_GGML_BASE=<path of libggml-base.so>. Build: gcc -shared -fPIC -O1 -o size_shim.so size_shim.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>

// libggml-base is opened by ctypes with RTLD_LOCAL, so RTLD_NEXT cannot see it: look the real
// functions up in it by path (VRAMCALC_GGML_BASE).
static void * real_sym(const char * name) {
    static void * h;
    if (!h) h = dlopen(getenv("VRAMCALC_GGML_BASE"), RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen(getenv("VRAMCALC_GGML_BASE"), RTLD_NOW);
    return h ? dlsym(h, name) : NULL;
}

typedef struct ggml_backend_buffer * buf_t;
typedef struct ggml_backend_sched * sched_t;
typedef struct ggml_backend * backend_t;

size_t ggml_backend_buffer_get_size(buf_t buf) {
    static size_t (*real)(buf_t);
    static const char * (*name)(buf_t);
    if (!real) { real = real_sym("ggml_backend_buffer_get_size"); name = real_sym("ggml_backend_buffer_name"); }
    size_t s = real(buf);
    fprintf(stderr, "VRAMCALC_BUF %s %zu\n", name ? name(buf) : "?", s);
    return s;
}

size_t ggml_backend_sched_get_buffer_size(sched_t sched, backend_t backend) {
    static size_t (*real)(sched_t, backend_t);
    static const char * (*name)(backend_t);
    if (!real) { real = real_sym("ggml_backend_sched_get_buffer_size"); name = real_sym("ggml_backend_name"); }
    size_t s = real(sched, backend);
    fprintf(stderr, "VRAMCALC_SCHED %s %zu\n", name ? name(backend) : "?", s);
    return s;
}
