/*
 * kbit_io.h — reading and writing bitsandbytes checkpoints (safetensors files) from C: libkbit_io.so.
 *
 * A host-only library, independent of the loader and of every backend: it memory-maps a
 * `.safetensors` file (or every shard of a sharded model directory), lists its tensors, and describes
 * each bitsandbytes-quantized layer in the layout transformers and bitsandbytes write (docs/behaviour.md
 * §11): a 4-bit NF4/FP4 weight with its absmax, quant_map and, when nested, nested_absmax,
 * nested_quant_map, nested_offset and nested_blocksize; an LLM.int8 weight with its SCB. The pointers
 * of a description can be passed to the 4-bit and 8-bit kernels (kbit_4bit.h, kbit_8bit.h) directly on
 * the CPU backend, or copied to a device first.
 *
 *     kbit_io_checkpoint* ck;
 *     if (kbit_io_open("model.safetensors", &ck) != KBIT_STATUS_SUCCESS) {
 *         fprintf(stderr, "%s\n", kbit_io_last_error_message());
 *         return 1;
 *     }
 *     const kbit_io_quant* q;
 *     if (kbit_io_quant_find(ck, "model.layers.0.mlp.down_proj", &q) == KBIT_STATUS_SUCCESS)
 *         ... q->weight, q->absmax, q->quant_map, q->blocksize, q->numel ...
 *     kbit_io_close(ck);
 *
 * Conventions (those of kbit_core.h where they apply):
 *   - Functions that can fail return kbit_status; a failure sets the thread-local message
 *     "function: message" (kbit_io_last_error_message()) and leaves every output untouched.
 *   - No function aborts, exits, throws or prints (KBIT_LOG=1 logs failures to stderr).
 *   - Everything the handle hands out (names, shapes, descriptions, tensor data) is owned by it, is
 *     read-only, and stays valid until kbit_io_close(). A handle may be used by several threads at
 *     once: after kbit_io_open() it is never modified.
 *   - Tensor data points into a read-only mapping. safetensors does not promise alignment: files
 *     written by the safetensors library keep every tensor aligned to its element size (the header is
 *     padded to 8 bytes and tensors are laid out by descending element size), but a file from another
 *     writer may not; kbit_io_quant.aligned says whether a layer's pointers may be read as their types.
 *   - Struct descriptions start with `size` (sizeof the struct in the library that filled it); later
 *     minors only append members, so check `size` before reading a member newer than your header.
 *
 * Version: kbit_io_interface_version() returns (KBIT_IO_VERSION_MAJOR << 16) | KBIT_IO_VERSION_MINOR;
 * the symbols carry the version node KBIT_IO_<major>.<minor> of the minor that added them.
 * io 1.1 adds writing: kbit_io_writer_create() ... kbit_io_writer_finish() write a `.safetensors` file
 * byte for byte as the safetensors library and kbit.checkpoint.save() write it, with the bitsandbytes
 * layers in the layout transformers reads (`kbit quantize` is built on it):
 *
 *     kbit_io_writer* w;
 *     kbit_io_quant layer = {sizeof layer};   (prefix, format, blocksize, shape, dtype, weight, absmax,
 *                                              quant_map, ... as kbit_io_quant_describe() fills them)
 *     if (kbit_io_writer_create("out.safetensors", &w) != KBIT_STATUS_SUCCESS) ...
 *     kbit_io_writer_metadata(w, "format", "pt");
 *     kbit_io_writer_add(w, "model.norm.weight", KBIT_IO_DTYPE_BF16, 1, shape, data);
 *     kbit_io_writer_add_quant(w, &layer);
 *     if (kbit_io_writer_finish(w) != KBIT_STATUS_SUCCESS)   (frees w; out.safetensors untouched)
 *         fprintf(stderr, "%s\n", kbit_io_last_error_message());
 *
 * io 1.2 adds kbit_io_writer_declare() / kbit_io_writer_declare_quant(): a writer told every tensor
 * (name, dtype, shape) before the first add writes the header at once and each add's bytes straight
 * to their place, so every byte is written once instead of going through a scratch file.
 *
 * io 1.3 adds 4-bit parameters: a bare parameter quantized under its own key (transformers v5's fused
 * MoE experts, `model.layers.0.mlp.experts.gate_up_proj` of shape [E, N, K]), described with
 * kbit_io_quant.parameter and .experts and written by the writer when .parameter is set
 * (docs/behaviour.md §11.3).
 */
