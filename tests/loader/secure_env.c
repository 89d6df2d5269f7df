/* The set-user-ID check of the loader tests (test_discovery.cpp): prints whether the process runs
 * with AT_SECURE, then fails one loader call (KBIT_LOG would print it) and makes the default choice
 * (KBIT_LOADER_DEBUG would print it). */
#include <stdio.h>
#include <sys/auxv.h>

#include "kbit/kbit_loader.h"

int main(void) {
    printf("secure %lu\n", getauxval(AT_SECURE));
    fflush(stdout);
    kbit_backend* b = NULL;
    kbit_loader_open("no such backend!", &b);
    kbit_backend_name();
    return 0;
}
