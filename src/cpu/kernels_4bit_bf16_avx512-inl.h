// kernels_4bit_bf16_avx512-inl.h — the bf16 class's dot kernel for AVX-512 BF16 (kernels_4bit_bf16.h), compiled
// twice: kernels_4bit_bf16_avx512bf16.cpp (AVX512_BF16, Isa::Avx512 up) and kernels_4bit_bf16_avx512vbmi.cpp (with
// VBMI's vpmultishiftqb for the nibble indices, Isa::Avx512Vbmi), each inside its own namespace after defining
// KBIT_BF16_TARGET (the target attribute) and kBf16Vbmi. No include guard: once per including file.
//
// Per weight row and block, the 16 class weights RN_bf16(level * s) (DAZ) are formed in one vector and held as
// 32 words (the 16 twice); per group of 32 elements the 16 packed bytes become 32 word indices and vpermw looks
// them up at once. vdpbf16ps then adds a[2j + 1] * w[2j + 1] and a[2j] * w[2j] to lane j of each activation
// row's accumulator: that is the class's definition (kbit_precision_bf16.h), so the bytes are the reference's.
// When K % blocksize == 0 (every real layer) a tile is RR weight rows x M activation rows (RR = 4 up to M = 4, else
// 2: accumulator chains that hide vdpbf16ps's latency, fewer activation loads per weight), the tables built
// once per block, each weight byte decoded once per tile; other K take one row at a time with the block found per
// group.

// The block's 16 class weights (bf16_class_weight: the fp32 product, RN_bf16 with NaN quietened as
// float_to_bf16 does, then DAZ) as words 0..15 and again 16..31: vpermw reads 5 index bits. For a finite
// scale of at least 2^-100 every product is 0 or a normal fp32 (the smallest nonzero level, FP4's 1/192, is
// above 2^-8), where vcvtneps2bf16 (which reads subnormals as zero) is exactly RN_bf16 and DAZ changes
// nothing; other scales take the integer rounding with its NaN and DAZ steps.
KBIT_BF16_TARGET inline __m512i block_table(__m512 levels, float s) {
    const __m512 p = _mm512_mul_ps(levels, _mm512_set1_ps(s));
    const float mag = __builtin_fabsf(s);
    if (mag >= 0x1.0p-100f && mag <= 0x1.fffffep127f) {
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(p);
        return _mm512_broadcast_i64x4(h);
    }
    const __m512i u = _mm512_castps_si512(p), hi = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    h = _mm512_mask_or_epi32(h, _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    h = _mm512_mask_and_epi32(h, _mm512_testn_epi32_mask(h, _mm512_set1_epi32(0x7F80)), h, _mm512_set1_epi32(0x8000));
    return _mm512_broadcast_i64x4(_mm512_cvtepi32_epi16(h));
}

// The 32 class weights of the group whose 16 packed bytes are `bytes`: vpermw looks up word i of the index
// vector, of which it reads 5 bits (the table holds the 16 weights twice, so bit 4 may be anything).
// Word 2j must hold element 2j's nibble (the high nibble of byte j) and word 2j + 1 element 2j + 1's (the low).
// Without VBMI: byte j widened to 32-bit lane j, shifted right by 4 into the low word and left by 16 into the
// high one. With VBMI: byte pair (2q, 2q + 1) widened to 64-bit lane q, and vpmultishiftqb picks the bit
// fields 4, 0, 12 and 8 of it into the words 4q .. 4q + 3 (one instruction for the shifts and the or).
KBIT_BF16_TARGET inline __m512i decode_group(__m128i bytes, __m512i table) {
    if constexpr (kBf16Vbmi) {
        const __m512i fields = _mm512_set1_epi64(0x0008000C00000004LL);
        return _mm512_permutexvar_epi16(_mm512_multishift_epi64_epi8(fields, _mm512_cvtepu16_epi64(bytes)), table);
    } else {
        const __m512i q = _mm512_cvtepu8_epi32(bytes);
        return _mm512_permutexvar_epi16(_mm512_or_si512(_mm512_srli_epi32(q, 4), _mm512_slli_epi32(q, 16)), table);
    }
}

// bf16_lane_tree on a vector: 8 + 8, 4 + 4, 2 + 2, 1 + 1.
KBIT_BF16_TARGET inline float lane_tree(__m512 v) {
    const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
}

struct Args {
    const uint16_t* a;
    int64_t kp, K;
    const uint8_t* B;
    const float* scales;
    int shift;
    const float* lut;
    float* sums;
    int64_t ldo;
};

// Weight rows r .. r + RR - 1 times activation rows 0 .. MR - 1 when K % blocksize == 0: every row's blocks start
// at the same groups, so the tables change once per block for all rows together and no group crosses a block.
template <int MR, int RR>
KBIT_BF16_TARGET void tile_blocks(const Args& x, int64_t r, int64_t blocksize) {
    const __m512 levels = _mm512_loadu_ps(x.lut);
    __m512 acc[RR][MR];
#pragma GCC unroll 8
    for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) acc[i][m] = _mm512_setzero_ps();
    const uint8_t* row[RR];
    const float* sc[RR];
#pragma GCC unroll 8
    for (int i = 0; i < RR; ++i) {
        row[i] = x.B + (r + i) * x.K / 2;
        sc[i] = x.scales + (((r + i) * x.K) >> x.shift);
    }
    for (int64_t b = 0, g = 0; g < x.K; ++b) {
        __m512i table[RR];
#pragma GCC unroll 8
        for (int i = 0; i < RR; ++i) table[i] = block_table(levels, sc[i][b]);
        for (const int64_t end = g + blocksize; g < end; g += kBf16Group) {
            __m512i w[RR];
#pragma GCC unroll 8
            for (int i = 0; i < RR; ++i)
                w[i] = decode_group(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[i] + g / 2)), table[i]);
#pragma GCC unroll 16
            for (int m = 0; m < MR; ++m) {
                const __m512bh av = (__m512bh)_mm512_loadu_si512(x.a + m * x.kp + g);
#pragma GCC unroll 8
                for (int i = 0; i < RR; ++i) acc[i][m] = _mm512_dpbf16_ps(acc[i][m], av, (__m512bh)w[i]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RR; ++i)
#pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) x.sums[m * x.ldo + r + i] = lane_tree(acc[i][m]);
}

// One weight row r times activation rows 0 .. MR - 1 for any K: the block is looked up per group, a last group of
// fewer than 32 elements is loaded under a mask and its weights past K zeroed, and a group across two blocks
// (K % 32 != 0) is decoded element by element.
template <int MR>
KBIT_BF16_TARGET void tile_any(const Args& x, int64_t r) {
    const __m512 levels = _mm512_loadu_ps(x.lut);
    __m512 acc[MR];
    for (int m = 0; m < MR; ++m) acc[m] = _mm512_setzero_ps();
    __m512i table = _mm512_setzero_si512();
    int64_t current = -1;
    for (int64_t g = 0; g < x.K; g += kBf16Group) {
        const int64_t n = x.K - g < kBf16Group ? x.K - g : kBf16Group;
        const int64_t first = r * x.K + g;
        const int64_t b0 = first >> x.shift, b1 = (first + n - 1) >> x.shift;
        __m512i w;
        if (b0 == b1) {
            if (b0 != current) {
                table = block_table(levels, x.scales[b0]);
                current = b0;
            }
            const __m128i bytes = n == kBf16Group
                ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.B + first / 2))
                : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (n / 2)) - 1u), x.B + first / 2);
            w = decode_group(bytes, table);
            if (n < kBf16Group) w = _mm512_maskz_mov_epi16(static_cast<__mmask32>((1ull << n) - 1u), w);
        } else {
            alignas(64) uint16_t buf[kBf16Group] = {};
            for (int64_t k = 0; k < n; ++k)
                buf[k] = bf16_class_weight(x.lut[nibble_at(x.B, first + k)], x.scales[(first + k) >> x.shift]);
            w = _mm512_load_si512(buf);
        }
        for (int m = 0; m < MR; ++m)
            acc[m] = _mm512_dpbf16_ps(acc[m], (__m512bh)_mm512_loadu_si512(x.a + m * x.kp + g), (__m512bh)w);
    }
    for (int m = 0; m < MR; ++m) x.sums[m * x.ldo + r] = lane_tree(acc[m]);
}