#ifndef KBIT_IO_H
#define KBIT_IO_H

#include "kbit_core.h"

/** Major version of the io API declared by this header. */
#define KBIT_IO_VERSION_MAJOR 1
/** Minor version of the io API declared by this header. */
#define KBIT_IO_VERSION_MINOR 3

/* ============================================================================================== */
/* Enumerations (int32_t values; only ever appended)                                              */
/* ============================================================================================== */

/** safetensors dtype "BOOL" (one byte). */
#define KBIT_IO_DTYPE_BOOL 0
/** safetensors dtype "U8". */
#define KBIT_IO_DTYPE_U8 1
/** safetensors dtype "I8". */
#define KBIT_IO_DTYPE_I8 2
/** safetensors dtype "I16". */
#define KBIT_IO_DTYPE_I16 3
/** safetensors dtype "U16". */
#define KBIT_IO_DTYPE_U16 4
/** safetensors dtype "F16" (IEEE binary16, kbit_half). */
#define KBIT_IO_DTYPE_F16 5
/** safetensors dtype "BF16" (kbit_bf16). */
#define KBIT_IO_DTYPE_BF16 6
/** safetensors dtype "I32". */
#define KBIT_IO_DTYPE_I32 7
/** safetensors dtype "U32". */
#define KBIT_IO_DTYPE_U32 8
/** safetensors dtype "F32". */
#define KBIT_IO_DTYPE_F32 9
/** safetensors dtype "F64". */
#define KBIT_IO_DTYPE_F64 10
/** safetensors dtype "I64". */
#define KBIT_IO_DTYPE_I64 11
/** safetensors dtype "U64". */
#define KBIT_IO_DTYPE_U64 12
/** safetensors dtype "F8_E5M2" (one byte). */
#define KBIT_IO_DTYPE_F8_E5M2 13
/** safetensors dtype "F8_E4M3" (one byte). */
#define KBIT_IO_DTYPE_F8_E4M3 14

/** A 4-bit NF4 layer (quant_state key suffix bitsandbytes__nf4). */
#define KBIT_IO_FORMAT_NF4 0
/** A 4-bit FP4 layer (quant_state key suffix bitsandbytes__fp4). */
#define KBIT_IO_FORMAT_FP4 1
/** An LLM.int8 layer: int8 weight [out, in] with one float32 scale (SCB) per row. */
#define KBIT_IO_FORMAT_INT8 2

/* ============================================================================================== */
/* Types                                                                                          */
/* ============================================================================================== */

/** An open checkpoint (one file or a sharded directory); opaque, from kbit_io_open(). */
typedef struct kbit_io_checkpoint kbit_io_checkpoint;

/** A safetensors file being written; opaque, from kbit_io_writer_create() (@since io 1.1). */
typedef struct kbit_io_writer kbit_io_writer;

/** One tensor of a checkpoint (kbit_io_tensor_at(), kbit_io_tensor_find()). */
typedef struct kbit_io_tensor {
    size_t size;              /**< sizeof(kbit_io_tensor) in the library that filled it */
    const char* name;         /**< the tensor's key */
    const char* dtype_name;   /**< the safetensors dtype string ("F32", "U8" ...) */
    int32_t dtype;            /**< KBIT_IO_DTYPE_* */
    int32_t ndim;             /**< number of dimensions, 0 for a scalar */
    const int64_t* shape;     /**< `ndim` sizes (not NULL, also for a scalar) */
    uint64_t numel;           /**< product of the sizes (1 for a scalar) */
    uint64_t nbytes;          /**< byte size: numel times the dtype's size */
    const void* data;         /**< the bytes in the read-only mapping (not NULL, also when nbytes is 0) */
    uint64_t file_offset;     /**< offset of `data` in its file */
    size_t shard;             /**< index of its file (kbit_io_shard_path()) */
} kbit_io_tensor;

