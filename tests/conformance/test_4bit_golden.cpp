// Golden vectors recorded from bitsandbytes' own CPU library (scripts/golden/gen_4bit.py): the
// backend's 4-bit dequantizer must reproduce bitsandbytes' output bytes exactly.
#include "golden.h"
#include "test_4bit_util.h"

using namespace kbit_test;

namespace {

template <class T>
void check_case(const nlohmann::json& c, const std::vector<uint8_t>& blob) {
    const QuantType q = c.at("quant_type") == "nf4" ? QuantType::NF4 : QuantType::FP4;
    const int64_t bs = c.at("blocksize"), n = int64_t{c.at("m")} * int64_t{c.at("n")};
    const auto packed = golden_array<uint8_t>(blob, c.at("packed"));
    const auto absmax = golden_array<float>(blob, c.at("absmax"));
    const auto want = golden_array<T>(blob, c.at("out"));
    const auto got = backend_dequantize<T>(q, packed, absmax, bs, n);
    // bitsandbytes' scalar CPU path stores fp16 with F16C (round to nearest even) and bf16 with the
    // +0x7FFF+lsb rounding (also nearest even): there are no tie cases to exclude.
    const long d = first_bit_difference(got, want);
    INFO("first difference at " << d << (d >= 0 ? " got " + std::to_string(bits_of(got[d])) + " bitsandbytes " +
                                                      std::to_string(bits_of(want[d])) +
                                                      " scale " + std::to_string(absmax[d / bs])
                                                : std::string()));
    CHECK(d == -1);
}

}  // namespace

TEST_CASE("4bit golden: dequantize equals bitsandbytes' CPU library byte for byte",
          "[4bit][golden]" FN_4BIT_DEQUANTIZE) {
    const auto [index, blob] = load_golden("bnb_4bit.json", "bnb_4bit.bin");
    REQUIRE(index.at("cases").size() == 240);
    for (const auto& c : index.at("cases")) {
        const std::string dt = c.at("dtype");
        DYNAMIC_SECTION(std::string(c.at("quant_type")) << " " << dt << " blocksize " << int64_t{c.at("blocksize")}
                                                        << " shape " << int64_t{c.at("m")} << "x"
                                                        << int64_t{c.at("n")}) {
            if (dt == "fp32") check_case<float>(c, blob);
            else if (dt == "fp16") check_case<kbit_half>(c, blob);
            else check_case<kbit_bf16>(c, blob);
        }
    }
}
