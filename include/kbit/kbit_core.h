/*
 * kbit_core.h — the core sub-interface of kbit.
 *
 * kbit is the k-bit quantization kernel layer of the bitsandbytes family as a plain C ABI. Every
 * backend shared object (libkbit_cpu.so, libkbit_cuda.so, a vendor's libkbit_<name>.so) exports the
 * core interface declared here: identity, a probe score, status strings, the thread-local error
 * message and a minimal memory API so that vendor-neutral code (the conformance suite, the Python
 * package) can move data to and from the backend's device.
 *
 * ABI rules (also in abi/ABI.md):
 *   - Each sub-interface (core, 4bit, 8bit, optim8) has its own MAJOR.MINOR version, exported as
 *     `uint32_t kbit_<iface>_interface_version(void)` returning (MAJOR << 16) | MINOR.
 *   - Same major = compatible. A minor only appends functions to the interface's list (abi/kbit_<iface>.def);
 *     removing a function or changing a signature or behaviour needs a new major.
 *   - Only fixed-layout C types cross the boundary: kbit_status is int32_t, enumerations are int32_t
 *     parameters with named constants, bool is C99 _Bool (one byte), no struct is passed by value.
 *
 * Conventions shared by every function of every interface:
 *   - Pointers are memory of the backend's device: host memory for the CPU backend, device (or
 *     managed) memory for the CUDA backend. Parameters documented as "host memory" are always host.
 *   - `stream` is an opaque pointer: a cudaStream_t on CUDA (NULL = legacy default stream), ignored on
 *     the CPU.
 *   - Validation happens before any write: bad input returns KBIT_STATUS_INVALID_ARGUMENT, sets the
 *     thread's error message and leaves every output untouched.
 *   - Empty inputs: a call whose element count is 0 (with otherwise valid scalar arguments) succeeds
 *     without touching any pointer, which may then be NULL.
 *   - No function aborts, exits, throws, or prints (unless KBIT_LOG=1 asks the backend to log failures
 *     to stderr).
 */
#ifndef KBIT_CORE_H
#define KBIT_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ============================================================================================== */
/* Version                                                                                        */
/* ============================================================================================== */

/** Release version of the kbit project (library files, packages); independent of interface versions. */
#define KBIT_RELEASE_VERSION_STRING "0.1.0"

/** Major version of the core interface declared by this header. */
#define KBIT_CORE_VERSION_MAJOR 1
/** Minor version of the core interface declared by this header. */
#define KBIT_CORE_VERSION_MINOR 0

/** Packs a MAJOR.MINOR pair the way every kbit_<iface>_interface_version() returns it. */
#define KBIT_MAKE_VERSION(major, minor) ((((uint32_t)(major)) << 16) | ((uint32_t)(minor)))
/** Major part of a packed version. */
#define KBIT_VERSION_MAJOR_OF(v) ((uint32_t)(v) >> 16)
/** Minor part of a packed version. */
#define KBIT_VERSION_MINOR_OF(v) ((uint32_t)(v) & 0xFFFFu)

/* ============================================================================================== */
/* Blocksizes                                                                                     */
/* ============================================================================================== */

/** Smallest blocksize (elements per absmax) of the blockwise 4-bit and 8-bit functions. The
 *  blocksizes they accept are the powers of two from KBIT_BLOCKSIZE_MIN to KBIT_BLOCKSIZE_MAX. */
#define KBIT_BLOCKSIZE_MIN 32
/** Largest blocksize of the blockwise 4-bit and 8-bit functions (see KBIT_BLOCKSIZE_MIN); the 8-bit
 *  blockwise functions of a backend at 8bit 1.1 go up to KBIT_8BIT_BLOCKSIZE_MAX (kbit_8bit.h). */
#define KBIT_BLOCKSIZE_MAX 4096

/* ============================================================================================== */
/* Export and linkage                                                                             */
/* ============================================================================================== */

/** Marks a symbol exported from a kbit shared object. Backends build with hidden visibility. */
#if defined(_WIN32)
#  if defined(KBIT_BUILDING)
#    define KBIT_API __declspec(dllexport)
#  else
#    define KBIT_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define KBIT_API __attribute__((visibility("default")))
#else
#  define KBIT_API
#endif

