/*
 * kbit_optim8.h — the optimizer sub-interface: bitsandbytes' 32-bit-state and 8-bit blockwise
 * optimizers (Adam/AdamW, AdEMAMix, Lion, SGD with momentum, RMSprop, Adagrad), the paged-memory
 * helpers they use, and kbit's additions (bf16 variants bitsandbytes lacks, freeing managed memory).
 *
 * Functions with bitsandbytes names keep bitsandbytes' parameter types and order (note: the 32-bit
 * kernels take g before p, the 8-bit kernels p before g) and return kbit_status where bitsandbytes
 * returns void.
 *
 * Numerics: every kernel evaluates its update in IEEE fp32 without contraction, in the order fixed in
 * src/common/kbit_optim_math.h (shared by every kbit backend), so CPU and GPU builds that follow it
 * produce identical bytes, for any thread count. fp16/bf16 parameters are rounded to nearest even.
 * Deviations from bitsandbytes (its known bugs) are listed in docs/behaviour.md.
 *
 * 8-bit state: codes of a 256-entry table per element plus one fp32 absmax per 256-element block
 * (fixed block size), initially all zero (codes 0 and absmax 0).
 *
 * Versioning: KBIT_OPTIM8_VERSION_MAJOR/MINOR below; same major = compatible, minors only append to the
 * function list in abi/kbit_optim8.def (rules in abi/ABI.md).
 */
#ifndef KBIT_OPTIM8_H
#define KBIT_OPTIM8_H

#include "kbit_core.h"

/* ============================================================================================== */
/* Version                                                                                        */
/* ============================================================================================== */

/** Major version of the optimizer interface declared by this header. */
#define KBIT_OPTIM8_VERSION_MAJOR 1
/** Minor version of the optimizer interface declared by this header. */
#define KBIT_OPTIM8_VERSION_MINOR 0

/** Block size of the 8-bit optimizer state (elements per absmax). */
#define KBIT_OPTIM8_BLOCKSIZE 256

KBIT_EXTERN_C_BEGIN

/**
 * Version of the optimizer interface this backend implements.
 * @return (KBIT_OPTIM8_VERSION_MAJOR << 16) | KBIT_OPTIM8_VERSION_MINOR of the backend's build.
 * @since optim8 1.0
 */
KBIT_API uint32_t kbit_optim8_interface_version(void);

/* BEGIN GENERATED DECLARATIONS (scripts/abi_gen.py from abi/kbit_optim8.def; do not edit) */

/* ---- 32-bit optimizers (bitsandbytes names, and the bf16 variants kbit adds) [optim32] ------- */

