/* Links the installed CPU backend directly (kbit::kbit_cpu / -lkbit_cpu), without the loader. */
#include <stdio.h>
#include <string.h>

#include <kbit/kbit.h>

int main(void) {
    if (strcmp(kbit_backend_name(), "cpu") != 0) return 1;
    if (KBIT_VERSION_MAJOR_OF(kbit_core_interface_version()) != KBIT_CORE_VERSION_MAJOR) return 1;
    if (kbit_device_malloc(NULL, 8) != KBIT_STATUS_INVALID_ARGUMENT) return 1;
    printf("consumer_cpu: %s: OK\n", kbit_backend_info());
    return 0;
}
