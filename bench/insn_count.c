/* insn_count.c — calls one CPU kernel `calls` times on a fixed shape and prints nothing: the program
 * that bench/insn_per_element.py runs under qemu-user, counting the instructions it executes. Two runs
 * that differ only in `calls` differ only by those extra calls, so their difference, over the extra
 * calls' elements, is the kernel's instructions per element at the level KBIT_CPU_ISA selects, on
 * whatever architecture it was built for (x86-64 or AArch64).
 *
 *     kbit_insn_count KERNEL|all CALLS    (exit 0; 2 for bad arguments; 1 when a call fails)
 *     kbit_insn_count --list              (name, elements per call, what an element is: CSV)
 *     kbit_insn_count --info              (kbit_backend_info(): the backend and its kernel level;
 *                                          then the backend file and its load address, hex)
 *
 * Kernels and what "one element" is for each are listed in kKernels below. Inputs are fixed
 * pseudo-random values, so both runs start up alike, and a kernel whose path depends on the data (the
 * reference's code searches) is counted for these values. It links the loader only, like any user
 * program; OMP_NUM_THREADS=1 keeps it on one thread.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kbit/kbit.h>
#include <kbit/kbit_loader.h>

enum {
    kElems = 1 << 16,     /* elements of the element-wise kernels */
    kRows = 128,          /* GEMV: weight rows (out features) ... */
    kCols = 512,          /* ... and columns (in features) */
    kIgemmK = 512,        /* int8 GEMM: inner dimension, */
    kIgemmTokens = 16,    /* tokens, */
    kIgemmOuts = 64,      /* output features */
    kBlock4 = 64,         /* 4-bit blocksize (QLoRA's) */
    kBlock8 = 4096,       /* 8-bit blocksize (bitsandbytes' default) */
};

static float* floats(size_t n, unsigned seed) {
    float* p = malloc(n * sizeof *p);
    if (p == NULL) exit(1);
    for (size_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 2.0f;
    }
    return p;
}

static void* zeros(size_t bytes) {
    void* p = calloc(bytes, 1);
    if (p == NULL) exit(1);
    return p;
}

/* A 256-entry ascending map (a linear one: the 8-bit kernels take any ascending table). */
static float* linear_map(void) {
    float* code = malloc(256 * sizeof *code);
    if (code == NULL) exit(1);
    for (int i = 0; i < 256; ++i) code[i] = (float)(i - 127) / 127.0f;
    code[0] = -1.0f;
    return code;
}

typedef struct State {
    float *x, *y, *absmax, *absmax2, *code, *code2;
    uint8_t *packed, *codes, *codes2;
    int8_t *i8a, *i8b;
    int32_t* i32;
    kbit_context* context;
} State;

