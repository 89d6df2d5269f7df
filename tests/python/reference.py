"""Independent numpy references written from docs/behaviour.md (fp32 bit patterns of the
tables and thresholds as the spec lists them), used to check the package and the raw C calls."""
import ml_dtypes
import numpy as np


def f32(hexes):
    return np.array([int(h, 16) for h in hexes.split()], dtype=np.uint32).view(np.float32)


# §2.1: NF4 values and the 15 decision thresholds (the kernel's decimal literals rounded to fp32).
NF4 = f32("bf800000 bf3239b1 bf066b30 beca32a0 be91a24d be3d353f bdba7871 00000000 "
          "3da2faff 3e24cae3 3e7c04dd 3ead033a 3ee1a4b8 3f1007ab 3f3913b3 3f800000")
NF4_T = f32("bf591cd9 bf1c5270 beeb8480 beadea76 be703cec be0d38bc bd3a7871 3d22faff "
            "3df64863 3e5067e0 3e9582d4 3ec753f9 3f006d03 3f248daf 3f5c89d9")
# §2.2: FP4 magnitudes by code; the quant_map has +0.0 at index 8, the kernels' dequantizers -0.0.
FP4_MAG = f32("00000000 3baaaaab 3f2aaaab 3f800000 3eaaaaab 3f000000 3e2aaaab 3e800000")
FP4_MAP = np.concatenate([FP4_MAG, -FP4_MAG]).astype(np.float32)
FP4_MAP[8] = np.float32(0.0)
FP4_DEQ = np.concatenate([FP4_MAG, -FP4_MAG]).astype(np.float32)  # nibble 1000 -> -0.0


def nf4_index(y):
    y = np.asarray(y, np.float32)
    idx = (y[..., None] > NF4_T).sum(-1)
    return np.where(np.isnan(y), 0, idx).astype(np.uint8)


def fp4_index(y):
    y = np.asarray(y, np.float32)
    a = np.abs(y)
    t = lambda h: np.uint32(int(h, 16)).view(np.float32)  # noqa: E731
    code = np.where(a > t("3e955555"),
                    np.where(a > t("3f155550"), np.where(a > t("3f555555"), 3, 2), np.where(a > t("3ed55556"), 5, 4)),
                    np.where(a > t("3db00000"), np.where(a > t("3e555555"), 7, 6), np.where(a > t("3b2aaab9"), 1, 0)))
    sign = np.where(y < 0, 8, 0)
    return np.where(np.isnan(y), 0, code + sign).astype(np.uint8)


def normalised_blocks(x, blocksize):
    """x flattened in fp32 and zero-padded to whole blocks: (y = block * (1 / absmax) as [blocks, blocksize],
    absmax per block)."""
    v = np.asarray(x).reshape(-1).astype(np.float32)
    blocks = -(-v.size // blocksize)
    pad = np.zeros(blocks * blocksize, np.float32)
    pad[:v.size] = v
    absmax = np.fmax.reduce(np.abs(pad.reshape(blocks, blocksize)), axis=1).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = pad.reshape(blocks, blocksize) * (np.float32(1.0) / absmax)[:, None]
    return y, absmax


def quantize_4bit(x, blocksize, quant_type):
    """(packed bytes, absmax) of §3.1 on the flattened x (fp32 evaluation)."""
    n = np.size(x)
    y, absmax = normalised_blocks(x, blocksize)
    # An odd n's padding nibble is the code of 0 * r, like every padding element of the last block.
    idx = (nf4_index if quant_type == "nf4" else fp4_index)(y).reshape(-1)[: n + (n % 2)]
    return ((idx[0::2] << 4) | idx[1::2]).astype(np.uint8), absmax


def unpack(packed, n):
    p = np.asarray(packed, np.uint8).reshape(-1)
    nib = np.empty(p.size * 2, np.uint8)
    nib[0::2], nib[1::2] = p >> 4, p & 0x0F
    return nib[:n]


def dequantize_4bit(packed, absmax, blocksize, n, quant_type, dtype):
    lut = NF4 if quant_type == "nf4" else FP4_DEQ
    scales = np.repeat(np.asarray(absmax, np.float32), blocksize)[:n]
    return (lut[unpack(packed, n)] * scales).astype(np.float32).astype(dtype)


def nearest_code(y, code):
    """§4.1 closed form: nearest entry, fp32 midpoints, a tie to the even index, NaN -> 0."""
    y = np.asarray(y, np.float32)
    code = np.asarray(code, np.float32)
    mid = ((code[:-1] + code[1:]) * np.float32(0.5)).astype(np.float32)
    i = np.searchsorted(mid, y, side="left")  # number of midpoints < y
    tie = (i < mid.size) & (mid[np.minimum(i, mid.size - 1)] == y)
    i = np.where(tie & (i % 2 == 1), i + 1, i)
    return np.where(np.isnan(y), 0, i).astype(np.uint8)


def quantize_blockwise(x, code, blocksize):
    y, absmax = normalised_blocks(x, blocksize)
    return nearest_code(y.reshape(-1)[: np.size(x)], code).reshape(np.shape(x)), absmax


def dequantize_blockwise(q, code, absmax, blocksize, dtype):
    n = np.size(q)
    scales = np.repeat(np.asarray(absmax, np.float32), blocksize)[:n]
    return (np.asarray(code, np.float32)[np.asarray(q).reshape(-1)] * scales).astype(dtype).reshape(np.shape(q))


def int8_vector_quant(a):
    """§4.3 with threshold 0: row absmax in half, rint(a * (127 / amax)) in fp32."""
    a = np.asarray(a, np.float16)
    amax = np.abs(a).max(axis=-1).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.float32(127.0) / amax
        q = np.rint(a.astype(np.float32) * s[..., None])
    return np.nan_to_num(q, nan=0.0).astype(np.int8), amax


def to_dtype(x, name):
    return np.asarray(x, np.float32).astype({"fp32": np.float32, "fp16": np.float16,
                                             "bf16": ml_dtypes.bfloat16}[name])


DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
