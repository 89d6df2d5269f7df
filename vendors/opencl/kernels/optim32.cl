// optim32.cl — the 32-bit-state optimizers (kbit_ops_optim8.h: optim32), byte-equal to the reference:
// every expression is kbit_optim_math.h's, operation for operation and in its order (the program is
// built with FP_CONTRACT OFF and correctly rounded divide and sqrt, so each step is one IEEE fp32
// operation, as on the host). The host runs, per call (src/ops_optim8.cpp):
//   unclipped: update32;
//   clipped, not Lion: norm_chunks, finish_norm(STORE_AND_CLIP), update32 with the device's clip factor;
//   clipped Lion: finish_norm(CLIP_FROM_UNORM) from the *unorm it was given, update32, then norm_chunks
//     and finish_norm(STORE_ONLY) over the updated state (bitsandbytes' order).

#define NORM_CHUNK 4096                      // optim::kNormChunk
#define NORM_LANES 16                        // optim::kNormLanes
#define NORM_GROUP 256                       // work-items of a norm_chunks group (host: kNormGroup)
#define CHUNKS_PER_GROUP (NORM_GROUP / NORM_LANES)

// The macros of kbit_optim_math.h, spelled out as functions on floats.
float ema(float x, float beta, float omb, float y) { return x * beta + omb * y; }
float ema_sq(float x, float beta, float omb, float y) { return x * beta + omb * (y * y); }
float ema_sq_left(float x, float beta, float omb, float y) { return x * beta + omb * y * y; }
float momentum(float x, float beta, float y) { return x * beta + y; }
float accumulate_sq(float x, float y) { return x + y * y; }
float adam_param(float p, float m, float v, float su, float eps_c2) { return p + su * (m / (sqrt(v) + eps_c2)); }
float ademamix_param(float p, float m1, float m2, float nu, const OptimConsts* c) {
    return p - c->lr * ((m1 / c->c1 + c->alpha * m2) / (sqrt(nu) / c->c2 + c->eps));
}
float momentum_param(float p, float s, float u, float neg_lr) { return p + u * (neg_lr * s); }
float rms_param(float p, float g, float s, float u, float lr, float eps) { return p - u * (lr * (g / (sqrt(s) + eps))); }
float lion_param(float p, float u, float lr, float sign) { return p - u * (lr * sign); }
float adam_norm_term(float m, float v, float rc1, float rc2, float eps) { return (m * rc1) / (sqrt(v * rc2) + eps); }
float rms_norm_term(float g, float s, float eps) { return g / (sqrt(s) + eps); }

float gradient32(const OptimConsts* c, int dt, float g) { return round_to(dt, g * c->gnorm_scale); }

// optim::step32: one element; s3 is AdEMAMix's slow moment.
void step32(const OptimConsts* c, int kind, int dt, float graw, float* p, float* s1, float* s2, float* s3) {
    float g = gradient32(c, dt, graw);
    if ((kind == KIND_MOMENTUM || kind == KIND_RMSPROP || kind == KIND_ADAGRAD) && c->has_wd)
        g = round_to(dt, g + *p * c->wd);  // coupled weight decay, before the skip test
    if (kind == KIND_ADEMAMIX) {             // no skip_zeros, no clipping
        *s1 = ema(*s1, c->beta1, c->omb1, g);
        *s3 = ema(*s3, c->beta3, c->omb3, g);
        *s2 = ema_sq_left(*s2, c->beta2, c->omb2, g);
        *p = round_to(dt, ademamix_param(*p, *s1, *s3, *s2, c));
        if (c->has_wd) *p = round_to(dt, *p * c->decay);
        return;
    }
    if (c->skip_zeros && g == 0.0f) return;
    switch (kind) {
        case KIND_ADAM:
            *s1 = ema(*s1, c->beta1, c->omb1, g);
            *s2 = ema_sq(*s2, c->beta2, c->omb2, g);
            *p = round_to(dt, adam_param(*p, *s1, *s2, c->su, c->eps_c2));
            if (c->has_wd) *p = round_to(dt, *p * c->decay);
            break;
        case KIND_MOMENTUM:
            *s1 = c->first_step ? g : momentum(*s1, c->beta1, g);
            *p = round_to(dt, momentum_param(*p, *s1, c->u, c->neg_lr));
            break;
        case KIND_RMSPROP:
            *s1 = ema_sq_left(*s1, c->beta1, c->omb1, g);
            *p = round_to(dt, rms_param(*p, g, *s1, c->u, c->lr, c->eps));
            break;
        case KIND_ADAGRAD:
            *s1 = accumulate_sq(*s1, g);
            *p = round_to(dt, rms_param(*p, g, *s1, 1.0f, c->lr, c->eps));
            break;
        case KIND_LION:
            if (c->has_wd) *p = round_to(dt, *p * c->decay);
            *p = round_to(dt, lion_param(*p, c->u, c->lr, sgn(ema(*s1, c->beta1, c->omb1, g))));
            *s1 = ema(*s1, c->beta2, c->omb2, g);
            break;
    }
}