static kbit_status dequantize_nf4_fp32(State* s) {
    return kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, s->packed, s->absmax, s->y, kBlock4, kElems, NULL);
}
static kbit_status dequantize_nf4_bf16(State* s) {
    return kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_BF16, s->packed, s->absmax, s->y, kBlock4, kElems, NULL);
}
static kbit_status quantize_nf4_fp32(State* s) {
    return kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, s->x, s->absmax, s->packed, kBlock4, kElems, NULL);
}
/* The 16 NF4 levels (QLoRA), the table the GEMV reads. */
static float kNf4[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

static kbit_status gemv_nf4_fp32(State* s) {  /* the packed weight: kRows x kCols = kElems nibbles */
    return cgemm_4bit_inference_naive_fp32(kRows, 1, kCols, s->x, s->packed, s->absmax, kNf4, s->y, 0, kCols / 2, 0,
                                           kBlock4, NULL);
}
static kbit_status quantize_8bit_fp32(State* s) {
    return kbit_quantize_blockwise_8bit(KBIT_DTYPE_FP32, s->code, s->x, s->absmax, s->codes, kBlock8, kElems, NULL);
}
static kbit_status dequantize_8bit_fp32(State* s) {
    return kbit_dequantize_blockwise_8bit(KBIT_DTYPE_FP32, s->code, s->codes, s->absmax2, s->y, kBlock8, kElems, NULL);
}
static kbit_status adam_8bit_fp32(State* s) {
    return cadam_8bit_blockwise_grad_fp32(s->y, s->x, s->codes, s->codes2, 0.9f, 0.999f, 0.0f, 0.0f, 1e-8f, 1, 1e-3f,
                                          s->code, s->code2, s->absmax, s->absmax2, 0.0f, 1.0f, false, kElems);
}
static kbit_status igemm_int8(State* s) {
    return cigemmlt_32(s->context, kIgemmK, kIgemmTokens, kIgemmOuts, s->i8a, s->i8b, s->i32, NULL, kIgemmK, kIgemmK,
                       kIgemmOuts, NULL);
}

static const struct {
    const char* name;
    const char* element;  /* what one element of the per-element count is */
    double elements;      /* per call */
    kbit_status (*call)(State*);
} kKernels[] = {
    {"dequantize_nf4_fp32", "output value", kElems, dequantize_nf4_fp32},
    {"dequantize_nf4_bf16", "output value", kElems, dequantize_nf4_bf16},
    {"quantize_nf4_fp32", "input value", kElems, quantize_nf4_fp32},
    {"gemv_nf4_fp32", "weight (multiply-add)", (double)kRows * kCols, gemv_nf4_fp32},
    {"quantize_8bit_fp32", "input value", kElems, quantize_8bit_fp32},
    {"dequantize_8bit_fp32", "output value", kElems, dequantize_8bit_fp32},
    {"adam_8bit_fp32", "parameter", kElems, adam_8bit_fp32},
    {"igemm_int8", "multiply-add", (double)kIgemmK * kIgemmTokens * kIgemmOuts, igemm_int8},
};

int main(int argc, char** argv) {
    const size_t count = sizeof kKernels / sizeof kKernels[0];
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < count; ++i) printf("%s,%.0f,%s\n", kKernels[i].name, kKernels[i].elements, kKernels[i].element);
        return 0;
    }
    /* The backend is loaded before anything is allocated, so that it lands at the same address in
     * every run (what --info reports, for the counting's -dfilter). */
    kbit_backend* backend = NULL;
    Dl_info where;
    if (kbit_loader_default(&backend) != KBIT_STATUS_SUCCESS ||
        dladdr((void*)kbit_loader_4bit_table(backend)->cdequantize_blockwise_fp32_nf4, &where) == 0) {
        fprintf(stderr, "kbit_insn_count: no backend: %s\n", kbit_last_error_message());
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        printf("%s\n%s\n%p\n", kbit_backend_info(), where.dli_fname, where.dli_fbase);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: kbit_insn_count KERNEL CALLS | --list\n");
        return 2;
    }
    const int all = strcmp(argv[1], "all") == 0;
    size_t k = 0;
    while (!all && k < count && strcmp(kKernels[k].name, argv[1]) != 0) ++k;
    const int calls = atoi(argv[2]);
    if ((!all && k == count) || calls < 1) {
        fprintf(stderr, "kbit_insn_count: unknown kernel '%s' or bad call count '%s' (--list names them)\n", argv[1],
                argv[2]);
        return 2;
    }
    State s;
    s.x = floats(kElems, 1);
    s.y = floats(kElems, 2);
    s.absmax = zeros(sizeof(float) * kElems);
    s.absmax2 = zeros(sizeof(float) * kElems);
    s.code = linear_map();
    s.code2 = linear_map();
    for (int i = 0; i < 128; ++i) s.code2[i] = 0.0f; /* an unsigned map: v >= 0 */
    s.packed = zeros(kElems / 2);
    s.codes = zeros(kElems);
    s.codes2 = zeros(kElems);
    s.i8a = zeros((size_t)kIgemmOuts * kIgemmK);
    s.i8b = zeros((size_t)kIgemmTokens * kIgemmK);
    for (size_t i = 0; i < (size_t)kIgemmOuts * kIgemmK; ++i) s.i8a[i] = (int8_t)(i * 37 % 255 - 127);
    for (size_t i = 0; i < (size_t)kIgemmTokens * kIgemmK; ++i) s.i8b[i] = (int8_t)(i * 91 % 255 - 127);
    s.i32 = zeros(sizeof(int32_t) * kIgemmTokens * kIgemmOuts);
    s.context = get_context();
    /* Real inputs for the readers: packed weights and scales, 8-bit codes and their scales. */
    if (kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, s.x, s.absmax, s.packed, kBlock4, kElems, NULL) != 0 ||
        kbit_quantize_blockwise_8bit(KBIT_DTYPE_FP32, s.code, s.x, s.absmax2, s.codes, kBlock8, kElems, NULL) != 0 ||
        s.context == NULL) {
        fprintf(stderr, "kbit_insn_count: setup failed: %s\n", kbit_last_error_message());
        return 1;
    }
    for (size_t i = all ? 0 : k; i < (all ? count : k + 1); ++i)
        for (int c = 0; c < calls; ++c) {
            const kbit_status st = kKernels[i].call(&s);
            if (st != KBIT_STATUS_SUCCESS) {
                fprintf(stderr, "kbit_insn_count: %s failed: %s: %s\n", kKernels[i].name, kbit_status_string(st),
                        kbit_last_error_message());
                return 1;
            }
        }
    return 0;
}
