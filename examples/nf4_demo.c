/*
 * nf4_demo.c — the main job of kbit in one C99 program, through the public ABI only:
 * quantize a realistic weight matrix to NF4 (bitsandbytes' format, blocksize 64), dequantize it,
 * run the 4-bit GEMV against an fp32 reference GEMV, and print the errors and throughput.
 *
 *   kbit_nf4_demo [--quick] [ROWS COLS]     (default 4096 x 4096; --quick: 512 x 1024)
 *
 * Exits non-zero when a call fails or an error is out of the range NF4 guarantees.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kbit/kbit.h"

/* bitsandbytes' NF4 quant_map (the `datatype` argument of the GEMV), as exact fp32 bits. */
static const float kNf4[16] = {
    -0x1.0000000p+0f, -0x1.6473620p-1f, -0x1.0cd6600p-1f, -0x1.9465400p-2f, -0x1.23449a0p-2f, -0x1.7a6a7e0p-3f,
    -0x1.74f0e20p-4f, 0x0.0p+0f,        0x1.45f5fe0p-4f,  0x1.4995c60p-3f,  0x1.f809ba0p-3f,  0x1.5a06740p-2f,
    0x1.c349700p-2f,  0x1.200f560p-1f,  0x1.7227660p-1f,  0x1.0000000p+0f};

static int check(kbit_status s, const char* what) {
    if (s != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "kbit_nf4_demo: %s failed: %s: %s\n", what, kbit_status_string(s), kbit_last_error_message());
        exit(1);
    }
    return 0;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Deterministic normal numbers (xorshift64* + Box-Muller). */