/**
 * One 32-bit-state step of the optimizer opt on n parameters of type T, element-wise with
 * g = RN(g * gnorm_scale) and u = the update-norm clip factor (1 when max_unorm == 0), t = step:
 *   - adam: m = m*beta1 + (1-beta1)*g; v = v*beta2 + (1-beta2)*g*g; p += u * (-lr *
 *     sqrt(1-beta2^t) / (1-beta1^t)) * m / (sqrt(v) + eps * sqrt(1-beta2^t)); then, if
 *     weight_decay > 0, p *= 1 - lr*weight_decay (decoupled, after the step). state1 = m, state2 = v.
 *   - ademamix: m1 = m1*beta1 + (1-beta1)*g; m2 = m2*beta3 + (1-beta3)*g; nu = nu*beta2 +
 *     (1-beta2)*g*g; p -= lr * (m1/(1-beta1^t) + alpha*m2) / (sqrt(nu)/sqrt(1-beta2^t) + eps); then
 *     decoupled weight decay as Adam. state1 = [m1 (n floats), m2 (n floats)], state2 = nu;
 *     skip_zeros and update clipping do not apply.
 *   - lion: if weight_decay > 0: p *= 1 - lr*weight_decay; p -= u * lr * sign(s*beta1 +
 *     (1-beta1)*g); s = s*beta2 + (1-beta2)*g. state1 = s; state2 unused.
 *   - momentum: if weight_decay > 0: g += p*weight_decay (coupled); s = (t == 1) ? g : s*beta1 + g;
 *     p -= u * lr * s. state1 = s; state2 unused.
 *   - rmsprop: coupled weight decay as momentum; s = s*beta1 + (1-beta1)*g*g; p -= u * lr * g /
 *     (sqrt(s) + eps). state1 = s; state2 unused.
 *   - adagrad: coupled weight decay as momentum; s = s + g*g; p -= lr * g / (sqrt(s) + eps).
 *     state1 = s; state2 unused.
 *
 * Evaluated in IEEE fp32 in the order written in src/common/kbit_optim_math.h; deterministic for any
 * thread count. Note the argument order: g before p. The bf16 variants of momentum, rmsprop and
 * adagrad are kbit additions (bitsandbytes has none).
 *
 * Variants:
 *
 * | function                       | element type     | optimizer | note          |
 * |--------------------------------|------------------|-----------|---------------|
 * | cadam32bit_grad_fp32()         | fp32 (float)     | adam      |               |
 * | cadam32bit_grad_fp16()         | fp16 (kbit_half) | adam      |               |
 * | cadam32bit_grad_bf16()         | bf16 (kbit_bf16) | adam      |               |
 * | cademamix32bit_grad_fp32()     | fp32 (float)     | ademamix  |               |
 * | cademamix32bit_grad_fp16()     | fp16 (kbit_half) | ademamix  |               |
 * | cademamix32bit_grad_bf16()     | bf16 (kbit_bf16) | ademamix  |               |
 * | clion32bit_grad_fp32()         | fp32 (float)     | lion      |               |
 * | clion32bit_grad_fp16()         | fp16 (kbit_half) | lion      |               |
 * | clion32bit_grad_bf16()         | bf16 (kbit_bf16) | lion      |               |
 * | cmomentum32bit_grad_32()       | fp32 (float)     | momentum  |               |
 * | cmomentum32bit_grad_16()       | fp16 (kbit_half) | momentum  |               |
 * | crmsprop32bit_grad_32()        | fp32 (float)     | rmsprop   |               |
 * | crmsprop32bit_grad_16()        | fp16 (kbit_half) | rmsprop   |               |
 * | cadagrad32bit_grad_32()        | fp32 (float)     | adagrad   |               |
 * | cadagrad32bit_grad_16()        | fp16 (kbit_half) | adagrad   |               |
 * | kbit_momentum32bit_grad_bf16() | bf16 (kbit_bf16) | momentum  | kbit addition |
 * | kbit_rmsprop32bit_grad_bf16()  | bf16 (kbit_bf16) | rmsprop   | kbit addition |
 * | kbit_adagrad32bit_grad_bf16()  | bf16 (kbit_bf16) | adagrad   | kbit addition |
 *
 * @param g            device memory, in: n gradient elements (not modified).
 * @param p            device memory, in/out: n parameters, updated in place (rounded to nearest even).
 * @param state1       device memory, in/out: fp32 first state (n floats; ademamix: 2n floats).
 * @param state2       device memory, in/out: fp32 second state (n floats), or NULL if unused.
 * @param unorm        device memory, scratch: one float for update-norm clipping; NULL when
 *                     max_unorm == 0.
 * @param max_unorm    update-norm clip ratio; 0 disables clipping (LAMB uses 1.0, LARS 0.02).
 * @param param_norm   ||p||_2 computed by the caller (used when max_unorm > 0).
 * @param beta1        first-moment decay (momentum / alpha for RMSprop).
 * @param beta2        second-moment decay.
 * @param beta3        AdEMAMix slow-moment decay (ignored by others).
 * @param alpha        AdEMAMix mixing factor (ignored by others).
 * @param eps          denominator epsilon.
 * @param weight_decay weight decay; 0 disables.
 * @param step         1-based step count t.
 * @param lr           learning rate.
 * @param gnorm_scale  the gradient is multiplied by this first (bitsandbytes passes 1.0).
 * @param skip_zeros   leave elements whose gradient is exactly 0 untouched (p and state).
 * @param n            number of parameters, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL required pointer with n > 0, n < 0,
 *         step < 1, unorm NULL with max_unorm > 0); KBIT_STATUS_DEVICE_ERROR.
 * @since optim8 1.0
 */
