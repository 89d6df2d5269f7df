/*
 * kbit.h — umbrella header: the four sub-interfaces of kbit.
 *
 *   kbit_core.h    identity, probe, status strings, last error, memory API   (KBIT_CORE_VERSION_*)
 *   kbit_4bit.h    NF4 / FP4 quantization, 4-bit GEMV / GEMM, nested absmax  (KBIT_4BIT_VERSION_*)
 *   kbit_8bit.h    blockwise dynamic 8-bit, LLM.int8                         (KBIT_8BIT_VERSION_*)
 *   kbit_optim8.h  32-bit and 8-bit optimizers, paged memory                 (KBIT_OPTIM8_VERSION_*)
 *
 * Link a backend directly (-lkbit_cpu) or the loader (-lkbit), which exports the same functions and
 * forwards them to the best backend on the machine; kbit_loader.h adds explicit backend selection.
 */
#ifndef KBIT_H
#define KBIT_H

#include "kbit_core.h"
#include "kbit_4bit.h"
#include "kbit_8bit.h"
#include "kbit_optim8.h"

#endif /* KBIT_H */