/**
 * One bitsandbytes-quantized layer with module prefix `prefix` (kbit_io_quant_describe()). Every
 * pointer points into the read-only mapping; members that do not apply to the format are NULL / 0.
 *
 * 4-bit (format NF4 / FP4): the weight `prefix.weight` holds numel 4-bit codes, two per byte
 * ((numel + 1) / 2 bytes, the row-major [shape[0], shape[1]] weight for a linear layer), quantized in
 * blocks of `blocksize` with `blocks` = ceil(numel / blocksize) scales:
 *   - not nested: `absmax` is `blocks` float32 scales (absmax_dtype KBIT_IO_DTYPE_F32); pass weight,
 *     absmax and quant_map to cdequantize_blockwise_<dtype>_<format>() or cgemm_4bit_*();
 *   - nested (bitsandbytes' compress_statistics): `absmax` is `blocks` uint8 codes (absmax_dtype
 *     KBIT_IO_DTYPE_U8); kbit_nested_absmax_dequantize(absmax, nested_quant_map, nested_absmax,
 *     nested_offset, out, blocks, nested_blocksize, stream) gives the float32 scales first.
 * A 4-bit parameter (io 1.3, `parameter` true) is the same with the key `prefix` itself in place of
 * `prefix.weight`: a bare parameter quantized flat, such as fused MoE experts of shape [E, N, K]
 * (`experts` = E), where expert e's codes are the weight_bytes / E bytes from e * weight_bytes / E
 * and, when N * K is a multiple of blocksize, its scales the blocks / E entries from e * blocks / E.
 * LLM.int8 (format INT8): `weight` is int8 [shape[0] = out, shape[1] = in] row-major and `scb` the
 * `shape[0]` float32 row absmax values (row i is weight[i, :] * scb[i] / 127), the B operand and its
 * row statistics for cigemmlt_* and cdequant_mm_int32_fp16() (kbit_8bit.h).
 */
typedef struct kbit_io_quant {
    size_t size;                 /**< sizeof(kbit_io_quant) in the library that filled it */
    const char* prefix;          /**< the module prefix P */
    int32_t format;              /**< KBIT_IO_FORMAT_NF4, _FP4 or _INT8 */
    int32_t blocksize;           /**< 4-bit: elements per scale (32 ... 4096); INT8: 0 */
    int32_t ndim;                /**< dimensions of the original weight (4-bit: quant_state shape) */
    const int64_t* shape;        /**< `ndim` sizes */
    uint64_t numel;              /**< element count of the original weight */
    int32_t dtype;               /**< 4-bit: original dtype as KBIT_DTYPE_FP32/FP16/BF16 (kbit_core.h),
                                      for kbit_dequantize_4bit(); INT8: -1 */
    const char* dtype_name;      /**< 4-bit: "float32", "float16" or "bfloat16"; INT8: "" */
    bool nested;                 /**< 4-bit: absmax is nested (uint8 codes); INT8: false */
    bool aligned;                /**< every pointer below is aligned to its element type */
    int32_t storage_dtype;       /**< KBIT_IO_DTYPE_* of the weight tensor (4-bit: the quant_storage,
                                      usually U8; INT8: I8) */
    const void* weight;          /**< packed codes (4-bit) or int8 values (INT8) */
    uint64_t weight_bytes;       /**< 4-bit: (numel + 1) / 2; INT8: numel */
    const void* absmax;          /**< 4-bit: `blocks` float32 or uint8 (nested) scales; INT8: NULL */
    int32_t absmax_dtype;        /**< KBIT_IO_DTYPE_F32, or KBIT_IO_DTYPE_U8 when nested; INT8: -1 */
    uint64_t blocks;             /**< 4-bit: entries of absmax, ceil(numel / blocksize); INT8: 0 */
    uint64_t absmax_bytes;       /**< 4-bit: blocks * 4, or blocks when nested */
    const float* quant_map;      /**< 4-bit: the 16-entry NF4 / FP4 table; INT8: NULL */
    const float* nested_absmax;  /**< nested: ceil(blocks / nested_blocksize) float32; else NULL */
    uint64_t nested_blocks;      /**< nested: entries of nested_absmax; else 0 */
    const float* nested_quant_map; /**< nested: the 256-entry dynamic map; else NULL */
    float nested_offset;         /**< nested: the JSON field nested_offset as float32; else 0 */
    int32_t nested_blocksize;    /**< nested: the JSON field nested_blocksize (256); else 0 */
    const float* scb;            /**< INT8: `shape[0]` float32 row absmax values (SCB); else NULL */
    const char* weight_name;     /**< the weight tensor's key: `prefix`.weight, or `prefix` for a
                                      parameter */
    /* io 1.3 (check size > offsetof(kbit_io_quant, parameter) before reading these) */
    bool parameter;              /**< 4-bit: a parameter stored under its own key `prefix` (fused
                                      experts) rather than a linear layer's `prefix`.weight; the writer
                                      reads it when `size` covers it; INT8: false */
    uint64_t experts;            /**< a 4-bit parameter of 3-D shape [E, N, K]: E (the expert
                                      count); else 0. The writer ignores it (it follows from shape) */
} kbit_io_quant;

