// fuzz_harness.h — what the fuzz_args_<iface> targets share: decoding scalars from the fuzz input
// (biased towards boundaries), buffers of exactly the size the documented contract gives for those
// scalars, and the checks after every call:
//   - the status is one of the defined KBIT_STATUS_* values;
//   - a failed call left every output (and in/out) buffer byte for byte as it was, and set a
//     kbit_last_error_message() that starts with the function's name;
//   - input buffers are never modified;
//   - calls the documented contract rejects (negative sizes, unsupported blocksizes, NULL required
//     pointers, unknown selectors: Call::must_fail) did fail, and empty calls with valid scalars
//     (Call::must_succeed_untouched) succeeded without writing;
//   - ASan/UBSan (the backend's sources are compiled with them) report nothing.
// A violation prints the function, its scalars and the buffer, then aborts (libFuzzer saves the input).
// KBIT_FUZZ_VERBOSE=1 prints every call before it runs (to see the call behind a sanitizer's report when
// reproducing a saved input).
//
// Buffers. Each pointer argument is decided by one input byte: NULL (1 in 8; an input that has run out
// reads zeros, which give buffers and no overlaps, so short inputs make valid calls), or an allocation of
// exactly the contract's byte count, optionally starting a few elements into a larger block (the ABI
// requires only element alignment) but always ending at the allocation's end, so ASan flags the first
// byte beyond the contract. Where the scalars make the contract meaningless (negative sizes, division by
// a non-positive blocksize) the buffer is kSmallBytes: a correct validator rejects such calls before
// touching memory. Where the contract exceeds kCapBytes the pointer is NULL, and so are the outputs of
// a call whose work exceeds kMaxWork (Call::limit_work).
//
// Functions are taken from the interface's abi/kbit_<iface>.def (the KBIT_FN X-macro), so every
// function is fuzzed; each target's resolve() maps a name to its family's handler and checks the
// function's type against the family's signature. A function no family claims stops the target at
// start-up ("no fuzz handler for ..."), so a new .def entry cannot go unfuzzed silently.
#pragma once

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <typeindex>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "kbit/kbit.h"

// The harness's own loops (filling, comparing) need no coverage feedback: they would only slow the
// fuzzer down with comparison traces.
#define KFUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))

namespace kfuzz {

// Largest buffer one pointer gets: 8 MiB reaches the non-temporal store paths (outputs of 4 MiB and
// more in the 8-bit, 8 MiB in the 4-bit dequantizers).
constexpr int64_t kCapBytes = int64_t{8} << 20;
constexpr int64_t kSmallBytes = 16;               // a pointer whose contract size is undefined
// Largest amount of work (multiply-adds, element updates) a call may do: beyond it the outputs are
// NULL, so the call only exercises the checks (a GEMM within the buffer cap can take seconds).
constexpr int64_t kMaxWork = int64_t{1} << 24;

[[noreturn]] inline void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("fuzz: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::fflush(stderr);
    std::abort();
}

// ---- input decoding ------------------------------------------------------------------------------

// Boundary values every integer scalar may take (the 64-bit ones add kSpecial64).
constexpr int64_t kSpecial32[] = {
    0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513,
    1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 16384, 32768, 46340, 46341, 65535,
    65536, 65537, 1 << 20, (1 << 20) + 1, 1 << 21, (1 << 21) + 64, 1 << 22, 1 << 24, 1 << 30, INT32_MAX - 1, INT32_MAX, -1, -2, -3, -32, -64, -256,
    -4096, INT32_MIN + 1, INT32_MIN, 6, 10, 100};
constexpr int64_t kSpecial64[] = {int64_t{1} << 31,
                                  (int64_t{1} << 31) + 1,
                                  int64_t{1} << 32,
                                  (int64_t{1} << 32) + 1,
                                  3037000499,
                                  3037000500,
                                  int64_t{1} << 40,
                                  int64_t{1} << 48,
                                  int64_t{1} << 61,
                                  (int64_t{1} << 62) - 1,
                                  int64_t{1} << 62,
                                  (int64_t{1} << 62) + 1,
                                  (int64_t{1} << 62) + 4096,
                                  INT64_MAX - 1,
                                  INT64_MAX,
                                  -(int64_t{1} << 62),
                                  -(int64_t{1} << 32),
                                  INT64_MIN + 1,
                                  INT64_MIN};

class Reader {
public:
    Reader(const uint8_t* data, size_t size) : d_(data), n_(size) {}
    uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
    uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
    uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
    uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
    bool coin() { return (u8() & 1) != 0; }
    size_t left() const { return n_ - i_; }

