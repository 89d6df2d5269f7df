"""The bitsandbytes-CPU interface of libkbit_cpu.so (include/kbit/kbit_bnb_cpu.h): bitsandbytes' CPU
library names, called the way bitsandbytes' CPU backend calls them (ctypes.CDLL without argtypes,
c_void_p pointers, c_longlong / c_int64 sizes). Checked against the numpy references (reference.py:
exact bytes), against an fp64 evaluation for the GEMV (class F bound), and against bitsandbytes' own
libbitsandbytes_cpu.so from its wheel where it is installed (those tests skip otherwise)."""
import ctypes as ct
import os
import platform
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import kbit
import reference as ref
from conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import abi_gen  # noqa: E402

BF16 = ml_dtypes.bfloat16
INVALID = 1  # KBIT_STATUS_INVALID_ARGUMENT
DTS = ["fp32", "bf16", "fp16"]


def cpu_library_path():
    return kbit.library_dir() / "libkbit_cpu.so"


@pytest.fixture(scope="module")
def lib():
    cdll = ct.CDLL(str(cpu_library_path()))
    cdll.kbit_last_error_message.restype = ct.c_char_p
    return cdll


def last_error(lib):
    return lib.kbit_last_error_message().decode()


def P(a):
    return ct.c_void_p(None) if a is None else ct.c_void_p(a.ctypes.data)


L = ct.c_longlong


@pytest.fixture(scope="module")
def code():
    return np.asarray(kbit.functional.create_dynamic_map(), np.float32)


def quantize(lib, dt, code, A, blocksize):
    n = A.size
    absmax = np.full(-(-n // blocksize), -7.0, np.float32)
    out = np.full(n, 0xAB, np.uint8)
    status = getattr(lib, f"cquantize_blockwise_cpu_{dt}")(P(code), P(A), P(absmax), P(out), L(blocksize), L(n))
    return status, out, absmax


# ---- exports -------------------------------------------------------------------------------------

def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)], check=True, capture_output=True,
                         text=True).stdout
    return {ln.split()[2].split("@")[0] for ln in out.splitlines() if len(ln.split()) == 3}


def test_exports_every_name_of_the_list():
    names = set(abi_gen.symbols("bnb_cpu"))
    assert len(names) == 17  # 16 functions of bitsandbytes' CPU library + the version symbol
    assert names <= exported(cpu_library_path())


def test_names_are_bitsandbytes_cpu_library_names(bnb):
    bnb_names = {n for n in exported(bnb._name) if not n.startswith("_")}
    ours = set(abi_gen.symbols("bnb_cpu")) - {"kbit_bnb_cpu_interface_version"}
    assert ours == bnb_names


def test_interface_version(lib):
    lib.kbit_bnb_cpu_interface_version.restype = ct.c_uint32
    assert lib.kbit_bnb_cpu_interface_version() == (1 << 16) | 0


# ---- 8-bit blockwise -----------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [1, 7, 64, 100, 4096, 16384, 65536])
def test_quantize_8bit_exact(lib, code, rng, dt, blocksize):
    n = 3 * 16384 + 77
    A = ref.to_dtype(rng.standard_normal(n) * 3.0, dt)
    A[5] = 0.0
    status, out, absmax = quantize(lib, dt, code, A, blocksize)
    assert status == 0, last_error(lib)
    exp_q, exp_absmax = ref.quantize_blockwise(A.astype(np.float32), code, blocksize)
    assert np.array_equal(absmax, exp_absmax)
    assert np.array_equal(out, exp_q)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [1, 7, 64, 100, 4096, 16384])
