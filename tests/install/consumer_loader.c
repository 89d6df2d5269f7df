/* Uses an installed libkbit.so: the default backend must be the CPU backend installed beside it
 * (argv[1] = the installed library directory), reachable through the trampolines and the loader API. */
#include <stdio.h>
#include <string.h>

#include <kbit/kbit_loader.h>

int main(int argc, char** argv) {
    kbit_backend* b = NULL;
    const kbit_loader_candidate* c;
    char expected[4096];
    void* p = NULL;
    if (argc != 2) return 2;
    snprintf(expected, sizeof expected, "%s/libkbit_cpu.so", argv[1]);
    if (kbit_loader_default(&b) != KBIT_STATUS_SUCCESS) {
        printf("no default backend: %s\n", kbit_last_error_message());
        return 1;
    }
    c = kbit_loader_backend_candidate(b);
    printf("default backend %s from %s via %s\n", c->name, c->path, kbit_loader_library_path());
    if (strcmp(c->path, expected) != 0 || strcmp(kbit_backend_name(), "cpu") != 0) {
        printf("expected the installed %s\n", expected);
        return 1;
    }
    if (kbit_device_malloc(&p, 256) != KBIT_STATUS_SUCCESS || p == NULL) return 1;
    kbit_device_free(p);
    printf("consumer_loader: OK\n");
    return 0;
}
