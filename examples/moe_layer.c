/*
 * moe_layer.c — one mixture-of-experts MLP block of a 4-bit checkpoint, run as an engine would (C99):
 * transformers v5's Qwen3-MoE block, its experts stored as fused 4-bit parameters
 * (docs/behaviour.md §11.3) and read straight from the mapping by libkbit_io.
 *
 *   router   logits = Wr x                   Wr = PREFIX.gate.weight [E, H], an fp32 matmul here
 *            p = softmax(logits) over all E; keep the top_k largest, divided by their sum when
 *            norm_topk_prob (config.json; Qwen3-30B-A3B: true; true is also Mixtral's rule)
 *   gate_up  [g | u] = W_gu[e] x              PREFIX.experts.gate_up_proj [E, 2I, H]: rows 0 .. I-1
 *                                             are the gate, rows I .. 2I-1 the up projection
 *   act      h = silu(g) * u
 *   down     out = sum_j p_j W_d[e_j] h_j     PREFIX.experts.down_proj [E, H, I]
 *
 * Each expert projection is one kbit_gemm_4bit_grouped call over every (token, choice) pair: gate_up
 * with a_rows_per_token = 1 (all choices of a token read its row of x), down with a_rows_per_token =
 * top_k (one row of h per choice) and the router weights as `combine`, which sums a token's choices.
 *
 *   kbit_moe_layer CHECKPOINT PREFIX TOP_K [--tokens T] [--no-norm-topk-prob] [--out FILE]
 *
 * PREFIX is the block ("model.layers.0.mlp"), TOP_K config.json's num_experts_per_tok. The input is T
 * tokens (default 4) generated deterministically by input_value() below; --out writes the output
 * [T, H] as raw float32 in the machine's byte order. The router weight may be dense (float32, float16
 * or bfloat16, as transformers keeps it and `kbit quantize` leaves it) or a 4-bit layer (`--no-default-skip`).
 * Exit status 0 on success, 1 when the checkpoint has no such MoE block or a call fails, 2 for a
 * usage error. Host memory throughout: run it on the CPU backend (KBIT_BACKEND=cpu), or copy the
 * arrays to the device first for another one.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kbit/kbit.h"
#include "kbit/kbit_io.h"

#define MAX_TOKENS 65536

/* One fused-experts parameter [E, N, K] in the form kbit_gemm_4bit_grouped takes it. */
typedef struct experts_weight {
    const kbit_io_quant* q;
    int64_t experts, n, k;
    const float* absmax;        /* fp32 scales; nested: the second-level scales */
    const uint8_t* absmax_8bit; /* nested: one uint8 code per block; else NULL */
    const float* code;          /* nested: the 256-entry map */
    const float* offset;        /* nested: the offset shared by all experts */
    float* decoded;             /* scales we decoded ourselves (see experts_find); freed at the end */
} experts_weight;

/* Library messages name their function already ("kbit_io_open: FILE: ..."): pass what = NULL. */
static int fail(const char* what, const char* message) {
    fprintf(stderr, "kbit_moe_layer: %s%s%s\n", what ? what : "", what ? ": " : "", message);
    return 1;
}

/* Token t's activations: a hash of (t, k) mapped to [-1, 1) in steps of 2^-10, exact in fp32, so that
 * a test can rebuild the input bit for bit (tests/examples/test_moe_layer.py). */
static float input_value(uint32_t t, uint32_t k) {
    uint32_t h = t * 0x9E3779B1u + k * 0x85EBCA77u + 0x165667B1u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return (float)((int32_t)(h % 2048u) - 1024) / 1024.0f;
}

static float half_to_float(uint16_t h) {
    int exponent = (h >> 10) & 31, mantissa = h & 1023;
    float v = exponent == 0    ? ldexpf((float)mantissa, -24)
              : exponent == 31 ? (mantissa ? NAN : INFINITY)
                               : ldexpf((float)(mantissa | 1024), exponent - 25);
    return (h & 0x8000) ? -v : v;
}