def test_dequantize_8bit_exact(lib, code, rng, dt, blocksize):
    n = 2 * 16384 + 33
    q = rng.integers(0, 256, n).astype(np.uint8)
    absmax = (rng.random(-(-n // blocksize)) * 4).astype(np.float32)
    out = np.zeros(n, ref.DTYPES[dt])
    status = getattr(lib, f"cdequantize_blockwise_cpu_{dt}")(P(code), P(q), P(absmax), P(out), L(blocksize), L(n))
    assert status == 0, last_error(lib)
    exp = ref.dequantize_blockwise(q, code, absmax, blocksize, ref.DTYPES[dt])
    assert np.array_equal(out.view(np.uint8), exp.view(np.uint8))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [7, 64, 4096, 16384])
def test_quantize_8bit_against_bitsandbytes(lib, bnb, code, rng, dt, blocksize):
    """Same absmax; codes equal except where bitsandbytes' 65536-bin lookup misses the nearest code: there
    kbit's code is the nearer one, and bitsandbytes' is off by less than one bin (2 / 65535) of y."""
    n = 2 * 16384 + 5
    A = ref.to_dtype(rng.standard_normal(n), dt)
    _, ours, ours_absmax = quantize(lib, dt, code, A, blocksize)
    _, theirs, theirs_absmax = quantize(bnb, dt, code, A, blocksize)
    assert np.array_equal(ours_absmax, theirs_absmax)
    y = A.astype(np.float32) * np.repeat(np.float32(1.0) / ours_absmax, blocksize)[:n]
    diff = ours != theirs
    assert diff.mean() < 0.01
    ours_err, theirs_err = np.abs(code[ours] - y)[diff], np.abs(code[theirs] - y)[diff]
    # kbit's decision is the fp32 midpoint, which can be an ulp from the real one.
    assert np.all(ours_err <= theirs_err + np.abs(y[diff]) * 2.0 ** -23)
    assert np.all(theirs_err <= ours_err + 2.0 / 65535)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize", [7, 64, 16384])
def test_dequantize_8bit_against_bitsandbytes(lib, bnb, code, rng, dt, blocksize):
    n = 16384 + 9
    q = rng.integers(0, 256, n).astype(np.uint8)
    absmax = (rng.random(-(-n // blocksize)) * 4).astype(np.float32)
    outs = []
    for cdll in (lib, bnb):
        out = np.zeros(n, ref.DTYPES[dt])
        getattr(cdll, f"cdequantize_blockwise_cpu_{dt}")(P(code), P(q), P(absmax), P(out), L(blocksize), L(n))
        outs.append(out.view(np.uint8))
    assert np.array_equal(outs[0], outs[1])


# ---- 4-bit dequantize (m, n) -----------------------------------------------------------------------

def dequantize_4bit(cdll, fmt, dt, packed, absmax, blocksize, m, n):
    out = np.full(m * n, 3.0, np.float32).astype(ref.DTYPES[dt])
    status = getattr(cdll, f"cdequantize_blockwise_cpu_{fmt}_{dt}")(P(packed), P(absmax), P(out), L(blocksize),
                                                                   L(m), L(n))
    return status, out


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize,m,n", [(64, 3, 256), (32, 5, 64), (4096, 2, 4096), (16384, 1, 40000),
                                           (48, 7, 96), (100, 3, 50), (64, 3, 33), (7, 1, 1)])
def test_dequantize_4bit_exact(lib, rng, fmt, dt, blocksize, m, n):
    total = m * n
    packed = rng.integers(0, 256, (total + 1) // 2).astype(np.uint8)
    absmax = (rng.random(-(-total // blocksize)) * 2).astype(np.float32)
    status, out = dequantize_4bit(lib, fmt, dt, packed, absmax, blocksize, m, n)
    assert status == 0, last_error(lib)
    exp = ref.dequantize_4bit(packed, absmax, blocksize, total, fmt, ref.DTYPES[dt])
    assert np.array_equal(out.view(np.uint8), exp.view(np.uint8))


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize,m,n", [(64, 4, 256), (128, 3, 1024), (32, 2, 64)])
def test_dequantize_4bit_against_bitsandbytes(lib, bnb, rng, fmt, dt, blocksize, m, n):
    """Rows that hold whole blocks (where bitsandbytes' paths agree with each other): the same bytes, but
    for FP4 nibble 1000, which is -0.0 in kbit and +0.0 on bitsandbytes' AVX-512 path."""
    total = m * n
    packed = rng.integers(0, 256, total // 2).astype(np.uint8)
    absmax = (rng.random(total // blocksize) * 2).astype(np.float32)
    _, ours = dequantize_4bit(lib, fmt, dt, packed, absmax, blocksize, m, n)
    _, theirs = dequantize_4bit(bnb, fmt, dt, packed, absmax, blocksize, m, n)
    signed_zero = (ref.unpack(packed, total) == 8) if fmt == "fp4" else np.zeros(total, bool)
    assert np.all(np.signbit(ours[signed_zero].astype(np.float32)))
    assert np.all(ours[signed_zero].astype(np.float32) == theirs[signed_zero].astype(np.float32))
    ours_bits, theirs_bits = ours.view(f"u{ours.itemsize}"), theirs.view(f"u{ours.itemsize}")
    assert np.array_equal(ours_bits[~signed_zero], theirs_bits[~signed_zero])


# ---- GEMV on bitsandbytes' repacked layout ---------------------------------------------------------

def repack(nibbles):
    """bitsandbytes' CPU layout of an [N, K] nibble matrix (bitsandbytes.functional's
    _convert_weight_packed_for_cpu, written from its description): [N/32, K/2, 32 rows, 2 columns],
    rows 0-15 of a group in the low nibbles, rows 16-31 in the high ones."""
    N, K = nibbles.shape
    q = nibbles.reshape(N // 32, 32, K // 2, 2).transpose(0, 2, 1, 3).reshape(-1, 64)
    return ((q[:, 32:] << 4) | q[:, :32]).astype(np.uint8).reshape(-1)


def gemv_case(rng, M, N, K, blocksize, fmt):
    nib = rng.integers(0, 16, (N, K)).astype(np.uint8)
    absmax = (rng.random((K // blocksize, N)) * 2 + 0.01).astype(BF16)  # transposed [K/B, N]
    x = (rng.standard_normal((M, K))).astype(BF16)
    lut = (ref.NF4 if fmt == "nf4" else ref.FP4_DEQ).astype(np.float64)
    W = lut[nib] * np.repeat(absmax.astype(np.float64).T, blocksize, axis=1)  # [N, K]
    xf = x.astype(np.float64)
    exact = xf @ W.T
    mag = np.abs(xf) @ np.abs(W).T
    return repack(nib), absmax, x, exact, mag


def class_f_bound(K, exact, mag):
    """The bound of kbit's own GEMV (tests/conformance/test_4bit_gemv.cpp): gamma(K + 4) * sum|a w| +
    u_bf16 * (|exact| + gamma(K + 4) * sum|a w|) + the smallest bf16 step."""
    u = 2.0 ** -24
    gamma = (K + 4) * u / (1 - (K + 4) * u)
    return gamma * mag + 2.0 ** -8 * (np.abs(exact) + gamma * mag) + 2.0 ** -133


def gemv(cdll, fmt, M, N, K, x, w, absmax, blocksize, x_stride, out_stride):
    out = np.full((M, out_stride), 7.0, BF16)
    status = getattr(cdll, f"gemv_4bit_inference_cpu_{fmt}_bf16")(
        ct.c_int64(M), ct.c_int64(N), ct.c_int64(K), P(x), P(w), P(absmax), P(out), ct.c_int64(blocksize),
        ct.c_int64(x_stride), ct.c_int64(out_stride))
    return status, out


GEMV_SHAPES = [(1, 32, 64, 64), (1, 64, 4096, 64), (3, 96, 512, 128), (1, 32, 8192, 4096), (2, 32, 96, 32),
               (1, 32, 32, 2), (5, 64, 1024, 256)]


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
@pytest.mark.parametrize("M,N,K,blocksize", GEMV_SHAPES)
def test_gemv_within_class_f(lib, rng, fmt, M, N, K, blocksize):
    w, absmax, x, exact, mag = gemv_case(rng, M, N, K, blocksize, fmt)
    status, out = gemv(lib, fmt, M, N, K, x, w, absmax, blocksize, K, N + 3)
    assert status == 0, last_error(lib)
    err = np.abs(out[:, :N].astype(np.float64) - exact)
    assert np.all(err <= class_f_bound(K, exact, mag))
    assert np.all(out[:, N:].astype(np.float32) == 7.0)  # the stride's gap is not written


def test_gemv_exact_when_every_sum_is_exact(lib):
    """Small integers times table values that are exact in few bits: the result is exact."""
    M, N, K, blocksize = 2, 32, 64, 32
    nib = np.tile(np.array([7, 15, 0], np.uint8), N * K)[: N * K].reshape(N, K)  # NF4 0, 1, -1
    absmax = np.full((K // blocksize, N), 2.0, BF16)
    x = np.arange(M * K).reshape(M, K).astype(np.float32) % 5 - 2
    x = x.astype(BF16)
    status, out = gemv(lib, "nf4", M, N, K, x, repack(nib), absmax, blocksize, K, N)
    assert status == 0
    W = ref.NF4[nib].astype(np.float64) * 2.0
    assert np.array_equal(out.astype(np.float64), x.astype(np.float64) @ W.T)


def test_gemv_with_k_zero_stores_zeros(lib):
    out = np.full((2, 32), 7.0, BF16)
    status = lib.gemv_4bit_inference_cpu_fp4_bf16(ct.c_int64(2), ct.c_int64(32), ct.c_int64(0), None, None, None,
                                                  P(out), ct.c_int64(64), ct.c_int64(0), ct.c_int64(32))
    assert status == 0, last_error(lib)
    assert np.all(out.view(np.uint16) == 0)  # +0.0


@pytest.mark.parametrize("isa", ["ref", "avx2", "avx512"])
def test_gemv_every_isa(tmp_path, isa):
    """The scalar reference and the AVX-512 kernel (each ISA cap) stay within the bound, in a child
    process because KBIT_CPU_ISA is read once per process."""
    script = f"""
import numpy as np, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import ctypes as ct, test_bnb_cpu as t
lib = ct.CDLL(str(t.cpu_library_path()))
rng = np.random.default_rng(5)
for fmt in ("nf4", "fp4"):
    for M, N, K, bs in t.GEMV_SHAPES:
        w, absmax, x, exact, mag = t.gemv_case(rng, M, N, K, bs, fmt)
        s, out = t.gemv(lib, fmt, M, N, K, x, w, absmax, bs, K, N)
        assert s == 0
        assert np.all(np.abs(out.astype(np.float64) - exact) <= t.class_f_bound(K, exact, mag)), (fmt, M, N, K)
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], env=subprocess_env(KBIT_CPU_ISA=isa), capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
@pytest.mark.parametrize("M,N,K,blocksize", [(1, 64, 1024, 64), (3, 32, 256, 128)])
def test_gemv_layout_agrees_with_bitsandbytes(lib, bnb, rng, fmt, M, N, K, blocksize):
    """bitsandbytes' kernel reads the same layout (it rounds the table to bf16, so only close)."""
    if not bnb.has_avx512bf16_cpu():
        pytest.skip("bitsandbytes' GEMV kernel needs AVX512-BF16")
    w, absmax, x, exact, mag = gemv_case(rng, M, N, K, blocksize, fmt)
    _, ours = gemv(lib, fmt, M, N, K, x, w, absmax, blocksize, K, N)
    _, theirs = gemv(bnb, fmt, M, N, K, x, w, absmax, blocksize, K, N)
    # bitsandbytes' bf16 table errs by up to 2^-9 per weight: both within 2^-7 sum|a w| of each other.
    assert np.all(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) <= 2.0 ** -7 * mag + 1e-30)
    assert np.all(np.abs(ours.astype(np.float64) - exact) <= np.abs(theirs.astype(np.float64) - exact) + 2.0 ** -8 * np.abs(exact) + 1e-30)


# ---- CPU feature queries ------------------------------------------------------------------------------

def cpu_flags():
    # The x86 flags of /proc/cpuinfo; none elsewhere (qemu-user shows an arm64 process the host's file).
    if platform.machine() not in ("x86_64", "AMD64"):
        return set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def query_in_child(isa):
    script = (f"import ctypes; lib = ctypes.CDLL({str(cpu_library_path())!r}); "
              "print(lib.has_avx512f_cpu(), lib.has_avx512bf16_cpu())")
    env = subprocess_env(**({"KBIT_CPU_ISA": isa} if isa else {}))
    if not isa:
        env.pop("KBIT_CPU_ISA", None)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return tuple(int(v) for v in r.stdout.split())  # ctypes' default int result: exactly 0 or 1


def test_feature_queries_follow_the_cpu():
    flags = cpu_flags()
    avx512 = {"avx512f", "avx512vl", "avx512dq", "avx512bw"} <= flags
    assert query_in_child(None) == (int(avx512), int(avx512 and "avx512_bf16" in flags))


@pytest.mark.parametrize("isa", ["avx2", "ref"])
def test_feature_queries_follow_the_isa_cap(isa):
    assert query_in_child(isa) == (0, 0)


def test_feature_queries_agree_with_bitsandbytes(bnb):
    if os.environ.get("KBIT_CPU_ISA") not in (None, "", "avx512", "avx512vbmi"):
        pytest.skip("KBIT_CPU_ISA caps kbit below the CPU")
    assert query_in_child(None) == (bnb.has_avx512f_cpu() & 1, bnb.has_avx512bf16_cpu() & 1)


# ---- bad input: a status, the message, nothing written ---------------------------------------------

def test_empty_calls_succeed_without_touching_pointers(lib):
    assert lib.cquantize_blockwise_cpu_fp32(None, None, None, None, L(64), L(0)) == 0
    assert lib.cdequantize_blockwise_cpu_bf16(None, None, None, None, L(3), L(0)) == 0
    assert lib.cdequantize_blockwise_cpu_nf4_fp16(None, None, None, L(64), L(0), L(128)) == 0
    assert lib.gemv_4bit_inference_cpu_nf4_bf16(ct.c_int64(0), ct.c_int64(32), ct.c_int64(64), None, None, None,
                                                 None, ct.c_int64(64), ct.c_int64(64), ct.c_int64(32)) == 0


@pytest.mark.parametrize("blocksize,n,message", [
    (0, 10, "blocksize is 0, must be > 0"),
    (-64, 10, "blocksize is -64, must be > 0"),
    (64, -1, "n is -1, must be >= 0"),
])
def test_quantize_8bit_bad_sizes(lib, code, blocksize, n, message):
    A = np.ones(16, np.float32)
    absmax = np.full(4, 5.0, np.float32)
    out = np.full(16, 9, np.uint8)
    status = lib.cquantize_blockwise_cpu_fp32(P(code), P(A), P(absmax), P(out), L(blocksize), L(n))
    assert status == INVALID
    assert last_error(lib) == f"cquantize_blockwise_cpu_fp32: {message}"
    assert np.all(out == 9) and np.all(absmax == 5.0)


def test_null_and_overlap_rejected(lib, code):
    A = np.ones(64, np.float32)
    out = np.full(64, 9, np.uint8)
    assert lib.cquantize_blockwise_cpu_fp32(P(code), P(A), None, P(out), L(64), L(64)) == INVALID
    assert last_error(lib) == "cquantize_blockwise_cpu_fp32: absmax is NULL"
    assert lib.cdequantize_blockwise_cpu_fp32(None, P(out), P(A), P(A), L(64), L(64)) == INVALID
    assert last_error(lib) == "cdequantize_blockwise_cpu_fp32: code is NULL"
    buf = np.zeros(256, np.float32)
    assert lib.cdequantize_blockwise_cpu_fp32(P(code), P(out), P(A), P(buf), L(64), L(64)) == 0
    q = buf.view(np.uint8)[:64]
    assert lib.cdequantize_blockwise_cpu_fp32(P(code), P(q), P(A), P(buf), L(64), L(64)) == INVALID
    assert "out overlaps A" in last_error(lib)
    assert np.all(out == 9)


@pytest.mark.parametrize("blocksize,m,n,message", [
    (0, 2, 64, "blocksize is 0, must be > 0"),
    (64, -2, 64, "m is -2, must be >= 0"),
    (64, 2, -1, "n is -1, must be >= 0"),
    (64, 1 << 40, 1 << 40, "m * n is 1099511627776 x 1099511627776, must be <= 4611686018427387904"),
])
def test_dequantize_4bit_bad_input(lib, blocksize, m, n, message):
    packed = np.zeros(64, np.uint8)
    absmax = np.ones(4, np.float32)
    out = np.full(128, 5.0, np.float32)
    status = lib.cdequantize_blockwise_cpu_nf4_fp32(P(packed), P(absmax), P(out), L(blocksize), L(m), L(n))
    assert status == INVALID
    assert last_error(lib) == f"cdequantize_blockwise_cpu_nf4_fp32: {message}"
    assert np.all(out == 5.0)
    assert lib.cdequantize_blockwise_cpu_fp4_fp32(None, P(absmax), P(out), L(64), L(2), L(64)) == INVALID
    assert last_error(lib) == "cdequantize_blockwise_cpu_fp4_fp32: A is NULL"


@pytest.mark.parametrize("M,N,K,blocksize,x_stride,out_stride,message", [
    (1, 48, 64, 64, 64, 48, "N is 48, must be a multiple of 32"),
    (1, 32, 64, 0, 64, 32, "blocksize is 0, must be even and > 0"),
    (1, 32, 63, 7, 63, 32, "blocksize is 7, must be even and > 0"),
    (1, 32, 96, 64, 96, 32, "K is 96, must be a multiple of blocksize 64"),
    (-1, 32, 64, 64, 64, 32, "M is -1, must be >= 0"),
    (2, 32, 64, 64, 32, 32, "x_stride is 32, must be >= K (64)"),
    (2, 32, 64, 64, 64, 16, "out_stride is 16, must be >= N (32)"),
])
def test_gemv_bad_input(lib, M, N, K, blocksize, x_stride, out_stride, message):
    x = np.ones(256, BF16)
    w = np.zeros(4096, np.uint8)
    absmax = np.ones(256, BF16)
    out = np.full(256, 3.0, BF16)
    status = lib.gemv_4bit_inference_cpu_fp4_bf16(ct.c_int64(M), ct.c_int64(N), ct.c_int64(K), P(x), P(w), P(absmax),
                                                  P(out), ct.c_int64(blocksize), ct.c_int64(x_stride),
                                                  ct.c_int64(out_stride))
    assert status == INVALID
    assert last_error(lib) == f"gemv_4bit_inference_cpu_fp4_bf16: {message}"
    assert np.all(out.astype(np.float32) == 3.0)


def test_gemv_null_and_overlap(lib):
    x = np.ones(64, BF16)
    w = np.zeros(1024, np.uint8)
    absmax = np.ones(32, BF16)
    args = [ct.c_int64(1), ct.c_int64(32), ct.c_int64(64)]
    tail = [ct.c_int64(64), ct.c_int64(64), ct.c_int64(32)]
    assert lib.gemv_4bit_inference_cpu_nf4_bf16(*args, P(x), None, P(absmax), P(x), *tail) == INVALID
    assert last_error(lib) == "gemv_4bit_inference_cpu_nf4_bf16: w is NULL"
    assert lib.gemv_4bit_inference_cpu_nf4_bf16(*args, P(x), P(w), P(absmax), P(x), *tail) == INVALID
    assert last_error(lib) == ("gemv_4bit_inference_cpu_nf4_bf16: out overlaps x (in-place or overlapping buffers "
                               "are not supported)")
