// fn_tags.h — the [fn:NAME] tags of the function families that test cases call whole (see
// functions.h). A test case names every exported function it calls in its tag string, single
// functions literally and whole families by these macros:
//   TEMPLATE_TEST_CASE("4bit quantize: ...", "[4bit][quantize]" FN_4BIT_QUANTIZE, float, kbit_half, kbit_bf16)
// `kbit_conformance --function NAME --list-tests` lists the test cases of one function.
#pragma once

// ---- 4bit ----------------------------------------------------------------------------------------
#define FN_4BIT_QUANTIZE_FP4 \
    "[fn:cquantize_blockwise_fp32_fp4][fn:cquantize_blockwise_fp16_fp4][fn:cquantize_blockwise_bf16_fp4]"
#define FN_4BIT_QUANTIZE_NF4 \
    "[fn:cquantize_blockwise_fp32_nf4][fn:cquantize_blockwise_fp16_nf4][fn:cquantize_blockwise_bf16_nf4]"
#define FN_4BIT_QUANTIZE FN_4BIT_QUANTIZE_FP4 FN_4BIT_QUANTIZE_NF4
#define FN_4BIT_DEQUANTIZE_FP4 \
    "[fn:cdequantize_blockwise_fp32_fp4][fn:cdequantize_blockwise_fp16_fp4][fn:cdequantize_blockwise_bf16_fp4]"
#define FN_4BIT_DEQUANTIZE_NF4 \
    "[fn:cdequantize_blockwise_fp32_nf4][fn:cdequantize_blockwise_fp16_nf4][fn:cdequantize_blockwise_bf16_nf4]"
#define FN_4BIT_DEQUANTIZE FN_4BIT_DEQUANTIZE_FP4 FN_4BIT_DEQUANTIZE_NF4
#define FN_4BIT_GEMV \
    "[fn:cgemm_4bit_inference_naive_fp32][fn:cgemm_4bit_inference_naive_fp16][fn:cgemm_4bit_inference_naive_bf16]"
#define FN_4BIT_GEMM "[fn:cgemm_4bit_fp32][fn:cgemm_4bit_fp16][fn:cgemm_4bit_bf16]"
#define FN_4BIT_TORCHAO                                                                                      \
    "[fn:kbit_quantize_nf4_torchao_fp32][fn:kbit_quantize_nf4_torchao_fp16][fn:kbit_quantize_nf4_torchao_bf16]" \
    "[fn:kbit_dequantize_nf4_torchao_fp32][fn:kbit_dequantize_nf4_torchao_fp16]"                              \
    "[fn:kbit_dequantize_nf4_torchao_bf16]"

// ---- 8bit ----------------------------------------------------------------------------------------
#define FN_8BIT_QUANTIZE "[fn:cquantize_blockwise_fp32][fn:cquantize_blockwise_fp16][fn:cquantize_blockwise_bf16]"
#define FN_8BIT_DEQUANTIZE \
    "[fn:cdequantize_blockwise_fp32][fn:cdequantize_blockwise_fp16][fn:cdequantize_blockwise_bf16]"

// ---- optim8: each optimizer of one element type ------------------------------------------------------
#define FN_OPTIM8_32BIT_FP32                                                                              \
    "[fn:cadam32bit_grad_fp32][fn:cademamix32bit_grad_fp32][fn:clion32bit_grad_fp32]"                     \
    "[fn:cmomentum32bit_grad_32][fn:crmsprop32bit_grad_32][fn:cadagrad32bit_grad_32]"
#define FN_OPTIM8_32BIT_FP16                                                                              \
    "[fn:cadam32bit_grad_fp16][fn:cademamix32bit_grad_fp16][fn:clion32bit_grad_fp16]"                     \
    "[fn:cmomentum32bit_grad_16][fn:crmsprop32bit_grad_16][fn:cadagrad32bit_grad_16]"
#define FN_OPTIM8_32BIT_BF16                                                                              \
    "[fn:cadam32bit_grad_bf16][fn:cademamix32bit_grad_bf16][fn:clion32bit_grad_bf16]"                     \
    "[fn:kbit_momentum32bit_grad_bf16][fn:kbit_rmsprop32bit_grad_bf16][fn:kbit_adagrad32bit_grad_bf16]"
#define FN_OPTIM8_32BIT FN_OPTIM8_32BIT_FP32 FN_OPTIM8_32BIT_FP16 FN_OPTIM8_32BIT_BF16
#define FN_OPTIM8_8BIT_FP32                                                                                   \
    "[fn:cadam_8bit_blockwise_grad_fp32][fn:cmomentum_8bit_blockwise_grad_fp32]"                              \
    "[fn:crmsprop_8bit_blockwise_grad_fp32][fn:clion_8bit_blockwise_grad_fp32]"                               \
    "[fn:cadagrad_8bit_blockwise_grad_fp32][fn:cademamix_8bit_blockwise_grad_fp32]"
#define FN_OPTIM8_8BIT_FP16                                                                                   \
    "[fn:cadam_8bit_blockwise_grad_fp16][fn:cmomentum_8bit_blockwise_grad_fp16]"                              \
    "[fn:crmsprop_8bit_blockwise_grad_fp16][fn:clion_8bit_blockwise_grad_fp16]"                               \
    "[fn:cadagrad_8bit_blockwise_grad_fp16][fn:cademamix_8bit_blockwise_grad_fp16]"
#define FN_OPTIM8_8BIT_BF16                                                                                   \
    "[fn:cadam_8bit_blockwise_grad_bf16][fn:cmomentum_8bit_blockwise_grad_bf16]"                              \
    "[fn:crmsprop_8bit_blockwise_grad_bf16][fn:clion_8bit_blockwise_grad_bf16]"                               \
    "[fn:cadagrad_8bit_blockwise_grad_bf16][fn:cademamix_8bit_blockwise_grad_bf16]"
#define FN_OPTIM8_8BIT FN_OPTIM8_8BIT_FP32 FN_OPTIM8_8BIT_FP16 FN_OPTIM8_8BIT_BF16

// ---- bnb_cpu -------------------------------------------------------------------------------------
#define FN_BNB_CPU_8BIT                                                                                        \
    "[fn:cquantize_blockwise_cpu_fp32][fn:cquantize_blockwise_cpu_bf16][fn:cquantize_blockwise_cpu_fp16]"      \
    "[fn:cdequantize_blockwise_cpu_fp32][fn:cdequantize_blockwise_cpu_bf16][fn:cdequantize_blockwise_cpu_fp16]"
#define FN_BNB_CPU_DEQUANTIZE_4BIT                                                                          \
    "[fn:cdequantize_blockwise_cpu_fp4_fp32][fn:cdequantize_blockwise_cpu_fp4_fp16]"                       \
    "[fn:cdequantize_blockwise_cpu_fp4_bf16][fn:cdequantize_blockwise_cpu_nf4_fp32]"                       \
    "[fn:cdequantize_blockwise_cpu_nf4_fp16][fn:cdequantize_blockwise_cpu_nf4_bf16]"