KBIT_EXTERN_C_BEGIN

/**
 * Version of the io API this library implements.
 * @return (KBIT_IO_VERSION_MAJOR << 16) | KBIT_IO_VERSION_MINOR of the library's build.
 * @since io 1.0
 */
KBIT_API uint32_t kbit_io_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_io.def; do not edit) */

/* ---- Opening and closing [io_open] ----------------------------------------------------------- */

/**
 * Opens a checkpoint read-only: a `.safetensors` file (memory-mapped), a sharded model directory
 * holding `model.safetensors.index.json` (every shard its weight_map names is opened), such an index
 * file itself, or a directory holding `model.safetensors`. Every file is validated completely before
 * this returns: the safetensors header (length, JSON, dtypes, shapes, data_offsets in order, without
 * gaps or overlaps, covering the data exactly), and, for a directory, that the index names only files
 * inside it and that every tensor it lists is in its shard and in no other. The bitsandbytes layers
 * are checked here too, each on its own: a bad layer does not fail the open (see
 * kbit_io_quant_describe()).
 * @param path      NUL-terminated path of the file or directory.
 * @param[out] out  receives the handle; untouched on failure.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL argument, a file that cannot be
 *         opened or is not a valid checkpoint: the message names the file, the tensor and the field);
 *         KBIT_STATUS_OUT_OF_MEMORY.
 * @since io 1.0
 */
KBIT_API kbit_status kbit_io_open(const char* path, kbit_io_checkpoint** out);

/**
 * Unmaps every file of the checkpoint and frees the handle. Every pointer obtained from it (names,
 * shapes, tensor data, descriptions) becomes invalid.
 * @param checkpoint  a handle from kbit_io_open(), or NULL (does nothing).
 * @return KBIT_STATUS_SUCCESS.
 * @since io 1.0
 */
KBIT_API kbit_status kbit_io_close(kbit_io_checkpoint* checkpoint);

/* ---- Errors [io_last_error_message] ---------------------------------------------------------- */

/**
 * Sentence describing the most recent failure of a kbit_io call in the calling thread, naming the
 * function, the file, the tensor and the field, for example "kbit_io_open: model.safetensors: tensor
 * 'lm_head.weight': data_offsets [0, 96] hold 96 bytes, shape [4, 4] of F32 needs 64". Successful
 * calls leave it unchanged.
 * @return a thread-local NUL-terminated string ("" before any failure), valid until the next failing
 *         kbit_io call in this thread; never NULL.
 * @since io 1.0
 */
KBIT_API const char* kbit_io_last_error_message(void);

