// optim8_blockwise.cl — the 8-bit blockwise optimizers (kbit_ops_optim8.h: optim8_blockwise), byte-equal
// to the reference: the block procedure of kbit_optim_math.h with its expressions, operation for
// operation (FP_CONTRACT OFF, correctly rounded divide and sqrt). Each work-group of 256 work-items
// walks blocks of 256 elements (several when there are more blocks than groups), one element (lane)
// per work-item:
//   1. dequantize the lane's states (code value * the block's old absmax) and update them; padding
//      lanes of a partial last block take g = 0, p = 0 and the padding codes, and count in step 2;
//   2. each state's new absmax: the largest |state| over the block (a NaN never wins), by a tree of
//      maxima in local memory — max is exact and order-free, so this is optim::absmax_fold's result;
//   3. every valid lane: parameter step, then each state re-quantized by the exact code search.
// AdEMAMix keeps m2's codes at state1 + n and its scales at absmax1 + ceil(n / 256).

#define BLOCK 256        // optim::kBlock, and the work-group size (host: kBlockGroup)
#define PAD_CODE1 128    // optim::kPadCode1 (state1, m2)
#define PAD_CODE2 0      // optim::kPadCode2 (state2)

// optim::quantize8: the code of s under the new absmax (code8_index of common.cl, the exact search of
// kbit_code8.h); a signed state whose code has the other sign bit moves one code towards s's sign
// (uchar wrap-around included, as the reference).
uchar quantize8(const global float* code, float s, float absmax, bool is_signed) {
    uchar c = code8_index(code, s / absmax);
    if (is_signed && sign_bit(code[c]) != sign_bit(s)) c = s > 0.0f ? (uchar)(c + 1) : (uchar)(c - 1);
    return c;
}

// The expressions of kbit_optim_math.h used here (as in optim32.cl).
float ema(float x, float beta, float omb, float y) { return x * beta + omb * y; }
float ema_sq(float x, float beta, float omb, float y) { return x * beta + omb * (y * y); }
float ema_sq_left(float x, float beta, float omb, float y) { return x * beta + omb * y * y; }

// optim::update8_two_state: false (and the states zeroed) for a non-finite gradient.
bool update8_two_state(const OptimConsts* c, int kind, float graw, float* m, float* v, float* m2) {
    if (!finite_bits(graw)) {
        *m = *v = *m2 = 0.0f;
        return false;
    }
    const float g = graw * c->gnorm_scale;
    *v = ema_sq_left(*v, c->beta2, c->omb2, g);
    *m = ema(*m, c->beta1, c->omb1, g);
    if (kind == KIND_ADEMAMIX) *m2 = ema(*m2, c->beta3, c->omb3, g);
    return true;
}

float apply8_two_state(const OptimConsts* c, int kind, int dt, float p, float m, float v, float m2) {
    if (kind == KIND_ADEMAMIX)
        p = round_to(dt, p - c->lr * ((m / c->c1 + c->alpha * m2) / (sqrt(v) / c->c2 + c->eps)));
    else
        p = round_to(dt, p + c->step_size * (m / (sqrt(v) + c->eps_c2)));
    if (c->has_wd) p = round_to(dt, p * c->decay);
    return p;
}

// optim::update8_one_state: whether step 3 moves p; Lion decays p here and leaves its step in d.
bool update8_one_state(const OptimConsts* c, int kind, int dt, float graw, float* p, float* s, float* d) {
    if (c->skip_zeros && graw == 0.0f) return false;
    float g = graw * c->gnorm_scale;
    if (c->has_wd) {
        if (kind == KIND_LION) *p = round_to(dt, *p * c->decay);
        else g = g + *p * c->wd;
    }
    switch (kind) {
        case KIND_MOMENTUM: *s = c->first_step ? g : *s * c->beta1 + g; break;
        case KIND_RMSPROP: *s = ema_sq(*s, c->beta1, c->omb1, g); break;
        case KIND_ADAGRAD: *s = *s + g * g; break;
        case KIND_LION:
            *d = round_to(dt, c->lr * sgn(ema(*s, c->beta1, c->omb1, g)));
            *s = ema(*s, c->beta2, c->omb2, g);
            return !c->skip_zeros || *d != 0.0f;
    }
    return true;
}