/** optim32: fp32 (float), adam. */
KBIT_API kbit_status cadam32bit_grad_fp32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), adam. */
KBIT_API kbit_status cadam32bit_grad_fp16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), adam. */
KBIT_API kbit_status cadam32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp32 (float), ademamix. */
KBIT_API kbit_status cademamix32bit_grad_fp32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), ademamix. */
KBIT_API kbit_status cademamix32bit_grad_fp16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), ademamix. */
KBIT_API kbit_status cademamix32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp32 (float), lion. */
KBIT_API kbit_status clion32bit_grad_fp32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), lion. */
KBIT_API kbit_status clion32bit_grad_fp16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), lion. */
KBIT_API kbit_status clion32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp32 (float), momentum. */
KBIT_API kbit_status cmomentum32bit_grad_32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), momentum. */
KBIT_API kbit_status cmomentum32bit_grad_16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp32 (float), rmsprop. */
KBIT_API kbit_status crmsprop32bit_grad_32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), rmsprop. */
KBIT_API kbit_status crmsprop32bit_grad_16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp32 (float), adagrad. */
KBIT_API kbit_status cadagrad32bit_grad_32(float* g, float* p, float* state1, float* state2, float* unorm,
    float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: fp16 (kbit_half), adagrad. */
KBIT_API kbit_status cadagrad32bit_grad_16(kbit_half* g, kbit_half* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), momentum; kbit addition. */
KBIT_API kbit_status kbit_momentum32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), rmsprop; kbit addition. */
KBIT_API kbit_status kbit_rmsprop32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);
/** optim32: bf16 (kbit_bf16), adagrad; kbit addition. */
KBIT_API kbit_status kbit_adagrad32bit_grad_bf16(kbit_bf16* g, kbit_bf16* p, float* state1, float* state2,
    float* unorm, float max_unorm, float param_norm, const float beta1, const float beta2, const float beta3,
    const float alpha, const float eps, const float weight_decay, const int step, const float lr,
    const float gnorm_scale, bool skip_zeros, const int n);

/* ---- 8-bit blockwise optimizers (bitsandbytes names) [optim8_blockwise] ---------------------- */

