"""bitsandbytes' CPU names in the CUDA backend (src/common/kbit_bnb_cpu_host.h): libkbit_cuda.so exports
them, as bitsandbytes' GPU libraries do, and forwards each call to libkbit_cpu.so. Runs without a GPU
(the library loads on any Linux machine); skipped where the CUDA backend was not built.

Each function of the list is called through both libraries, the way bitsandbytes calls them (ctypes
without argtypes), with the same inputs: the outputs must be the same bytes and the statuses and messages
the same. Then the drop-in cases: a link named libbitsandbytes_cuda*.so finds libkbit_cpu.so beside the
file it points to, and a copy with no CPU backend beside it refuses with a message naming the file."""
import ctypes as ct
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kbit
from test_bnb_cpu import BF16, DTS, L, P, code, exported, gemv_case  # noqa: F401 (code: a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import abi_gen  # noqa: E402

CUDA_LIBRARY = kbit.library_dir() / "libkbit_cuda.so"
NOT_SUPPORTED = 100  # KBIT_STATUS_NOT_SUPPORTED

pytestmark = pytest.mark.skipif(not CUDA_LIBRARY.exists(), reason="the CUDA backend was not built")


def open_library(path):
    cdll = ct.CDLL(str(path))
    cdll.kbit_last_error_message.restype = ct.c_char_p
    return cdll


@pytest.fixture(scope="module")
def both():
    return open_library(kbit.library_dir() / "libkbit_cpu.so"), open_library(CUDA_LIBRARY)


def test_exports_every_name_of_the_list():
    assert set(abi_gen.symbols("bnb_cpu")) <= exported(CUDA_LIBRARY)


def call_both(both, name, make_args, outputs):
    """Calls `name` through each library on fresh copies of the arguments; returns per library the
    status, the message after it and the output arrays' bytes."""
    results = []
    for cdll in both:
        args = make_args()
        status = getattr(cdll, name)(*[P(a) if isinstance(a, np.ndarray) else a for a in args])
        message = cdll.kbit_last_error_message().decode() if status != 0 else ""
        results.append((status, message, [args[i].tobytes() for i in outputs]))
    return results


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("blocksize,n", [(64, 1000), (7, 33), (0, 10), (64, -1)])
def test_8bit_blockwise_same_through_both(both, code, rng, dt, blocksize, n):
    A = rng.standard_normal(max(n, 1)).astype({"fp32": np.float32, "fp16": np.float16, "bf16": BF16}[dt])
    blocks = -(-max(n, 1) // max(blocksize, 1))
    q = rng.integers(0, 256, max(n, 1)).astype(np.uint8)
    absmax = (rng.random(blocks) + 0.5).astype(np.float32)

    def quantize_args():
        return [code, A, np.zeros(blocks, np.float32), np.zeros(max(n, 1), np.uint8), L(blocksize), L(n)]

    def dequantize_args():
        return [code, q, absmax, np.zeros(max(n, 1), A.dtype), L(blocksize), L(n)]

    for name, make_args, outputs in [(f"cquantize_blockwise_cpu_{dt}", quantize_args, [2, 3]),
                                     (f"cdequantize_blockwise_cpu_{dt}", dequantize_args, [3])]:
        cpu, cuda = call_both(both, name, make_args, outputs)
        assert cuda == cpu
        assert (cpu[0] == 0) == (blocksize > 0 and n >= 0)
        if cpu[0] != 0:
            assert cuda[1].startswith(name + ": ")


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
@pytest.mark.parametrize("dt", DTS)
def test_4bit_dequantize_same_through_both(both, rng, fmt, dt):
    m, n, blocksize = 3, 100, 64
    packed = rng.integers(0, 256, m * n // 2).astype(np.uint8)
    absmax = (rng.random(-(-m * n // blocksize)) * 2).astype(np.float32)
    out_type = {"fp32": np.float32, "fp16": np.float16, "bf16": BF16}[dt]
    cpu, cuda = call_both(both, f"cdequantize_blockwise_cpu_{fmt}_{dt}",
                          lambda: [packed, absmax, np.zeros(m * n, out_type), L(blocksize), L(m), L(n)], [2])
    assert cpu[0] == 0 and cuda == cpu


@pytest.mark.parametrize("fmt", ["nf4", "fp4"])
def test_gemv_same_through_both(both, rng, fmt):
    M, N, K, blocksize = 2, 64, 256, 64
    w, absmax, x, _, _ = gemv_case(rng, M, N, K, blocksize, fmt)
    cpu, cuda = call_both(both, f"gemv_4bit_inference_cpu_{fmt}_bf16",
                          lambda: [L(M), L(N), L(K), x, w, absmax, np.zeros((M, N), BF16), L(blocksize), L(K),
                                   L(N)], [6])
    assert cpu[0] == 0 and cuda == cpu


def test_feature_queries_same_through_both(both):
    for name in ("has_avx512f_cpu", "has_avx512bf16_cpu"):
        values = [getattr(cdll, name)() for cdll in both]  # no restype, as bitsandbytes calls them
        assert values[0] in (0, 1) and values[1] == values[0]


def run_child(library, body):
    script = textwrap.dedent(f"""
        import ctypes as ct
        lib = ct.CDLL({str(library)!r})
        lib.kbit_last_error_message.restype = ct.c_char_p
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout


def test_a_link_named_like_bitsandbytes_finds_the_cpu_backend(tmp_path):
    link = tmp_path / "libbitsandbytes_cuda124.so"
    link.symlink_to(CUDA_LIBRARY)
    out = run_child(link, "print(lib.cdequantize_blockwise_cpu_fp32(None, None, None, None, ct.c_longlong(64), "
                          "ct.c_longlong(0)), lib.has_avx512f_cpu() in (0, 1))")
    assert out.split() == ["0", "True"]


def test_without_the_cpu_backend_every_name_refuses(tmp_path):
    copy = tmp_path / "libbitsandbytes_cuda124.so"
    shutil.copy(CUDA_LIBRARY, copy)
    out = run_child(copy, """
        status = lib.cquantize_blockwise_cpu_fp32(None, None, None, None, ct.c_longlong(64), ct.c_longlong(0))
        print(status)
        print(lib.kbit_last_error_message().decode())
        print(lib.has_avx512f_cpu())
    """).splitlines()
    assert out[0] == str(NOT_SUPPORTED)
    assert out[1].startswith("cquantize_blockwise_cpu_fp32: bitsandbytes' CPU functions of this backend need the "
                             f"CPU backend libkbit_cpu.so: {tmp_path}/libkbit_cpu.so (")
    assert out[2] == "0"