/* Element i of a float tensor as fp32, through memcpy: safetensors does not promise alignment. */
static float element(const kbit_io_tensor* t, uint64_t i) {
    const unsigned char* p = t->data;
    uint16_t bits16;
    uint32_t bits32;
    float f;
    if (t->dtype == KBIT_IO_DTYPE_F32) {
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    memcpy(&bits16, p + 2 * i, 2);
    if (t->dtype == KBIT_IO_DTYPE_F16) return half_to_float(bits16);
    bits32 = (uint32_t)bits16 << 16; /* bfloat16 is the upper half of a float32 */
    memcpy(&f, &bits32, 4);
    return f;
}

/* No MoE block under `prefix`: say so, and name the blocks the checkpoint has. */
static int no_moe_layer(const kbit_io_checkpoint* ck, const char* prefix) {
    const char* suffix = ".experts.gate_up_proj";
    size_t i, found = 0, ls = strlen(suffix);
    fprintf(stderr, "kbit_moe_layer: %s: no MoE layer here (it needs %s.gate.weight and the 4-bit parameters "
            "%s.experts.gate_up_proj and %s.experts.down_proj)\n", prefix, prefix, prefix, prefix);
    for (i = 0; i < kbit_io_quant_count(ck); ++i) {
        const char* p = kbit_io_quant_prefix(ck, i);
        size_t lp = p ? strlen(p) : 0;
        if (lp > ls && strcmp(p + lp - ls, suffix) == 0)
            fprintf(stderr, "%s %.*s", found++ ? "," : "  MoE layers in this checkpoint:", (int)(lp - ls), p);
    }
    fprintf(stderr, "%s\n", found ? "" : "  this checkpoint has no 4-bit fused experts");
    return 1;
}

/* The 4-bit parameter `name` [E, N, K]. The GEMM reads nested scales itself, in bitsandbytes'
 * second-level blocks of 256; a checkpoint nested in other blocks has its scales decoded first. */
static int experts_find(const kbit_io_checkpoint* ck, const char* name, experts_weight* w) {
    const kbit_io_quant* q;
    if (kbit_io_quant_find(ck, name, &q) != KBIT_STATUS_SUCCESS) return fail(name, kbit_io_last_error_message());
    /* parameter and experts are io 1.3 members: read them only when the library filled them */
    if (q->size < offsetof(kbit_io_quant, experts) + sizeof q->experts || !q->parameter || q->experts == 0 ||
        q->ndim != 3 || q->format == KBIT_IO_FORMAT_INT8)
        return fail(name, "not a 4-bit fused-experts parameter [E, N, K]");
    if (!q->aligned) return fail(name, "its tensors are not aligned to their element types (copy them first)");
    w->q = q;
    w->experts = q->shape[0];
    w->n = q->shape[1];
    w->k = q->shape[2];
    if (!q->nested) {
        w->absmax = q->absmax;
    } else if (q->nested_blocksize == 256) {
        w->absmax = q->nested_absmax;
        w->absmax_8bit = q->absmax;
        w->code = q->nested_quant_map;
        w->offset = &q->nested_offset;
    } else {
        if (!(w->decoded = malloc(q->blocks * sizeof(float)))) return fail(name, "out of memory");
        if (kbit_nested_absmax_dequantize(q->absmax, q->nested_quant_map, q->nested_absmax, q->nested_offset,
                                          w->decoded, (int64_t)q->blocks, q->nested_blocksize,
                                          NULL) != KBIT_STATUS_SUCCESS)
            return fail(NULL, kbit_last_error_message());
        w->absmax = w->decoded;
    }
    return 0;
}

/* A 4-bit router layer dequantized to fp32 into out (q->numel floats). */
static int router_dequantize(const kbit_io_quant* q, float* out) {
    int rc = 0;
    float* absmax = malloc(q->blocks * sizeof(float));
    if (!absmax) return fail(q->prefix, "out of memory");
    if (!q->nested)
        memcpy(absmax, q->absmax, q->absmax_bytes);
    else if (kbit_nested_absmax_dequantize(q->absmax, q->nested_quant_map, q->nested_absmax, q->nested_offset, absmax,
                                           (int64_t)q->blocks, q->nested_blocksize, NULL) != KBIT_STATUS_SUCCESS)
        rc = fail(NULL, kbit_last_error_message());
    if (!rc && kbit_dequantize_4bit(q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, KBIT_DTYPE_FP32,
                                    q->weight, absmax, out, q->blocksize, (int64_t)q->numel,
                                    NULL) != KBIT_STATUS_SUCCESS)
        rc = fail(NULL, kbit_last_error_message());
    free(absmax);
    return rc;
}

/* The router weight PREFIX.gate.weight [E, H] as fp32 into *out (malloc'd): a float tensor converted,
 * or a 4-bit layer PREFIX.gate dequantized; *kind names which. */
static int router_load(const kbit_io_checkpoint* ck, const char* prefix, int64_t* rows, int64_t* cols, float** out,
                       const char** kind) {
    char module[512], name[520];
    const kbit_io_tensor* t;
    const kbit_io_quant* q;
    uint64_t i;
    snprintf(module, sizeof module, "%s.gate", prefix);
    snprintf(name, sizeof name, "%s.weight", module);
    if (kbit_io_tensor_find(ck, name, &t) != KBIT_STATUS_SUCCESS) return no_moe_layer(ck, prefix);
    if (t->dtype == KBIT_IO_DTYPE_F32 || t->dtype == KBIT_IO_DTYPE_F16 || t->dtype == KBIT_IO_DTYPE_BF16) {
        if (t->ndim != 2 || t->numel == 0) return fail(name, "the router weight is not a 2-D [E, H], E, H > 0");
        *rows = t->shape[0];
        *cols = t->shape[1];
        *kind = kbit_io_dtype_name(t->dtype);
        if (!(*out = malloc(t->numel * sizeof(float)))) return fail(name, "out of memory");
        for (i = 0; i < t->numel; ++i) (*out)[i] = element(t, i);
        return 0;
    }
    /* not a float tensor: the packed codes of a quantized router */
    if (kbit_io_quant_find(ck, module, &q) != KBIT_STATUS_SUCCESS) return fail(name, kbit_io_last_error_message());
    if (q->format == KBIT_IO_FORMAT_INT8 || q->ndim != 2 || q->numel == 0)
        return fail(name, "the router is neither a float tensor nor a non-empty 2-D 4-bit layer");
    if (!q->aligned) return fail(name, "its tensors are not aligned to their element types (copy them first)");
    *rows = q->shape[0];
    *cols = q->shape[1];
    *kind = kbit_io_format_name(q->format);
    if (!(*out = malloc(q->numel * sizeof(float)))) return fail(name, "out of memory");
    return router_dequantize(q, *out);
}

/* Qwen3-MoE's routing for one token: softmax over all E logits, the top_k largest probabilities (ties
 * to the lower expert index; torch.topk leaves ties unspecified), divided by their sum when `norm`. */
static void route(const float* logits, int64_t E, int64_t top_k, int norm, float* p, int32_t* ids, float* weights) {
    float max = logits[0], sum = 0.0f;
    int64_t e, j;
    for (e = 1; e < E; ++e)
        if (logits[e] > max) max = logits[e];
    for (e = 0; e < E; ++e) sum += p[e] = expf(logits[e] - max); /* minus the max: no overflow */
    for (e = 0; e < E; ++e) p[e] /= sum;
    sum = 0.0f;
    for (j = 0; j < top_k; ++j) { /* top_k <= E, so an expert is left to take */
        int64_t best = -1;
        for (e = 0; e < E; ++e)
            if (p[e] != -1.0f && (best < 0 || p[e] > p[best])) best = e;
        ids[j] = (int32_t)best;
        weights[j] = p[best];
        sum += p[best];
        p[best] = -1.0f; /* taken (a probability is never -1, not even a NaN one) */
    }
    if (norm)
        for (j = 0; j < top_k; ++j) weights[j] /= sum;
}

static int usage(void) {
    fprintf(stderr, "usage: kbit_moe_layer CHECKPOINT PREFIX TOP_K [--tokens T] [--no-norm-topk-prob] [--out FILE]\n"
                    "  PREFIX: the MoE block, e.g. model.layers.0.mlp; TOP_K: num_experts_per_tok\n");
    return 2;
}

int main(int argc, char** argv) {
    const char *path, *prefix, *out_path = NULL, *router_kind = "";
    const kbit_io_tensor* tensor;
    char name[512];
    long tokens = 4, top_k;
    int norm = 1, rc = 1, i;
    kbit_io_checkpoint* ck = NULL;
    experts_weight gate_up = {0}, down = {0};
    int64_t E, H, I, router_rows = 0, router_cols = 0, t, j, n, e;
    float *router = NULL, *x = NULL, *logits = NULL, *p = NULL, *weights = NULL, *gu = NULL, *h = NULL, *y = NULL;
    int32_t* ids = NULL;
    long* load = NULL;
    char* end;
    double max_abs = 0.0, sum_abs = 0.0;

    if (argc < 4) return usage();
    path = argv[1];
    prefix = argv[2];
    top_k = strtol(argv[3], &end, 10);
    if (*end || top_k < 1) return usage();
    for (i = 4; i < argc; ++i) {
        if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
            tokens = strtol(argv[++i], &end, 10);
            if (*end || tokens < 1 || tokens > MAX_TOKENS) return usage();
        } else if (strcmp(argv[i], "--no-norm-topk-prob") == 0) {
            norm = 0;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else {
            return usage();
        }
    }
    if (strlen(prefix) > 400) return fail(prefix, "prefix too long");

    if (kbit_io_open(path, &ck) != KBIT_STATUS_SUCCESS) return fail(NULL, kbit_io_last_error_message());
    if (router_load(ck, prefix, &router_rows, &router_cols, &router, &router_kind)) goto done;
    snprintf(name, sizeof name, "%s.experts.gate_up_proj", prefix);
    if (kbit_io_tensor_find(ck, name, &tensor) != KBIT_STATUS_SUCCESS) {
        rc = no_moe_layer(ck, prefix);
        goto done;
    }
    if (experts_find(ck, name, &gate_up)) goto done;
    snprintf(name, sizeof name, "%s.experts.down_proj", prefix);
    if (experts_find(ck, name, &down)) goto done;

    /* The shapes must agree: router [E, H], gate_up [E, 2I, H], down [E, H, I]. */
    E = router_rows;
    H = router_cols;
    I = down.k;
    if (E < 1 || H < 1 || I < 1 || gate_up.experts != E || down.experts != E || gate_up.k != H || down.n != H ||
        gate_up.n != 2 * I) {
        fprintf(stderr, "kbit_moe_layer: %s: shapes disagree: gate [%lld, %lld], gate_up [%lld, %lld, %lld], "
                "down [%lld, %lld, %lld]\n", prefix, (long long)E, (long long)H, (long long)gate_up.experts,
                (long long)gate_up.n, (long long)gate_up.k, (long long)down.experts, (long long)down.n,
                (long long)down.k);
        goto done;
    }
    if (top_k > E) {
        fprintf(stderr, "kbit_moe_layer: TOP_K %ld is more than the %lld experts\n", top_k, (long long)E);
        rc = 2;
        goto done;
    }

    x = malloc((size_t)(tokens * H) * sizeof(float));
    logits = malloc((size_t)E * sizeof(float));
    p = malloc((size_t)E * sizeof(float));
    ids = malloc((size_t)(tokens * top_k) * sizeof(int32_t));
    weights = malloc((size_t)(tokens * top_k) * sizeof(float));
    gu = malloc((size_t)(tokens * top_k * 2 * I) * sizeof(float));
    h = malloc((size_t)(tokens * top_k * I) * sizeof(float));
    y = malloc((size_t)(tokens * H) * sizeof(float));
    load = calloc((size_t)E, sizeof(long));
    if (!x || !logits || !p || !ids || !weights || !gu || !h || !y || !load) {
        fail("malloc", "out of memory");
        goto done;
    }

    /* The router, per token: logits in fp32, then the top_k experts and their weights. */
    for (t = 0; t < tokens; ++t) {
        for (n = 0; n < H; ++n) x[t * H + n] = input_value((uint32_t)t, (uint32_t)n);
        for (e = 0; e < E; ++e) {
            float s = 0.0f;
            for (n = 0; n < H; ++n) s += router[e * H + n] * x[t * H + n];
            logits[e] = s;
        }
        route(logits, E, top_k, norm, p, ids + t * top_k, weights + t * top_k);
        for (j = 0; j < top_k; ++j) ++load[ids[t * top_k + j]];
    }

    /* gate_up for every (token, choice): out [T, top_k, 2I]; each choice reads its token's row of x. */
    if (kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, x, 1, gate_up.q->weight, gate_up.absmax, gate_up.absmax_8bit,
                               gate_up.code, gate_up.offset, E, 2 * I, H, gate_up.q->blocksize,
                               gate_up.q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, ids,
                               tokens, top_k, NULL, gu, NULL) != KBIT_STATUS_SUCCESS) {
        fail("gate_up", kbit_last_error_message());
        goto done;
    }
    /* h = silu(gate) * up, one row of I per (token, choice): the first half of each row is the gate. */
    for (t = 0; t < tokens * top_k; ++t)
        for (n = 0; n < I; ++n) {
            float g = gu[t * 2 * I + n], u = gu[t * 2 * I + I + n];
            h[t * I + n] = g / (1.0f + expf(-g)) * u;
        }
    /* down: row t*top_k + j of h through expert ids[t*top_k + j], summed over j with the router weights. */
    if (kbit_gemm_4bit_grouped(KBIT_DTYPE_FP32, h, top_k, down.q->weight, down.absmax, down.absmax_8bit, down.code,
                               down.offset, E, H, I, down.q->blocksize,
                               down.q->format == KBIT_IO_FORMAT_NF4 ? KBIT_QUANT_NF4 : KBIT_QUANT_FP4, ids, tokens,
                               top_k, weights, y, NULL) != KBIT_STATUS_SUCCESS) {
        fail("down", kbit_last_error_message());
        goto done;
    }

    for (t = 0; t < tokens * H; ++t) {
        if (fabs(y[t]) > max_abs) max_abs = fabs(y[t]);
        sum_abs += fabs(y[t]);
    }
    printf("%s: %lld experts, hidden %lld, intermediate %lld; experts %s, blocksize %d, %s; router %s\n", prefix,
           (long long)E, (long long)H, (long long)I, kbit_io_format_name(gate_up.q->format),
           (int)gate_up.q->blocksize, gate_up.q->nested ? "nested" : "not nested", router_kind);
    printf("%ld tokens (generated), top-%ld routing%s\n", tokens, top_k,
           norm ? ", weights renormalized (norm_topk_prob)" : ", weights not renormalized");
    for (t = 0; t < tokens && t < 8; ++t) {
        printf("  token %lld:", (long long)t);
        for (j = 0; j < top_k; ++j)
            printf(" expert %d (%.4f)", ids[t * top_k + j], weights[t * top_k + j]);
        printf("\n");
    }
    if (tokens > 8) printf("  ...\n");
    printf("tokens per expert:");
    for (e = 0; e < E; ++e) printf(" %ld", load[e]);
    printf("\noutput [%ld, %lld]: max |y| %.4g, mean |y| %.4g\n", tokens, (long long)H, max_abs,
           sum_abs / (double)(tokens * H));
    if (out_path) {
        FILE* f = fopen(out_path, "wb");
        int ok = f && fwrite(y, sizeof(float), (size_t)(tokens * H), f) == (size_t)(tokens * H);
        if (f && fclose(f) != 0) ok = 0; /* a full disk may show only here */
        if (!ok) {
            fail(out_path, "cannot write the output");
            goto done;
        }
        printf("written to %s (raw float32)\n", out_path);
    }
    rc = 0;
done:
    free(router);
    free(x);
    free(logits);
    free(p);
    free(ids);
    free(weights);
    free(gu);
    free(h);
    free(y);
    free(load);
    free(gate_up.decoded);
    free(down.decoded);
    kbit_io_close(ck);
    return rc;
}