/* ---- Files [io_shards] ----------------------------------------------------------------------- */

/**
 * The files of the checkpoint: one for a `.safetensors` file, one per shard for a sharded directory
 * (the distinct file names of the index's weight_map, in name order, as transformers opens them).
 * kbit_io_shard_path() gives the path of shard `index` as opened (the directory joined with the
 * index's file name); kbit_io_shard_metadata() the number of entries of its `__metadata__` map and,
 * for `entry` < that number, one key and value (in key order). With `key`/`value` NULL it only counts.
 *
 * Variants:
 *
 * | function                 |
 * |--------------------------|
 * | kbit_io_shard_count()    |
 * | kbit_io_shard_path()     |
 * | kbit_io_shard_metadata() |
 *
 * @param checkpoint  an open handle.
 * @param index       0 <= index < kbit_io_shard_count().
 * @return kbit_io_shard_count(): the number of files (0 for a NULL handle); kbit_io_shard_path(): a
 *         string owned by the handle, NULL for a bad argument; kbit_io_shard_metadata():
 *         KBIT_STATUS_SUCCESS or KBIT_STATUS_INVALID_ARGUMENT (index or entry out of range).
 * @since io 1.0
 */
/** io_shards. */
KBIT_API size_t kbit_io_shard_count(const kbit_io_checkpoint* checkpoint);
/** io_shards. */
KBIT_API const char* kbit_io_shard_path(const kbit_io_checkpoint* checkpoint, size_t index);
/** io_shards. */
KBIT_API kbit_status kbit_io_shard_metadata(const kbit_io_checkpoint* checkpoint, size_t index, size_t entry,
    size_t* count, const char** key, const char** value);

/* ---- Tensors [io_tensors] -------------------------------------------------------------------- */

/**
 * The tensors of every file of the checkpoint, in name order (byte-wise), as a kbit_io_tensor each:
 * name, dtype, shape, byte size and a pointer into the read-only mapping. kbit_io_tensor_find()
 * looks a name up.
 *
 * Variants:
 *
 * | function               |
 * |------------------------|
 * | kbit_io_tensor_count() |
 * | kbit_io_tensor_at()    |
 * | kbit_io_tensor_find()  |
 *
 * @param checkpoint  an open handle.
 * @param index       0 <= index < kbit_io_tensor_count().
 * @param name        NUL-terminated tensor name.
 * @param[out] out    receives a description owned by the handle (valid until kbit_io_close());
 *                    untouched on failure.
 * @return kbit_io_tensor_count(): the number of tensors (0 for a NULL handle); the others
 *         KBIT_STATUS_SUCCESS or KBIT_STATUS_INVALID_ARGUMENT (NULL argument, index out of range, no
 *         tensor of that name).
 * @since io 1.0
 */
/** io_tensors. */
KBIT_API size_t kbit_io_tensor_count(const kbit_io_checkpoint* checkpoint);
/** io_tensors. */
KBIT_API kbit_status kbit_io_tensor_at(const kbit_io_checkpoint* checkpoint, size_t index,
    const kbit_io_tensor** out);
/** io_tensors. */
KBIT_API kbit_status kbit_io_tensor_find(const kbit_io_checkpoint* checkpoint, const char* name,
    const kbit_io_tensor** out);

/* ---- bitsandbytes layers [io_quant] ---------------------------------------------------------- */

