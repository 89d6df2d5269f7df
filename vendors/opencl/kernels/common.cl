// common.cl — shared by every program of the OpenCL backend: element loads and stores of fp32, fp16
// and bf16 arrays (16-bit types as raw bits, rounded exactly as the backend kit's kbit_half.h does,
// so no device half support is needed), x86's NaN bits for dequantized results, and the absmax and
// 4-bit code helpers of kbit_formats.h. The prelude before this file defines the format tables and
// the KBIT_DTYPE_* / KBIT_QUANT_* numbers.
//
// Arrays reach kernels as (global uchar* buffer, ulong byte offset): see src/device_memory.h.
#define ARRAY(type, name) global type* name##_buf, ulong name##_off
#define AT(type, name) ((global type*)((global uchar*)name##_buf + name##_off))

uint float_bits(float f) { return as_uint(f); }
float bits_float(uint u) { return as_float(u); }

float bf16_to_float(ushort h) { return as_float((uint)h << 16); }

ushort float_to_bf16(float f) {
    const uint u = as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((u >> 16) | 0x0040u);  // NaN: quiet, truncated
    const uint rounding = 0x7FFFu + ((u >> 16) & 1u);                          // nearest, ties to even
    return (ushort)((u + rounding) >> 16);
}

float half_to_float(ushort h) {
    const uint sign = (uint)(h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1Fu;
    const uint man = h & 0x3FFu;
    if (e == 0x1Fu) return as_float(sign | 0x7F800000u | (man << 13));
    if (e != 0) return as_float(sign | ((e + 112u) << 23) | (man << 13));
    const float mag = (float)man * 0x1.0p-24f;  // subnormal: exact
    return as_float(sign | as_uint(mag));
}

ushort float_to_half(float f) {
    const uint u = as_uint(f);
    const ushort sign = (ushort)((u >> 16) & 0x8000u);
    const uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (ushort)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x477FF000u) return (ushort)(sign | 0x7C00u);
    if (a >= 0x38800000u) {
        const uint rounded = a + 0xFFFu + ((a >> 13) & 1u);
        return (ushort)(sign | ((rounded - 0x38000000u) >> 13));
    }
    if (a < 0x33000000u) return sign;
    const uint e = a >> 23;
    const uint man = (a & 0x7FFFFFu) | 0x800000u;
    const uint shift = 126u - e;
    const uint halfway = 1u << (shift - 1);
    const uint rest = man & ((1u << shift) - 1u);
    uint q = man >> shift;
    if (rest > halfway || (rest == halfway && (q & 1u))) ++q;
    return (ushort)(sign | q);
}

// Element i of an array of dtype `dt` (KBIT_DTYPE_*): the branch is the same for every work-item.
float load_elem(const global uchar* base, ulong i, int dt) {
    if (dt == KBIT_DTYPE_FP32) return ((const global float*)base)[i];
    const ushort bits = ((const global ushort*)base)[i];
    return dt == KBIT_DTYPE_FP16 ? half_to_float(bits) : bf16_to_float(bits);
}

void store_elem(global uchar* base, ulong i, int dt, float v) {
    if (dt == KBIT_DTYPE_FP32) ((global float*)base)[i] = v;
    else ((global ushort*)base)[i] = dt == KBIT_DTYPE_FP16 ? float_to_half(v) : float_to_bf16(v);
}

