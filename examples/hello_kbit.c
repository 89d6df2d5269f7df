/* hello_kbit.c — the smallest complete kbit program: quantize a weight matrix to NF4 and multiply it
 * with an activation vector (the 4-bit GEMV of QLoRA inference), on whatever backend the machine
 * has. It links only the loader:
 *
 *     cc hello_kbit.c -lkbit        (or pkg-config --cflags --libs kbit)
 *
 * libkbit.so picks the backend on the first call (KBIT_BACKEND=cpu|cuda|... overrides the choice;
 * `kbit info` shows it). Memory goes through kbit_device_malloc/kbit_memcpy, so the same code runs on
 * the CPU and on a GPU. Any failing call prints the loader's or backend's message and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include <kbit/kbit.h>

enum { ROWS = 64, COLS = 256, BLOCKSIZE = 64 };

/* The 16 NF4 levels (QLoRA), the `datatype` table the GEMV reads. */
static const float kNf4[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

static void check(kbit_status status, const char* what) {
    if (status != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "hello_kbit: %s failed: %s: %s\n", what, kbit_status_string(status),
                kbit_last_error_message());
        exit(1);
    }
}

/* Device memory holding `bytes`, optionally filled from host memory. */
static void* device(size_t bytes, const void* host) {
    void* p = NULL;
    check(kbit_device_malloc(&p, bytes), "kbit_device_malloc");
    if (host != NULL) check(kbit_memcpy(p, host, bytes, KBIT_MEMCPY_HOST_TO_DEVICE), "kbit_memcpy");
    return p;
}

/* Roughly normal values from a fixed linear congruential sequence (sum of four uniforms). */
static float next_normal(unsigned* state) {
    float sum = 0.0f;
    int i;
    for (i = 0; i < 4; ++i) {
        *state = *state * 1664525u + 1013904223u;
        sum += (float)(*state >> 8) / 16777216.0f;
    }
    return (sum - 2.0f) * 1.7320508f;
}

static double absd(double x) { return x < 0 ? -x : x; }

int main(void) {
    static float w[ROWS * COLS], w_dequantized[ROWS * COLS], x[COLS], y[ROWS];
    const int n = ROWS * COLS, blocks = (ROWS * COLS + BLOCKSIZE - 1) / BLOCKSIZE;
    unsigned seed = 42;
    double worst = 0.0, scale = 0.0;
    int i, r, k;
    void *dw, *dx, *dcode, *dabsmax, *dpacked, *dy, *ddeq;

    for (i = 0; i < n; ++i) w[i] = 0.02f * next_normal(&seed);
    for (k = 0; k < COLS; ++k) x[k] = next_normal(&seed);

    printf("backend: %s (%s)\n", kbit_backend_name(), kbit_backend_info());

    dw = device(sizeof w, w);
    dx = device(sizeof x, x);
    dcode = device(sizeof kNf4, kNf4);
    dabsmax = device((size_t)blocks * sizeof(float), NULL);
    dpacked = device((size_t)n / 2, NULL);
    dy = device(sizeof y, NULL);
    ddeq = device(sizeof w_dequantized, NULL);

    /* Weight -> NF4: one fp32 scale per block of 64 weights, two 4-bit codes per byte. */
    check(cquantize_blockwise_fp32_nf4(NULL, dw, dabsmax, dpacked, BLOCKSIZE, n), "cquantize_blockwise_fp32_nf4");
    /* y = W x with the 4-bit weight (bitsandbytes' arguments: m = rows, n = 1, k = cols, ldb = cols / 2). */
    check(cgemm_4bit_inference_naive_fp32(ROWS, 1, COLS, dx, dpacked, dabsmax, dcode, dy, ROWS, COLS / 2, ROWS,
                                          BLOCKSIZE, NULL),
          "cgemm_4bit_inference_naive_fp32");
    /* The weight the GEMV used, to check its result. */
    check(cdequantize_blockwise_fp32_nf4(NULL, dpacked, dabsmax, ddeq, BLOCKSIZE, n, NULL),
          "cdequantize_blockwise_fp32_nf4");
    check(kbit_stream_synchronize(NULL), "kbit_stream_synchronize");
    check(kbit_memcpy(y, dy, sizeof y, KBIT_MEMCPY_DEVICE_TO_HOST), "kbit_memcpy");
    check(kbit_memcpy(w_dequantized, ddeq, sizeof w_dequantized, KBIT_MEMCPY_DEVICE_TO_HOST), "kbit_memcpy");

    /* The GEMV must equal the product with the dequantized weight up to fp32 rounding: at most
     * (COLS + 1) roundings of 2^-24 each, relative to the sum of |terms| (2^-23 leaves slack). */
    for (r = 0; r < ROWS; ++r) {
        double exact = 0.0, magnitude = 0.0;
        for (k = 0; k < COLS; ++k) {
            exact += (double)x[k] * w_dequantized[r * COLS + k];
            magnitude += absd((double)x[k] * w_dequantized[r * COLS + k]);
        }
        if (absd(y[r] - exact) > worst) worst = absd(y[r] - exact);
        if (magnitude > scale) scale = magnitude;
    }
    printf("NF4 GEMV of a %dx%d weight (blocksize %d): y[0..3] = %.5f %.5f %.5f %.5f\n", ROWS, COLS, BLOCKSIZE, y[0],
           y[1], y[2], y[3]);
    printf("largest difference from the dequantized product: %.3g (sum of |terms| up to %.3g)\n", worst, scale);

    kbit_device_free(dw);
    kbit_device_free(dx);
    kbit_device_free(dcode);
    kbit_device_free(dabsmax);
    kbit_device_free(dpacked);
    kbit_device_free(dy);
    kbit_device_free(ddeq);
    if (!(worst <= (COLS + 1) * (scale / 8388608.0)) || scale == 0.0) {
        fprintf(stderr, "hello_kbit: the GEMV result is wrong\n");
        return 1;
    }
    printf("OK\n");
    return 0;
}
