/*
 * kbit_loader.h — the loader libkbit.so: finds kbit backends, checks their interface versions, and
 * hands out per-interface function tables; it also exports every interface function itself.
 *
 * Two ways to use it
 *   - Link -lkbit (or ctypes.CDLL("libkbit.so")) and call the functions of kbit.h by name. Each
 *     exported function is a trampoline that forwards to the default backend, chosen once, thread-
 *     safely, on the first call: the backend named by KBIT_BACKEND, otherwise the one with the highest
 *     kbit_backend_probe() score. kbit_backend_name() says which one it is.
 *   - Explicit selection, for a caller that wants a particular backend or several in one process:
 *     kbit_loader_open("cuda", &b), then kbit_loader_4bit_table(b)->cquantize_blockwise_fp32_nf4(...),
 *     then kbit_loader_close(b). kbit_loader_discover() lists every candidate and why any was rejected.
 *
 * Search order (never the current directory)
 *   1. an explicit path given to kbit_loader_open();
 *   2. KBIT_BACKEND: a backend name ("cpu", "cuda", a vendor's name) or a path to a backend file;
 *      when set it decides the default backend (no fallback to another one if it cannot be used);
 *   3. each absolute directory of KBIT_BACKEND_PATH (colon-separated), in order;
 *   4. the directory that contains libkbit.so itself (where `cmake --install` puts the backends).
 *   A backend named NAME is the file libkbit_NAME.so; the first one in this order wins and later files
 *   of the same name are listed as shadowed. KBIT_BACKEND and KBIT_BACKEND_PATH are read with
 *   secure_getenv(), so they are ignored in set-user-ID programs.
 *
 * Validation, before any vendor code other than the version functions and the probe runs
 *   The file's ELF header must match this process (class, machine, shared object); then it is opened
 *   with dlopen(RTLD_NOW | RTLD_LOCAL) (which runs the file's ELF constructors, as for any shared
 *   object) and its kbit_<iface>_interface_version() symbols are read.
 *   A backend must export the core interface with this loader's major. Any other interface whose major
 *   differs is rejected (the backend stays usable for the rest); one with an older minor provides only
 *   the functions of that minor; a newer minor is accepted. Only symbols defined by the file itself
 *   count. A function the backend should have but lacks becomes a loader stub that returns
 *   KBIT_STATUS_NOT_IMPLEMENTED (pointer results: NULL) and sets the thread's error message to
 *   "<function>: not implemented by backend <name> (<file>)", so no NULL pointer ever reaches a caller.
 *   Functions within one interface always come from one backend file. Finally kbit_backend_probe()
 *   runs; a score <= 0 means the backend cannot run on this machine.
 *
 * Diagnostics: KBIT_LOADER_DEBUG=1 prints every candidate, the stage it reached and why it was
 * skipped to stderr; kbit_loader_discover() returns the same records, and `kbit info` prints them.
 *
 * Errors: every function here that fails sets the thread's error message, which
 * kbit_last_error_message() of libkbit.so returns (it reports the last failure in the thread, whether
 * it came from the loader, a stub or the default backend).
 *
 * Thread safety: every function may be called from any thread. The loader keeps no global state
 * besides the default backend (chosen once) and the identities of loaded backends that its stubs
 * name; each kbit_loader_open() and kbit_loader_discover() reads the environment again.
 *
 * Versioning: the loader API has its own KBIT_LOADER_VERSION_MAJOR/MINOR and follows the rules of
 * abi/ABI.md: same major = compatible, minors only append functions, and every struct below starts
 * with its size and only ever grows at the end.
 */
#ifndef KBIT_LOADER_H
#define KBIT_LOADER_H

#include <stddef.h>

#include "kbit.h"
#include "kbit_loader_tables.h"

/* ============================================================================================== */
/* Version                                                                                        */
/* ============================================================================================== */

/** Major version of the loader API declared by this header. */
#define KBIT_LOADER_VERSION_MAJOR 1
/** Minor version of the loader API declared by this header. */
#define KBIT_LOADER_VERSION_MINOR 0