    // One selector byte: a boundary value, a small count, or raw bits.
    int64_t integer(bool wide) {
        const uint8_t b = u8();
        constexpr size_t n32 = sizeof kSpecial32 / sizeof kSpecial32[0];
        constexpr size_t n64 = sizeof kSpecial64 / sizeof kSpecial64[0];
        if (b < 112) return kSpecial32[b % n32];
        if (b < 128) return wide ? kSpecial64[b % n64] : kSpecial32[b % n32];
        if (b < 224) return b - 128;                                     // 0 ... 95
        if (b < 232) return static_cast<int64_t>(u8()) * 32 + (b & 3) - 1;  // near multiples of 32
        if (b < 240) return static_cast<int16_t>(u16());
        if (!wide) return static_cast<int32_t>(u32());
        return static_cast<int64_t>(u64());
    }
    int32_t i32() { return static_cast<int32_t>(integer(false)); }
    int64_t i64() { return integer(true); }
    size_t size() {
        const uint8_t b = u8();
        switch (b & 15) {
            case 0: return SIZE_MAX;
            case 1: return SIZE_MAX - 63;
            case 2: return SIZE_MAX - 64;
            case 3: return size_t{1} << 62;
            case 4: return size_t{1} << 63;
            case 5: return static_cast<size_t>(u64());
            default: return static_cast<size_t>(std::max<int64_t>(0, integer(false)));
        }
    }
    float f32() {
        static const float kSpecial[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 0.9f, 0.99f, 0.999f, 0.1f, 2.0f, 6.0f, 127.0f,
                                         1e-8f, 1e-6f, 1e-3f, 1e30f, 65504.0f, 65520.0f, FLT_MAX, -FLT_MAX, FLT_MIN,
                                         std::numeric_limits<float>::denorm_min(), -6.0f, 0.02f,
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(),
                                         std::numeric_limits<float>::quiet_NaN(),
                                         -std::numeric_limits<float>::quiet_NaN()};
        constexpr size_t n = sizeof kSpecial / sizeof kSpecial[0];
        const uint8_t b = u8();
        if (b < 200) return kSpecial[b % n];
        const uint32_t bits = u32();
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }

private:
    const uint8_t* d_;
    size_t n_;
    size_t i_ = 0;
};

// ---- sizes ---------------------------------------------------------------------------------------

// A byte or element count computed from fuzzed scalars: undefined (a negative size, a division by a
// non-positive value) or a non-negative value, saturated far above any cap.
class Sz {
public:
    static constexpr __int128 kHuge = static_cast<__int128>(1) << 100;
    Sz(int64_t v) : v_(v), ok_(v >= 0) {}  // NOLINT: counts convert implicitly
    static Sz undefined() { Sz s(0); s.ok_ = false; return s; }
    bool ok() const { return ok_; }
    __int128 raw() const { return v_; }
    bool fits(int64_t cap) const { return ok_ && v_ <= cap; }
    int64_t value() const { return static_cast<int64_t>(v_); }