template <int MR>
KBIT_BF16_TARGET void rows(const Args& x, int64_t blocksize, int64_t r0, int64_t r1) {
    constexpr int RR = MR <= 4 ? 4 : 2;
    if (x.K % blocksize != 0) {
        for (int64_t r = r0; r < r1; ++r) tile_any<MR>(x, r);
        return;
    }
    int64_t r = r0;
    for (; r + RR <= r1; r += RR) tile_blocks<MR, RR>(x, r, blocksize);
    for (; r < r1; ++r) tile_blocks<MR, 1>(x, r, blocksize);
}

// Up to 8 activation rows per pass (MR x RR accumulators stay in registers); 9 .. 16 rows take two passes over
// the same weight rows, which are in the cache by then.
KBIT_BF16_TARGET void dot_rows(const uint16_t* a, int M, int64_t K, const uint8_t* B, const float* scales, int64_t blocksize,
                        QuantType qt, int64_t r0, int64_t r1, float* sums, int64_t ldo) {
    const int64_t kp = (K + kBf16Group - 1) / kBf16Group * kBf16Group;
    const float* lut = qt == QuantType::FP4 ? kFp4Values : kNf4Values;
    const int shift = __builtin_ctzll(static_cast<unsigned long long>(blocksize));
    for (int m0 = 0; m0 < M; m0 += 8) {
        const Args x{a + m0 * kp, kp, K, B, scales, shift, lut, sums + m0 * ldo, ldo};
        switch (M - m0 < 8 ? M - m0 : 8) {
            case 1: rows<1>(x, blocksize, r0, r1); break;
            case 2: rows<2>(x, blocksize, r0, r1); break;
            case 3: rows<3>(x, blocksize, r0, r1); break;
            case 4: rows<4>(x, blocksize, r0, r1); break;
            case 5: rows<5>(x, blocksize, r0, r1); break;
            case 6: rows<6>(x, blocksize, r0, r1); break;
            case 7: rows<7>(x, blocksize, r0, r1); break;
            default: rows<8>(x, blocksize, r0, r1); break;
        }
    }
}
