"""kbit as the kernel provider of bitsandbytes' torch ops for CPU tensors (and CUDA tensors where a
kbit CUDA backend is loaded).

    import bitsandbytes, kbit.bitsandbytes
    kbit.bitsandbytes.install()     # before building models: bnb.nn.Linear4bit, Linear8bitLt,
                                    # bnb.optim.Adam8bit, ... now run on kbit's CPU backend

install() registers, with torch.library.register_kernel(op, "cpu", fn), a kernel for each op of
bitsandbytes 0.50.2 that kbit's C ABI covers (OPS below), and registers the same kernels for "cuda"
when torch has a GPU and the loader opens kbit's CUDA backend. Each kernel makes the C calls that
bitsandbytes' CUDA path makes (same function names and arguments, the backend of the tensors' device
through the loader, torch's current stream where the function takes one) and checks every returned
kbit_status: a rejected call raises kbit.KbitError with
kbit_last_error_message() instead of leaving its output uninitialised. Ops that kbit has no kernel
for keep bitsandbytes' own implementation (NOT_COVERED says why).

bitsandbytes' CPU path repacks 4-bit weights into a private layout when has_avx512bf16() is true
(Linear4bit in eval mode without grad, F._convert_weight_packed_for_cpu) and then sends every CPU
gemv_4bit through its fused kernel, which rounds the activations and the result to bf16. install()
keeps that behaviour, so code and tests see what bitsandbytes' own CPU path does: has_avx512bf16()
answers what kbit's CPU backend answers (has_avx512bf16_cpu, abi/kbit_bnb_cpu.def), and gemv_4bit
serves both layouts, told apart by absmax (1-D fp32 in the standard layout, 2-D [K / blocksize, N]
bf16 in the repacked one): the standard layout through cgemm_4bit_inference_naive_*, the repacked one
through the backend's gemv_4bit_inference_cpu_{nf4,fp4}_bf16 (exact fp32 table over the bf16 inputs,
where bitsandbytes' kernel also rounds the table to bf16). A backend without that interface answers
False and never sees the repacked layout. Modules built before install() keep the answer they read
at construction.

torch and bitsandbytes are imported by this module only; the rest of kbit never needs them.
"""
import math
import os
import threading
import warnings
from math import prod

from . import functional as _kf
from ._devices import backend_for
from ._library import KbitError

# op -> what kbit calls for it.
OPS = {
    "quantize_4bit": "cquantize_blockwise_{fp32,fp16,bf16}_{fp4,nf4}",
    "dequantize_4bit": "cdequantize_blockwise_{fp32,fp16,bf16}_{fp4,nf4}",
    "dequantize_4bit.out": "cdequantize_blockwise_{fp32,fp16,bf16}_{fp4,nf4}",
    "gemv_4bit": "cgemm_4bit_inference_naive_{fp32,fp16,bf16}",
    "gemv_4bit.out": "cgemm_4bit_inference_naive_{fp32,fp16,bf16}",
    "gemm_4bit": "cgemm_4bit_{fp32,fp16,bf16}",
    "quantize_blockwise": "cquantize_blockwise_{fp32,fp16,bf16}",
    "dequantize_blockwise": "cdequantize_blockwise_{fp32,fp16,bf16}",
    "dequantize_blockwise.out": "cdequantize_blockwise_{fp32,fp16,bf16}",
    "int8_vectorwise_quant": "kbit_int8_vectorwise_quant (fp16; fp32 and bf16 in numpy, as bitsandbytes' default)",
    "int8_double_quant": "kbit_int8_vectorwise_quant (rows; columns in numpy, as bitsandbytes' CUDA path)",
    "int8_linear_matmul": "cigemmlt_32",
    "int8_linear_matmul.out": "cigemmlt_32",
    "int8_mm_dequant": "cdequant_mm_int32_fp16",
    "optimizer_update_32bit": "c<optimizer>32bit_grad_*",
    "optimizer_update_8bit_blockwise": "c<optimizer>_8bit_blockwise_grad_*",
}
NOT_COVERED = {
    "int8_vectorwise_dequant": "no kbit kernel: bitsandbytes' default torch expression (A * stats / 127) stays",
    "int8_scaled_mm": "composite: bitsandbytes' default calls int8_linear_matmul and int8_mm_dequant, which reach kbit",
    "int8_mixed_scaled_mm": "composite: its default calls int8_scaled_mm and torch's matmul for the outlier columns",
}