// optim::apply8_one_state: RMSprop and Adagrad step with the stored gradient, as bitsandbytes.
float apply8_one_state(const OptimConsts* c, int kind, int dt, float graw, float p, float s, float d) {
    switch (kind) {
        case KIND_MOMENTUM: return round_to(dt, p - c->lr * s);
        case KIND_LION: return round_to(dt, p - d);
        default: return round_to(dt, p - 1.0f * (c->lr * (graw / (sqrt(s) + c->eps))));
    }
}

// |x| for the block maximum, -FLT_MAX for NaN (which never wins optim::absmax_fold).
float magnitude(float x) { return absmax_fold(-0x1.fffffep+127f, x); }

// The maxima of x, y, z over the work-group, by halving in local memory (x, y, z are never NaN).
void block_max3(local float* bx, local float* by, local float* bz, float* x, float* y, float* z) {
    const int lid = get_local_id(0);
    bx[lid] = *x;
    by[lid] = *y;
    bz[lid] = *z;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = BLOCK / 2; width >= 1; width /= 2) {
        if (lid < width) {
            bx[lid] = bx[lid + width] > bx[lid] ? bx[lid + width] : bx[lid];
            by[lid] = by[lid + width] > by[lid] ? by[lid + width] : by[lid];
            bz[lid] = bz[lid + width] > bz[lid] ? bz[lid + width] : bz[lid];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *x = bx[0];
    *y = by[0];
    *z = bz[0];
    barrier(CLK_LOCAL_MEM_FENCE);  // read by all before the next block overwrites them
}

kernel void optim8_blockwise(ARRAY(uchar, p), ARRAY(uchar, g), ARRAY(uchar, s1), ARRAY(uchar, s2),
                             ARRAY(float, q1), ARRAY(float, q2), ARRAY(float, a1), ARRAY(float, a2), OptimConsts c,
                             int kind, int dt, long n) {
    local float max1[BLOCK], max2[BLOCK], max3[BLOCK];
    const int lid = get_local_id(0);
    const bool two = two_state(kind), mix = kind == KIND_ADEMAMIX;
    const global float* code1 = AT(float, q1);  // 1 KiB each: the device's caches keep them
    const global float* code2 = AT(float, q2);

    global uchar* ps = AT(uchar, p);
    const global uchar* gs = AT(uchar, g);
    global uchar* c1 = AT(uchar, s1);
    global uchar* c2 = AT(uchar, s2);
    global uchar* c3 = c1 + n;  // AdEMAMix's m2 codes
    global float* scale1 = AT(float, a1);
    global float* scale2 = AT(float, a2);
    const long blocks = (n + BLOCK - 1) / BLOCK;
    global float* scale3 = scale1 + blocks;  // AdEMAMix's m2 scales

    for (long b = get_group_id(0); b < blocks; b += get_num_groups(0)) {  // the same trip count for the group
        const long i = b * BLOCK + lid;
        const bool valid = i < n;
        float gv = valid ? load_elem(gs, i, dt) : 0.0f;
        float pv = valid ? load_elem(ps, i, dt) : 0.0f;
        float m = code1[valid ? c1[i] : PAD_CODE1] * scale1[b];
        float v = 0.0f, m2 = 0.0f, d = 0.0f;
        bool step;
        if (two) {
            v = code2[valid ? c2[i] : PAD_CODE2] * scale2[b];
            if (mix) m2 = code1[valid ? c3[i] : PAD_CODE1] * scale3[b];
            step = update8_two_state(&c, kind, gv, &m, &v, &m2);
        } else {
            step = update8_one_state(&c, kind, dt, gv, &pv, &m, &d);
        }
        // Every lane has read the old scales before the barriers of block_max3; lane 0 then overwrites.
        float new1 = magnitude(m), new2 = two ? magnitude(v) : 0.0f, new3 = mix ? magnitude(m2) : 0.0f;
        block_max3(max1, max2, max3, &new1, &new2, &new3);
        if (lid == 0) {
            scale1[b] = new1;
            if (two) scale2[b] = new2;
            if (mix) scale3[b] = new3;
        }
        if (!valid) continue;
        if (step)
            pv = two ? apply8_two_state(&c, kind, dt, pv, m, v, m2) : apply8_one_state(&c, kind, dt, gv, pv, m, d);
        store_elem(ps, i, dt, pv);
        c1[i] = quantize8(code1, m, new1, true);
        if (two) c2[i] = quantize8(code2, v, new2, false);
        if (mix) c3[i] = quantize8(code1, m2, new3, true);
    }
}