/**
 * True when `table` (a pointer to a table struct of type `type`, e.g. kbit_4bit_table) contains
 * `member`: needed only for members added after the first version of the table, when the loader
 * that filled it may be older than the header the caller was compiled with.
 */
#define KBIT_TABLE_HAS(type, table, member) \
    ((table)->size >= offsetof(type, member) + sizeof(((const type*)0)->member))

/* ============================================================================================== */
/* Constants (int32_t values; numbered explicitly and only appended)                              */
/* ============================================================================================== */

/** Interface identifier: the core interface (kbit_core.h). */
#define KBIT_INTERFACE_CORE 0
/** Interface identifier: the 4-bit interface (kbit_4bit.h). */
#define KBIT_INTERFACE_4BIT 1
/** Interface identifier: the 8-bit interface (kbit_8bit.h). */
#define KBIT_INTERFACE_8BIT 2
/** Interface identifier: the 8-bit optimizer interface (kbit_optim8.h). */
#define KBIT_INTERFACE_OPTIM8 3
/** Number of interfaces this header knows (identifiers are 0 .. KBIT_INTERFACE_COUNT - 1). */
#define KBIT_INTERFACE_COUNT 4

/** Interface state: the backend does not export the interface's version symbol. */
#define KBIT_INTERFACE_ABSENT 0
/** Interface state: same major as the loader; its table is usable. */
#define KBIT_INTERFACE_ACCEPTED 1
/** Interface state: the backend exports the interface with another major; it is not used. */
#define KBIT_INTERFACE_REJECTED 2

/** Where a candidate came from: a path or name passed to kbit_loader_open(). */
#define KBIT_SOURCE_EXPLICIT 0
/** Where a candidate came from: the KBIT_BACKEND environment variable. */
#define KBIT_SOURCE_KBIT_BACKEND 1
/** Where a candidate came from: a directory of the KBIT_BACKEND_PATH environment variable. */
#define KBIT_SOURCE_KBIT_BACKEND_PATH 2
/** Where a candidate came from: the directory that contains libkbit.so. */
#define KBIT_SOURCE_LOADER_DIRECTORY 3

/** Furthest validation stage a candidate passed: the file was found (nothing checked yet). */
#define KBIT_STAGE_FOUND 0
/** Stage: the ELF header matches this process (class, machine, shared object). */
#define KBIT_STAGE_FILE_CHECKED 1
/** Stage: dlopen(RTLD_NOW | RTLD_LOCAL) succeeded. */
#define KBIT_STAGE_OPENED 2
/** Stage: the version symbols were read and the core interface was accepted. */
#define KBIT_STAGE_VERSIONS_CHECKED 3
/** Stage: the functions were resolved (missing ones replaced by stubs). */
#define KBIT_STAGE_RESOLVED 4
/** Stage: kbit_backend_probe() was called (its score is in kbit_loader_candidate.score). */
#define KBIT_STAGE_PROBED 5

/** Verdict: the candidate passed every stage with a probe score > 0. */
#define KBIT_VERDICT_USABLE 0
/** Verdict: the candidate failed a stage (kbit_loader_candidate.reason says which and why). */
#define KBIT_VERDICT_REJECTED 1
/** Verdict: not opened, because a file of the same backend name comes earlier in the search order. */
#define KBIT_VERDICT_SHADOWED 2

/* ============================================================================================== */
/* Types                                                                                          */
/* ============================================================================================== */

/** An opened backend (opaque). From kbit_loader_open() (close it) or kbit_loader_default() (owned
 *  by the loader). */
typedef struct kbit_backend kbit_backend;

/** The result of one kbit_loader_discover() call (opaque); free it with kbit_loader_report_free(). */
typedef struct kbit_loader_report kbit_loader_report;

/**
 * What the loader found out about one interface of one candidate. Owned by the candidate's report or
 * backend; grows only at the end (check `size`).
 */
