/* Preloaded before libasan by run.sh (KBIT_FUZZ_ASAN=1): strong definitions of the libFuzzer entry
   points that atheris calls to register its Python coverage counters and comparisons, forwarded to
   atheris' own libFuzzer (KBIT_FUZZ_ATHERIS_CORE: the path of its core_with_libfuzzer*.so). Without
   it, the preloaded libasan's weak stubs of these functions come first in the lookup order and take
   the calls, and libFuzzer under ASan fuzzes blind.

   cc -shared -fPIC -o asan_coverage_shim.so asan_coverage_shim.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static void *core(void) {
  static void *handle;
  if (!handle && getenv("KBIT_FUZZ_ATHERIS_CORE"))
    handle = dlopen(getenv("KBIT_FUZZ_ATHERIS_CORE"), RTLD_NOLOAD | RTLD_LAZY);  /* loaded by atheris */
  return handle;
}

#define FORWARD(name, params, args)                                       \
  void name params {                                                      \
    static void (*target) params;                                         \
    if (!target && core()) target = (void (*) params)dlsym(core(), #name); \
    if (target) target args;                                              \
  }

FORWARD(__sanitizer_cov_8bit_counters_init, (uint8_t *start, uint8_t *stop), (start, stop))
FORWARD(__sanitizer_cov_pcs_init, (const uintptr_t *start, const uintptr_t *stop), (start, stop))
FORWARD(__sanitizer_cov_trace_cmp1, (uint8_t a, uint8_t b), (a, b))
FORWARD(__sanitizer_cov_trace_cmp2, (uint16_t a, uint16_t b), (a, b))
FORWARD(__sanitizer_cov_trace_cmp4, (uint32_t a, uint32_t b), (a, b))
FORWARD(__sanitizer_cov_trace_cmp8, (uint64_t a, uint64_t b), (a, b))
FORWARD(__sanitizer_cov_trace_const_cmp1, (uint8_t a, uint8_t b), (a, b))
FORWARD(__sanitizer_cov_trace_const_cmp2, (uint16_t a, uint16_t b), (a, b))
FORWARD(__sanitizer_cov_trace_const_cmp4, (uint32_t a, uint32_t b), (a, b))
FORWARD(__sanitizer_cov_trace_const_cmp8, (uint64_t a, uint64_t b), (a, b))
FORWARD(__sanitizer_cov_trace_switch, (uint64_t value, uint64_t *cases), (value, cases))
FORWARD(__sanitizer_cov_trace_div4, (uint32_t value), (value))
FORWARD(__sanitizer_cov_trace_div8, (uint64_t value), (value))
