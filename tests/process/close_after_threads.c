/* ctest process.close_after_threads: a process that closes the CPU backend (kbit_loader_close, a
 * dlclose) right after a multi-threaded kernel call keeps running and exits cleanly. GNU OpenMP's
 * workers outlive the call, spinning in libgomp's code; had the close unmapped the backend and with it
 * libgomp, they would fault (SIGSEGV) at once. Run with OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active (the
 * workers then spin until the process ends). Checks, three times over: open, a parallel quantize
 * whose bytes match the first round's, close, the backend still mapped (dlopen RTLD_NOLOAD), and
 * 100 ms alive with the workers spinning. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kbit/kbit_loader.h"

enum { kN = 1 << 22, kBlock = 4096 }; /* large enough for the backend to use every thread */

int main(void) {
    float* x = malloc(sizeof(float) * kN);
    float* absmax = malloc(sizeof(float) * (kN / kBlock));
    unsigned char* out = malloc(kN);
    unsigned char* first = malloc(kN);
    if (!x || !absmax || !out || !first) return 2;
    static float code[256];
    for (int i = 0; i < 256; ++i) code[i] = -1.0f + 2.0f * (float)i / 255.0f;
    for (int i = 0; i < kN; ++i) x[i] = (float)(((long long)i * 7919) % 2001 - 1000) / 1000.0f;
    for (int round = 0; round < 3; ++round) {
        kbit_backend* b = NULL;
        if (kbit_loader_open("cpu", &b) != KBIT_STATUS_SUCCESS) {
            fprintf(stderr, "close_after_threads: kbit_loader_open(cpu) failed\n");
            return 1;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s", kbit_loader_backend_candidate(b)->path);
        const kbit_8bit_table* t8 = kbit_loader_8bit_table(b);
        if (!t8 || t8->cquantize_blockwise_fp32(code, x, absmax, out, kBlock, kN) != KBIT_STATUS_SUCCESS) {
            fprintf(stderr, "close_after_threads: quantize failed in round %d\n", round);
            return 1;
        }
        if (round == 0) memcpy(first, out, kN);
        else if (memcmp(first, out, kN) != 0) {
            fprintf(stderr, "close_after_threads: round %d quantized other bytes than round 0\n", round);
            return 1;
        }
        if (kbit_loader_close(b) != KBIT_STATUS_SUCCESS) {
            fprintf(stderr, "close_after_threads: kbit_loader_close failed\n");
            return 1;
        }
        void* still = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (still == NULL) {
            fprintf(stderr, "close_after_threads: %s was unloaded by kbit_loader_close\n", path);
            return 1;
        }
        dlclose(still);
        const struct timespec wait = {0, 100 * 1000 * 1000};
        nanosleep(&wait, NULL);
    }
    printf("close_after_threads: 3 rounds of open, parallel call, close; the backend stayed mapped\n");
    free(x);
    free(absmax);
    free(out);
    free(first);
    return 0;
}
