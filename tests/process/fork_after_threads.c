/* ctest process.fork_after_threads: a process that forks after a multi-threaded kbit call (OpenMP
 * threads alive in the parent) can still call kbit in the child. GNU OpenMP is not fork-safe: a child
 * entering a parallel region waits forever for the parent's threads, which do not exist in it (the
 * fork-started DataLoader / multiprocessing worker case). The child runs with a watchdog; a hang is a
 * failure, not a stuck test. Linked against libkbit_cpu.so directly; run with OMP_NUM_THREADS=2. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kbit/kbit.h"

enum { kN = 1 << 22, kBlock = 4096 };  /* large enough for the backend to use every thread */

static int quantize(const float* x, float* absmax, unsigned char* out) {
    static float code[256];
    for (int i = 0; i < 256; ++i) code[i] = -1.0f + 2.0f * (float)i / 255.0f;
    return cquantize_blockwise_fp32(code, (float*)x, absmax, out, kBlock, kN);
}

int main(void) {
    float* x = malloc(sizeof(float) * kN);
    float* absmax = malloc(sizeof(float) * (kN / kBlock));
    float* absmax_child = malloc(sizeof(float) * (kN / kBlock));
    unsigned char* parent = malloc(kN);
    unsigned char* child = malloc(kN);
    if (!x || !absmax || !absmax_child || !parent || !child) return 2;
    for (int i = 0; i < kN; ++i) x[i] = (float)(((long long)i * 7919) % 2001 - 1000) / 1000.0f;
    if (quantize(x, absmax, parent) != KBIT_STATUS_SUCCESS) {
        fprintf(stderr, "parent call failed: %s\n", kbit_last_error_message());
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        alarm(30); /* a deadlocked child dies of SIGALRM */
        if (quantize(x, absmax_child, child) != KBIT_STATUS_SUCCESS) _exit(3);
        _exit(memcmp(parent, child, kN) == 0 && memcmp(absmax, absmax_child, sizeof(float) * (kN / kBlock)) == 0 ? 0 : 4);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 2;
    if (WIFSIGNALED(status)) {
        printf("FAILED: the child %s\n",
               WTERMSIG(status) == SIGALRM ? "hung in its kbit call (killed after 30 s)" : strsignal(WTERMSIG(status)));
        return 1;
    }
    const int code = WEXITSTATUS(status);
    if (code != 0) {
        printf("FAILED: the child %s\n", code == 3 ? "got an error status" : "computed different bytes");
        return 1;
    }
    /* The parent keeps its threads. */
    if (quantize(x, absmax_child, child) != KBIT_STATUS_SUCCESS || memcmp(parent, child, kN) != 0) return 1;
    printf("fork after threads: the child's call finished with the parent's bytes\n");
    return 0;
}