#ifdef __cplusplus
#  define KBIT_EXTERN_C_BEGIN extern "C" {
#  define KBIT_EXTERN_C_END }
#else
#  define KBIT_EXTERN_C_BEGIN
#  define KBIT_EXTERN_C_END
#endif

/* ============================================================================================== */
/* Types                                                                                          */
/* ============================================================================================== */

/**
 * Result of every kbit function that can fail. 0 is success. Values are numbered explicitly and only
 * ever appended; kbit_status_string() names each one.
 */
typedef int32_t kbit_status;

/** The call succeeded. */
#define KBIT_STATUS_SUCCESS 0
/** An argument was invalid (NULL where data is needed, unsupported blocksize, negative or
 *  overflowing size, unknown enumeration value). Nothing was written. */
#define KBIT_STATUS_INVALID_ARGUMENT 1
/** The device (GPU driver, runtime, BLAS library) reported an error; the message names it. */
#define KBIT_STATUS_DEVICE_ERROR 2
/** An allocation failed. */
#define KBIT_STATUS_OUT_OF_MEMORY 3
/** The function is declared by the interface version the caller expects but the backend does not
 *  provide it (returned by the loader's stubs, which name the missing function). */
#define KBIT_STATUS_NOT_IMPLEMENTED 4
/** An unexpected internal failure (a bug); the message describes it. */
#define KBIT_STATUS_INTERNAL_ERROR 5
/** The call is valid but this backend cannot perform it here (for example an int8 GEMM shape the
 *  BLAS library rejects). Numbered 100: bitsandbytes' callers of cigemmlt_* already treat 100 as
 *  "fall back to another implementation". */
#define KBIT_STATUS_NOT_SUPPORTED 100

/** Element type selector for the kbit_-prefixed generic functions (passed as int32_t). */
#define KBIT_DTYPE_FP32 0
/** IEEE binary16 elements (kbit_half). */
#define KBIT_DTYPE_FP16 1
/** bfloat16 elements (kbit_bf16). */
#define KBIT_DTYPE_BF16 2

/** Direction of kbit_memcpy() (passed as int32_t). */
#define KBIT_MEMCPY_HOST_TO_DEVICE 1
/** Device memory to host memory. */
#define KBIT_MEMCPY_DEVICE_TO_HOST 2
/** Device memory to device memory. */
#define KBIT_MEMCPY_DEVICE_TO_DEVICE 3

/**
 * IEEE 754 binary16 value in storage form (bit pattern in `bits`). Layout-identical to CUDA's
 * `__half`, bitsandbytes' CPU `fp16_t` and a uint16_t. Only ever passed by pointer.
 */
typedef struct kbit_half {
    uint16_t bits; /**< sign, 5-bit exponent, 10-bit mantissa */
} kbit_half;

/**
 * bfloat16 value in storage form (the upper 16 bits of an IEEE binary32). Layout-identical to CUDA's
 * `__nv_bfloat16`, bitsandbytes' CPU `bf16_t` and a uint16_t. Only ever passed by pointer.
 */
typedef struct kbit_bf16 {
    uint16_t bits; /**< sign, 8-bit exponent, 7-bit mantissa */
} kbit_bf16;

KBIT_EXTERN_C_BEGIN

/* ============================================================================================== */
/* Functions                                                                                      */
/* ============================================================================================== */

/**
 * Version of the core interface this backend implements.
 * @return (MAJOR << 16) | MINOR; the loader rejects a backend whose MAJOR differs from
 *         KBIT_CORE_VERSION_MAJOR.
 * @since core 1.0
 */
KBIT_API uint32_t kbit_core_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_core.def; do not edit) */

/**
 * Side-effect-free check whether this backend can run on this machine, and how well.
 * Must not initialise devices or allocate; may query the driver for a device count.
 * @return 0 when the backend cannot run here (for example no GPU or no driver); otherwise a score,
 *         higher is preferred. The CPU backend returns 10, the CUDA backend 100 with a usable device.
 * @since core 1.0
 */
