// Blockwise 8-bit dequantization against golden vectors recorded from bitsandbytes' CPU library
// (scripts/golden/gen_8bit.py -> tests/golden/8bit_index.json + 8bit_dequant.bin). bitsandbytes'
// cdequantize_blockwise_cpu_* is exact (one fp32 product, one round-to-nearest-even store; its fp16
// store is vcvtps2ph, checked on exact fp16 ties by the generator), so every byte must match.
#include <catch2/catch.hpp>

#include "golden.h"
#include "test_8bit_util.h"

using namespace kbit_test;

namespace {

template <class T>
void check_case(const nlohmann::json& c, const std::vector<uint8_t>& blob) {
    const int64_t n = c["n"], B = c["blocksize"];
    const auto code = golden_array<float>(blob, c["code"], 256);
    const auto A = golden_array<uint8_t>(blob, c["A"], static_cast<size_t>(n));
    const auto absmax = golden_array<float>(blob, c["absmax"], static_cast<size_t>((n + B - 1) / B));
    const auto want = golden_array<T>(blob, c["out"], static_cast<size_t>(n));
    DeviceBuffer<float> dcode(code), dabsmax(absmax);
    DeviceBuffer<uint8_t> dA(A);
    DeviceBuffer<T> out(static_cast<size_t>(n)), out64(static_cast<size_t>(n));
    require_ok(Blockwise8<T>::dequantize(dcode.get(), dA.get(), dabsmax.get(), out.get(), static_cast<int>(B),
                                         static_cast<int>(n)),
               "cdequantize_blockwise");
    require_ok(backend().fns_8bit.kbit_dequantize_blockwise_8bit(kbit::Elem<T>::dtype, dcode.get(), dA.get(), dabsmax.get(),
                                                           out64.get(), B, n, nullptr),
               "kbit_dequantize_blockwise_8bit");
    const auto got = out.download();
    const long diff = first_bit_difference(got, want);
    INFO("first difference at " << diff);
    CHECK(diff < 0);
    CHECK(first_bit_difference(out64.download(), want) < 0);
}

}  // namespace

TEST_CASE("8bit golden: dequantize equals bitsandbytes' cdequantize_blockwise_cpu, fp32/bf16/fp16, blocksizes 32-4096",
          "[8bit][golden]" FN_8BIT_DEQUANTIZE "[fn:kbit_dequantize_blockwise_8bit]") {
    const auto [index, blob] = load_golden("8bit_index.json", "8bit_dequant.bin");
    REQUIRE(index["file"].get<std::string>() == "8bit_dequant.bin");
    REQUIRE(blob.size() == index["bytes"].get<size_t>());
    size_t cases = 0, ties = 0;
    for (const auto& c : index["cases"]) {
        const std::string dtype = c["dtype"];
        INFO(c["name"].get<std::string>());
        if (dtype == "fp32") check_case<float>(c, blob);
        else if (dtype == "fp16") check_case<kbit_half>(c, blob);
        else if (dtype == "bf16") check_case<kbit_bf16>(c, blob);
        else FAIL("unknown dtype " << dtype);
        ties += c.value("fp16_ties", 0);
        ++cases;
    }
    CHECK(cases == 75);   // 3 tables x 8 blocksizes x 3 dtypes + the fp16-ties table x 3 dtypes
    CHECK(ties > 1000);   // exact fp16 ties are part of the comparison, none excluded
}