typedef struct kbit_loader_interface_record {
    /** sizeof(kbit_loader_interface_record) in the loader that filled it. */
    size_t size;
    /** KBIT_INTERFACE_* identifier. */
    int32_t interface_id;
    /** KBIT_INTERFACE_ABSENT, KBIT_INTERFACE_ACCEPTED or KBIT_INTERFACE_REJECTED. */
    int32_t state;
    /** Version the backend exports, (MAJOR << 16) | MINOR; 0 when absent or not read. */
    uint32_t version;
    /** Version of the interface this loader was built with. */
    uint32_t loader_version;
    /** Number of functions in the loader's table of this interface. */
    uint32_t function_count;
    /** Functions that the backend's minor includes but the file does not define (now stubs). */
    uint32_t missing_count;
    /** Functions newer than the backend's minor (stubs by design). */
    uint32_t newer_count;
    /** "" or a sentence: why the interface was rejected, or which functions are missing. */
    const char* message;
} kbit_loader_interface_record;

/**
 * One backend file the loader considered. Owned by its report or backend; grows only at the end.
 * kbit_loader_candidate_interface() gives its per-interface records.
 */
typedef struct kbit_loader_candidate {
    /** sizeof(kbit_loader_candidate) in the loader that filled it. */
    size_t size;
    /** Backend name: NAME for a file libkbit_NAME.so, otherwise the file name. */
    const char* name;
    /** Path of the file, as found (absolute for searched directories). */
    const char* path;
    /** KBIT_SOURCE_* value: where the candidate came from. */
    int32_t source;
    /** KBIT_STAGE_* value: the furthest stage it passed. */
    int32_t stage;
    /** KBIT_VERDICT_* value. */
    int32_t verdict;
    /** kbit_backend_probe() result; -1 when the probe did not run. */
    int32_t score;
    /** "" when usable; otherwise why it was rejected or shadowed, naming the file. */
    const char* reason;
} kbit_loader_candidate;

KBIT_EXTERN_C_BEGIN

/* ============================================================================================== */
/* Version of the loader API                                                                      */
/* ============================================================================================== */

/**
 * Version of the loader API this libkbit.so implements.
 * @return (KBIT_LOADER_VERSION_MAJOR << 16) | KBIT_LOADER_VERSION_MINOR of the loader's build.
 * @since loader 1.0
 */
KBIT_API uint32_t kbit_loader_interface_version(void);

/* ============================================================================================== */
/* Opening backends                                                                               */
/* ============================================================================================== */

/**
 * Opens and validates one backend. Each call returns a new handle, independent of the trampolines'
 * default backend and of other handles (the same file is mapped only once by the dynamic linker).
 * @param backend  host memory: NULL or "" = the default choice (KBIT_BACKEND if set, otherwise the
 *                 highest probe score of all candidates); a string starting with '/' = the absolute
 *                 path of a backend file (a relative one, containing '/' elsewhere, is refused: the
 *                 current directory is never searched); anything else = a backend name (letters,
 *                 digits, '_', '-'), looked up as libkbit_<name>.so in KBIT_BACKEND_PATH, then beside
 *                 libkbit.so.
 * @param[out] out host memory: receives the handle; set to NULL on failure.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (out is NULL, malformed name, relative
 *         path); KBIT_STATUS_NOT_SUPPORTED (not found, rejected by a validation stage, probe score
 *         <= 0, 16 other backend files that need stubs or 64 with string guards are open already,
 *         or called from a backend's probe, constructor or destructor while the loader is choosing
 *         its default: the message names the file and the reason); KBIT_STATUS_OUT_OF_MEMORY.
 * @since loader 1.0
 */
KBIT_API kbit_status kbit_loader_open(const char* backend, kbit_backend** out);

/**
 * The default backend that the exported trampolines use, chosen on the first call of this function or
 * of any trampoline (thread-safe, once per process).
 * @param[out] out host memory: receives the handle, owned by the loader (do not close it); NULL on
 *                 failure.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (out is NULL); KBIT_STATUS_NOT_SUPPORTED
 *         when no backend could be chosen (the message says why, as for kbit_loader_open()).
 * @since loader 1.0
 */