/**
 * The bitsandbytes-quantized weights of the checkpoint: every 4-bit layer (a tensor
 * `P.weight.quant_state.bitsandbytes__<type>` gives prefix P; since io 1.3 also a tensor
 * `T.quant_state.bitsandbytes__<type>`, T not ending in `.weight`, gives the 4-bit parameter T, such
 * as fused MoE experts, described with `parameter` true and the weight under the key T), in prefix
 * order, then every LLM.int8 layer (a tensor `P.SCB` beside `P.weight`), in prefix order; the rules
 * of the Python package's
 * kbit.checkpoint.quantized_prefixes(). kbit_io_quant_describe() gives layer `index` as a
 * kbit_io_quant, checked by the rules of kbit.checkpoint.load_4bit() / load_int8() (the JSON fields,
 * the companion tensors' dtypes and element counts, the scales against shape and blocksize);
 * kbit_io_quant_find() looks a prefix up; kbit_io_quant_prefix() names layer `index` also when it
 * failed its checks (NULL for a bad argument). Each layer is checked when the checkpoint is opened, so
 * these calls only report the stored result; a layer that failed its checks returns
 * KBIT_STATUS_INVALID_ARGUMENT with the message of the check (naming file, tensor and field) and
 * leaves `out` untouched.
 *
 * Variants:
 *
 * | function                 |
 * |--------------------------|
 * | kbit_io_quant_count()    |
 * | kbit_io_quant_describe() |
 * | kbit_io_quant_find()     |
 * | kbit_io_quant_prefix()   |
 *
 * @param checkpoint  an open handle.
 * @param index       0 <= index < kbit_io_quant_count().
 * @param prefix      NUL-terminated module prefix ("model.layers.0.mlp.down_proj").
 * @param[out] out    receives a description owned by the handle (valid until kbit_io_close()).
 * @return kbit_io_quant_count(): the number of layers (0 for a NULL handle); the others
 *         KBIT_STATUS_SUCCESS or KBIT_STATUS_INVALID_ARGUMENT.
 * @since io 1.0
 */
/** io_quant. */
KBIT_API size_t kbit_io_quant_count(const kbit_io_checkpoint* checkpoint);
/** io_quant. */
KBIT_API kbit_status kbit_io_quant_describe(const kbit_io_checkpoint* checkpoint, size_t index,
    const kbit_io_quant** out);
/** io_quant. */
KBIT_API kbit_status kbit_io_quant_find(const kbit_io_checkpoint* checkpoint, const char* prefix,
    const kbit_io_quant** out);
/** io_quant. */
KBIT_API const char* kbit_io_quant_prefix(const kbit_io_checkpoint* checkpoint, size_t index);

/* ---- Names [io_names] ------------------------------------------------------------------------ */

/**
 * Names of the enumerations: kbit_io_dtype_name() of a KBIT_IO_DTYPE_* value (the safetensors
 * string: "F32", "BF16", "U8" ...), kbit_io_format_name() of a KBIT_IO_FORMAT_* value ("nf4", "fp4",
 * "int8").
 *
 * Variants:
 *
 * | function              |
 * |-----------------------|
 * | kbit_io_dtype_name()  |
 * | kbit_io_format_name() |
 *
 * @return a static string, "unknown" for other values; never NULL.
 * @since io 1.0
 */
/** io_names. */
KBIT_API const char* kbit_io_dtype_name(int32_t dtype);
/** io_names. */
KBIT_API const char* kbit_io_format_name(int32_t format);

/* ---- Writing checkpoints [io_write] ---------------------------------------------------------- */

