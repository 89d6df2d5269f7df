/* fake_backend.c — one fake vendor backend, compiled by tests/loader/CMakeLists.txt into many
 * libkbit_<variant>.so files that differ only in these macros:
 *
 *   FAKE_NAME             backend name (string)                       default "fake"
 *   FAKE_PROBE            kbit_backend_probe() score                  default 5
 *   FAKE_CORE_VERSION     packed core version                         default 1.0
 *   FAKE_NO_CORE_VERSION  do not export kbit_core_interface_version
 *   FAKE_4BIT_VERSION     export the 4-bit interface at this packed version (likewise FAKE_8BIT_VERSION,
 *                         FAKE_OPTIM8_VERSION); undefined = interface absent
 *   FAKE_UNDEFINED_REFERENCE  reference a symbol nobody defines (dlopen with RTLD_NOW fails)
 *   FAKE_NEXT_MINOR_FN    also define kbit_next_minor_test_fn, the 4-bit 1.1 function of the test
 *                         loader kbit_next (tests/loader/CMakeLists.txt)
 *   FAKE_MINIMAL          only the core version symbol, no C library (for builds of other architectures)
 *   FAKE_NULL_STRINGS     kbit_backend_name, _info, kbit_status_string and kbit_last_error_message
 *                         return NULL (which the contract forbids)
 *   FAKE_PROBE_ABORT, FAKE_PROBE_SEGV, FAKE_PROBE_HANG  kbit_backend_probe() calls abort(), writes
 *                         to an unmapped address, or never returns
 *   FAKE_PROBE_EXIT       kbit_backend_probe() calls exit(FAKE_PROBE_EXIT)
 *   FAKE_CONSTRUCTOR_ABORT  an ELF constructor calls abort() (in dlopen)
 *   FAKE_PROBE_REENTER    kbit_backend_probe() calls back into the libkbit.so that probes it (found from
 *                         its return address) and records the answers (kbit_fake_reentry())
 *   FAKE_DESTRUCTOR_REENTER  an ELF destructor calls kbit_backend_name() of the libkbit.so that probed
 *                         the backend and prints the answer to stderr
 *
 * A function is left out by renaming it on the command line (-D<function>=fake_omitted_<function>),
 * which keeps the X-macro generation below untouched.
 *
 * Every interface function is generated from the abi/kbit_<iface>.def lists. It records its name (kbit_fake_last_call())
 * and returns the status set by kbit_fake_set_result() (0 by default; pointer results are NULL when
 * the status is not 0), setting the fake's thread-local error message on failure, so tests can tell
 * which backend answered a call and whose message kbit_last_error_message() reports.
 */
#define _GNU_SOURCE /* dladdr (FAKE_PROBE_REENTER, FAKE_DESTRUCTOR_REENTER) */
#include "kbit/kbit.h"

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifndef FAKE_PROBE
#define FAKE_PROBE 5
#endif
#ifndef FAKE_CORE_VERSION
#define FAKE_CORE_VERSION KBIT_MAKE_VERSION(1, 0)
#endif

#ifndef FAKE_NO_CORE_VERSION
KBIT_API uint32_t kbit_core_interface_version(void) { return FAKE_CORE_VERSION; }
#endif

#ifndef FAKE_MINIMAL

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int g_probe_calls;
static atomic_int g_result;
static const char* _Atomic g_last_call = "";
static _Thread_local char t_message[256];

/* ---- test controls (not part of any kbit interface) ------------------------------------------ */

/** Number of kbit_backend_probe() calls so far. */
KBIT_API int kbit_fake_probe_calls(void) { return atomic_load(&g_probe_calls); }
/** Status every generated function returns from now on (0 = success). */
KBIT_API void kbit_fake_set_result(int32_t status) { atomic_store(&g_result, status); }
/** Name of the generated function called last ("" before any). */
KBIT_API const char* kbit_fake_last_call(void) { return atomic_load(&g_last_call); }

/* ---- core interface ---------------------------------------------------------------------------- */

#ifdef FAKE_UNDEFINED_REFERENCE
extern int fake_symbol_nobody_defines;
#endif

