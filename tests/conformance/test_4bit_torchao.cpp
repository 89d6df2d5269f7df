// torchao NF4Tensor (kbit_quantize_nf4_torchao_*, kbit_dequantize_nf4_torchao_*): every inner tensor
// byte for byte against golden vectors recorded from torchao itself (scripts/golden/gen_torchao_nf4.py,
// torch on one thread), and against the scalar reference on further data.
#include "golden.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

struct Torchao {
    std::vector<uint8_t> data;
    std::vector<int8_t> scalers;
    std::vector<uint8_t> factor, mean;  // raw bytes of T values
};

template <class T>
Torchao backend_torchao_quantize(const std::vector<T>& w, int64_t bs, int64_t sbs) {
    const int64_t n = static_cast<int64_t>(w.size()), blocks = n / bs;
    DeviceBuffer<T> dw(w), df(static_cast<size_t>(blocks / sbs)), dm(1);
    DeviceBuffer<uint8_t> dd(static_cast<size_t>(n / 2));
    DeviceBuffer<int8_t> ds(static_cast<size_t>(blocks));
    require_ok(Fns4<T>::torchao_quantize()(dw.get(), dd.get(), ds.get(), df.get(), dm.get(), n, bs, sbs, nullptr),
               "torchao quantize");
    return {dd.download(), ds.download(), df.bytes(), dm.bytes()};
}

template <class T>
std::vector<T> backend_torchao_dequantize(const Torchao& t, int64_t n, int64_t bs, int64_t sbs) {
    std::vector<T> f(t.factor.size() / sizeof(T)), m(1);
    std::memcpy(f.data(), t.factor.data(), t.factor.size());
    std::memcpy(m.data(), t.mean.data(), sizeof(T));
    DeviceBuffer<uint8_t> dd(t.data);
    DeviceBuffer<int8_t> ds(t.scalers);
    DeviceBuffer<T> df(f), dm(m), out(static_cast<size_t>(n));
    require_ok(Fns4<T>::torchao_dequantize()(dd.get(), ds.get(), df.get(), dm.get(), out.get(), n, bs, sbs, nullptr),
               "torchao dequantize");
    return out.download();
}

template <class T>
void check_golden(const nlohmann::json& c, const std::vector<uint8_t>& blob) {
    const int64_t n = c.at("n"), bs = c.at("block_size"), sbs = c.at("scaler_block_size");
    const auto w = golden_array<T>(blob, c.at("w"));
    const Torchao got = backend_torchao_quantize<T>(w, bs, sbs);
    CHECK(first_bit_difference(got.data, golden_array<uint8_t>(blob, c.at("quantized_data"))) == -1);
    CHECK(first_bit_difference(got.scalers, golden_array<int8_t>(blob, c.at("quantized_scalers"))) == -1);
    CHECK(first_bit_difference(got.factor, golden_array<uint8_t>(blob, c.at("quantization_factor"))) == -1);
    CHECK(first_bit_difference(got.mean, golden_array<uint8_t>(blob, c.at("scaler_mean"))) == -1);
    // kbit's table is torchao's nf4 tensor
    const auto nf4 = golden_array<T>(blob, c.at("nf4"));
    CHECK(first_bit_difference(nf4, std::vector<T>(kbit::ref::torchao_nf4_table<T>(),
                                                   kbit::ref::torchao_nf4_table<T>() + 16)) == -1);
    // dequantize torchao's own tensors
    Torchao theirs{golden_array<uint8_t>(blob, c.at("quantized_data")), golden_array<int8_t>(blob, c.at("quantized_scalers")),
                   golden_array<uint8_t>(blob, c.at("quantization_factor")), golden_array<uint8_t>(blob, c.at("scaler_mean"))};
    const auto deq = backend_torchao_dequantize<T>(theirs, n, bs, sbs);
    const long d = first_bit_difference(deq, golden_array<T>(blob, c.at("dequantized")));
    INFO("first dequantize difference at " << d);
    CHECK(d == -1);
}

}  // namespace

TEST_CASE("4bit torchao: to_nf4 and get_original_weight byte for byte against torchao", "[4bit][torchao]"
          FN_4BIT_TORCHAO) {
    const auto [index, blob] = load_golden("torchao_nf4.json", "torchao_nf4.bin");
    REQUIRE(index.at("cases").size() == 33);
    for (const auto& c : index.at("cases")) {
        const std::string dt = c.at("dtype");
        DYNAMIC_SECTION(std::string(c.at("name")) << " " << dt << " block_size " << int64_t{c.at("block_size")}
                                                  << " scaler_block_size " << int64_t{c.at("scaler_block_size")}) {
            if (dt == "fp32") check_golden<float>(c, blob);
            else if (dt == "fp16") check_golden<kbit_half>(c, blob);
            else check_golden<kbit_bf16>(c, blob);
        }
    }
}

TEMPLATE_TEST_CASE("4bit torchao: backend equals the reference; round trip error", "[4bit][torchao]" FN_4BIT_TORCHAO,
                   float, kbit_half, kbit_bf16) {
    using T = TestType;
    for (int64_t bs : {int64_t{64}, int64_t{32}, int64_t{256}}) {
        DYNAMIC_SECTION(kbit::Elem<T>::name << " block_size " << bs << " scaler_block_size 256") {
            const int64_t sbs = 256, n = bs * sbs * 3;
            const auto w = weights<T>(static_cast<size_t>(n), 31);
            const Torchao got = backend_torchao_quantize<T>(w, bs, sbs);
            std::vector<uint8_t> data(static_cast<size_t>(n / 2));
            std::vector<int8_t> scalers(static_cast<size_t>(n / bs));
            std::vector<T> factor(static_cast<size_t>(n / bs / sbs)), mean(1);
            kbit::ref::torchao_quantize(w.data(), data.data(), scalers.data(), factor.data(), mean.data(), n, bs, sbs);
            CHECK(got.data == data);
            CHECK(got.scalers == scalers);
            CHECK(std::memcmp(got.factor.data(), factor.data(), got.factor.size()) == 0);
            CHECK(std::memcmp(got.mean.data(), mean.data(), sizeof(T)) == 0);
            const auto deq = backend_torchao_dequantize<T>(got, n, bs, sbs);
            std::vector<T> ref(static_cast<size_t>(n));
            kbit::ref::torchao_dequantize(data.data(), scalers.data(), factor.data(), mean.data(), ref.data(), n, bs,
                                          sbs);
            CHECK(first_bit_difference(deq, ref) == -1);
            // NF4 round trip: half the largest table gap of the block scale, plus the error of the
            // int8 scaler code (half a step of 1 / factor) and the roundings in T.
            for (int64_t i = 0; i < n; ++i) {
                const int64_t b = i / bs;
                const double f = kbit::Elem<T>::load(factor[b / sbs]);
                double amax = 0;
                for (int64_t j = b * bs; j < (b + 1) * bs; ++j)
                    amax = std::max(amax, double(std::fabs(kbit::Elem<T>::load(w[j]))));
                const double x = kbit::Elem<T>::load(w[i]), y = kbit::Elem<T>::load(deq[i]);
                const double bound = 0.16 * amax + 0.5 / f * 1.2 + 8 * unit_roundoff<T>() * (amax + std::fabs(y));
                INFO("i " << i << " x " << x << " y " << y);
                REQUIRE(std::fabs(y - x) <= bound);
            }
        }
    }
}