    // Operands are >= 0 and <= kHuge when defined, so no operation below overflows __int128.
    friend Sz operator*(Sz a, Sz b) {
        if (!a.ok_ || !b.ok_) return undefined();
        return make(b.v_ != 0 && a.v_ > kHuge / b.v_ ? kHuge : a.v_ * b.v_);
    }
    friend Sz operator+(Sz a, Sz b) { return a.ok_ && b.ok_ ? make(a.v_ + b.v_) : undefined(); }
    friend Sz operator-(Sz a, Sz b) { return a.ok_ && b.ok_ ? make(a.v_ - b.v_) : undefined(); }
    friend Sz operator/(Sz a, Sz b) { return a.ok_ && b.ok_ && b.v_ > 0 ? make(a.v_ / b.v_) : undefined(); }

private:
    static Sz make(__int128 v) {  // negative: undefined; beyond kHuge: kHuge
        Sz s(0);
        s.ok_ = v >= 0;
        s.v_ = v > kHuge ? kHuge : v;
        return s;
    }
    __int128 v_;
    bool ok_;
};

inline Sz ceil_div(Sz a, Sz b) { return (a + b - Sz(1)) / b; }  // undefined unless b > 0

// ---- buffers -------------------------------------------------------------------------------------

enum class Role { In, Out, InOut };
// What an element is, for filling in-buffers with values of every class (NaN, inf, subnormal ...).
enum class Elem { U8, I8, I32, F32, F16, BF16 };

template <class T> constexpr Elem elem_of() { return Elem::U8; }  // bytes, pointers
template <> constexpr Elem elem_of<uint8_t>() { return Elem::U8; }
template <> constexpr Elem elem_of<int8_t>() { return Elem::I8; }
template <> constexpr Elem elem_of<int32_t>() { return Elem::I32; }
template <> constexpr Elem elem_of<float>() { return Elem::F32; }
template <> constexpr Elem elem_of<kbit_half>() { return Elem::F16; }
template <> constexpr Elem elem_of<kbit_bf16>() { return Elem::BF16; }

template <class T> inline const char* type_name();
template <> inline const char* type_name<float>() { return "fp32"; }
template <> inline const char* type_name<kbit_half>() { return "fp16"; }
template <> inline const char* type_name<kbit_bf16>() { return "bf16"; }

struct Buffer {
    std::string name;
    Role role;
    std::unique_ptr<uint8_t[]> block;  // the allocation; ptr..ptr+bytes is its end
    uint8_t* ptr = nullptr;
    int64_t bytes = 0;
    std::vector<uint8_t> before;  // contents before the call
};

// Contents of a 256-entry code table or a 16-entry LUT.
enum class Table { Any, Ascending };

class Call {
public:
    Call(Reader& r, const char* fn) : r_(r), fn_(fn) {
        seed_ = r_.u64() | 1;
        fill_mode_ = r_.u8();
    }
    Reader& in() { return r_; }
    const char* fn() const { return fn_; }

    // Scalars, recorded for the report.
    int32_t i32(const char* name) { return note(name, r_.i32()); }
    int64_t i64(const char* name) { return note(name, r_.i64()); }
    size_t size(const char* name) {
        const size_t v = r_.size();
        log_ += std::string(" ") + name + "=" + std::to_string(v);
        return v;
    }
    float f32(const char* name) {
        const float v = r_.f32();
        char s[64];
        std::snprintf(s, sizeof s, " %s=%a", name, static_cast<double>(v));
        log_ += s;
        return v;
    }
    bool boolean(const char* name) { return note(name, r_.coin()) != 0; }
    // An int32 selector (dtype, quant_type, kind): mostly a valid value, sometimes any int.
    int32_t selector(const char* name, std::initializer_list<int32_t> valid) {
        const uint8_t b = r_.u8();
        int32_t v = b < 224 ? *(valid.begin() + b % valid.size()) : r_.i32();
        return note(name, v);
    }
    void* stream() {
        const bool bogus = r_.coin();
        log_ += bogus ? " stream=0x10" : " stream=NULL";
        return bogus ? reinterpret_cast<void*>(uintptr_t{0x10}) : nullptr;  // opaque: never dereferenced
    }