#if defined(FAKE_PROBE_REENTER) || defined(FAKE_DESTRUCTOR_REENTER)
#include <dlfcn.h>

/* The library whose code is at `caller` (the probe's return address: the libkbit.so probing this
 * backend), or NULL; dlclose() it after use. */
static void* fake_loader_at(void* caller) {
    Dl_info info;
    return dladdr(caller, &info) != 0 && info.dli_fname != NULL ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)
                                                                 : NULL;
}
#endif

#ifdef FAKE_PROBE_REENTER
static char g_reentry[2048];

/** What the probe's calls into libkbit.so returned (FAKE_PROBE_REENTER), one "call: result" a line. */
KBIT_API const char* kbit_fake_reentry(void) { return g_reentry; }

/* Calls the trampolines and the loader API of the libkbit.so whose code is at `caller`. */
static void fake_reenter(void* caller) {
    void* h = fake_loader_at(caller);
    if (h == NULL) {
        snprintf(g_reentry, sizeof g_reentry, "the probe's caller is not a loaded library");
        return;
    }
    const char* (*name)(void) = (const char* (*)(void))dlsym(h, "kbit_backend_name");
    const char* (*binfo)(void) = (const char* (*)(void))dlsym(h, "kbit_backend_info");
    const char* (*message)(void) = (const char* (*)(void))dlsym(h, "kbit_last_error_message");
    const char* (*status_string)(kbit_status) = (const char* (*)(kbit_status))dlsym(h, "kbit_status_string");
    kbit_status (*dmalloc)(void**, size_t) = (kbit_status (*)(void**, size_t))dlsym(h, "kbit_device_malloc");
    kbit_status (*deflt)(void**) = (kbit_status (*)(void**))dlsym(h, "kbit_loader_default");
    kbit_status (*lopen)(const char*, void**) = (kbit_status (*)(const char*, void**))dlsym(h, "kbit_loader_open");
    kbit_status (*discover)(void**) = (kbit_status (*)(void**))dlsym(h, "kbit_loader_discover");
    void* p = NULL;
    int n = snprintf(g_reentry, sizeof g_reentry, "kbit_backend_name: %s\nkbit_backend_info: %s\n", name(), binfo());
    const kbit_status s = dmalloc(&p, 16);
    n += snprintf(g_reentry + n, sizeof g_reentry - n, "kbit_device_malloc: %s: %s\n", status_string(s), message());
    const kbit_status d = deflt(&p);
    n += snprintf(g_reentry + n, sizeof g_reentry - n, "kbit_loader_default: %d: %s\n", (int)d, message());
    const kbit_status o = lopen(NULL, &p);
    n += snprintf(g_reentry + n, sizeof g_reentry - n, "kbit_loader_open: %d: %s\n", (int)o, message());
    const kbit_status r = discover(&p);
    snprintf(g_reentry + n, sizeof g_reentry - n, "kbit_loader_discover: %d: %s\n", (int)r, message());
    dlclose(h);
}
#endif

#ifdef FAKE_DESTRUCTOR_REENTER
static const char* (*g_loader_name)(void);

static void fake_remember_loader(void* caller) {
    void* h = fake_loader_at(caller);
    if (h == NULL) return;
    g_loader_name = (const char* (*)(void))dlsym(h, "kbit_backend_name");
    dlclose(h);
}

__attribute__((destructor)) static void fake_destructor(void) {
    Dl_info info;
    if (g_loader_name != NULL && dladdr((void*)g_loader_name, &info) != 0)  /* that loader is still there */
        fprintf(stderr, "destructor: kbit_backend_name: %s\n", g_loader_name());
}
#endif

#ifdef FAKE_CONSTRUCTOR_ABORT
__attribute__((constructor)) static void fake_constructor(void) { abort(); }
#endif

