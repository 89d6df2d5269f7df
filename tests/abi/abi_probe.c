/* The public ABI as debug information: every function of every .def list in abi/ (including the
 * loader API and the CPU backend's bitsandbytes-CPU interface) defined with an empty body against the
 * public headers, built with -g into a small shared object whose abidw description is the baseline
 * abi/kbit.abi. abidiff of a fresh build against the baseline (ctest abi.baseline) catches any
 * change of a declaration, a parameter or return type, or the layout of a public struct (kbit_half,
 * kbit_bf16, the loader's tables). */
#include "kbit/kbit.h"
#include "kbit/kbit_bnb_cpu.h"
#include "kbit/kbit_loader.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif

#define KBIT_FN(minor, ret, name, params, args, variant) \
    KBIT_API ret name params { return (ret)0; }
#include "kbit_core.def"
#include "kbit_4bit.def"
#include "kbit_8bit.def"
#include "kbit_optim8.def"
#include "kbit_loader.def"
#include "kbit_bnb_cpu.def"
#undef KBIT_FN

KBIT_API uint32_t kbit_core_interface_version(void) { return 0; }
KBIT_API uint32_t kbit_4bit_interface_version(void) { return 0; }
KBIT_API uint32_t kbit_8bit_interface_version(void) { return 0; }
KBIT_API uint32_t kbit_optim8_interface_version(void) { return 0; }
KBIT_API uint32_t kbit_loader_interface_version(void) { return 0; }
KBIT_API uint32_t kbit_bnb_cpu_interface_version(void) { return 0; }
