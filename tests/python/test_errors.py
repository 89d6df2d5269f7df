"""Every error path raises clearly: ValueError / TypeError before the C call for what Python can see
(blocksize, dtype, contiguity, shapes), KbitError with the library's message for what only the C side
checks."""
import numpy as np
import pytest

import kbit

BS_MSG = "blocksize {} is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096"


@pytest.fixture
def w():
    return np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)


BS8_MSG = "blocksize {} is not one of 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384"


@pytest.mark.parametrize("bs", [0, 16, 48, 8192, 64.0, True, "64"])
def test_bad_blocksize(w, bs):
    with pytest.raises(ValueError, match="quantize_4bit: " + BS_MSG.format(repr(bs)).replace("(", r"\(")):
        kbit.quantize_4bit(w, blocksize=bs)
    if bs != 8192:  # 8bit 1.1 (the CPU backend) takes 8192
        with pytest.raises(ValueError, match="quantize_blockwise: " + BS8_MSG.format(repr(bs)).replace("(", r"\(")):
            kbit.quantize_blockwise(w, blocksize=bs)


@pytest.mark.parametrize("bs", [12288, 32768])
def test_bad_8bit_blocksize(w, bs):
    with pytest.raises(ValueError, match="quantize_blockwise: " + BS8_MSG.format(bs)):
        kbit.quantize_blockwise(w, blocksize=bs)
    q = np.zeros(w.shape, np.uint8)
    with pytest.raises(ValueError, match="dequantize_blockwise: " + BS8_MSG.format(bs)):
        kbit.dequantize_blockwise(q, absmax=np.ones(1, np.float32), blocksize=bs)


def test_8bit_blocksizes_follow_the_backend_minor(w):
    """8192 and 16384 only go to a backend at 8bit 1.1 or later; nesting (4-bit interface) stops at 4096."""
    from kbit import functional as F

    class Lib:
        def __init__(self, minor):
            self.backend_versions = {"8bit": (1, minor)}
    assert F._blocksizes_8bit(Lib(0)) == (32, 64, 128, 256, 512, 1024, 2048, 4096)
    assert F._blocksizes_8bit(Lib(1)) == (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    assert kbit.load("cpu").backend_versions["8bit"] == (1, 1)
    with pytest.raises(ValueError, match="quantize_blockwise: " + BS_MSG.format(16384)):
        kbit.quantize_blockwise(w, blocksize=16384, nested=True)


def test_bad_quant_type(w):
    with pytest.raises(ValueError, match="quantize_4bit: quant_type 'int4' is not 'fp4' or 'nf4'"):
        kbit.quantize_4bit(w, quant_type="int4")
    with pytest.raises(NotImplementedError, match="get_4bit_type: typename 'nf3' is not one of"):  # as bitsandbytes
        kbit.get_4bit_type("nf3")


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.uint8, np.int32])
def test_wrong_input_dtype(dtype):
    a = np.zeros(128, dtype)
    msg = f"must have dtype float32, float16, bfloat16, not {np.dtype(dtype).name}"
    with pytest.raises(TypeError, match="quantize_4bit: A " + msg):
        kbit.quantize_4bit(a)
    with pytest.raises(TypeError, match="quantize_blockwise: A " + msg):
        kbit.quantize_blockwise(a)
    with pytest.raises(TypeError, match="int8_vectorwise_quant: A must have dtype float16"):
        kbit.int8_vectorwise_quant(a.reshape(2, 64))


def test_non_contiguous_inputs(w):
    with pytest.raises(ValueError, match="quantize_4bit: A must be C-contiguous"):
        kbit.quantize_4bit(w.T)
    with pytest.raises(ValueError, match="quantize_blockwise: A must be C-contiguous"):
        kbit.quantize_blockwise(w[:, ::2])
    packed, state = kbit.quantize_4bit(w, quant_type="nf4")
    with pytest.raises(ValueError, match="gemv_4bit: A must be C-contiguous"):
        kbit.gemv_4bit(np.ones(128, np.float32)[::2], packed, state=state)


def test_not_an_array():
    with pytest.raises(TypeError, match="unsupported array type builtins.list"):
        kbit.quantize_4bit([1.0, 2.0])