    // A buffer of `count` elements of T for the contract's role; NULL by choice of the input, when the
    // count exceeds the cap, or for any count when `allow` is false.
    template <class T>
    T* buf(const char* name, Role role, Sz count, Table table = Table::Any) {
        const uint8_t choice = r_.u8();
        const Sz bytes = count * Sz(sizeof(T));
        if ((choice & 7) == 7 || (bytes.ok() && !bytes.fits(kCapBytes)) || (over_work_ && role != Role::In)) {
            log_ += std::string(" ") + name + (over_work_ && role != Role::In ? "=NULL (work cap)" : "=NULL");
            return nullptr;
        }
        const int64_t n = bytes.ok() ? bytes.value() : kSmallBytes;
        const int64_t offset = static_cast<int64_t>(sizeof(T)) * ((choice >> 3) & 3);
        Buffer b;
        b.name = name;
        b.role = role;
        b.block.reset(new uint8_t[static_cast<size_t>(offset + n)]);
        b.ptr = b.block.get() + offset;
        b.bytes = n;
        log_ += std::string(" ") + name + "[" + std::to_string(n) + (bytes.ok() ? "" : " (undefined size)") +
                (offset ? ", +" + std::to_string(offset) : "") + "]";
        if (role == Role::Out) std::memset(b.ptr, 0xA5, static_cast<size_t>(n));
        else fill(b.ptr, n, elem_of<T>(), table);
        T* p = reinterpret_cast<T*>(b.ptr);
        bufs_.push_back(std::move(b));
        return p;
    }
    // A pointer the function ignores by contract: NULL or a tiny in-buffer that must stay unread... and
    // unwritten (ASan flags a read beyond its 4 bytes).
    template <class T>
    T* ignored(const char* name) {
        return buf<T>(name, Role::In, Sz(r_.coin() ? 0 : 1));
    }

    // Sometimes (1 in 16, by the input) moves output pointer `p` into the non-empty buffer `over` (at an
    // element-aligned offset from the input): ABI.md's aliasing rule, which the blockwise (de)quantizers
    // check, so such a call must fail and leave both untouched. `p` keeps its own contract size, so a
    // call wrongly accepted may also run past `over`'s end (ASan).
    template <class T>
    void maybe_overlap(T*& p, const char* name, const void* over, const char* over_name) {
        const uint8_t b = r_.u8();
        if (b % 16 != 15 || p == nullptr || over == nullptr) return;
        const Buffer* target = nullptr;
        for (const Buffer& buf : bufs_)
            if (buf.ptr == over) target = &buf;
        if (target == nullptr || target->bytes == 0) return;
        uintptr_t at = reinterpret_cast<uintptr_t>(target->ptr) + r_.u16() % static_cast<uint64_t>(target->bytes);
        constexpr size_t align = alignof(std::conditional_t<std::is_void<T>::value, float, T>);  // void*: fp32/16-bit
        at -= at % align;
        if (at < reinterpret_cast<uintptr_t>(target->ptr)) at += align;
        if (at >= reinterpret_cast<uintptr_t>(target->ptr) + static_cast<uint64_t>(target->bytes)) return;
        p = reinterpret_cast<T*>(at);
        log_ += std::string(" ") + name + "=inside " + over_name + "+" +
                std::to_string(at - reinterpret_cast<uintptr_t>(target->ptr));
        must_fail(true, "an output overlaps another buffer");
    }

    // The work the call's scalars ask for (see kMaxWork); call before making the buffers.
    void limit_work(Sz work) { over_work_ = work.ok() && !work.fits(kMaxWork); }

    // The contract says the call is invalid: it must fail.
    void must_fail(bool cond, const char* why) {
        if (cond && fail_reason_ == nullptr) fail_reason_ = why;
    }
    // The contract says the call is empty and valid: success, nothing written.
    void must_succeed_untouched(bool cond) { empty_ = empty_ || cond; }

    // Runs the call (after every buffer is made) and checks the outcome.
    template <class F>
    kbit_status run(F&& call) {
        for (Buffer& b : bufs_) b.before.assign(b.ptr, b.ptr + b.bytes);
        static const bool verbose = std::getenv("KBIT_FUZZ_VERBOSE") != nullptr;
        if (verbose) std::fprintf(stderr, "fuzz: calling %s:%s\n", fn_, log_.c_str());
        const kbit_status s = call();
        check(s);
        return s;
    }

