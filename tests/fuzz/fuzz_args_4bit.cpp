// fuzz_args_4bit: every function of abi/kbit_4bit.def with fuzzed scalars and contract-sized buffers
// (include/kbit/kbit_4bit.h); the checks are fuzz_harness.h's, the blockwise (de)quantizers
// fuzz_blockwise.h's.
#include "fuzz_blockwise.h"

using namespace kfuzz;

namespace {

// cgemm_4bit_inference_naive_<dt>: A k, B m * ldb bytes, absmax ceil(2 * ldb * m / blocksize),
// datatype 16 floats, out m; n, lda, ldc unused.
template <class T>
void gemv(Call& c, kbit_status (*f)(int, int, int, T*, unsigned char*, float*, float*, T*, int, int, int, int,
                                    void*)) {
    const int m = c.i32("m"), n = c.i32("n"), k = c.i32("k");
    const int lda = c.i32("lda"), ldb = c.i32("ldb"), ldc = c.i32("ldc"), bs = c.i32("blocksize");
    c.limit_work(Sz(m) * k);
    T* A = c.buf<T>("A", Role::In, k);
    uint8_t* B = c.buf<uint8_t>("B", Role::In, Sz(m) * ldb);
    float* absmax = c.buf<float>("absmax", Role::In, ceil_div(Sz(2) * ldb * m, bs));
    float* datatype = c.buf<float>("datatype", Role::In, 16);
    T* out = c.buf<T>("out", Role::Out, m);
    void* stream = c.stream();
    const bool bad = m < 0 || k < 0 || k % 2 != 0 || int64_t{ldb} * 2 < k || !is_blocksize(bs);
    c.must_fail(bad, "negative size, odd k, ldb < k / 2 or unsupported blocksize");
    c.must_fail(m > 0 && !out, "out NULL with m > 0");
    c.must_fail(m > 0 && k > 0 && (!A || !B || !absmax || !datatype), "NULL input with m, k > 0");
    c.must_succeed_untouched(!bad && m == 0);
    c.run([&] { return f(m, n, k, A, B, absmax, datatype, out, lda, ldb, ldc, bs, stream); });
}

// cgemm_4bit_<dt>: A M * K, B N * K / 2 bytes, absmax ceil(N * K / blocksize) floats, or when nested
// (absmax_8bit given: that many codes) ceil(. / 256) floats with a 256-entry code table and one offset;
// out M * N; bias N or NULL.
template <class T>
void gemm(Call& c, kbit_status (*f)(const T*, const uint8_t*, const float*, const uint8_t*, const float*,
                                    const float*, T*, const T*, int, int, int, int, int, void*)) {
    const int M = c.i32("M"), N = c.i32("N"), K = c.i32("K"), bs = c.i32("blocksize");
    const int quant_type = c.i32("quant_type");
    const Sz blocks = ceil_div(Sz(N) * K, bs);
    c.limit_work(Sz(M) * N * K + Sz(M) * N);
    const T* A = c.buf<T>("A", Role::In, Sz(M) * K);
    const uint8_t* B = c.buf<uint8_t>("B", Role::In, Sz(N) * K / 2);
    const uint8_t* absmax_8bit = c.in().coin() ? c.buf<uint8_t>("absmax_8bit", Role::In, blocks) : nullptr;
    const bool nested = absmax_8bit != nullptr;
    const float* absmax = c.buf<float>("absmax", Role::In, nested ? ceil_div(blocks, 256) : blocks);
    const float* absmax_code = nested ? c.buf<float>("absmax_code", Role::In, 256) : c.ignored<float>("absmax_code");
    const float* absmax_offset = nested ? c.buf<float>("absmax_offset", Role::In, 1) : c.ignored<float>("absmax_offset");
    T* out = c.buf<T>("out", Role::Out, Sz(M) * N);
    const T* bias = c.buf<T>("bias", Role::In, N);
    void* stream = c.stream();
    const bool bad = M < 0 || N < 0 || K < 0 || K % 2 != 0 || !is_blocksize(bs);
    const bool work = !bad && M > 0 && N > 0;
    c.must_fail(bad, "negative size, odd K or unsupported blocksize");
    c.must_fail(work && !out, "out NULL");
    c.must_fail(work && K > 0 && (!A || !B || !absmax), "NULL input with K > 0");
    c.must_fail(work && K > 0 && nested && (!absmax_code || !absmax_offset), "nested without code or offset");
    c.must_succeed_untouched(!bad && (M == 0 || N == 0));
    c.run([&] {
        return f(A, B, absmax, absmax_8bit, absmax_code, absmax_offset, out, bias, M, N, K, bs, quant_type, stream);
    });
}

// The scale buffers of a 4-bit weight of `blocks` blocks: absmax_8bit present (by the input) makes it
// nested: `blocks` codes, ceil(blocks / 256) second-level scales, a 256-entry table and one offset.
struct Scales4 {
    const uint8_t* absmax_8bit;
    const float *absmax, *code, *offset;
    bool nested() const { return absmax_8bit != nullptr; }
};
Scales4 scale_bufs(Call& c, Sz blocks) {
    Scales4 s{};
    s.absmax_8bit = c.in().coin() ? c.buf<uint8_t>("absmax_8bit", Role::In, blocks) : nullptr;
    s.absmax = c.buf<float>("absmax", Role::In, s.nested() ? ceil_div(blocks, Sz(256)) : blocks);
    s.code = s.nested() ? c.buf<float>("absmax_code", Role::In, 256) : c.ignored<float>("absmax_code");
    s.offset = s.nested() ? c.buf<float>("absmax_offset", Role::In, 1) : c.ignored<float>("absmax_offset");
    return s;
}

// kbit_gemm_4bit_grouped: A tokens * a_rows_per_token rows of K elements of dtype, B experts * N * K / 2
// bytes and its scales, ids tokens * top_k, combine NULL or tokens * top_k floats, out tokens * top_k * N
// elements (tokens * N with combine). An id outside [0, experts) fails the call (checked before writing).
void grouped(Call& c, decltype(&kbit_gemm_4bit_grouped) f) {
    const int32_t dtype = c.selector("dtype", {KBIT_DTYPE_FP32, KBIT_DTYPE_FP16, KBIT_DTYPE_BF16});
    const int32_t qt = c.selector("quant_type", {KBIT_QUANT_FP4, KBIT_QUANT_NF4});
    const int64_t E = c.i64("experts"), N = c.i64("N"), K = c.i64("K"), bs = c.i64("blocksize");
    const int64_t tokens = c.i64("tokens"), top_k = c.i64("top_k");
    const int64_t rows = c.boolean("per_choice") ? top_k : (c.boolean("other_rows") ? c.i64("a_rows_per_token") : 1);
    const Sz pairs = Sz(tokens) * top_k;
    c.limit_work(pairs * N * K + pairs * N);
    const bool with_combine = c.boolean("combine");
    void* A = dtype_buf(c, "A", Role::In, dtype, Sz(tokens) * rows * K);
    const uint8_t* B = c.buf<uint8_t>("B", Role::In, Sz(E) * N * K / 2);
    const Scales4 sc = scale_bufs(c, ceil_div(Sz(E) * N * K, Sz(bs)));
    const int32_t* ids = c.buf<int32_t>("ids", Role::In, pairs);
    const float* combine = with_combine ? c.buf<float>("combine", Role::In, pairs) : nullptr;
    void* out = dtype_buf(c, "out", Role::Out, dtype, with_combine ? Sz(tokens) * N : pairs * N);
    void* stream = c.stream();
    constexpr int64_t kIntMax = 2147483647;
    const bool bad = !valid_dtype(dtype) || !valid_quant_type(qt) || E < 0 || N < 0 || N > kIntMax || K < 0 ||
                     K > kIntMax || K % 2 != 0 || !is_blocksize(bs) || tokens < 0 || top_k < 0 ||
                     (N * K > 0 && E > kMaxElements / (N * K)) || (top_k > 0 && tokens > kIntMax / top_k) ||
                     (rows != 1 && rows != top_k);
    const bool empty = !bad && (tokens == 0 || top_k == 0 || N == 0);
    c.must_fail(bad, "bad selector, size out of range, odd K, unsupported blocksize or a_rows_per_token");
    c.must_fail(!bad && !empty && (!ids || !out), "ids or out NULL");
    c.must_fail(!bad && !empty && K > 0 && (!A || !B || !sc.absmax), "NULL input with K > 0");
    c.must_fail(!bad && !empty && K > 0 && sc.nested() && (!sc.code || !sc.offset), "nested without code or offset");
    bool id_out_of_range = false;
    if (!bad && !empty && ids != nullptr && pairs.ok())
        for (int64_t p = 0; p < pairs.value(); ++p) id_out_of_range = id_out_of_range || ids[p] < 0 || ids[p] >= E;
    c.must_fail(id_out_of_range, "an expert id outside [0, experts)");
    c.must_succeed_untouched(empty);
    c.run([&] {
        return f(dtype, A, rows, B, sc.absmax, sc.absmax_8bit, sc.code, sc.offset, E, N, K, bs, qt, ids, tokens,
                 top_k, combine, out, stream);
    });
}

// kbit_gemm_4bit_precision: cgemm_4bit's buffers with a dtype selector and 64-bit sizes; the int8 class
// also needs K % 32 == 0, the bf16 class (4bit 1.3, the fuzzed CPU backend's minor) has the exact class's rules.
void precision(Call& c, decltype(&kbit_gemm_4bit_precision) f) {
    const int32_t prec = c.selector("precision", {KBIT_PRECISION_EXACT, KBIT_PRECISION_BF16, KBIT_PRECISION_INT8});
    const int32_t dtype = c.selector("dtype", {KBIT_DTYPE_FP32, KBIT_DTYPE_FP16, KBIT_DTYPE_BF16});
    const int64_t M = c.i64("M"), N = c.i64("N"), K = c.i64("K"), bs = c.i64("blocksize");
    const int32_t qt = c.i32("quant_type");
    c.limit_work(Sz(M) * N * K + Sz(M) * N);
    const void* A = dtype_buf(c, "A", Role::In, dtype, Sz(M) * K);
    const uint8_t* B = c.buf<uint8_t>("B", Role::In, Sz(N) * K / 2);
    const Scales4 sc = scale_bufs(c, ceil_div(Sz(N) * K, Sz(bs)));
    void* out = dtype_buf(c, "out", Role::Out, dtype, Sz(M) * N);
    const void* bias = dtype_buf(c, "bias", Role::In, dtype, Sz(N));
    void* stream = c.stream();
    constexpr int64_t kIntMax = 2147483647;
    const bool bad = (prec != KBIT_PRECISION_EXACT && prec != KBIT_PRECISION_BF16 && prec != KBIT_PRECISION_INT8) ||
                     !valid_dtype(dtype) || M < 0 ||
                     M > kIntMax || N < 0 || N > kIntMax || K < 0 || K > kIntMax || !is_blocksize(bs) || K % 2 != 0 ||
                     (prec == KBIT_PRECISION_INT8 && K % 32 != 0);
    const bool empty = !bad && (M == 0 || N == 0);
    c.must_fail(bad, "bad precision or dtype, size out of range, odd K (int8: K % 32) or unsupported blocksize");
    c.must_fail(!bad && !empty && !out, "out NULL");
    c.must_fail(!bad && !empty && K > 0 && (!A || !B || !sc.absmax), "NULL input with K > 0");
    c.must_fail(!bad && !empty && K > 0 && sc.nested() && (!sc.code || !sc.offset), "nested without code or offset");
    c.must_succeed_untouched(empty);
    c.run([&] {
        return f(prec, dtype, A, B, sc.absmax, sc.absmax_8bit, sc.code, sc.offset, out, bias, M, N, K, bs, qt, stream);
    });
}

// kbit_nested_absmax_quantize: absmax `blocks`, code 256, qabsmax `blocks`, nested_absmax
// ceil(blocks / nested_blocksize), offset 1.
void nested_quantize(Call& c, kbit_status (*f)(const float*, const float*, uint8_t*, float*, float*, int64_t,
                                               int64_t, void*)) {
    const int64_t blocks = c.i64("blocks"), nbs = c.i64("nested_blocksize");
    const float* absmax = c.buf<float>("absmax", Role::In, blocks);
    const float* code = c.buf<float>("code", Role::In, 256);
    uint8_t* qabsmax = c.buf<uint8_t>("qabsmax", Role::Out, blocks);
    float* nested = c.buf<float>("nested_absmax", Role::Out, ceil_div(blocks, nbs));
    float* offset = c.buf<float>("offset", Role::Out, 1);
    void* stream = c.stream();
    const bool bad = blocks < 0 || blocks > kMaxElements || !is_blocksize(nbs);
    c.must_fail(bad, "blocks out of range or unsupported nested_blocksize");
    c.must_fail(blocks > 0 && (!absmax || !code || !qabsmax || !nested || !offset), "NULL buffer with blocks > 0");
    c.must_succeed_untouched(!bad && blocks == 0);
    c.run([&] { return f(absmax, code, qabsmax, nested, offset, blocks, nbs, stream); });
}

// kbit_nested_absmax_dequantize: qabsmax `blocks`, code 256, nested_absmax ceil(blocks /
// nested_blocksize), absmax `blocks`.
void nested_dequantize(Call& c, kbit_status (*f)(const uint8_t*, const float*, const float*, float, float*,
                                                 int64_t, int64_t, void*)) {
    const int64_t blocks = c.i64("blocks"), nbs = c.i64("nested_blocksize");
    const float offset = c.f32("offset");
    const uint8_t* qabsmax = c.buf<uint8_t>("qabsmax", Role::In, blocks);
    const float* code = c.buf<float>("code", Role::In, 256);
    const float* nested = c.buf<float>("nested_absmax", Role::In, ceil_div(blocks, nbs));
    float* absmax = c.buf<float>("absmax", Role::Out, blocks);
    void* stream = c.stream();
    const bool bad = blocks < 0 || blocks > kMaxElements || !is_blocksize(nbs);
    c.must_fail(bad, "blocks out of range or unsupported nested_blocksize");
    c.must_fail(blocks > 0 && (!qabsmax || !code || !nested || !absmax), "NULL buffer with blocks > 0");
    c.must_succeed_untouched(!bad && blocks == 0);
    c.run([&] { return f(qabsmax, code, nested, offset, absmax, blocks, nbs, stream); });
}

// torchao's size rules: n % block_size == 0, (n / block_size) % scaler_block_size == 0, block_size even.
bool torchao_bad(int64_t n, int64_t bs, int64_t sbs) {
    if (n < 0 || n > kMaxElements || bs <= 0 || bs % 2 != 0 || sbs <= 0) return true;
    return n % bs != 0 || (n / bs) % sbs != 0;
}

// The rules both torchao functions follow: sizes torchao rejects fail, so does a NULL buffer (of
// `bufs`) with n > 0; n == 0 with valid sizes succeeds without writing.
void torchao_rules(Call& c, int64_t n, int64_t bs, int64_t sbs, std::initializer_list<const void*> bufs) {
    const bool bad = torchao_bad(n, bs, sbs);
    c.must_fail(bad, "sizes torchao rejects");
    c.must_fail(n > 0 && std::find(bufs.begin(), bufs.end(), nullptr) != bufs.end(), "NULL buffer with n > 0");
    c.must_succeed_untouched(!bad && n == 0);
}

// kbit_quantize_nf4_torchao_<dt>: w n, quantized_data n / 2, quantized_scalers n / block_size,
// quantization_factor n / block_size / scaler_block_size, scaler_mean 1.
template <class T>
void torchao_quantize(Call& c, kbit_status (*f)(const T*, uint8_t*, int8_t*, T*, T*, int64_t, int64_t, int64_t,
                                                void*)) {
    const int64_t n = c.i64("n"), bs = c.i64("block_size"), sbs = c.i64("scaler_block_size");
    const T* w = c.buf<T>("w", Role::In, n);
    uint8_t* qd = c.buf<uint8_t>("quantized_data", Role::Out, Sz(n) / 2);
    int8_t* qs = c.buf<int8_t>("quantized_scalers", Role::Out, Sz(n) / bs);
    T* qf = c.buf<T>("quantization_factor", Role::Out, Sz(n) / bs / sbs);
    T* mean = c.buf<T>("scaler_mean", Role::Out, 1);
    void* stream = c.stream();
    torchao_rules(c, n, bs, sbs, {w, qd, qs, qf, mean});
    c.run([&] { return f(w, qd, qs, qf, mean, n, bs, sbs, stream); });
}

// kbit_dequantize_nf4_torchao_<dt>: the quantizer's outputs in, out n.
template <class T>
void torchao_dequantize(Call& c, kbit_status (*f)(const uint8_t*, const int8_t*, const T*, const T*, T*, int64_t,
                                                  int64_t, int64_t, void*)) {
    const int64_t n = c.i64("n"), bs = c.i64("block_size"), sbs = c.i64("scaler_block_size");
    const uint8_t* qd = c.buf<uint8_t>("quantized_data", Role::In, Sz(n) / 2);
    const int8_t* qs = c.buf<int8_t>("quantized_scalers", Role::In, Sz(n) / bs);
    const T* qf = c.buf<T>("quantization_factor", Role::In, Sz(n) / bs / sbs);
    const T* mean = c.buf<T>("scaler_mean", Role::In, 1);
    T* out = c.buf<T>("out", Role::Out, n);
    void* stream = c.stream();
    torchao_rules(c, n, bs, sbs, {qd, qs, qf, mean, out});
    c.run([&] { return f(qd, qs, qf, mean, out, n, bs, sbs, stream); });
}

Handler resolve(const Fn& fn) {
    if (Handler h = resolve_blockwise<4>(fn)) return h;
    const std::string name = fn.name;
    auto after = [&](const char* prefix) { return name.substr(std::strlen(prefix)); };
    if (starts_with(name, "cgemm_4bit_inference_naive_"))
        return by_dtype(after("cgemm_4bit_inference_naive_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(int, int, int, T*, unsigned char*, float*, float*, T*, int, int, int, int,
                                        void*)>(fn, gemv<T>);
        });
    if (starts_with(name, "cgemm_4bit_"))
        return by_dtype(after("cgemm_4bit_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(const T*, const uint8_t*, const float*, const uint8_t*, const float*,
                                        const float*, T*, const T*, int, int, int, int, int, void*)>(fn, gemm<T>);
        });
    if (name == "kbit_gemm_4bit_grouped") return bind<decltype(&kbit_gemm_4bit_grouped)>(fn, grouped);
    if (name == "kbit_gemm_4bit_precision") return bind<decltype(&kbit_gemm_4bit_precision)>(fn, precision);
    if (name == "kbit_nested_absmax_quantize")
        return bind<decltype(&kbit_nested_absmax_quantize)>(fn, nested_quantize);
    if (name == "kbit_nested_absmax_dequantize")
        return bind<decltype(&kbit_nested_absmax_dequantize)>(fn, nested_dequantize);
    if (starts_with(name, "kbit_quantize_nf4_torchao_"))
        return by_dtype(after("kbit_quantize_nf4_torchao_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(const T*, uint8_t*, int8_t*, T*, T*, int64_t, int64_t, int64_t, void*)>(
                fn, torchao_quantize<T>);
        });
    if (starts_with(name, "kbit_dequantize_nf4_torchao_"))
        return by_dtype(after("kbit_dequantize_nf4_torchao_"), [&](auto t) {
            using T = decltype(t);
            return bind<kbit_status (*)(const uint8_t*, const int8_t*, const T*, const T*, T*, int64_t, int64_t,
                                        int64_t, void*)>(fn, torchao_dequantize<T>);
        });
    return nullptr;
}

}  // namespace

#define KBIT_FUZZ_LIST "kbit_4bit.def"
#include "fuzz_main.inc"