/**
 * Writes one `.safetensors` file in exactly the layout the safetensors library (0.4+) gives it and
 * transformers / bitsandbytes read (docs/behaviour.md §11.2): the header is the compact JSON of the
 * `__metadata__` map (only when an entry was set; keys in byte order) and of every tensor, in data
 * order: by element type in the safetensors order (U64, I64, F64, F32, U32, I32, BF16, F16, U16, I16,
 * F8_E4M3, F8_E5M2, I8, U8, BOOL), then by name (byte-wise); spaces pad it to a multiple of 8 bytes,
 * and the data follows without gaps. A file the Python package writes with kbit.checkpoint.save()
 * from the same tensors and metadata is identical byte for byte (with more than one metadata entry
 * the Python writer's key order is not fixed; this one sorts them).
 *
 * kbit_io_writer_create() only prepares: it creates the temporary file in `path`'s directory (so an
 * unwritable destination fails here), without a name (O_TMPFILE) where the file system has it and
 * /proc is mounted, else as `path`.kbit-tmp-XXXXXX, and a scratch file. kbit_io_writer_metadata() sets
 * one `__metadata__` entry (a later value of a key replaces the earlier). kbit_io_writer_add() adds a
 * tensor and copies its bytes to the scratch file at once (so `data` may be freed on return, and the
 * process holds about one tensor at a time). kbit_io_writer_add_quant() adds every tensor of one
 * bitsandbytes layer described as kbit_io_quant_describe() describes it: for NF4 / FP4,
 * `P.weight` (storage_dtype, [(numel + 1) / 2 / its size, 1]), `P.weight.absmax` (F32, or U8 when
 * nested), `P.weight.quant_map` (F32 [16]), when nested `P.weight.nested_absmax` and
 * `P.weight.nested_quant_map`, and `P.weight.quant_state.bitsandbytes__nf4|fp4`: U8, the JSON text
 * Python's json.dumps gives (`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape":
 * [N, K], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0123}`, the offset
 * as Python prints the float32 value) — with `parameter` set (io 1.3, read when `size` covers it),
 * the same under `P` in place of `P.weight` (`P`, `P.absmax`, ..., `P.quant_state.bitsandbytes__nf4`);
 * for INT8, `P.weight` (I8 [shape[0], shape[1]]), `P.SCB`
 * (F32 [shape[0]]) and `P.weight_format` (U8 scalar 0). It reads the members size, prefix, format,
 * blocksize, ndim, shape, dtype (KBIT_DTYPE_*), nested, storage_dtype, weight, absmax, quant_map,
 * nested_absmax, nested_quant_map, nested_offset, nested_blocksize, scb and parameter; the counts
 * (numel, blocks, byte sizes, experts) it computes from the shape and blocksize, ignoring the members
 * of those names.
 * kbit_io_writer_finish() writes the header and the data into the temporary file, gives it the name
 * `path` (an unnamed file is first linked in through /proc/self/fd as `path`.kbit-tmp-XXXXXX; then
 * renamed, replacing a file there) and frees the writer;
 * on any failure it removes the temporary file, so `path` is either the complete new file or
 * untouched, and a process killed before finish leaves no file (where the temporary file is unnamed). kbit_io_writer_discard() removes the
 * temporary files and frees the writer without writing.
 * A failing add leaves the writer as it was (nothing of that call is added), so the caller may go on
 * or discard. A writer is used by one thread at a time.
 *
 * Variants:
 *
 * | function                   |
 * |----------------------------|
 * | kbit_io_writer_create()    |
 * | kbit_io_writer_metadata()  |
 * | kbit_io_writer_add()       |
 * | kbit_io_writer_add_quant() |
 * | kbit_io_writer_finish()    |
 * | kbit_io_writer_discard()   |
 *
 * @param path      NUL-terminated destination path; its directory must exist and be writable.
 * @param[out] out  receives the writer; untouched on failure.
 * @param writer    a writer from kbit_io_writer_create() (kbit_io_writer_discard(NULL) does nothing,
 *                  kbit_io_writer_finish(NULL) returns KBIT_STATUS_INVALID_ARGUMENT).
 * @param key, value  NUL-terminated UTF-8 strings.
 * @param name      the tensor's key: UTF-8, not `__metadata__`, not yet added.
 * @param dtype     KBIT_IO_DTYPE_* of the tensor.
 * @param ndim      number of dimensions, 0 ... 64 (0: a scalar; shape may then be NULL).
 * @param shape     `ndim` sizes >= 0.
 * @param data      the tensor's numel * dtype size bytes, host memory (may be NULL when that is 0).
 * @param layer     the layer; 4-bit: blocksize 32 ... 4096 (a power of two), dtype KBIT_DTYPE_FP32,
 *                  FP16 or BF16, storage_dtype whose size divides (numel + 1) / 2, quant_map 16 floats,
 *                  absmax `blocks` floats (or uint8 codes when nested), nested: nested_blocksize as
 *                  blocksize, nested_absmax ceil(blocks / nested_blocksize) floats, nested_quant_map
 *                  256 floats, nested_offset finite; INT8: ndim 2, weight shape[0] * shape[1] int8,
 *                  scb shape[0] floats, parameter false. No name it adds may exist already.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (a NULL or bad argument, a name added
 *         twice or not UTF-8, a path whose temporary file cannot be created, a header larger than the
 *         100 000 000 bytes safetensors reads, a write or rename that fails: the message names the
 *         function, the file, the tensor and the field);
 *         KBIT_STATUS_OUT_OF_MEMORY.
 * @since io 1.1
 */