KBIT_API int32_t kbit_backend_probe(void) {
    atomic_fetch_add(&g_probe_calls, 1);
#ifdef FAKE_PROBE_ABORT
    abort();
#endif
#ifdef FAKE_PROBE_SEGV
    volatile int* volatile nowhere = (volatile int*)16; /* unmapped; volatile: a real store */
    *nowhere = 1;
#endif
#ifdef FAKE_PROBE_EXIT
    exit(FAKE_PROBE_EXIT);
#endif
#ifdef FAKE_PROBE_HANG
    for (;;) pause();
#endif
#ifdef FAKE_PROBE_REENTER
    fake_reenter(__builtin_return_address(0));
#endif
#ifdef FAKE_DESTRUCTOR_REENTER
    fake_remember_loader(__builtin_return_address(0));
#endif
#ifdef FAKE_UNDEFINED_REFERENCE
    return fake_symbol_nobody_defines;
#else
    return FAKE_PROBE;
#endif
}

#ifdef FAKE_NULL_STRINGS
KBIT_API const char* kbit_backend_name(void) { return NULL; }
KBIT_API const char* kbit_backend_info(void) { return NULL; }
KBIT_API const char* kbit_status_string(kbit_status status) { return NULL; }
KBIT_API const char* kbit_last_error_message(void) { return NULL; }
#else
KBIT_API const char* kbit_backend_name(void) { return FAKE_NAME; }

KBIT_API const char* kbit_backend_info(void) { return "fake backend " FAKE_NAME " for the loader tests"; }

KBIT_API const char* kbit_status_string(kbit_status status) {
    return status == KBIT_STATUS_SUCCESS ? "FAKE_SUCCESS" : "FAKE_FAILURE";
}

KBIT_API const char* kbit_last_error_message(void) { return t_message; }
#endif

KBIT_API kbit_status kbit_device_malloc(void** ptr, size_t bytes) {
    if (ptr == NULL) {
        snprintf(t_message, sizeof t_message, "kbit_device_malloc: ptr is NULL (fake %s)", FAKE_NAME);
        return KBIT_STATUS_INVALID_ARGUMENT;
    }
    *ptr = bytes ? malloc(bytes) : NULL;
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_device_free(void* ptr) {
    free(ptr);
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_memcpy(void* dst, const void* src, size_t bytes, int32_t kind) {
    (void)kind;
    if (bytes) memmove(dst, src, bytes);
    return KBIT_STATUS_SUCCESS;
}

KBIT_API kbit_status kbit_stream_synchronize(void* stream) {
    (void)stream;
    return KBIT_STATUS_SUCCESS;
}

/* ---- generated interface functions ------------------------------------------------------------- */

/* Writes the call's result into `out` (a kbit_status or a pointer, told apart by size). */
static __attribute__((unused)) void fake_result(const char* fn, void* out, size_t size) {
    const int32_t status = atomic_load(&g_result);
    atomic_store(&g_last_call, fn);
    if (status != 0)
        snprintf(t_message, sizeof t_message, "%s: fake %s failure (status %d)", fn, FAKE_NAME, (int)status);
    if (size == sizeof(int32_t)) {
        memcpy(out, &status, sizeof status);
    } else {
        void* p = status == 0 ? (void*)&g_probe_calls : NULL;
        memcpy(out, &p, sizeof p);
    }
}

#define KBIT_FN(minor, ret, name, params, args, variant) \
    KBIT_API ret name params {                  \
        ret r;                                  \
        fake_result(#name, &r, sizeof r);       \
        return r;                               \
    }

#ifdef FAKE_4BIT_VERSION
KBIT_API uint32_t kbit_4bit_interface_version(void) { return FAKE_4BIT_VERSION; }
#include "kbit_4bit.def"
#endif
#ifdef FAKE_8BIT_VERSION
KBIT_API uint32_t kbit_8bit_interface_version(void) { return FAKE_8BIT_VERSION; }
#include "kbit_8bit.def"
#endif
#ifdef FAKE_OPTIM8_VERSION
KBIT_API uint32_t kbit_optim8_interface_version(void) { return FAKE_OPTIM8_VERSION; }
#include "kbit_optim8.def"
#endif

#undef KBIT_FN

#ifdef FAKE_NEXT_MINOR_FN
KBIT_API kbit_status kbit_next_minor_test_fn(int32_t value) {
    kbit_status r;
    fake_result("kbit_next_minor_test_fn", &r, sizeof r);
    return r == 0 ? (kbit_status)(1000 + value) : r;
}
#endif

#endif /* FAKE_MINIMAL */