/**
 * One 8-bit blockwise step of the optimizer opt on n parameters of type T. Per 256-element block
 * (KBIT_OPTIM8_BLOCKSIZE) the states are dequantized (code table entry * absmax), updated with the
 * formulas of the 32-bit variant (family optim32), given a new absmax (max |state| over the block)
 * and re-quantized to the nearest code (a state whose nearest code has the wrong sign moves one code
 * towards its sign). The states and the weight decay of each optimizer:
 *   - adam: Adam (decoupled weight decay after the step); state1 = m (signed map), state2 = v
 *     (unsigned map).
 *   - momentum: SGD with momentum (coupled weight decay); state1 = s; state2, quantiles2, absmax2
 *     unused.
 *   - rmsprop: RMSprop (coupled weight decay in the state update; the parameter step uses the raw
 *     gradient, as bitsandbytes); state1 = s; state2 unused.
 *   - lion: Lion (decoupled weight decay before the step); state1 = s; state2 unused.
 *   - adagrad: Adagrad (as RMSprop regarding weight decay); state1 = s; state2 unused.
 *   - ademamix: AdEMAMix; state1 = [m1 codes (n), m2 codes (n)] with absmax1 = [m1 scales
 *     (ceil(n/256)), m2 scales (ceil(n/256))] (kbit always uses these indices; bitsandbytes' CUDA
 *     kernel mis-indexes m2's scale when n % 256 != 0), state2 = nu.
 *
 * Evaluated in IEEE fp32; deterministic for any thread count. Note the argument order: p before g.
 *
 * Variants:
 *
 * | function                             | element type     | optimizer |
 * |--------------------------------------|------------------|-----------|
 * | cadam_8bit_blockwise_grad_fp32()     | fp32 (float)     | adam      |
 * | cadam_8bit_blockwise_grad_fp16()     | fp16 (kbit_half) | adam      |
 * | cadam_8bit_blockwise_grad_bf16()     | bf16 (kbit_bf16) | adam      |
 * | cmomentum_8bit_blockwise_grad_fp32() | fp32 (float)     | momentum  |
 * | cmomentum_8bit_blockwise_grad_fp16() | fp16 (kbit_half) | momentum  |
 * | cmomentum_8bit_blockwise_grad_bf16() | bf16 (kbit_bf16) | momentum  |
 * | crmsprop_8bit_blockwise_grad_fp32()  | fp32 (float)     | rmsprop   |
 * | crmsprop_8bit_blockwise_grad_fp16()  | fp16 (kbit_half) | rmsprop   |
 * | crmsprop_8bit_blockwise_grad_bf16()  | bf16 (kbit_bf16) | rmsprop   |
 * | clion_8bit_blockwise_grad_fp32()     | fp32 (float)     | lion      |
 * | clion_8bit_blockwise_grad_fp16()     | fp16 (kbit_half) | lion      |
 * | clion_8bit_blockwise_grad_bf16()     | bf16 (kbit_bf16) | lion      |
 * | cadagrad_8bit_blockwise_grad_fp32()  | fp32 (float)     | adagrad   |
 * | cadagrad_8bit_blockwise_grad_fp16()  | fp16 (kbit_half) | adagrad   |
 * | cadagrad_8bit_blockwise_grad_bf16()  | bf16 (kbit_bf16) | adagrad   |
 * | cademamix_8bit_blockwise_grad_fp32() | fp32 (float)     | ademamix  |
 * | cademamix_8bit_blockwise_grad_fp16() | fp16 (kbit_half) | ademamix  |
 * | cademamix_8bit_blockwise_grad_bf16() | bf16 (kbit_bf16) | ademamix  |
 *
 * @param p            device memory, in/out: n parameters, updated in place (rounded to nearest even).
 * @param g            device memory, in: n gradient elements (not modified).
 * @param state1       device memory, in/out: n 8-bit codes of the first state (quantiles1);
 *                     ademamix: 2n.
 * @param state2       device memory, in/out: n 8-bit codes of the second state (quantiles2), or NULL
 *                     for 1-state optimizers.
 * @param beta1        first-moment decay (momentum / alpha for RMSprop).
 * @param beta2        second-moment decay (Lion: state decay).
 * @param beta3        AdEMAMix slow-moment decay (ignored by others).
 * @param alpha        AdEMAMix mixing factor (ignored by others).
 * @param eps          denominator epsilon.
 * @param step         1-based step count t.
 * @param lr           learning rate.
 * @param quantiles1   device memory, in: 256 ascending floats for state1 (signed dynamic map).
 * @param quantiles2   device memory, in: 256 ascending floats for state2 (unsigned dynamic map), or NULL
 *                     for 1-state optimizers.
 * @param absmax1      device memory, in/out: ceil(n / 256) fp32 block scales of state1; ademamix:
 *                     2 * ceil(n / 256).
 * @param absmax2      device memory, in/out: ceil(n / 256) fp32 block scales of state2, or NULL for
 *                     1-state optimizers.
 * @param weight_decay weight decay; 0 disables.
 * @param gnorm_scale  the gradient is multiplied by this first (bitsandbytes passes 1.0).
 * @param skip_zeros   1-state optimizers: leave elements whose gradient is exactly 0 untouched (their
 *                     state is re-quantized unchanged); ignored by Adam and AdEMAMix.
 * @param n            number of parameters, >= 0.
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL required pointer with n > 0, n < 0,
 *         step < 1); KBIT_STATUS_DEVICE_ERROR.
 * @since optim8 1.0
 */