/** io_write. */
KBIT_API kbit_status kbit_io_writer_create(const char* path, kbit_io_writer** out);
/** io_write. */
KBIT_API kbit_status kbit_io_writer_metadata(kbit_io_writer* writer, const char* key, const char* value);
/** io_write. */
KBIT_API kbit_status kbit_io_writer_add(kbit_io_writer* writer, const char* name, int32_t dtype, int32_t ndim,
    const int64_t* shape, const void* data);
/** io_write. */
KBIT_API kbit_status kbit_io_writer_add_quant(kbit_io_writer* writer, const kbit_io_quant* layer);
/** io_write. */
KBIT_API kbit_status kbit_io_writer_finish(kbit_io_writer* writer);
/** io_write. */
KBIT_API kbit_status kbit_io_writer_discard(kbit_io_writer* writer);

/* ---- Declaring the layout first [io_declare] ------------------------------------------------- */

/**
 * Lets the writer write every byte once. Without declarations a writer keeps each added tensor in a
 * scratch file and copies all of them behind the header at kbit_io_writer_finish(), because the
 * header, which holds every offset, comes first in the file. kbit_io_writer_declare() names a tensor
 * that will be added, with its dtype and shape and no data; kbit_io_writer_declare_quant() names every
 * tensor kbit_io_writer_add_quant() will add for `layer`, reading the members add_quant reads except
 * the data pointers (weight, absmax, quant_map, nested_absmax, nested_quant_map, scb). A nested
 * layer's nested_offset is part of the size of its quant_state tensor, so it must be the value the
 * add will pass (a converter learns it only by quantizing: it adds nested layers without declaring).
 *
 * Declarations come before the first add and metadata before it too. When at least one tensor was
 * declared, the first add (or kbit_io_writer_finish()) fixes the file's layout: the header is written
 * into the temporary file then, no scratch file is used, and every add writes its bytes straight to
 * their place. From then on an add must name a declared tensor not yet added, with its declared dtype
 * and shape; declarations and metadata are refused; finish fails (and writes nothing at `path`)
 * while a declared tensor has not been added. Adds may come in any order. The file is the same byte
 * for byte as the one written without declarations. A failing call leaves the writer as it was
 * (a failed add in a fixed layout may have written part of its bytes into the temporary file; they
 * are overwritten when the tensor is added, and the file is removed if it never is).
 *
 * Variants:
 *
 * | function                       |
 * |--------------------------------|
 * | kbit_io_writer_declare()       |
 * | kbit_io_writer_declare_quant() |
 *
 * @param writer  a writer from kbit_io_writer_create().
 * @param name, dtype, ndim, shape  as for kbit_io_writer_add(); the name must not be declared yet.
 * @param layer   as for kbit_io_writer_add_quant(); its data pointers are not read and may be NULL.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (a NULL or bad argument, a name declared
 *         twice, a declaration or metadata after the layout was fixed, an add of a name not declared
 *         or with another dtype or shape than declared: the message names the function, the file,
 *         the tensor and both dtypes and shapes; a declared tensor never added, at finish);
 *         KBIT_STATUS_OUT_OF_MEMORY.
 * @since io 1.2
 */
/** io_declare. */
KBIT_API kbit_status kbit_io_writer_declare(kbit_io_writer* writer, const char* name, int32_t dtype,
    int32_t ndim, const int64_t* shape);
/** io_declare. */
KBIT_API kbit_status kbit_io_writer_declare_quant(kbit_io_writer* writer, const kbit_io_quant* layer);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_IO_H */