    void report(const char* what) const {
        fatal("%s: %s\n  call:%s", fn_, what, log_.c_str());
    }
    template <class T>
    T note(const char* name, T v) {
        log_ += std::string(" ") + name + "=" + std::to_string(v);
        return v;
    }

private:
    KFUZZ_NO_COVERAGE uint64_t next() {  // xorshift64*
        seed_ ^= seed_ >> 12;
        seed_ ^= seed_ << 25;
        seed_ ^= seed_ >> 27;
        return seed_ * 2685821657736338717ull;
    }
    KFUZZ_NO_COVERAGE static uint16_t f16_from_float(float f) {  // truncating: any fp16 bit pattern is valid input
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        const uint32_t sign = (u >> 16) & 0x8000u;
        const int e = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
        if (e <= 0) return static_cast<uint16_t>(sign);
        if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
        return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e) << 10) | ((u >> 13) & 0x3FFu));
    }
    KFUZZ_NO_COVERAGE float nice() {  // a modest float, sometimes a special one
        const uint64_t x = next();
        if ((x & 63) == 0) return r_special(x >> 8);
        return (static_cast<float>(static_cast<int32_t>(x >> 32)) / 2147483648.0f) * 4.0f;
    }
    static float r_special(uint64_t x) {
        static const float k[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                  FLT_MAX, std::numeric_limits<float>::denorm_min(), 1e-30f};
        return k[x % (sizeof k / sizeof k[0])];
    }
    // Large buffers repeat their first kTile bytes: the contents matter less than the sizes, and a
    // few MiB of generated values per call would dominate the time per input.
    static constexpr int64_t kTile = int64_t{1} << 16;
    KFUZZ_NO_COVERAGE void fill(uint8_t* p, int64_t n, Elem e, Table table) {
        if (n > kTile && table == Table::Any) {
            fill_values(p, kTile, e, table);
            for (int64_t at = kTile; at < n; at += kTile)
                std::memcpy(p + at, p, static_cast<size_t>(std::min(kTile, n - at)));
            return;
        }
        fill_values(p, n, e, table);
    }
    KFUZZ_NO_COVERAGE void fill_values(uint8_t* p, int64_t n, Elem e, Table table) {
        const int mode = fill_mode_ & 3;
        if (mode == 0 && table == Table::Any) {
            std::memset(p, 0, static_cast<size_t>(n));
            return;
        }
        const bool raw = mode == 1;
        switch (e) {
            case Elem::F32: {
                const int64_t count = n / 4;
                for (int64_t i = 0; i < count; ++i) {
                    float f;
                    if (raw && table == Table::Any) {
                        const uint32_t bits = static_cast<uint32_t>(next());
                        std::memcpy(&f, &bits, sizeof f);
                    } else {
                        f = nice();
                        if (table == Table::Ascending && std::isnan(f)) f = 0.0f;
                    }
                    std::memcpy(p + 4 * i, &f, 4);
                }
                if (table == Table::Ascending && count > 0) {
                    std::vector<float> v(static_cast<size_t>(count));
                    std::memcpy(v.data(), p, static_cast<size_t>(count) * 4);
                    std::sort(v.begin(), v.end());
                    std::memcpy(p, v.data(), static_cast<size_t>(count) * 4);
                }
                return;
            }
            case Elem::F16:
            case Elem::BF16:
                for (int64_t i = 0; i + 1 < n; i += 2) {
                    uint16_t h;
                    if (raw) {
                        h = static_cast<uint16_t>(next());
                    } else {
                        const float f = nice();
                        uint32_t u;
                        std::memcpy(&u, &f, sizeof u);
                        h = e == Elem::BF16 ? static_cast<uint16_t>(u >> 16) : f16_from_float(f);
                    }
                    std::memcpy(p + i, &h, 2);
                }
                return;
            case Elem::I32:
                for (int64_t i = 0; i + 3 < n; i += 4) {
                    const uint64_t x = next();
                    const int32_t v = raw ? static_cast<int32_t>(x) : static_cast<int32_t>(x % 65536) - 32768;
                    std::memcpy(p + i, &v, 4);
                }
                return;
            default:
                // Any bytes, or only 0/1 (outlier flags, codes next to the zero code).
                for (int64_t i = 0; i < n; i += 8) {
                    uint64_t x = next();
                    if (!raw && (fill_mode_ & 4) == 0) x &= 0x0101010101010101ull;
                    std::memcpy(p + i, &x, static_cast<size_t>(std::min<int64_t>(8, n - i)));
                }
                return;
        }
    }

    KFUZZ_NO_COVERAGE void check(kbit_status s) {
        switch (s) {
            case KBIT_STATUS_SUCCESS:
            case KBIT_STATUS_INVALID_ARGUMENT:
            case KBIT_STATUS_DEVICE_ERROR:
            case KBIT_STATUS_OUT_OF_MEMORY:
            case KBIT_STATUS_NOT_IMPLEMENTED:
            case KBIT_STATUS_INTERNAL_ERROR:
            case KBIT_STATUS_NOT_SUPPORTED: break;
            default: report(("returned undefined status " + std::to_string(s)).c_str());
        }
        for (const Buffer& b : bufs_) {
            const bool must_keep = b.role == Role::In || s != KBIT_STATUS_SUCCESS || empty_;
            if (!must_keep || b.bytes == 0 || std::memcmp(b.before.data(), b.ptr, static_cast<size_t>(b.bytes)) == 0)
                continue;
            int64_t at = 0;
            while (b.before[static_cast<size_t>(at)] == b.ptr[at]) ++at;
            std::string what = (b.role == Role::In ? "modified its input " : "wrote ") + b.name + " (byte " +
                               std::to_string(at) + " of " + std::to_string(b.bytes) + ")";
            what += b.role == Role::In ? "" : s != KBIT_STATUS_SUCCESS ? " but returned " + std::string(kbit_status_string(s))
                                                                       : " in a call with nothing to do";
            report(what.c_str());
        }
        if (s != KBIT_STATUS_SUCCESS) {
            const char* msg = kbit_last_error_message();
            const size_t len = std::strlen(fn_);
            if (msg == nullptr || std::strncmp(msg, fn_, len) != 0 || msg[len] != ':')
                report(("failed with a message that does not name it: \"" + std::string(msg ? msg : "(null)") + "\"")
                           .c_str());
        }
        if (fail_reason_ != nullptr && s == KBIT_STATUS_SUCCESS)
            report(("succeeded although the contract rejects the call: " + std::string(fail_reason_)).c_str());
        if (empty_ && s != KBIT_STATUS_SUCCESS)
            report(("an empty valid call returned " + std::string(kbit_status_string(s)) + ": " +
                    kbit_last_error_message())
                       .c_str());
    }

    Reader& r_;
    const char* fn_;
    uint64_t seed_;
    uint8_t fill_mode_;
    std::vector<Buffer> bufs_;
    std::string log_;
    const char* fail_reason_ = nullptr;
    bool empty_ = false;
    bool over_work_ = false;
};