KBIT_API kbit_status kbit_loader_default(kbit_backend** out);

/**
 * Closes a handle from kbit_loader_open(); its tables and records become invalid. NULL does nothing.
 * The backend library is dlclose()d; one linked -z nodelete (the CPU backend, whose OpenMP threads
 * outlive every call) stays mapped.
 * @param backend handle from kbit_loader_open().
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT for the default backend's handle.
 * @since loader 1.0
 */
KBIT_API kbit_status kbit_loader_close(kbit_backend* backend);

/**
 * The record of an opened backend: name, file, probe score, and its interfaces through
 * kbit_loader_candidate_interface().
 * @param backend an open handle.
 * @return the record, valid while the handle is open; NULL (with a message) when backend is NULL.
 * @since loader 1.0
 */
KBIT_API const kbit_loader_candidate* kbit_loader_backend_candidate(const kbit_backend* backend);

/**
 * The core function table of an opened backend (every backend has one). Its kbit_last_error_message
 * member also reports the failures of this backend's stubs.
 * @param backend an open handle.
 * @return the table, valid while the handle is open; NULL (with a message) when backend is NULL.
 * @since loader 1.0
 */
KBIT_API const kbit_core_table* kbit_loader_core_table(const kbit_backend* backend);

/**
 * The 4-bit function table of an opened backend.
 * @param backend an open handle.
 * @return the table, valid while the handle is open; NULL (with a message naming the backend and the
 *         reason) when backend is NULL or the backend's 4-bit interface is absent or rejected.
 * @since loader 1.0
 */
KBIT_API const kbit_4bit_table* kbit_loader_4bit_table(const kbit_backend* backend);

/**
 * The 8-bit function table of an opened backend.
 * @param backend an open handle.
 * @return the table, valid while the handle is open; NULL (with a message naming the backend and the
 *         reason) when backend is NULL or the backend's 8-bit interface is absent or rejected.
 * @since loader 1.0
 */
KBIT_API const kbit_8bit_table* kbit_loader_8bit_table(const kbit_backend* backend);

/**
 * The 8-bit optimizer function table of an opened backend.
 * @param backend an open handle.
 * @return the table, valid while the handle is open; NULL (with a message naming the backend and the
 *         reason) when backend is NULL or the backend's optim8 interface is absent or rejected.
 * @since loader 1.0
 */
KBIT_API const kbit_optim8_table* kbit_loader_optim8_table(const kbit_backend* backend);

/* ============================================================================================== */
/* Discovery reports                                                                              */
/* ============================================================================================== */

/**
 * Walks the search order, validates and probes every candidate (then closes them again), and decides
 * which one would be the default. The environment is read anew on each call. With KBIT_LOADER_DEBUG=1
 * the report is also printed to stderr.
 * @param[out] out host memory: receives the report; NULL on failure.
 * @return KBIT_STATUS_SUCCESS (also when no candidate is usable: see kbit_loader_report_default());
 *         KBIT_STATUS_INVALID_ARGUMENT (out is NULL); KBIT_STATUS_OUT_OF_MEMORY.
 * @since loader 1.0
 */
KBIT_API kbit_status kbit_loader_discover(kbit_loader_report** out);

/**
 * Frees a report and everything it points to. NULL does nothing.
 * @param report from kbit_loader_discover().
 * @return KBIT_STATUS_SUCCESS.
 * @since loader 1.0
 */
KBIT_API kbit_status kbit_loader_report_free(kbit_loader_report* report);

/**
 * Number of entries of the search order the report used (KBIT_BACKEND, each directory).
 * @param report a report; NULL gives 0.
 * @return the number of entries.
 * @since loader 1.0
 */
KBIT_API size_t kbit_loader_report_search_count(const kbit_loader_report* report);