static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static double uniform01(void) {
    g_state ^= g_state >> 12;
    g_state ^= g_state << 25;
    g_state ^= g_state >> 27;
    return ((g_state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}
static float normal(void) {
    const double u = uniform01() + 1e-300, v = uniform01();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void* device_alloc(size_t bytes) {
    void* p = NULL;
    check(kbit_device_malloc(&p, bytes), "kbit_device_malloc");
    return p;
}

int main(int argc, char** argv) {
    int64_t rows = 4096, cols = 4096;
    int quick = 0, positional = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
            rows = 512;
            cols = 1024;
        } else if (positional == 0) {
            rows = atoll(argv[i]);
            positional = 1;
        } else {
            cols = atoll(argv[i]);
        }
    }
    const int64_t blocksize = 64;
    if (rows <= 0 || cols <= 0 || cols % 2 != 0 || rows * cols > INT32_MAX) {
        fprintf(stderr, "usage: kbit_nf4_demo [--quick] [ROWS COLS] (COLS even, ROWS*COLS < 2^31)\n");
        return 2;
    }
    const int64_t n = rows * cols, blocks = (n + blocksize - 1) / blocksize;
    const int reps = quick ? 3 : 10;
    printf("kbit %s backend: %s\n", kbit_backend_name(), kbit_backend_info());
    printf("weight %lld x %lld (normal, std 0.02, 0.1%% outliers x25), NF4 blocksize %lld\n", (long long)rows,
           (long long)cols, (long long)blocksize);

    /* Host data: weights-like matrix and one activation row. */
    float* w = malloc((size_t)n * sizeof(float));
    float* x = malloc((size_t)cols * sizeof(float));
    float* w_back = malloc((size_t)n * sizeof(float));
    float* y4 = malloc((size_t)rows * sizeof(float));
    if (!w || !x || !w_back || !y4) return 1;
    for (int64_t i = 0; i < n; ++i) w[i] = 0.02f * normal() * (uniform01() < 0.001 ? 25.0f : 1.0f);
    for (int64_t i = 0; i < cols; ++i) x[i] = normal();

    /* Device buffers (host memory on the CPU backend; the same code drives a GPU backend). */
    float* d_w = device_alloc((size_t)n * sizeof(float));
    float* d_x = device_alloc((size_t)cols * sizeof(float));
    float* d_absmax = device_alloc((size_t)blocks * sizeof(float));
    uint8_t* d_packed = device_alloc((size_t)(n + 1) / 2);
    float* d_back = device_alloc((size_t)n * sizeof(float));
    float* d_y = device_alloc((size_t)rows * sizeof(float));
    float* d_lut = device_alloc(sizeof kNf4);
    check(kbit_memcpy(d_w, w, (size_t)n * sizeof(float), KBIT_MEMCPY_HOST_TO_DEVICE), "kbit_memcpy");
    check(kbit_memcpy(d_x, x, (size_t)cols * sizeof(float), KBIT_MEMCPY_HOST_TO_DEVICE), "kbit_memcpy");
    check(kbit_memcpy(d_lut, kNf4, sizeof kNf4, KBIT_MEMCPY_HOST_TO_DEVICE), "kbit_memcpy");

    /* Quantize, dequantize, GEMV; best time of `reps` runs each. */
    double t_quant = 1e30, t_deq = 1e30, t_gemv = 1e30;
    for (int r = 0; r < reps; ++r) {
        double t0 = now();
        check(kbit_quantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, d_w, d_absmax, d_packed, blocksize, n, NULL),
              "kbit_quantize_4bit");
        check(kbit_stream_synchronize(NULL), "kbit_stream_synchronize");
        double t1 = now();
        check(kbit_dequantize_4bit(KBIT_QUANT_NF4, KBIT_DTYPE_FP32, d_packed, d_absmax, d_back, blocksize, n, NULL),
              "kbit_dequantize_4bit");
        check(kbit_stream_synchronize(NULL), "kbit_stream_synchronize");
        double t2 = now();
        /* bitsandbytes' naive GEMV convention: m = output features, k = inner size, ldb = k / 2. */
        check(cgemm_4bit_inference_naive_fp32((int)rows, 1, (int)cols, d_x, d_packed, d_absmax, d_lut, d_y,
                                              (int)rows, (int)(cols / 2), (int)rows, (int)blocksize, NULL),
              "cgemm_4bit_inference_naive_fp32");
        check(kbit_stream_synchronize(NULL), "kbit_stream_synchronize");
        double t3 = now();
        if (t1 - t0 < t_quant) t_quant = t1 - t0;
        if (t2 - t1 < t_deq) t_deq = t2 - t1;
        if (t3 - t2 < t_gemv) t_gemv = t3 - t2;
    }
    check(kbit_memcpy(w_back, d_back, (size_t)n * sizeof(float), KBIT_MEMCPY_DEVICE_TO_HOST), "kbit_memcpy");
    check(kbit_memcpy(y4, d_y, (size_t)rows * sizeof(float), KBIT_MEMCPY_DEVICE_TO_HOST), "kbit_memcpy");

    /* Quantization error of the weights. */
    double err2 = 0, norm2 = 0, max_rel_block = 0;
    for (int64_t b = 0; b < blocks; ++b) {
        double amax = 0, emax = 0;
        for (int64_t i = b * blocksize; i < n && i < (b + 1) * blocksize; ++i) {
            const double e = (double)w_back[i] - w[i];
            err2 += e * e;
            norm2 += (double)w[i] * w[i];
            if (fabs(w[i]) > amax) amax = fabs(w[i]);
            if (fabs(e) > emax) emax = fabs(e);
        }
        if (amax > 0 && emax / amax > max_rel_block) max_rel_block = emax / amax;
    }
    const double weight_rel = sqrt(err2 / norm2);

    /* fp32 reference GEMV on the original weights and on the dequantized ones (in double). */
    double ref2 = 0, q_err2 = 0, k_err = 0;
    for (int64_t r = 0; r < rows; ++r) {
        double y = 0, yq = 0, abs_sum = 0;
        for (int64_t k = 0; k < cols; ++k) {
            y += (double)w[r * cols + k] * x[k];
            yq += (double)w_back[r * cols + k] * x[k];
            abs_sum += fabs((double)w_back[r * cols + k] * x[k]);
        }
        ref2 += y * y;
        q_err2 += (y4[r] - y) * (y4[r] - y);
        const double rel = fabs(y4[r] - yq) / (abs_sum + 1e-30);
        if (rel > k_err) k_err = rel;
    }
    const double gemv_rel = sqrt(q_err2 / ref2);

    const double packed_bytes = n / 2.0 + 4.0 * blocks;
    printf("\nweights:  relative RMS error %.4f, worst element error / block absmax %.4f (bound 0.152)\n",
           weight_rel, max_rel_block);
    printf("GEMV:     relative error vs fp32 reference %.4f; vs the dequantized weights %.2e (fp32 summation)\n",
           gemv_rel, k_err);
    printf("\n%-12s %10s %12s\n", "kernel", "time (ms)", "GB/s");
    printf("%-12s %10.3f %12.2f\n", "quantize", t_quant * 1e3, (4.0 * n + packed_bytes) / t_quant / 1e9);
    printf("%-12s %10.3f %12.2f\n", "dequantize", t_deq * 1e3, (4.0 * n + packed_bytes) / t_deq / 1e9);
    printf("%-12s %10.3f %12.2f  (weights read once: %.1f MB)\n", "gemv", t_gemv * 1e3,
           (packed_bytes + 4.0 * (rows + cols)) / t_gemv / 1e9, packed_bytes / 1e6);

    int ok = 1;
    if (!(max_rel_block <= 0.1521)) ok = 0;      /* half the largest NF4 gap (0.3038 / 2) */
    if (!(weight_rel > 0.0 && weight_rel < 0.15)) ok = 0;
    if (!(k_err < 1e-4)) ok = 0;                  /* the kernel computes the dequantized product */
    if (!(gemv_rel < 0.15)) ok = 0;
    printf("\n%s\n", ok ? "OK" : "FAILED: an error is out of range");

    kbit_device_free(d_w);
    kbit_device_free(d_x);
    kbit_device_free(d_absmax);
    kbit_device_free(d_packed);
    kbit_device_free(d_back);
    kbit_device_free(d_y);
    kbit_device_free(d_lut);
    free(w);
    free(x);
    free(w_back);
    free(y4);
    return ok ? 0 : 1;
}