/** optim8_blockwise: fp32 (float), adam. */
KBIT_API kbit_status cadam_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), adam. */
KBIT_API kbit_status cadam_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), adam. */
KBIT_API kbit_status cadam_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp32 (float), momentum. */
KBIT_API kbit_status cmomentum_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), momentum. */
KBIT_API kbit_status cmomentum_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), momentum. */
KBIT_API kbit_status cmomentum_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp32 (float), rmsprop. */
KBIT_API kbit_status crmsprop_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), rmsprop. */
KBIT_API kbit_status crmsprop_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), rmsprop. */
KBIT_API kbit_status crmsprop_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp32 (float), lion. */
KBIT_API kbit_status clion_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), lion. */
KBIT_API kbit_status clion_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), lion. */
KBIT_API kbit_status clion_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp32 (float), adagrad. */
KBIT_API kbit_status cadagrad_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), adagrad. */
KBIT_API kbit_status cadagrad_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), adagrad. */
KBIT_API kbit_status cadagrad_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp32 (float), ademamix. */
KBIT_API kbit_status cademamix_8bit_blockwise_grad_fp32(float* p, float* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: fp16 (kbit_half), ademamix. */
KBIT_API kbit_status cademamix_8bit_blockwise_grad_fp16(kbit_half* p, kbit_half* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);
/** optim8_blockwise: bf16 (kbit_bf16), ademamix. */
KBIT_API kbit_status cademamix_8bit_blockwise_grad_bf16(kbit_bf16* p, kbit_bf16* g, unsigned char* state1,
    unsigned char* state2, float beta1, float beta2, float beta3, float alpha, float eps, int step, float lr,
    float* quantiles1, float* quantiles2, float* absmax1, float* absmax2, float weight_decay,
    const float gnorm_scale, bool skip_zeros, int n);

/* ---- Paged (managed) memory [managed_ptr_alloc] ---------------------------------------------- */

/**
 * Allocates memory addressable from the host and the device (CUDA managed memory, initially
 * attached to the host; plain 64-byte-aligned host memory on the CPU) for paged optimizer state.
 * @param bytes        size in bytes, > 0.
 * @return the allocation, or NULL on failure (kbit_last_error_message() says why). Free it with
 *         kbit_free_managed_ptr() (bitsandbytes never frees).
 * @since optim8 1.0
 */
KBIT_API void* cget_managed_ptr(size_t bytes);

/**
 * Frees memory from cget_managed_ptr(). NULL is accepted and does nothing.
 * @param ptr          allocation from cget_managed_ptr() of this backend.
 * @return KBIT_STATUS_SUCCESS or KBIT_STATUS_DEVICE_ERROR.
 * @since optim8 1.0
 */
KBIT_API kbit_status kbit_free_managed_ptr(void* ptr);

/**
 * Asynchronously migrates a managed range towards a device, when that device supports concurrent
 * managed access; otherwise does nothing. No-op on the CPU.
 * @param ptr          managed memory from cget_managed_ptr().
 * @param bytes        size of the range in bytes.
 * @param device       device ordinal, or -1 for the host (bitsandbytes' CUDA build fails on -1; kbit
 *                     prefetches to the host).
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL ptr with bytes > 0, device < -1);
 *         KBIT_STATUS_DEVICE_ERROR.
 * @since optim8 1.0
 */
KBIT_API kbit_status cprefetch(void* ptr, size_t bytes, int device);

/**
 * Sets A[i] = value for i < n (asynchronously on the default stream of a device backend).
 *
 * Variants:
 *
 * | function      | element type          |
 * |---------------|-----------------------|
 * | cfill_fp32()  | fp32 (float)          |
 * | cfill_uint8() | uint8 (unsigned char) |
 *
 * @param A            device or managed memory, out: n elements of T.
 * @param B            unused (bitsandbytes passes NULL).
 * @param value        fill value.
 * @param n            number of elements, >= 0 (bitsandbytes' C type is long; int64_t on LP64).
 * @return KBIT_STATUS_SUCCESS; KBIT_STATUS_INVALID_ARGUMENT (NULL A with n > 0, n < 0);
 *         KBIT_STATUS_DEVICE_ERROR.
 * @since optim8 1.0
 */
/** fill: fp32 (float). */
KBIT_API kbit_status cfill_fp32(float* A, float* B, float value, int64_t n);
/** fill: uint8 (unsigned char). */
KBIT_API kbit_status cfill_uint8(unsigned char* A, unsigned char* B, unsigned char value, int64_t n);

/* END GENERATED DECLARATIONS */

KBIT_EXTERN_C_END

#endif /* KBIT_OPTIM8_H */
