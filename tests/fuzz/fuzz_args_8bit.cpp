// fuzz_args_8bit: every function of abi/kbit_8bit.def with fuzzed scalars and contract-sized buffers
// (include/kbit/kbit_8bit.h); the checks are fuzz_harness.h's, the blockwise (de)quantizers
// fuzz_blockwise.h's.
#include "fuzz_blockwise.h"

using namespace kfuzz;

namespace {

bool bad_threshold(float t) { return !(t >= 0.0f); }  // negative or NaN

// cint8_vector_quant: A rows * cols fp16, out rows * cols, rowStats rows.
void int8_vector_quant(Call& c, decltype(&cint8_vector_quant) f) {
    const float threshold = c.f32("threshold");
    const int rows = c.i32("rows"), cols = c.i32("cols");
    kbit_half* A = c.buf<kbit_half>("A", Role::In, Sz(rows) * cols);
    int8_t* out = c.buf<int8_t>("out", Role::Out, Sz(rows) * cols);
    float* row_stats = c.buf<float>("rowStats", Role::Out, rows);
    void* stream = c.stream();
    const bool bad = rows < 0 || cols < 0 || int64_t{rows} * cols > INT32_MAX || bad_threshold(threshold);
    const bool empty = int64_t{rows} * cols == 0;
    c.must_fail(bad, "negative size, rows * cols > INT32_MAX, negative or NaN threshold");
    c.must_fail(!empty && (!A || !out || !row_stats), "NULL buffer with a non-empty matrix");
    c.must_succeed_untouched(!bad && empty);
    c.run([&] { return f(A, out, row_stats, threshold, rows, cols, stream); });
}

// Contexts a call may get: a live one, NULL, a destroyed one, or memory get_context() never returned.
struct Context {
    kbit_context* ptr = nullptr;
    bool live = false;
    std::unique_ptr<uint64_t[]> foreign;
    Context(Call& c) {
        switch (c.note("context_kind", c.in().u8() % 8)) {
            case 5: break;  // NULL
            case 6: {       // destroyed
                kbit_context* d = get_context();
                if (d == nullptr) c.report("get_context() returned NULL");
                if (kbit_context_destroy(d) != KBIT_STATUS_SUCCESS) c.report("kbit_context_destroy of a live context failed");
                ptr = d;
                break;
            }
            case 7:
                foreign.reset(new uint64_t[4]());
                ptr = reinterpret_cast<kbit_context*>(foreign.get());
                break;
            default:  // 0-4: live
                ptr = get_context();
                if (ptr == nullptr) c.report("get_context() returned NULL");
                live = true;
        }
    }
    ~Context() {
        if (live && kbit_context_destroy(ptr) != KBIT_STATUS_SUCCESS) fatal("kbit_context_destroy of a live context failed");
    }
};

// get_context: a live context, destroyed exactly once.
void get_context_fn(Call& c, decltype(&get_context) f) {
    kbit_context* ctx = f();
    if (ctx == nullptr) c.report("returned NULL");
    if (kbit_context_destroy(ctx) != KBIT_STATUS_SUCCESS) c.report("its context cannot be destroyed");
    if (kbit_context_destroy(ctx) == KBIT_STATUS_SUCCESS) c.report("its context can be destroyed twice");
}

// kbit_context_destroy: NULL and live contexts succeed, everything else is refused.
void context_destroy(Call& c, decltype(&kbit_context_destroy) f) {
    Context ctx(c);
    const bool live = ctx.live;
    c.must_fail(ctx.ptr != nullptr && !live, "a destroyed or foreign context");
    const kbit_status s = c.run([&] { return f(ctx.ptr); });
    if ((live || ctx.ptr == nullptr) && s != KBIT_STATUS_SUCCESS) c.report("a live or NULL context was refused");
    if (live) ctx.live = false;  // destroyed by the call
}

// cigemmlt_<variant>: A [k][lda] int8, B [n][ldb] int8, C [n][ldc] of int32 (_32) or int8, row_scale
// k floats (_8_rowscale; ignored otherwise).
template <class C, bool RowScale>
void igemmlt(Call& c, decltype(&cigemmlt_32) f) {
    Context ctx(c);
    const int m = c.i32("m"), n = c.i32("n"), k = c.i32("k");
    const int lda = c.i32("lda"), ldb = c.i32("ldb"), ldc = c.i32("ldc");
    c.limit_work(Sz(m) * n * k + Sz(n) * k);
    const int8_t* A = c.buf<int8_t>("A", Role::In, Sz(k) * lda);
    const int8_t* B = c.buf<int8_t>("B", Role::In, Sz(n) * ldb);
    C* out = c.buf<C>("C", Role::Out, Sz(n) * ldc);
    float* row_scale = RowScale ? c.buf<float>("row_scale", Role::In, k) : c.ignored<float>("row_scale");
    void* stream = c.stream();
    const bool bad = m < 0 || n < 0 || k < 0 || lda < m || ldb < m || ldc < k;
    const bool empty = n == 0 || k == 0;
    c.must_fail(!ctx.live, "NULL, destroyed or foreign context");
    c.must_fail(bad, "negative size or leading dimension too small");
    c.must_fail(!empty && (!out || (m > 0 && (!A || !B)) || (RowScale && !row_scale)), "NULL buffer");
    c.must_succeed_untouched(ctx.live && !bad && empty);
    c.run([&] { return f(ctx.ptr, m, n, k, A, B, out, row_scale, lda, ldb, ldc, stream); });
}

// cdequant_mm_int32_fp16: A rows * cols int32, rowStats rows, colStats cols, out rows * cols, bias cols.
void dequant_mm(Call& c, decltype(&cdequant_mm_int32_fp16) f) {
    const int rows = c.i32("numRows"), cols = c.i32("numCols");
    int* A = c.buf<int32_t>("A", Role::In, Sz(rows) * cols);
    float* row_stats = c.buf<float>("rowStats", Role::In, rows);
    float* col_stats = c.buf<float>("colStats", Role::In, cols);
    kbit_half* out = c.buf<kbit_half>("out", Role::Out, Sz(rows) * cols);
    kbit_half* bias = c.buf<kbit_half>("bias", Role::In, cols);
    void* stream = c.stream();
    const bool bad = rows < 0 || cols < 0 || int64_t{rows} * cols > INT32_MAX;
    const bool empty = int64_t{rows} * cols == 0;
    c.must_fail(bad, "negative size or numRows * numCols > INT32_MAX");
    c.must_fail(!empty && (!A || !row_stats || !col_stats || !out), "NULL buffer with a non-empty matrix");
    c.must_succeed_untouched(!bad && empty);
    c.run([&] { return f(A, row_stats, col_stats, out, bias, rows, cols, stream); });
}

// kbit_int8_vectorwise_quant: A rows * cols, out rows * cols, rowStats rows, outlier_cols cols.
void vectorwise_quant(Call& c, decltype(&kbit_int8_vectorwise_quant) f) {
    const float threshold = c.f32("threshold");
    const int64_t rows = c.i64("rows"), cols = c.i64("cols");
    const kbit_half* A = c.buf<kbit_half>("A", Role::In, Sz(rows) * cols);
    int8_t* out = c.buf<int8_t>("out", Role::Out, Sz(rows) * cols);
    float* row_stats = c.buf<float>("rowStats", Role::Out, rows);
    uint8_t* outlier_cols = c.buf<uint8_t>("outlier_cols", Role::Out, cols);
    void* stream = c.stream();
    const bool bad = rows < 0 || cols < 0 || bad_threshold(threshold);
    const bool empty = (Sz(rows) * cols).raw() == 0;
    const bool absurd = (Sz(rows) * cols).raw() > kMaxElements;  // may be refused even when empty
    c.must_fail(bad, "negative size, negative or NaN threshold");
    c.must_fail(!empty && (!A || !out || !row_stats), "NULL buffer with a non-empty matrix");
    c.must_fail(threshold > 0.0f && cols > 0 && !outlier_cols, "outlier_cols NULL with threshold > 0");
    // An empty matrix still clears a given outlier_cols (cols bytes).
    c.must_succeed_untouched(!bad && !absurd && empty && cols == 0);
    c.run([&] { return f(A, out, row_stats, outlier_cols, threshold, rows, cols, stream); });
}

// kbit_int8_outlier_matmul_fp16: A rows * in, W out * in, W_stats out, outlier_cols in, out rows * out
// (in/out).
void outlier_matmul(Call& c, decltype(&kbit_int8_outlier_matmul_fp16) f) {
    const int64_t rows = c.i64("rows"), outf = c.i64("out_features"), inf = c.i64("in_features");
    c.limit_work(Sz(rows) * outf * inf + Sz(outf) * inf);
    const kbit_half* A = c.buf<kbit_half>("A", Role::In, Sz(rows) * inf);
    const int8_t* W = c.buf<int8_t>("W", Role::In, Sz(outf) * inf);
    const float* W_stats = c.buf<float>("W_stats", Role::In, outf);
    const uint8_t* outlier_cols = c.buf<uint8_t>("outlier_cols", Role::In, inf);
    kbit_half* out = c.buf<kbit_half>("out", Role::InOut, Sz(rows) * outf);
    void* stream = c.stream();
    const bool bad = rows < 0 || outf < 0 || inf < 0;
    const bool empty = rows == 0 || outf == 0 || inf == 0;
    // Element counts beyond 2^62 (kbit's limit for 64-bit sizes) may be refused even when empty.
    const bool absurd = (Sz(rows) * inf).raw() > kMaxElements || (Sz(outf) * inf).raw() > kMaxElements ||
                        (Sz(rows) * outf).raw() > kMaxElements;
    c.must_fail(bad, "negative size");
    c.must_fail(!bad && !empty && (!A || !W || !W_stats || !outlier_cols || !out), "NULL buffer");
    c.must_succeed_untouched(!bad && !absurd && empty);
    c.run([&] { return f(A, W, W_stats, outlier_cols, out, rows, outf, inf, stream); });
}

Handler resolve(const Fn& fn) {
    if (Handler h = resolve_blockwise<8>(fn)) return h;
    const std::string name = fn.name;
    using Igemm = decltype(&cigemmlt_32);
    if (name == "cigemmlt_32") return bind<Igemm>(fn, igemmlt<int32_t, false>);
    if (name == "cigemmlt_8") return bind<Igemm>(fn, igemmlt<int8_t, false>);
    if (name == "cigemmlt_8_rowscale") return bind<Igemm>(fn, igemmlt<int8_t, true>);
    if (name == "cint8_vector_quant") return bind<decltype(&cint8_vector_quant)>(fn, int8_vector_quant);
    if (name == "get_context") return bind<decltype(&get_context)>(fn, get_context_fn);
    if (name == "kbit_context_destroy") return bind<decltype(&kbit_context_destroy)>(fn, context_destroy);
    if (name == "cdequant_mm_int32_fp16") return bind<decltype(&cdequant_mm_int32_fp16)>(fn, dequant_mm);
    if (name == "kbit_int8_vectorwise_quant") return bind<decltype(&kbit_int8_vectorwise_quant)>(fn, vectorwise_quant);
    if (name == "kbit_int8_outlier_matmul_fp16")
        return bind<decltype(&kbit_int8_outlier_matmul_fp16)>(fn, outlier_matmul);
    return nullptr;
}

}  // namespace

#define KBIT_FUZZ_LIST "kbit_8bit.def"
#include "fuzz_main.inc"