_DT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_OPT32 = {"adam": ("cadam32bit_grad_fp32", "cadam32bit_grad_fp16", "cadam32bit_grad_bf16"),
          "momentum": ("cmomentum32bit_grad_32", "cmomentum32bit_grad_16", "kbit_momentum32bit_grad_bf16"),
          "rmsprop": ("crmsprop32bit_grad_32", "crmsprop32bit_grad_16", "kbit_rmsprop32bit_grad_bf16"),
          "lion": ("clion32bit_grad_fp32", "clion32bit_grad_fp16", "clion32bit_grad_bf16"),
          "adagrad": ("cadagrad32bit_grad_32", "cadagrad32bit_grad_16", "kbit_adagrad32bit_grad_bf16"),
          "lamb": ("cadam32bit_grad_fp32", "cadam32bit_grad_fp16", "cadam32bit_grad_bf16"),
          "ademamix": ("cademamix32bit_grad_fp32", "cademamix32bit_grad_fp16", "cademamix32bit_grad_bf16"),
          "lars": ("cmomentum32bit_grad_32", "cmomentum32bit_grad_16", "kbit_momentum32bit_grad_bf16")}
# bitsandbytes 0.50.2's 8-bit blockwise op takes no update norm: its CPU path runs "lamb" as Adam and
# "lars" as momentum, with no update-norm clipping (LAMB8bit / LARS8bit clip only parameters small enough
# for 32-bit state, through optimizer_update_32bit).
_OPT8_KERNEL = {"adam": "adam", "momentum": "momentum", "rmsprop": "rmsprop", "lion": "lion", "adagrad": "adagrad",
                "ademamix": "ademamix", "lamb": "adam", "lars": "momentum"}
_OPT8 = {name: tuple(f"c{kernel}_8bit_blockwise_grad_{d}" for d in ("fp32", "fp16", "bf16"))
         for name, kernel in _OPT8_KERNEL.items()}

_lock = threading.Lock()
_installed = None
_devices_served = ()


def _torch():
    import torch
    return torch


def _lib(t):
    """The backend of tensor t's device (kbit.register_backend's map), whose every call raises KbitError
    on a non-zero status."""
    return backend_for(t.device.type).checked


def _stream(t):
    """torch's current stream on t's device for the C functions that take one (None: the host, or the
    device's default stream), as bitsandbytes' CUDA path passes it."""
    return _torch().cuda.current_stream(t.device).cuda_stream if t.device.type == "cuda" else None


def _dt(t, what):
    name = str(t.dtype).replace("torch.", "")
    if name not in _DT:
        raise ValueError(f"kbit.bitsandbytes: {what} must be float32, float16 or bfloat16, not {name}")
    return _DT[name]


def _ptr(t):
    return None if t is None else t.data_ptr()


def _int32(what, v):
    if not 0 <= v < 2 ** 31:
        raise ValueError(f"kbit.bitsandbytes: {what} {v} does not fit the int32 of bitsandbytes' C functions")
    return v