// optim::norm_term32: one element's update-norm contribution (every element counts; Lion's is its
// next state, not squared, as bitsandbytes).
float norm_term32(const OptimConsts* c, int kind, int dt, float graw, float s1, float s2) {
    const float g = gradient32(c, dt, graw);
    float x = 0.0f;
    switch (kind) {
        case KIND_ADAM:
            x = adam_norm_term(ema(s1, c->beta1, c->omb1, g), ema_sq(s2, c->beta2, c->omb2, g), c->rc1, c->rc2, c->eps);
            return x * x;
        case KIND_MOMENTUM:
            x = c->first_step ? g : momentum(s1, c->beta1, g);
            return x * x;
        case KIND_RMSPROP:
            x = rms_norm_term(g, ema_sq_left(s1, c->beta1, c->omb1, g), c->eps);
            return x * x;
        case KIND_ADAGRAD:
            x = rms_norm_term(g, accumulate_sq(s1, g), c->eps);
            return x * x;
        case KIND_LION:
            return ema(s1, c->beta2, c->omb2, g);
        default:
            return 0.0f;
    }
}

// The update-norm sum of each 4096-element chunk, in the reference's order: work-item `lane` of a chunk
// adds the chunk's elements lane, lane + 16, ... from +0.0f, and the chunk's first work-item folds the
// 16 sums as optim::fold_lanes does (acc[l] += acc[l + w] for w = 8, 4, 2, 1).
kernel void norm_chunks(ARRAY(uchar, g), ARRAY(float, s1), ARRAY(float, s2), ARRAY(float, sums), OptimConsts c,
                        int kind, int dt, long n, long chunks) {
    local float acc[NORM_GROUP];
    const int lid = get_local_id(0);
    const int lane = lid % NORM_LANES;
    const long chunk = get_group_id(0) * CHUNKS_PER_GROUP + lid / NORM_LANES;
    float sum = 0.0f;
    if (chunk < chunks) {
        const global uchar* gs = AT(uchar, g);
        const global float* a = AT(float, s1);
        const global float* b = AT(float, s2);  // read only by Adam, the one 2-state kind that clips
        const long end = min((chunk + 1) * NORM_CHUNK, n);
        for (long i = chunk * NORM_CHUNK + lane; i < end; i += NORM_LANES)
            sum = sum + norm_term32(&c, kind, dt, load_elem(gs, i, dt), a[i], kind == KIND_ADAM ? b[i] : 0.0f);
    }
    acc[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && chunk < chunks) {
        local float* x = acc + lid;
        for (int w = NORM_LANES / 2; w >= 1; w /= 2)
            for (int l = 0; l < w; ++l) x[l] = x[l] + x[l + w];
        AT(float, sums)[chunk] = x[0];
    }
}

#define STORE_AND_CLIP 0   // *unorm = the sum; clip from it
#define CLIP_FROM_UNORM 1  // clip from the *unorm given (Lion, before its step)
#define STORE_ONLY 2       // *unorm = the sum (Lion, after its step)

// One work-group. The chunk sums are added as optim::tree_sum does: each level pairs s[2i] and
// s[2i + 1] and carries an odd last value up unchanged. The levels alternate between `sums` and
// `other` (count / 2 + 1 floats), so no level overwrites what it reads. Then optim::set_clip:
// clip[0] = u, clip[1] = u * step_size, read by update32.
kernel void finish_norm(ARRAY(float, sums), ARRAY(float, other), ARRAY(float, unorm), ARRAY(float, clip),
                        OptimConsts c, float max_unorm, float param_norm, int one_state, int mode, long count) {
    float total;
    if (mode == CLIP_FROM_UNORM) {
        total = AT(float, unorm)[0];
    } else {
        global float* src = AT(float, sums);
        global float* dst = AT(float, other);
        while (count > 1) {
            const long pairs = count / 2;
            const long next = pairs + (count & 1);
            for (long i = get_local_id(0); i < next; i += get_local_size(0))
                dst[i] = i < pairs ? src[2 * i] + src[2 * i + 1] : src[count - 1];
            barrier(CLK_GLOBAL_MEM_FENCE);  // the level is written before the next one reads it
            global float* t = src;
            src = dst;
            dst = t;
            count = next;
        }
        total = src[0];
    }
    if (get_local_id(0) != 0) return;
    if (mode != CLIP_FROM_UNORM) AT(float, unorm)[0] = total;
    if (mode == STORE_ONLY) return;
    float u = 1.0f;
    if (max_unorm > 0.0f) {
        const float norm = sqrt(total);
        float lim = max_unorm * param_norm;
        if (one_state) lim = lim + c.eps;
        if (norm > lim) u = lim / norm;
    }
    AT(float, clip)[0] = u;
    AT(float, clip)[1] = u * c.step_size;
}

// One work-item per element: optim::step32, with the clip factor from `clip` when `clipped`.
kernel void update32(ARRAY(uchar, g), ARRAY(uchar, p), ARRAY(float, s1), ARRAY(float, s2), ARRAY(float, clip),
                     OptimConsts c, int clipped, int kind, int dt, long n) {
    const long i = get_global_id(0);
    if (i >= n) return;
    if (clipped) {
        c.u = AT(float, clip)[0];
        c.su = AT(float, clip)[1];
    }
    global uchar* ps = AT(uchar, p);
    global float* a = AT(float, s1);
    global float* b = AT(float, s2);
    float pv = load_elem(ps, i, dt), m = a[i];
    float v = two_state(kind) ? b[i] : 0.0f;
    float m2 = kind == KIND_ADEMAMIX ? a[n + i] : 0.0f;
    step32(&c, kind, dt, load_elem(AT(uchar, g), i, dt), &pv, &m, &v, &m2);
    store_elem(ps, i, dt, pv);
    a[i] = m;
    if (two_state(kind)) b[i] = v;
    if (kind == KIND_ADEMAMIX) a[n + i] = m2;
}