KBIT_API int32_t kbit_backend_probe(void);

/**
 * Short name of the backend, as accepted by the loader: "cpu", "cuda", or the vendor's name.
 * @return a static NUL-terminated string, never NULL.
 * @since core 1.0
 */
KBIT_API const char* kbit_backend_name(void);

/**
 * One-line human-readable description of what this backend uses here (for `kbit info`), for example
 * "x86-64 AVX2 kernels (KBIT_CPU_ISA cap: none), 2 OpenMP threads" or "NVIDIA H200, sm_90, driver 13.0".
 * @return a NUL-terminated string owned by the backend, valid until it is unloaded; never NULL.
 * @since core 1.0
 */
KBIT_API const char* kbit_backend_info(void);

/**
 * Name of a status code.
 * @param status any value; unknown values are named "KBIT_STATUS_UNKNOWN".
 * @return a static string such as "KBIT_STATUS_INVALID_ARGUMENT", never NULL.
 * @since core 1.0
 */
KBIT_API const char* kbit_status_string(kbit_status status);

/**
 * Sentence describing the most recent failure of a kbit call in the calling thread, naming the
 * function, for example "cquantize_blockwise_fp32_nf4: blocksize 48 is not one of 32, 64, 128, 256,
 * 512, 1024, 2048, 4096". Successful calls leave it unchanged.
 * @return a thread-local NUL-terminated string ("" before any failure), valid until the next failing
 *         kbit call in this thread; never NULL.
 * @since core 1.0
 */
KBIT_API const char* kbit_last_error_message(void);

/**
 * Allocates `bytes` of this backend's device memory (host memory aligned to 64 bytes on the CPU).
 * @param[out] ptr   host memory: receives the allocation; untouched on failure.
 * @param bytes      size in bytes; 0 stores NULL in *ptr and succeeds.
 * @return KBIT_STATUS_SUCCESS, KBIT_STATUS_INVALID_ARGUMENT (ptr NULL), KBIT_STATUS_OUT_OF_MEMORY,
 *         KBIT_STATUS_DEVICE_ERROR.
 * @since core 1.0
 */
KBIT_API kbit_status kbit_device_malloc(void** ptr, size_t bytes);

/**
 * Frees memory from kbit_device_malloc(). NULL is accepted and does nothing.
 * @param ptr device memory from kbit_device_malloc() of this backend.
 * @return KBIT_STATUS_SUCCESS or KBIT_STATUS_DEVICE_ERROR.
 * @since core 1.0
 */
KBIT_API kbit_status kbit_device_free(void* ptr);

/**
 * Copies `bytes` between host and device memory, synchronously with respect to the host.
 * @param dst    destination (device or host memory according to `kind`).
 * @param src    source (device or host memory according to `kind`).
 * @param bytes  number of bytes; 0 does nothing.
 * @param kind   KBIT_MEMCPY_HOST_TO_DEVICE, KBIT_MEMCPY_DEVICE_TO_HOST or KBIT_MEMCPY_DEVICE_TO_DEVICE.
 * @return KBIT_STATUS_SUCCESS, KBIT_STATUS_INVALID_ARGUMENT (NULL pointer with bytes > 0, unknown
 *         kind), KBIT_STATUS_DEVICE_ERROR.
 * @since core 1.0
 */
KBIT_API kbit_status kbit_memcpy(void* dst, const void* src, size_t bytes, int32_t kind);

/**
 * Waits until all work queued on `stream` has finished (no-op on the CPU), then reports the first error
 * that calls given this stream handle found on the device after they returned (an expert id out of range
 * in kbit_gemm_4bit_grouped), once (behaviour.md §10.6).
 * @param stream opaque stream handle; NULL = the legacy default stream.
 * @return KBIT_STATUS_SUCCESS, the deferred error's status (KBIT_STATUS_INVALID_ARGUMENT, with its
 *         message), or KBIT_STATUS_DEVICE_ERROR.
 * @since core 1.0
 */
KBIT_API kbit_status kbit_stream_synchronize(void* stream);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_CORE_H */