// ---- the function list ---------------------------------------------------------------------------

struct Fn {
    const char* name;
    void (*addr)();
    std::type_index type;
};
#define KBIT_FUZZ_FN_ENTRY(since, ret, name, params, args, variant) \
    kfuzz::Fn{#name, reinterpret_cast<void (*)()>(&name), std::type_index(typeid(decltype(&name)))},

using Handler = std::function<void(Call&)>;

// The handler of `fn` for a family with signature Sig; stops the target when the types differ.
template <class Sig, class H>
Handler bind(const Fn& fn, H handler) {
    if (fn.type != std::type_index(typeid(Sig)))
        fatal("%s: its type in the .def list is not the one its fuzz family (%s) expects: update the harness",
              fn.name, typeid(Sig).name());
    const Sig f = reinterpret_cast<Sig>(fn.addr);
    return [f, handler](Call& c) { handler(c, f); };
}

inline bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
inline bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Calls make(T{}) for the element type named by `dt` ("fp32"/"32", "fp16"/"16", "bf16").
template <class F>
Handler by_dtype(const std::string& dt, F make) {
    if (dt == "fp32" || dt == "32") return make(float{});
    if (dt == "fp16" || dt == "16") return make(kbit_half{});
    if (dt == "bf16") return make(kbit_bf16{});
    return nullptr;
}

constexpr bool is_blocksize(int64_t b) {
    return b == 32 || b == 64 || b == 128 || b == 256 || b == 512 || b == 1024 || b == 2048 || b == 4096;
}
// The 8-bit blockwise blocksizes of the CPU backend, which implements 8bit 1.1 (adds 8192 and 16384).
constexpr bool is_blocksize_8bit(int64_t b) { return is_blocksize(b) || b == 8192 || b == 16384; }

// The largest element count the kbit_ functions with 64-bit sizes take (2^62).
constexpr int64_t kMaxElements = int64_t{1} << 62;

inline bool valid_dtype(int32_t d) { return d == KBIT_DTYPE_FP32 || d == KBIT_DTYPE_FP16 || d == KBIT_DTYPE_BF16; }

// A buffer of n elements of the dtype a kbit_ function's selector names (undefined size for a bad dtype).
inline void* dtype_buf(Call& c, const char* name, Role role, int32_t dtype, Sz n) {
    switch (dtype) {
        case KBIT_DTYPE_FP32: return c.buf<float>(name, role, n);
        case KBIT_DTYPE_FP16: return c.buf<kbit_half>(name, role, n);
        case KBIT_DTYPE_BF16: return c.buf<kbit_bf16>(name, role, n);
        default: return c.buf<float>(name, role, Sz::undefined());
    }
}

// Sizes an allocation may ask for: up to the cap, or beyond what the allocator can ever give (ASan's
// limit is 2^40; sizes between would only trip libFuzzer's malloc limit).
inline size_t alloc_size(Call& c, const char* name) {
    size_t bytes = c.size(name);
    if (bytes > static_cast<size_t>(kCapBytes) && bytes < (size_t{1} << 41)) bytes %= static_cast<size_t>(kCapBytes);
    return c.note("bytes_used", bytes);
}

// The target: fns from the .def list, resolve(name) from the target's families.
class Target {
public:
    template <size_t N>
    Target(const Fn (&fns)[N], Handler (*resolve)(const Fn&)) {
        for (const Fn& f : fns) {
            Handler h = resolve(f);
            if (!h) fatal("no fuzz handler for %s: add its family to the fuzz_args target", f.name);
            names_.push_back(f.name);
            handlers_.push_back(std::move(h));
        }
    }
    void run(const uint8_t* data, size_t size) {
        Reader r(data, size);
        const size_t i = r.u8() % handlers_.size();
        Call c(r, names_[i]);
        handlers_[i](c);
    }

private:
    std::vector<const char*> names_;
    std::vector<Handler> handlers_;
};

// Environment for every target (unless set): two OpenMP threads, so the kernels' splits into ranges
// run, which sleep between calls (spinning workers would take the CPU from the fuzzer's own thread).
inline void init_environment() {
    setenv("OMP_NUM_THREADS", "2", 0);
    setenv("OMP_WAIT_POLICY", "passive", 0);
}

}  // namespace kfuzz

// ASan: a huge malloc returns NULL (the library's OUT_OF_MEMORY path) instead of aborting.
// intercept_tls_get_addr=0: LeakSanitizer's exit-time tracer otherwise reads a bogus dynamic-TLS range
// of the OpenMP worker thread (it misreads glibc's DTLS layout) and dies of SIGSEGV,
// "Tracer caught signal 11", in about one 15-s run of six; 0 of 20 runs fail with it. Defined here: each
// fuzz target is one translation unit.
extern "C" const char* __asan_default_options() {
    return "allocator_may_return_null=1:intercept_tls_get_addr=0";
}
