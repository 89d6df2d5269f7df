"""torchao's NF4Tensor format (docs/behaviour.md §5) and conversion to and from bitsandbytes' layout, over the
kbit_*_nf4_torchao functions. No torch needed: an NF4Tensor is held as its inner arrays.

Conversions reuse the packed nibbles (same index order and packing in both formats) and re-derive the
scales: torchao -> bitsandbytes takes torchao's dequantized block scales as fp32 absmax (nested again
if asked); bitsandbytes -> torchao re-quantizes the block scales with torchao's linear int8 scheme.
Neither direction is bit-exact in the dequantized values: the two formats use different 16-entry
tables (torchao rounds its levels to 4 decimals and to the weight's dtype).
"""
from dataclasses import dataclass

import numpy as np

from ._devices import Ctx
from .functional import (_SUFFIX, BLOCKSIZES, FLOAT_DTYPES, _addr, _arg, _check_state, _plain_absmax,
                         _state_4bit)


@dataclass
class NF4Tensor:
    """The inner tensors and metadata of a torchao NF4Tensor (names as torchao's)."""
    quantized_data: object      # uint8 [n/2]
    quantized_scalers: object   # int8 [n/block_size]
    quantization_factor: object  # dtype [n/block_size/scaler_block_size]
    scaler_mean: object         # dtype [1] (a scalar in torchao)
    block_size: int
    scaler_block_size: int
    shape: tuple
    dtype: np.dtype

    @property
    def n_blocks(self):
        return int(np.prod(self.shape, dtype=np.int64)) // self.block_size

    @property
    def nf4(self):
        """torchao's 16-entry table in the weight's dtype."""
        return nf4_table(self.dtype)