def _quantize_4bit(A, blocksize, quant_type, quant_storage):
    torch = _torch()
    A = A.contiguous()
    n = A.numel()
    absmax = torch.empty((-(n // -blocksize),), dtype=torch.float32, device=A.device)
    out = torch.empty(((n + 1) // (quant_storage.itemsize * 2), 1), dtype=quant_storage, device=A.device)
    getattr(_lib(A), f"cquantize_blockwise_{_dt(A, 'A')}_{quant_type}")(
        None, A.data_ptr(), absmax.data_ptr(), out.data_ptr(), blocksize, _int32("n", n))
    return out, absmax


def _dequantize_4bit_into(A, absmax, blocksize, quant_type, dtype, out):
    A = A.contiguous()
    absmax = absmax.contiguous()
    fn = getattr(_lib(A), f"cdequantize_blockwise_{_dt(out, 'dtype')}_{quant_type}")
    fn(None, A.data_ptr(), absmax.data_ptr(), out.data_ptr(), blocksize, _int32("n", out.numel()), _stream(A))


def _dequantize_4bit(A, absmax, blocksize, quant_type, shape, dtype):
    out = _torch().empty(tuple(shape), dtype=dtype, device=A.device)
    _dequantize_4bit_into(A, absmax, blocksize, quant_type, dtype, out)
    return out


def _dequantize_4bit_out(A, absmax, blocksize, quant_type, shape, dtype, out):
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.is_contiguous():
        raise ValueError(f"kbit.bitsandbytes: out must be a contiguous {dtype} tensor of shape {tuple(shape)}, "
                         f"not {out.dtype} {tuple(out.shape)}")
    _dequantize_4bit_into(A, absmax, blocksize, quant_type, dtype, out)


_bnb_cpu_functions = None


def _bnb_cpu():
    """The CPU backend's bitsandbytes-CPU functions (abi/kbit_bnb_cpu.def: the backend file exports them
    beside its tables; the loader does not forward them), as a ctypes library typed from the list, or
    None when the backend lacks that interface at major 1."""
    global _bnb_cpu_functions
    with _lock:
        if _bnb_cpu_functions is None:
            import ctypes
            from . import _abi
            found = False
            try:
                cdll = ctypes.CDLL(backend_for("cpu").path)  # already loaded by the loader: the same handle
                version = cdll.kbit_bnb_cpu_interface_version
                version.restype, version.argtypes = ctypes.c_uint32, []
                found = version() >> 16 == 1
            except (OSError, AttributeError):
                pass
            if found:
                for fn in _abi.functions("bnb_cpu"):
                    f = getattr(cdll, fn["name"])
                    f.restype, f.argtypes = _abi.signature(fn)
            _bnb_cpu_functions = cdll if found else False
        return _bnb_cpu_functions or None


def _has_avx512bf16():
    lib = _bnb_cpu()
    return bool(lib is not None and lib.has_avx512bf16_cpu())


def _is_repacked(absmax):
    # F._convert_weight_packed_for_cpu's [K / blocksize, N]; the standard layout's absmax is 1-D
    return absmax.dim() == 2 and absmax.device.type == "cpu"


def _gemv_4bit_repacked(A, B, shapeB, absmax, code, blocksize):
    """bitsandbytes' repacked CPU layout: any number of rows, computed in bf16 as bitsandbytes does."""
    torch = _torch()
    lib = _bnb_cpu()
    if lib is None:
        raise ValueError("kbit.bitsandbytes: a weight in bitsandbytes' repacked CPU layout, but kbit's CPU backend "
                         "lacks the bnb_cpu interface (gemv_4bit_inference_cpu_*_bf16)")
    if B.dtype != torch.uint8:
        B = B.contiguous().view(torch.uint8)
    n, k = int(shapeB[0]), int(shapeB[1])
    if A.shape[-1] != k:
        raise ValueError(f"kbit.bitsandbytes: gemv_4bit: A's last dimension {A.shape[-1]} is not the weight's {k}")
    rows = A.reshape(-1, k).to(torch.bfloat16).contiguous()
    absmax = absmax.to(torch.bfloat16).contiguous()
    out = torch.empty((rows.shape[0], n), dtype=torch.bfloat16)
    name = f"gemv_4bit_inference_cpu_{'fp4' if float(code[1]) > 0 else 'nf4'}_bf16"  # bitsandbytes' own test
    status = getattr(lib, name)(rows.shape[0], n, k, rows.data_ptr(), B.contiguous().data_ptr(), absmax.data_ptr(),
                                out.data_ptr(), blocksize, k, n)
    if status != 0:
        raise backend_for("cpu").error(name, status)
    return out.to(A.dtype).reshape(*A.shape[:-1], n)


def _gemv_4bit_into(A, B, shapeB, absmax, code, blocksize, out):
    if _is_repacked(absmax):
        out.copy_(_gemv_4bit_repacked(A, B, shapeB, absmax, code, blocksize))
        return
    A = A.contiguous()
    if B.dtype != _torch().uint8:
        B = B.contiguous().view(_torch().uint8)
    m, k = int(shapeB[0]), int(shapeB[1])
    if A.shape[-1] != k or A.numel() != k:
        raise ValueError(f"kbit.bitsandbytes: gemv_4bit takes one row of {k} elements, not A of shape {tuple(A.shape)}")
    fn = getattr(_lib(A), f"cgemm_4bit_inference_naive_{_dt(A, 'A')}")
    fn(_int32("m", m), 1, _int32("k", k), A.data_ptr(), B.contiguous().data_ptr(), absmax.contiguous().data_ptr(),
       code.contiguous().data_ptr(), out.data_ptr(), m, (k + 1) // 2, m, blocksize, _stream(A))


def _gemv_4bit(A, B, shapeB, absmax, code, blocksize):
    if _is_repacked(absmax):
        return _gemv_4bit_repacked(A, B, shapeB, absmax, code, blocksize)
    out = _torch().empty((*A.shape[:-1], shapeB[0]), dtype=A.dtype, device=A.device)
    _gemv_4bit_into(A, B, shapeB, absmax, code, blocksize, out)
    return out


def _gemv_4bit_out(A, B, shapeB, absmax, code, blocksize, out):
    if tuple(out.shape) != (*A.shape[:-1], shapeB[0]) or out.dtype != A.dtype or not out.is_contiguous():
        raise ValueError(f"kbit.bitsandbytes: gemv_4bit out must be a contiguous {A.dtype} tensor of shape "
                         f"{(*A.shape[:-1], shapeB[0])}")
    _gemv_4bit_into(A, B, shapeB, absmax, code, blocksize, out)


def _gemm_4bit(A, B, shapeB, absmax, blocksize, quant_type, bias=None, absmax_8bit=None, absmax_code=None,
               absmax_offset=None):
    torch = _torch()
    A = A.contiguous()
    K = A.shape[-1]
    M, N = A.numel() // K, int(shapeB[0])
    out = torch.empty((*A.shape[:-1], N), dtype=A.dtype, device=A.device)
    if B.dtype != torch.uint8:
        B = B.contiguous().view(torch.uint8)
    if absmax_offset is not None and absmax_offset.dtype != torch.float32:
        absmax_offset = absmax_offset.float()  # the C function reads one float (checkpoints may hold bf16/fp16)
    c = lambda t: None if t is None else t.contiguous()  # noqa: E731
    absmax, absmax_8bit, absmax_code, absmax_offset, bias = map(c, (absmax, absmax_8bit, absmax_code,
                                                                  absmax_offset, bias))
    getattr(_lib(A), f"cgemm_4bit_{_dt(A, 'A')}")(
        A.data_ptr(), B.contiguous().data_ptr(), _ptr(absmax), _ptr(absmax_8bit), _ptr(absmax_code),
        _ptr(absmax_offset), out.data_ptr(), _ptr(bias), _int32("M", M), _int32("N", N), _int32("K", K), blocksize,
        1 if quant_type == "fp4" else 2, _stream(A))
    return out


def _quantize_blockwise(A, code, blocksize):
    torch = _torch()
    A = A.contiguous()
    if code.dtype != torch.float32:
        raise ValueError(f"kbit.bitsandbytes: code must be float32, not {code.dtype}")
    n = A.numel()
    absmax = torch.empty((-(n // -blocksize),), dtype=torch.float32, device=A.device)
    out = torch.empty_like(A, dtype=torch.uint8)
    getattr(_lib(A), f"cquantize_blockwise_{_dt(A, 'A')}")(code.contiguous().data_ptr(), A.data_ptr(),
                                                          absmax.data_ptr(), out.data_ptr(), blocksize,
                                                          _int32("n", n))
    return out, absmax


def _dequantize_blockwise_into(A, absmax, code, blocksize, out):
    A = A.contiguous()
    getattr(_lib(A), f"cdequantize_blockwise_{_dt(out, 'dtype')}")(
        code.contiguous().data_ptr(), A.data_ptr(), absmax.contiguous().data_ptr(), out.data_ptr(), blocksize,
        _int32("n", A.numel()), _stream(A))


def _dequantize_blockwise(A, absmax, code, blocksize, dtype):
    out = _torch().empty_like(A, dtype=dtype, memory_format=_torch().contiguous_format)
    _dequantize_blockwise_into(A, absmax, code, blocksize, out)
    return out


def _dequantize_blockwise_out(A, absmax, code, blocksize, dtype, out):
    if out.dtype != dtype or out.shape != A.shape or not out.is_contiguous():
        raise ValueError(f"kbit.bitsandbytes: out must be a contiguous {dtype} tensor of shape {tuple(A.shape)}")
    _dequantize_blockwise_into(A, absmax, code, blocksize, out)


def _int8_vectorwise_quant(A, threshold=0.0):
    torch = _torch()
    _dt(A, "A")
    if threshold < 0.0:
        raise ValueError("kbit.bitsandbytes: threshold must be non-negative")
    out, row_stats, outlier_cols = _kf.int8_vectorwise_quant(A.contiguous(), threshold)
    if threshold > 0.0 and outlier_cols is None:
        outlier_cols = torch.empty(0, dtype=torch.int64, device=A.device)
    return out, row_stats, outlier_cols


def _int8_double_quant(A, threshold=0.0):
    _dt(A, "A")
    if threshold < 0.0:
        raise ValueError("kbit.bitsandbytes: threshold must be non-negative")
    quant_row, quant_col, row_stats, col_stats, outlier_cols = _kf.int8_double_quant(A.contiguous(),
                                                                                     threshold=threshold)
    if threshold > 0.0 and outlier_cols is None:
        outlier_cols = _torch().empty(0, dtype=_torch().int64, device=A.device)
    return quant_row, quant_col, row_stats, col_stats, outlier_cols


def _int8_linear_matmul_into(A, B, out):
    torch = _torch()
    if A.dtype != torch.int8 or B.dtype != torch.int8:
        raise ValueError(f"kbit.bitsandbytes: A and B must be int8, not {A.dtype} and {B.dtype}")
    if out.dtype != torch.int32 or tuple(out.shape) != (*A.shape[:-1], B.shape[0]) or not out.is_contiguous():
        raise ValueError(f"kbit.bitsandbytes: out must be a contiguous int32 tensor of shape "
                         f"{(*A.shape[:-1], B.shape[0])}")
    if prod(A.shape) <= 0:
        raise ValueError(f"kbit.bitsandbytes: input tensor dimensions need to be > 0: {tuple(A.shape)}")
    _kf.int8_linear_matmul(A.contiguous(), B.contiguous(), out=out)
    return out


def _int8_linear_matmul(A, B):
    out = _torch().empty((*A.shape[:-1], B.shape[0]), dtype=_torch().int32, device=A.device)
    return _int8_linear_matmul_into(A, B, out)


def _int8_linear_matmul_out(A, B, out):
    _int8_linear_matmul_into(A, B, out)


def _int8_mm_dequant(A, row_stats, col_stats, dtype=None, bias=None):
    torch = _torch()
    if A.dtype != torch.int32 or row_stats.dtype != torch.float32 or col_stats.dtype != torch.float32:
        raise ValueError("kbit.bitsandbytes: int8_mm_dequant takes int32 A and float32 row_stats, col_stats")
    fused = bias if bias is not None and bias.dtype == torch.float16 else None
    out = _kf.int8_mm_dequant(A.contiguous(), row_stats.contiguous(), col_stats.contiguous(),
                              bias=None if fused is None else fused.contiguous())
    if bias is not None and fused is None:
        out = out.add_(bias)
    return out.to(dtype or torch.float16)


def _optimizer_update_32bit(optimizer_name, g, p, state1, state2, unorm_vec, max_unorm, param_norm, beta1, beta2,
                            beta3, alpha, eps, weight_decay, step, lr, gnorm_scale, skip_zeros=False):
    fns = _OPT32.get(optimizer_name)
    if fns is None:
        raise ValueError(f"kbit.bitsandbytes: unsupported optimizer {optimizer_name!r} (supported: {', '.join(_OPT32)})")
    fn = getattr(_lib(g), fns[("fp32", "fp16", "bf16").index(_dt(g, "g"))])
    for t in (g, p, state1, state2, unorm_vec):
        if t is not None and not t.is_contiguous():
            raise ValueError("kbit.bitsandbytes: optimizer tensors must be contiguous (they are updated in place)")
    n = g.numel()
    f32 = _torch().float32
    _check_state_sizes(f"optimizer_update_32bit({optimizer_name!r})", g, p, (
        ("state1", state1, f32, (2 if optimizer_name == "ademamix" else 1) * n),
        ("state2", state2, f32, n if optimizer_name in _TWO_STATE else None),
        ("unorm_vec", unorm_vec, f32, 1 if max_unorm > 0.0 else None)))
    norm_factor = None
    if g.device.type == "cpu" and max_unorm > 0.0:
        max_unorm, norm_factor = _cpu_update_norm(optimizer_name, max_unorm, beta1, beta2, step)
        if norm_factor is None:
            unorm_vec = None
    fn(g.data_ptr(), p.data_ptr(), state1.data_ptr(), _ptr(state2), _ptr(unorm_vec), max_unorm, param_norm, beta1,
       beta2, beta3, alpha, eps, weight_decay, step, lr, gnorm_scale, bool(skip_zeros), _int32("n", g.numel()))
    if norm_factor is not None and unorm_vec is not None:
        unorm_vec.sqrt_().mul_(norm_factor)


_TWO_STATE = ("adam", "lamb", "ademamix")


def _check_state_sizes(what, g, p, states):
    """The C kernels read and write every state in place at the sizes the optimizer implies: a shorter
    tensor would be overrun (bitsandbytes' AdEMAMix32bit allocates state1 at the parameter's size and
    fails on its own CPU path), so each is checked first. states: (name, tensor, dtype, elements or
    None where the kernel reads none)."""
    if p.numel() != g.numel() or p.dtype != g.dtype:
        raise ValueError(f"kbit.bitsandbytes: {what}: p ({p.dtype}, {p.numel()} elements) does not match g "
                         f"({g.dtype}, {g.numel()} elements)")
    for name, t, dtype, numel in states:
        if numel is None:
            continue
        if t is None:
            raise ValueError(f"kbit.bitsandbytes: {what}: {name} is required")
        if t.dtype != dtype or t.numel() != numel or t.device != g.device:
            raise ValueError(f"kbit.bitsandbytes: {what}: {name} is {t.dtype} with {t.numel()} elements on "
                             f"{t.device}, the kernel needs {dtype} with {numel} on {g.device}")


def _cpu_update_norm(optimizer_name, max_unorm, beta1, beta2, step):
    """(max_unorm for the C call, factor turning its *unorm into bitsandbytes' CPU value, or None for no
    clipping) so that update-norm clipping on CPU tensors is that of bitsandbytes' CPU path. The C
    kernels clip as bitsandbytes' CUDA kernels do and leave the sum of squares in *unorm; the CPU path
    stores the norm itself, measures Adam/LAMB's update before bias correction (m / (sqrt(v) + eps * c2),
    c1 = 1 - beta1^t, c2 = sqrt(1 - beta2^t): c1 / c2 times the norm of the corrected update the C
    kernel measures, so its limit is scaled by c2 / c1), and does not clip Lion, Adagrad or AdEMAMix."""
    if optimizer_name in ("adam", "lamb"):
        ratio = math.sqrt(1.0 - beta2 ** step) / (1.0 - beta1 ** step)
        return max_unorm * ratio, 1.0 / ratio
    if optimizer_name in ("momentum", "lars", "rmsprop"):
        return max_unorm, 1.0
    return 0.0, None


def _optimizer_update_8bit_blockwise(optimizer_name, g, p, state1, state2, beta1, beta2, beta3, alpha, eps, step,
                                     lr, qmap1, qmap2, absmax1, absmax2, weight_decay, gnorm_scale,
                                     skip_zeros=False):
    fns = _OPT8.get(optimizer_name)
    if fns is None:
        raise ValueError(f"kbit.bitsandbytes: unsupported optimizer {optimizer_name!r} (supported: {', '.join(_OPT8)})")
    fn = getattr(_lib(g), fns[("fp32", "fp16", "bf16").index(_dt(g, "g"))])
    for t in (g, p, state1, state2, qmap1, qmap2, absmax1, absmax2):
        if t is not None and not t.is_contiguous():
            raise ValueError("kbit.bitsandbytes: optimizer tensors must be contiguous (they are updated in place)")
    torch = _torch()
    n = g.numel()
    k, blocks, two = (2 if optimizer_name == "ademamix" else 1), -(n // -256), optimizer_name in _TWO_STATE
    _check_state_sizes(f"optimizer_update_8bit_blockwise({optimizer_name!r})", g, p, (
        ("state1", state1, torch.uint8, k * n), ("absmax1", absmax1, torch.float32, k * blocks),
        ("qmap1", qmap1, torch.float32, 256), ("state2", state2, torch.uint8, n if two else None),
        ("absmax2", absmax2, torch.float32, blocks if two else None),
        ("qmap2", qmap2, torch.float32, 256 if two else None)))
    fn(p.data_ptr(), g.data_ptr(), state1.data_ptr(), _ptr(state2), beta1, beta2, beta3, alpha, eps, step, lr,
       qmap1.data_ptr(), _ptr(qmap2), absmax1.data_ptr(), _ptr(absmax2), weight_decay, gnorm_scale, bool(skip_zeros),
       _int32("n", g.numel()))


_KERNELS = {
    "quantize_4bit": _quantize_4bit,
    "dequantize_4bit": _dequantize_4bit,
    "dequantize_4bit.out": _dequantize_4bit_out,
    "gemv_4bit": _gemv_4bit,
    "gemv_4bit.out": _gemv_4bit_out,
    "gemm_4bit": _gemm_4bit,
    "quantize_blockwise": _quantize_blockwise,
    "dequantize_blockwise": _dequantize_blockwise,
    "dequantize_blockwise.out": _dequantize_blockwise_out,
    "int8_vectorwise_quant": _int8_vectorwise_quant,
    "int8_double_quant": _int8_double_quant,
    "int8_linear_matmul": _int8_linear_matmul,
    "int8_linear_matmul.out": _int8_linear_matmul_out,
    "int8_mm_dequant": _int8_mm_dequant,
    "optimizer_update_32bit": _optimizer_update_32bit,
    "optimizer_update_8bit_blockwise": _optimizer_update_8bit_blockwise,
}
assert set(_KERNELS) == set(OPS)


def _op_exists(torch, name):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.bitsandbytes, base, None)
    return packet is not None and hasattr(packet, overload or "default")


def _cuda_served(torch):
    """True when CUDA tensors can go to a kbit CUDA backend: torch sees a GPU and the loader opens the
    backend registered for "cuda" (kbit.register_backend)."""
    if not torch.cuda.is_available():
        return False
    try:
        backend_for("cuda")
    except (KbitError, ValueError):
        return False
    return True


def install():
    """Registers kbit's kernels on every bitsandbytes op of OPS that this bitsandbytes defines (imports
    bitsandbytes first): for CPU tensors, and for CUDA tensors too when torch has a GPU and the loader
    opens a CUDA backend (the calls then get torch's current stream where the C function takes one, as
    bitsandbytes' CUDA path passes it). Returns the list of ops registered. Idempotent."""
    global _installed, _devices_served
    torch = _torch()
    # Before the lock: a first `import bitsandbytes` defines the ops, registers bitsandbytes' own kernels
    # and, with kbit pip-installed, calls autoload() and so install() itself (which must not wait on it).
    import bitsandbytes  # noqa: F401
    import bitsandbytes.functional as bnbf
    with _lock:
        if _installed is not None:
            return list(_installed)
        backend_for("cpu")  # open the CPU backend now: a missing library fails here, not in a layer
        devices = ["cpu"] + (["cuda"] if _cuda_served(torch) else [])
        done = []
        for name, fn in _KERNELS.items():
            if _op_exists(torch, name):
                for device in devices:
                    torch.library.register_kernel(f"bitsandbytes::{name}", device, fn)
                done.append(name)
        _devices_served = tuple(devices)
        # bitsandbytes repacks 4-bit weights for the CPU when this answers True (module docstring).
        bnbf.has_avx512bf16 = _has_avx512bf16
        try:
            import bitsandbytes.nn.modules as bnbm
            bnbm.has_avx512bf16 = bnbf.has_avx512bf16
        except ImportError:  # pragma: no cover - bitsandbytes without nn
            pass
        _installed = tuple(done)
        return done


ENV = "KBIT_BITSANDBYTES"


def autoload():
    """bitsandbytes' "bitsandbytes.backends" entry point (pyproject.toml): `import bitsandbytes` calls
    it, with no argument, once its own kernels are registered, so that an installed kbit serves
    bitsandbytes' CPU ops with no code. KBIT_BITSANDBYTES=0 turns it off (1 or unset: on; any other
    value raises ValueError, which bitsandbytes reports as a failed backend). A kbit that cannot open
    its CPU backend warns (RuntimeWarning) and leaves bitsandbytes' own kernels in place rather than
    break `import bitsandbytes`. Returns install()'s list, or None when off or failed."""
    value = os.environ.get(ENV, "1").strip()
    if value == "0":
        return None
    if value not in ("1", ""):
        raise ValueError(f"kbit.bitsandbytes: {ENV}={value!r}: use 0 (off) or 1 (on, the default)")
    try:
        return install()
    except (KbitError, OSError) as e:
        warnings.warn(f"kbit.bitsandbytes: kbit's kernels were not registered with bitsandbytes ({e}); "
                      f"bitsandbytes' own kernels stay. Set {ENV}=0 to silence this.", RuntimeWarning, stacklevel=2)
        return None


def installed():
    """The ops install() registered, or None before install()."""
    return None if _installed is None else list(_installed)


def devices():
    """The device types install() registered kbit's kernels for ("cpu", and "cuda" when served), or
    None before install()."""
    return None if _installed is None else list(_devices_served)


__all__ = ["install", "installed", "devices", "autoload", "ENV", "OPS", "NOT_COVERED"]