// x86's NaN result of a two-operand operation (behaviour §1.1): the first NaN operand, quieted, else
// the default NaN 0xFFC00000; non-NaN results pass through.
bool is_nan_bits(uint u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

float x86_nan2(float r, float a, float b) {
    if (!is_nan_bits(as_uint(r))) return r;
    if (is_nan_bits(as_uint(a))) return as_float(as_uint(a) | 0x00400000u);
    if (is_nan_bits(as_uint(b))) return as_float(as_uint(b) | 0x00400000u);
    return as_float(0xFFC00000u);
}

float mul_rn(float a, float b) { return x86_nan2(a * b, a, b); }
float add_rn(float a, float b) { return x86_nan2(a + b, a, b); }

// The absmax of a block: the largest |x| (fabs(-0.0) = +0.0; a NaN never wins the comparison), from
// absmax_start(): 0 for a short last block, else -FLT_MAX.
float absmax_fold(float acc, float x) {
    const float a = fabs(x);
    return a > acc ? a : acc;
}
float absmax_start(long valid, long blocksize) { return valid < blocksize ? 0.0f : -0x1.fffffep+127f; }

// The block's absmax from each work-item's fold `mine` (partial: one float per work-item of the
// group), returned to every work-item. The parts are |x| already and max is exact, so the order of
// the combination cannot change the result.
float group_absmax(float mine, local float* partial) {
    const int lid = get_local_id(0);
    partial[lid] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        for (int j = 1; j < (int)get_local_size(0); ++j) mine = partial[j] > mine ? partial[j] : mine;
        partial[0] = mine;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return partial[0];
}

// The 4-bit codes: the number of thresholds y exceeds (NaN exceeds none), which is the index the
// decision trees of kbit_formats.h return; FP4 maps its magnitude rank to the code and adds the sign.
uchar nf4_index(float y) {
    uchar n = 0;
    for (int t = 0; t < 15; ++t) n += y > kNf4Thresholds[t];
    return n;
}

uchar fp4_index(float y) {
    const uchar code_of_rank[8] = {0, 1, 6, 7, 4, 5, 2, 3};
    const uchar sign = y < 0.0f ? 8 : 0;
    const float a = y < 0.0f ? -y : y;
    uchar rank = 0;
    for (int t = 0; t < 7; ++t) rank += a > kFp4MagnitudeThresholds[t];
    return (uchar)(sign | code_of_rank[rank]);
}

uchar index_4bit(int qt, float y) { return qt == KBIT_QUANT_FP4 ? fp4_index(y) : nf4_index(y); }

float value_4bit(int qt, uint code) { return qt == KBIT_QUANT_FP4 ? kFp4Values[code] : kNf4Values[code]; }

uchar nibble_at(const global uchar* packed, ulong i) {
    const uchar byte = packed[i >> 1];
    return (i & 1) ? (byte & 0x0F) : (byte >> 4);
}

float sub_rn(float a, float b) { return x86_nan2(a - b, a, b); }
float div_rn(float a, float b) { return x86_nan2(a / b, a, b); }

// x rounded to the element type dt and back (fp32: unchanged).
float round_to(int dt, float x) {
    if (dt == KBIT_DTYPE_FP32) return x;
    return dt == KBIT_DTYPE_FP16 ? half_to_float(float_to_half(x)) : bf16_to_float(float_to_bf16(x));
}

// The index of the 8-bit code nearest y in the sorted 256-entry table c (kbit_code8.h): a binary
// search, then the nearer neighbour by the midpoint, ties as the reference breaks them. OpenCL 1.2
// has no generic address space, so the one body is stamped out for tables in global memory
// (code8_index) and in local memory (code8_index_local).
#define KBIT_CODE8_INDEX(name, space)                                   \
    uchar name(const space float* c, float y) {                         \
        int p = 127, lo = 0, hi = 255;                                  \
        float lv = -1.0f, hv = 1.0f;                                    \
        for (int step = 64; step >= 1; step >>= 1) {                    \
            if (y > c[p]) {                                             \
                lo = p;                                                 \
                lv = c[p];                                              \
                p += step;                                              \
            } else {                                                    \
                hi = p;                                                 \
                hv = c[p];                                              \
                p -= step;                                              \
            }                                                           \
        }                                                               \
        if (hi == 255) hv = c[255];                                     \
        if (lo == 0) lv = c[0];                                         \
        if (y > c[p]) return (uchar)(y > (hv + c[p]) * 0.5f ? hi : p);  \
        return (uchar)(y < (lv + c[p]) * 0.5f ? lo : p);                \
    }
KBIT_CODE8_INDEX(code8_index, global)
KBIT_CODE8_INDEX(code8_index_local, local)

// ---- Optimizers (optim32.cl, optim8_blockwise.cl) ---------------------------------------------------
// The per-call constants of kbit_optim_math.h (optim::Consts), computed on the host (its beta^t is a
// binary64 power, which an OpenCL device need not have) and passed by value. The layout is
// OptimConsts in src/ops_optim8.cpp, field for field; the kit's bools are ints here (a kernel argument
// may not hold a bool).
typedef struct {
    float beta1, beta2, beta3, alpha, eps, lr, wd, gnorm_scale;
    float omb1, omb2, omb3;  // 1 - beta
    float c1, c2;            // 1 - beta1^t, sqrt(1 - beta2^t)
    float step_size, eps_c2, neg_lr, decay, rc1, rc2;
    float u, su;             // the update-norm clip factor and u * step_size (1 and step_size unclipped)
    int has_wd, first_step, skip_zeros;
} OptimConsts;

// The kinds of optim::Kind.
#define KIND_ADAM 0
#define KIND_MOMENTUM 1
#define KIND_RMSPROP 2
#define KIND_LION 3
#define KIND_ADAGRAD 4
#define KIND_ADEMAMIX 5

bool two_state(int kind) { return kind == KIND_ADAM || kind == KIND_ADEMAMIX; }

// sgn with sgn(0) = sgn(NaN) = 0, and the bit tests of kbit_optim_math.h.
float sgn(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
bool finite_bits(float x) { return (as_uint(x) & 0x7F800000u) != 0x7F800000u; }
bool sign_bit(float x) { return (as_uint(x) >> 31) != 0; }