def _check_sizes(fn, n, block_size, scaler_block_size):
    if block_size <= 0 or block_size % 2 or scaler_block_size <= 0:
        raise ValueError(f"{fn}: block_size must be even and > 0, scaler_block_size > 0")
    if n % block_size or (n // block_size) % scaler_block_size:
        raise ValueError(f"{fn}: {n} elements are not whole blocks of {block_size} x {scaler_block_size} "
                         "(torchao needs numel % block_size == 0 and n_blocks % scaler_block_size == 0)")


def to_nf4(w, block_size=64, scaler_block_size=256):
    """torchao's to_nf4(w): quantizes a float32/float16/bfloat16 array, arithmetic in w's dtype."""
    fn = "to_nf4"
    ctx = Ctx(w)
    wa = _arg(ctx, fn, w, "w", FLOAT_DTYPES)
    shape, dtype = wa.shape, wa.dtype
    n = int(np.prod(shape, dtype=np.int64))
    _check_sizes(fn, n, block_size, scaler_block_size)
    blocks = n // block_size
    t = NF4Tensor(ctx.empty((n // 2,), np.uint8), ctx.empty((blocks,), np.int8),
                  ctx.empty((blocks // scaler_block_size,), dtype), ctx.empty((1,), dtype),
                  block_size, scaler_block_size, shape, dtype)
    getattr(ctx.lib.checked, f"kbit_quantize_nf4_torchao_{_SUFFIX[dtype]}")(
        wa.ptr, _addr(t.quantized_data), _addr(t.quantized_scalers), _addr(t.quantization_factor),
        _addr(t.scaler_mean), n, block_size, scaler_block_size, ctx.stream)
    return t


def _dequantize_raw(ctx, dtype, qdata, scalers, factor, mean, n, block_size, scaler_block_size):
    out = ctx.empty((n,), dtype)
    getattr(ctx.lib.checked, f"kbit_dequantize_nf4_torchao_{_SUFFIX[dtype]}")(
        _addr(qdata), _addr(scalers), _addr(factor), _addr(mean), _addr(out), n, block_size,
        scaler_block_size, ctx.stream)
    return out


def _check_tensor(fn, ctx, t):
    n = int(np.prod(t.shape, dtype=np.int64))
    _check_sizes(fn, n, t.block_size, t.scaler_block_size)
    blocks = n // t.block_size
    _arg(ctx, fn, t.quantized_data, "quantized_data", (np.dtype(np.uint8),), numel=n // 2)
    _arg(ctx, fn, t.quantized_scalers, "quantized_scalers", (np.dtype(np.int8),), numel=blocks)
    _arg(ctx, fn, t.quantization_factor, "quantization_factor", (t.dtype,), numel=blocks // t.scaler_block_size)
    _arg(ctx, fn, t.scaler_mean, "scaler_mean", (t.dtype,), numel=1)
    return n, blocks


def get_original_weight(t):
    """torchao's NF4Tensor.get_original_weight(): the dequantized weight in its dtype and shape."""
    ctx = Ctx(t.quantized_data)
    n, _ = _check_tensor("get_original_weight", ctx, t)
    out = _dequantize_raw(ctx, t.dtype, t.quantized_data, t.quantized_scalers, t.quantization_factor,
                          t.scaler_mean, n, t.block_size, t.scaler_block_size)
    return out.reshape(t.shape)


def _block_scales(ctx, t, blocks):
    """torchao's dequantized block scales (q / F).to(dtype) + mean, in t.dtype: the dequantizer run on
    one byte of nibbles 15 (table value 1.0) per block, so each output is exactly 1.0 * scale."""
    ones = ctx.from_numpy(np.full(blocks, 0xFF, dtype=np.uint8))
    return _dequantize_raw(ctx, t.dtype, ones, t.quantized_scalers, t.quantization_factor, t.scaler_mean,
                           2 * blocks, 2, t.scaler_block_size)


def nf4_table(dtype):
    """torchao's NF4 levels in `dtype` (as its NF4Tensor.nf4), read from the kbit dequantizer."""
    dtype = np.dtype(dtype)
    from ._devices import backend_for
    lib = backend_for("cpu")
    qdata = np.array([0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF], dtype=np.uint8)
    scalers = np.zeros(8, dtype=np.int8)
    factor = np.ones(1, dtype=dtype)
    mean = np.ones(1, dtype=dtype)  # every block scale is (0 / 1) + 1 = 1
    out = np.empty(16, dtype=dtype)
    getattr(lib.checked, f"kbit_dequantize_nf4_torchao_{_SUFFIX[dtype]}")(
        qdata.ctypes.data, scalers.ctypes.data, factor.ctypes.data, mean.ctypes.data, out.ctypes.data, 16, 2, 8,
        None)
    return out


def to_bitsandbytes(t, compress_statistics=False):
    """(packed, QuantState) in bitsandbytes' NF4 layout from a torchao NF4Tensor: the nibbles as they
    are, blocksize = t.block_size, absmax = torchao's dequantized block scales in fp32 (nested like
    bitsandbytes' compress_statistics when asked)."""
    fn = "to_bitsandbytes"
    ctx = Ctx(t.quantized_data)
    if t.block_size not in BLOCKSIZES:
        raise ValueError(f"{fn}: block_size {t.block_size} is not a bitsandbytes blocksize "
                         f"({', '.join(map(str, BLOCKSIZES))})")
    n, blocks = _check_tensor(fn, ctx, t)
    scales = ctx.to_numpy(_block_scales(ctx, t, blocks))[0::2].astype(np.float32)
    packed = ctx.from_numpy(np.ascontiguousarray(ctx.to_numpy(t.quantized_data)).reshape(n // 2, 1))
    state = _state_4bit(ctx, ctx.from_numpy(scales), t.shape, t.dtype, t.block_size, "nf4", compress_statistics)
    return packed, state


def from_bitsandbytes(packed, state, scaler_block_size=256):
    """A torchao NF4Tensor from bitsandbytes' NF4 (packed, QuantState): the nibbles as they are,
    block_size = state.blocksize, the fp32 block scales (restored if nested) rounded to the weight's
    dtype and re-quantized with torchao's scheme (mean, linear int8 codes, one factor per
    scaler_block_size scales)."""
    fn = "from_bitsandbytes"
    ctx = Ctx(packed)
    _check_state(fn, state, four_bit=True)
    if state.quant_type != "nf4":
        raise ValueError(f"{fn}: torchao has NF4 only, not {state.quant_type!r}")
    n = int(np.prod(state.shape, dtype=np.int64))
    _check_sizes(fn, n, state.blocksize, scaler_block_size)
    blocks = n // state.blocksize
    _arg(ctx, fn, packed, "packed", (np.dtype(np.uint8),), numel=n // 2)
    dtype = state.dtype
    scales = ctx.to_numpy(_plain_absmax(ctx, fn, state, blocks)[0]).astype(dtype)
    # A two-element block [s_b, 0] per scale: torchao's block absmax is then exactly s_b, and the
    # quantizer derives mean, codes and factors from these scales as it would from the weight.
    w = np.zeros(2 * blocks, dtype=dtype)
    w[0::2] = scales
    w_dev = ctx.from_numpy(w)
    scratch = ctx.empty((blocks,), np.uint8)
    t = NF4Tensor(ctx.from_numpy(np.ascontiguousarray(ctx.to_numpy(packed)).reshape(n // 2)),
                  ctx.empty((blocks,), np.int8), ctx.empty((blocks // scaler_block_size,), dtype),
                  ctx.empty((1,), dtype), state.blocksize, scaler_block_size, tuple(state.shape), dtype)
    getattr(ctx.lib.checked, f"kbit_quantize_nf4_torchao_{_SUFFIX[dtype]}")(
        _addr(w_dev), _addr(scratch), _addr(t.quantized_scalers), _addr(t.quantization_factor),
        _addr(t.scaler_mean), 2 * blocks, 2, scaler_block_size, ctx.stream)
    return t


__all__ = ["NF4Tensor", "to_nf4", "get_original_weight", "nf4_table", "to_bitsandbytes", "from_bitsandbytes"]
