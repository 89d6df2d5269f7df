/* ctest loader.exit: kbit functions called from an atexit handler registered before libkbit.so's
 * first use (so it runs after everything libkbit.so registered) still reach the default backend. */
#include <stdio.h>
#include <stdlib.h>

#include "kbit/kbit.h"

static void at_exit(void) {
    void* p = NULL;
    kbit_status s = kbit_device_malloc(&p, 64);
    printf("at exit: %s %d %d\n", kbit_backend_name(), (int)s, (int)kbit_device_free(p));
    fflush(stdout);
}

int main(void) {
    atexit(at_exit);
    printf("backend: %s\n", kbit_backend_name());
    return 0;
}