/**
 * One entry of the search order: KBIT_BACKEND's value (a name or path), or a directory searched.
 * @param report      a report.
 * @param index       0 .. kbit_loader_report_search_count() - 1.
 * @param[out] source host memory, may be NULL: receives the entry's KBIT_SOURCE_* value.
 * @return the entry, valid until the report is freed; NULL for a bad index or NULL report.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_report_search_entry(const kbit_loader_report* report, size_t index,
                                                     int32_t* source);

/**
 * Number of candidates in the report, in search order.
 * @param report a report; NULL gives 0.
 * @return the number of candidates.
 * @since loader 1.0
 */
KBIT_API size_t kbit_loader_report_candidate_count(const kbit_loader_report* report);

/**
 * One candidate of the report.
 * @param report a report.
 * @param index  0 .. kbit_loader_report_candidate_count() - 1.
 * @return the candidate, valid until the report is freed; NULL for a bad index or NULL report.
 * @since loader 1.0
 */
KBIT_API const kbit_loader_candidate* kbit_loader_report_candidate(const kbit_loader_report* report,
                                                                   size_t index);

/**
 * The candidate that would be the default backend: the one KBIT_BACKEND names if set (when usable),
 * otherwise the usable candidate with the highest probe score (the earliest in search order on ties).
 * @param report a report.
 * @return one of the report's candidates, or NULL when none qualifies (kbit_loader_report_summary()
 *         says why).
 * @since loader 1.0
 */
KBIT_API const kbit_loader_candidate* kbit_loader_report_default(const kbit_loader_report* report);

/**
 * One sentence on the default choice, e.g. "default: cpu (/usr/lib/libkbit_cpu.so), probe score 10,
 * highest of 1 usable candidate" or "no default backend: KBIT_BACKEND=cuda: ...".
 * @param report a report; NULL gives "".
 * @return a string valid until the report is freed; never NULL.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_report_summary(const kbit_loader_report* report);

/**
 * Per-interface record of a candidate (from a report or kbit_loader_backend_candidate()).
 * @param candidate a candidate record.
 * @param iface     KBIT_INTERFACE_* identifier.
 * @return the record, valid as long as the candidate; NULL for an unknown iface or NULL candidate.
 * @since loader 1.0
 */
KBIT_API const kbit_loader_interface_record* kbit_loader_candidate_interface(
    const kbit_loader_candidate* candidate, int32_t iface);

/* ============================================================================================== */
/* Names                                                                                          */
/* ============================================================================================== */

/**
 * Absolute path of this libkbit.so (its directory is the last entry of the search order).
 * @return a static string; "" if it cannot be determined.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_library_path(void);

/**
 * Short name of an interface: "core", "4bit", "8bit", "optim8".
 * @param iface KBIT_INTERFACE_* identifier.
 * @return a static string; "unknown" for other values.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_interface_name(int32_t iface);

/**
 * Name of an interface state: "absent", "accepted", "rejected".
 * @param state KBIT_INTERFACE_ABSENT, KBIT_INTERFACE_ACCEPTED or KBIT_INTERFACE_REJECTED.
 * @return a static string; "unknown" for other values.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_interface_state_name(int32_t state);

/**
 * Name of a candidate source: "explicit", "KBIT_BACKEND", "KBIT_BACKEND_PATH", "loader directory".
 * @param source KBIT_SOURCE_* value.
 * @return a static string; "unknown" for other values.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_source_name(int32_t source);

/**
 * Name of a validation stage: "found", "file checked", "opened", "versions checked", "resolved",
 * "probed".
 * @param stage KBIT_STAGE_* value.
 * @return a static string; "unknown" for other values.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_stage_name(int32_t stage);

/**
 * Name of a verdict: "usable", "rejected", "shadowed".
 * @param verdict KBIT_VERDICT_* value.
 * @return a static string; "unknown" for other values.
 * @since loader 1.0
 */
KBIT_API const char* kbit_loader_verdict_name(int32_t verdict);

KBIT_EXTERN_C_END

#endif /* KBIT_LOADER_H */