def test_wrong_shapes_and_sizes(w):
    packed, state = kbit.quantize_4bit(w, quant_type="nf4")
    with pytest.raises(ValueError, match=r"dequantize_4bit: A holds 2047 bytes, a packed tensor of shape \(64, 64\) needs 2048"):
        kbit.dequantize_4bit(packed[:-1], state)
    with pytest.raises(ValueError, match=r"quant_state.absmax has 63 elements, expected 64"):
        kbit.dequantize_4bit(packed, kbit.QuantState(state.absmax[:-1].copy(), shape=state.shape, dtype=state.dtype,
                                                    blocksize=64, quant_type="nf4", code=state.code))
    with pytest.raises(ValueError, match=r"quantize_4bit: out has 10 elements, expected 2048"):
        kbit.quantize_4bit(w, out=np.empty(10, np.uint8))
    with pytest.raises(TypeError, match=r"dequantize_4bit: out must have dtype float32, not float16"):
        kbit.dequantize_4bit(packed, state, out=np.empty((64, 64), np.float16))
    with pytest.raises(ValueError, match=r"gemv_4bit: A must be one row of 64 elements"):
        kbit.gemv_4bit(np.ones((2, 64), np.float32), packed, state=state)
    with pytest.raises(ValueError, match="gemv_4bit: state cannot be None"):
        kbit.gemv_4bit(np.ones(64, np.float32), packed)
    with pytest.raises(ValueError, match=r"int8_linear_matmul: A \[..., K\] and B \[N, K\] do not match"):
        kbit.int8_linear_matmul(np.zeros((2, 8), np.int8), np.zeros((3, 9), np.int8))
    with pytest.raises(TypeError, match="int8_linear_matmul: only dtype int32"):
        kbit.int8_linear_matmul(np.zeros((2, 8), np.int8), np.zeros((3, 8), np.int8), dtype=np.int64)
    with pytest.raises(ValueError, match="int8_mm_dequant: col_stats has 2 elements, expected 3"):
        kbit.int8_mm_dequant(np.zeros((2, 3), np.int32), np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="int8_vectorwise_quant: threshold must be >= 0"):
        kbit.int8_vectorwise_quant(np.zeros((2, 8), np.float16), threshold=-1)


def test_bad_quant_states(w):
    packed, state = kbit.quantize_4bit(w)
    with pytest.raises(TypeError, match="dequantize_4bit: quant_state must be a kbit.QuantState, not dict"):
        kbit.dequantize_4bit(packed, {"absmax": state.absmax})
    with pytest.raises(ValueError, match="dequantize_4bit: without quant_state, absmax and out are required"):
        kbit.dequantize_4bit(packed)
    bad = kbit.QuantState(state.absmax, shape=state.shape, dtype=np.float64, blocksize=64, quant_type="fp4",
                          code=state.code)
    with pytest.raises(TypeError, match="quant_state.dtype must be float32, float16, bfloat16, not float64"):
        kbit.dequantize_4bit(packed, bad)


def test_kbit_error_from_the_c_side_carries_the_message():
    # What only the library checks, reached through the raw calls: an odd inner dimension of the naive
    # GEMV, an unknown dtype selector.
    lib = kbit.load("cpu")
    a = np.ones(63, np.float32)
    with pytest.raises(kbit.KbitError) as e:
        lib.checked.cgemm_4bit_inference_naive_fp32(4, 1, 63, a.ctypes.data, a.ctypes.data, a.ctypes.data,
                                                    a.ctypes.data, a.ctypes.data, 4, 32, 4, 64, None)
    assert e.value.status_name == "KBIT_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("cgemm_4bit_inference_naive_fp32: ")
    with pytest.raises(kbit.KbitError, match=r"^KBIT_STATUS_INVALID_ARGUMENT: kbit_quantize_4bit: .*dtype 9"):
        lib.checked.kbit_quantize_4bit(2, 9, a.ctypes.data, a.ctypes.data, a.ctypes.data, 64, 63, None)


def test_nothing_is_written_on_error(w):
    out = np.full((2048, 1), 0x5A, np.uint8)
    absmax = np.full(64, 7.0, np.float32)
    with pytest.raises(ValueError):
        kbit.quantize_4bit(w, blocksize=100, out=out, absmax=absmax)
    assert (out == 0x5A).all() and (absmax == 7.0).all()


def test_read_only_outputs(w):
    out = np.empty((2048, 1), np.uint8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="quantize_4bit: out is read-only"):
        kbit.quantize_4bit(w, out=out)
    ro = np.zeros(4096, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="parameter 0 is read-only"):
        kbit.optim.Adam([ro])
