"""kbit.bitsandbytes: bitsandbytes' torch ops on CPU tensors served by kbit, against bitsandbytes' own CPU
path. Needs torch and bitsandbytes (skipped without them; kbit itself needs neither).

The same seeded cases run in two child interpreters: one with bitsandbytes as installed ("bnb"), one
after kbit.bitsandbytes.install() ("kbit"); each writes its results with torch.save. This file is
also the child's script (python test_bitsandbytes_shim.py LEG OUT)."""
import ctypes

import pytest

DTYPES = ("float32", "float16", "bfloat16")


# ---- the child ------------------------------------------------------------------------------------

def _cases(torch, bnb):
    """(name, function) pairs; each function returns a dict of tensors, or raises."""
    F = bnb.functional
    ops = torch.ops.bitsandbytes
    cases = []

    def gen(seed):
        return torch.Generator().manual_seed(seed)

    def add(name, fn):
        cases.append((name, fn))

    def out_variant(call, into):
        # bitsandbytes' CPU path lacks some .out kernels: the result is then absent from its leg.
        try:
            call()
        except NotImplementedError:
            return {}
        return {"into": into}

    for di, dt in enumerate(DTYPES):
        dtype = getattr(torch, dt)
        for qt in ("nf4", "fp4"):
            for bs in (64, 4096):
                def q4(dtype=dtype, qt=qt, bs=bs, seed=100 + di * 10 + bs):
                    A = (torch.randn(3001, generator=gen(seed)) * 3).to(dtype)
                    A[:64] = 0  # a zero block
                    out, absmax = ops.quantize_4bit(A, bs, qt, torch.uint8)
                    return {"out": out, "absmax": absmax, "A": A}
                add(f"quantize_4bit-{dt}-{qt}-{bs}", q4)

            def dq4(dtype=dtype, qt=qt, seed=200 + di):
                g = gen(seed)
                packed = torch.randint(0, 256, (2048,), generator=g, dtype=torch.uint8)
                absmax = torch.rand(64, generator=g) * 4
                out = ops.dequantize_4bit(packed, absmax, 64, qt, [4096], dtype)
                into = torch.empty(4096, dtype=dtype)
                return {"out": out, **out_variant(
                    lambda: ops.dequantize_4bit.out(packed, absmax, 64, qt, [4096], dtype, into), into)}
            add(f"dequantize_4bit-{dt}-{qt}", dq4)

        for bs in (256, 4096):
            def q8(dtype=dtype, bs=bs, seed=300 + di * 10 + bs):
                A = (torch.randn(5000, generator=gen(seed)) * 2).to(dtype)
                out, absmax = ops.quantize_blockwise(A, F.create_dynamic_map(True), bs)
                return {"out": out, "absmax": absmax, "A": A}
            add(f"quantize_blockwise-{dt}-{bs}", q8)

        def dq8(dtype=dtype, seed=400 + di):
            g = gen(seed)
            A = torch.randint(0, 256, (5000,), generator=g, dtype=torch.uint8)
            absmax = torch.rand(20, generator=g) * 3
            code = F.create_dynamic_map(True)
            out = ops.dequantize_blockwise(A, absmax, code, 256, dtype)
            into = torch.empty(5000, dtype=dtype)
            return {"out": out, **out_variant(lambda: ops.dequantize_blockwise.out(A, absmax, code, 256, dtype, into),
                                              into)}
        add(f"dequantize_blockwise-{dt}", dq8)

        def opt8(dtype=dtype, seed=500 + di):
            g = gen(seed)
            n = 4096 + 300
            p = (torch.randn(n, generator=g) * 0.1).to(dtype)
            s1 = torch.full((n,), 127, dtype=torch.uint8)
            s2 = torch.zeros(n, dtype=torch.uint8)
            m1, m2 = torch.zeros(-(n // -256)), torch.zeros(-(n // -256))
            q1, q2 = F.create_dynamic_map(True), F.create_dynamic_map(False)
            for step in range(1, 4):
                grad = (torch.randn(n, generator=g) * 0.01).to(dtype)
                ops.optimizer_update_8bit_blockwise("adam", grad, p, s1, s2, 0.9, 0.999, 0.0, 0.0, 1e-8, step,
                                                    1e-3, q1, q2, m1, m2, 0.0, 1.0, False)
            return {"p": p, "state1": s1, "state2": s2, "absmax1": m1, "absmax2": m2}
        add(f"optimizer_8bit-adam-{dt}", opt8)

        def opt32(dtype=dtype, seed=600 + di):
            g = gen(seed)
            n = 1000
            p = (torch.randn(n, generator=g) * 0.1).to(dtype)
            s1, s2 = torch.zeros(n), torch.zeros(n)
            for step in range(1, 4):
                grad = (torch.randn(n, generator=g) * 0.01).to(dtype)
                ops.optimizer_update_32bit("adam", grad, p, s1, s2, None, 0.0, 0.0, 0.9, 0.999, 0.0, 0.0, 1e-8,
                                           0.01, step, 1e-3, 1.0, False)
            return {"p": p, "state1": s1, "state2": s2}
        add(f"optimizer_32bit-adam-{dt}", opt32)

    for dt in DTYPES:  # bitsandbytes' CPU path: its default torch expression, for every float dtype
        for threshold in (0.0, 3.0):
            def vq(threshold=threshold, dtype=getattr(torch, dt)):
                A = (torch.randn(16, 64, generator=gen(700)) * 1.5).to(dtype)
                A[1, 5] = 2.999  # rounds to 3.0 in bf16 and fp16 (an outlier there), stays below it in fp32
                A[2, 7] = -3.0
                out, row_stats, cols = ops.int8_vectorwise_quant(A, threshold)
                r = {"out": out, "row_stats": row_stats}
                if cols is not None:
                    r["outlier_cols"] = cols
                return r
            add(f"int8_vectorwise_quant-{dt}-{threshold}", vq)

    def mm():
        g = gen(800)
        A = torch.randint(-127, 128, (2, 8, 64), generator=g, dtype=torch.int8)
        B = torch.randint(-127, 128, (48, 64), generator=g, dtype=torch.int8)
        into = torch.empty(2, 8, 48, dtype=torch.int32)
        return {"out": ops.int8_linear_matmul(A, B), **out_variant(lambda: ops.int8_linear_matmul.out(A, B, into),
                                                                   into)}
    add("int8_linear_matmul", mm)

    def mmd():
        g = gen(900)
        A = torch.randint(-2 ** 20, 2 ** 20, (16, 48), generator=g, dtype=torch.int32)
        rs, cs = torch.rand(16, generator=g) * 5, torch.rand(48, generator=g) * 5
        bias = torch.randn(48, generator=g).half()
        return {"plain": ops.int8_mm_dequant(A, rs, cs), "bias": ops.int8_mm_dequant(A, rs, cs, bias=bias),
                "fp32": ops.int8_mm_dequant(A, rs, cs, dtype=torch.float32)}
    add("int8_mm_dequant", mmd)

    def dbl():
        A = (torch.randn(16, 64, generator=gen(700)) * 1.5).half()  # the input of int8_vectorwise_quant-float16-0.0
        A[1, 5], A[2, 7] = 2.999, -3.0
        qr, qc, rs, cs, cols = ops.int8_double_quant(A, 0.0)
        return {"A": A, "quant_row": qr, "quant_col": qc, "row_stats": rs, "col_stats": cs}
    add("int8_double_quant", dbl)

    for qt in ("nf4", "fp4"):
        def lin4(qt=qt):
            torch.manual_seed(1100)
            layer = bnb.nn.Linear4bit(256, 64, bias=True, compute_dtype=torch.float32, quant_type=qt)
            layer = layer.to("cpu") if hasattr(layer, "to") else layer
            layer.eval()
            x1 = torch.randn(1, 256)
            x4 = torch.randn(4, 256)
            with torch.no_grad():
                weight = F.dequantize_4bit(layer.weight.data, layer.weight.quant_state)  # before any repacking
                one = layer(x1)
                four = layer(x4)
                return {"one": one, "four": four, "x1": x1, "x4": x4, "weight": weight, "bias": layer.bias.detach()}
        add(f"Linear4bit-{qt}", lin4)

    def adam8():
        torch.manual_seed(1200)
        w = torch.nn.Parameter(torch.randn(64, 128) * 0.1)
        opt = bnb.optim.Adam8bit([w], lr=1e-3, min_8bit_size=0)
        for _ in range(5):
            opt.zero_grad()
            loss = ((w @ torch.ones(128)) ** 2).sum()
            loss.backward()
            opt.step()
        st = opt.state[w]
        return {"w": w.detach(), "state1": st["state1"], "state2": st["state2"]}
    add("Adam8bit", adam8)
    return cases


def _child(leg):
    import torch
    import bitsandbytes as bnb
    import bitsandbytes.functional  # noqa: F401
    import bitsandbytes.nn  # noqa: F401
    import bitsandbytes.optim  # noqa: F401
    torch.set_num_threads(1)
    meta = {"leg": leg}
    if leg == "kbit":
        import kbit.bitsandbytes
        meta["installed"] = kbit.bitsandbytes.install()
    meta["repacks"] = bool(bnb.functional.has_avx512bf16())  # eval-mode Linear4bit takes the bf16 CPU layout
    results = {}
    for name, fn in _cases(torch, bnb):
        try:
            results[name] = {k: v.detach().clone() for k, v in fn().items()}
        except Exception as e:  # recorded, compared by the parent
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    return {"meta": meta, "results": results}


if __name__ == "__main__":
    from conftest import child_main
    child_main(_child)


# ---- the tests ------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="torch not installed: kbit.bitsandbytes needs torch and bitsandbytes")
bnb = pytest.importorskip("bitsandbytes", reason="bitsandbytes not installed")
import kbit  # noqa: E402
import kbit.bitsandbytes as kbnb  # noqa: E402
from conftest import child_legs  # noqa: E402

CASE_NAMES = [name for name, _ in _cases(torch, bnb)]


@pytest.fixture(scope="session")
def legs(tmp_path_factory):
    return child_legs(__file__, tmp_path_factory.mktemp("bnb_shim"))


def _bits(t):
    return t.contiguous().view(torch.uint8) if t.dtype != torch.bool else t


def _same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def _pair(legs, name):
    b, k = legs["bnb"]["results"][name], legs["kbit"]["results"][name]
    assert "error" not in k, k.get("error")
    assert "error" not in b, b.get("error")
    return b, k


def test_kbit_leg_registered_every_op_it_covers(legs):
    assert sorted(legs["kbit"]["meta"]["installed"]) == sorted(kbnb.OPS)


# Exact ops: the same values as bitsandbytes' CPU path, byte for byte.
EXACT = [n for n in CASE_NAMES if n.startswith(("dequantize_4bit", "dequantize_blockwise", "int8_linear_matmul",
                                                "int8_vectorwise_quant"))]


@pytest.mark.parametrize("name", EXACT)
def test_exact_ops_equal_bitsandbytes(legs, name):
    b, k = _pair(legs, name)
    assert set(b) <= set(k) and set(k) - set(b) <= {"into"}
    for key in k:
        # An .out kernel bitsandbytes' CPU path lacks is compared with its plain op's result. bitsandbytes'
        # CPU dequantize_4bit returns shape [1, n] for a requested [n]; kbit returns the requested shape.
        want = b.get(key, b["out"]).reshape(k[key].shape)
        assert k[key].dtype == want.dtype
        if "-fp4" in name:
            # FP4 code 8 is -0.0 in kbit (as in bitsandbytes' CUDA kernels), +0.0 on bitsandbytes' CPU path.
            assert torch.equal(want, k[key]), f"{name}: {key}"
            signs = ~_bits(want).reshape(-1, want.element_size()).eq(_bits(k[key]).reshape(-1, want.element_size())).all(1)
            assert bool((k[key].reshape(-1)[signs] == 0).all())
        else:
            assert _same_bytes(want, k[key]), f"{name}: {key}"
    if name.startswith("dequantize_4bit"):
        assert tuple(k["out"].shape) == (4096,)


def _nibbles(t):
    t = t.reshape(-1).int()
    return torch.stack([t >> 4, t & 15], 1).reshape(-1)


@pytest.mark.parametrize("name", [n for n in CASE_NAMES if n.startswith("quantize_4bit")])
def test_quantize_4bit(legs, name):
    # Same absmax, same codes, except (a) the all-zero block: kbit codes it 0 with absmax 0 (as
    # bitsandbytes' CUDA kernels), bitsandbytes' CPU path the code of 0.0 (NF4 7); (b) FP4 elements that
    # round to zero: bitsandbytes' CPU path codes them +0 (0), kbit keeps their sign (8 = -0).
    b, k = _pair(legs, name)
    assert _same_bytes(b["absmax"], k["absmax"])
    assert b["out"].shape == k["out"].shape and b["out"].dtype == k["out"].dtype
    bn, kn = _nibbles(b["out"])[:3001], _nibbles(k["out"])[:3001]
    fmt = "fp4" if "-fp4-" in name else "nf4"
    zero_block = slice(0, 64) if "-64" == name[-3:] else slice(0, 0)
    if zero_block.stop:
        assert bool((kn[zero_block] == 0).all()) and bool((bn[zero_block] == (7 if fmt == "nf4" else 0)).all())
    rest = torch.ones(3001, dtype=torch.bool)
    rest[zero_block] = False
    differ = rest & (bn != kn)
    if fmt == "nf4":
        assert int(differ.sum()) == 0
    else:
        pair = torch.stack([bn[differ], kn[differ]], 1).sort(1).values
        zeros = (pair == torch.tensor([0, 8])).all(1)
        A = k["A"].double().reshape(-1)
        assert bool(((A[differ][zeros] < 0) == (kn[differ][zeros] == 8)).all())
        table = bnb.functional.get_4bit_type("fp4", device="cpu").double()
        y = (A / k["absmax"].double().repeat_interleave(int(name.rsplit("-", 1)[1]))[:3001])[differ][~zeros]
        assert bool(((table[kn[differ][~zeros]] - y).abs() <= (table[bn[differ][~zeros]] - y).abs() + 1e-6).all())
        assert int((~zeros).sum()) <= 3


@pytest.mark.parametrize("name", [n for n in CASE_NAMES if n.startswith("quantize_blockwise")])
def test_quantize_blockwise(legs, name):
    # bitsandbytes' CPU quantizer is approximate (a lookup table); kbit picks the nearest code exactly:
    # same absmax, and kbit's code is never farther from the scaled input than bitsandbytes'.
    b, k = _pair(legs, name)
    assert _same_bytes(b["absmax"], k["absmax"])
    code = bnb.functional.create_dynamic_map(True).double()
    bs = int(name.rsplit("-", 1)[1])
    A = k["A"].double()
    scale = k["absmax"].double().repeat_interleave(bs)[:A.numel()]
    y = A / scale
    err_k = (code[k["out"].long()] - y).abs()
    err_b = (code[b["out"].long()] - y).abs()
    assert bool((err_k <= err_b + 1e-7).all())
    assert int((b["out"] != k["out"]).sum()) <= A.numel() // 100


def test_int8_mm_dequant(legs):
    b, k = _pair(legs, "int8_mm_dequant")
    for key in ("plain", "bias"):  # fp16 results: at most one unit in the last place apart
        assert b[key].dtype == k[key].dtype == torch.float16
        ulp = 2.0 ** (torch.floor(torch.log2(b[key].double().abs().clamp_min(2.0 ** -14))) - 10)
        assert bool(((b[key].double() - k[key].double()).abs() <= ulp).all()), key
    # dtype=float32: kbit rounds to fp16 first, as bitsandbytes' CUDA kernel does (its CPU path does not).
    assert k["fp32"].dtype == torch.float32 and _same_bytes(k["fp32"], k["plain"].float())
    assert float(((b["fp32"].double() - k["fp32"].double()).abs() /
                  b["fp32"].double().abs().clamp_min(1e-3)).max()) <= 2.0 ** -11


def test_int8_double_quant_runs_through_kbit(legs):
    # bitsandbytes' CPU path has no int8_double_quant kernel; through kbit its row half equals
    # int8_vectorwise_quant and its column half is the torch expression of bitsandbytes' CUDA path.
    assert "error" in legs["bnb"]["results"]["int8_double_quant"]
    k = legs["kbit"]["results"]["int8_double_quant"]
    v = legs["bnb"]["results"]["int8_vectorwise_quant-float16-0.0"]
    assert _same_bytes(k["quant_row"], v["out"]) and _same_bytes(k["row_stats"], v["row_stats"])
    col = k["A"].abs().amax(0).float()
    assert _same_bytes(k["col_stats"], col)
    assert _same_bytes(k["quant_col"], torch.round(k["A"].mul(127.0) / col.unsqueeze(0)).to(torch.int8))


@pytest.mark.parametrize("name", [n for n in CASE_NAMES if n.startswith("optimizer_")])
def test_optimizer_updates(legs, name):
    # Three Adam steps of lr 1e-3 (each moves a parameter by about lr): bitsandbytes' CPU path and kbit
    # evaluate the update in different orders, so parameters agree to a small part of one step plus one
    # rounding of the dtype, 32-bit states to fp32 rounding, 8-bit states within a few codes.
    b, k = _pair(legs, name)
    eps = torch.finfo(b["p"].dtype).eps
    tol = 1e-4 if "8bit" in name else 1e-7
    assert float((b["p"].double() - k["p"].double()).abs().max()) <= tol + eps * float(b["p"].abs().max())
    for key in ("state1", "state2"):
        if b[key].dtype == torch.uint8:
            assert int((b[key].int() - k[key].int()).abs().max()) <= 4
            assert int((b[key] != k[key]).sum()) <= b[key].numel() // 100
        else:
            assert torch.allclose(b[key], k[key], rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", [n for n in CASE_NAMES if n.startswith("Linear4bit")])
def test_linear4bit_forward(legs, name):
    b, k = _pair(legs, name)
    assert torch.equal(b["weight"], k["weight"]), "the quantized weights differ"  # FP4: +0 / -0 apart
    repacks = legs["kbit"]["meta"]["repacks"]
    for key, x in (("one", "x1"), ("four", "x4")):
        exact = k[x].double() @ k["weight"].double().t() + k["bias"].double()
        scale = float((k[x].double().abs() @ k["weight"].double().abs().t()).max()) + 1.0
        if repacks:
            # As bitsandbytes on an AVX512-BF16 CPU: activations, block scales (absmax) and the product
            # rounded to bf16 (each within 2^-9 relative), kbit's products exact over them (fp32
            # accumulation), then the fp32 bias.
            xr = k[x].bfloat16().double()
            xw = xr @ k["weight"].double().t()
            bound = 2.0 ** -8 * xw.abs() + 2.0 ** -9 * (xr.abs() @ k["weight"].double().abs().t()) + \
                256 * 2.0 ** -24 * scale
            assert bool(((k[key].double() - (xw + k["bias"].double())).abs() <= bound).all()), key
        else:
            assert float((k[key].double() - exact).abs().max()) <= 256 * 2.0 ** -24 * scale, key
        # bitsandbytes computes in bf16 on an AVX512-BF16 CPU: both within its error of the exact product.
        assert float((b[key].double() - exact).abs().max()) <= 2.0 ** -7 * scale, key


def test_adam8bit_steps(legs):
    b, k = _pair(legs, "Adam8bit")
    assert float((b["w"] - k["w"]).abs().max()) <= 1e-4  # five steps of lr 1e-3
    for key in ("state1", "state2"):
        assert int((b[key].int() - k[key].int()).abs().max()) <= 4


def test_gemv_4bit_against_dequantized_weights():
    kbnb.install()
    g = torch.Generator().manual_seed(7)
    for dt in DTYPES:
        dtype = getattr(torch, dt)
        W = torch.randn(96, 512, generator=g).to(dtype)
        packed, absmax = torch.ops.bitsandbytes.quantize_4bit(W, 64, "nf4", torch.uint8)
        Wd = torch.ops.bitsandbytes.dequantize_4bit(packed, absmax, 64, "nf4", [96, 512], dtype)
        A = torch.randn(1, 512, generator=g).to(dtype)
        code = bnb.functional.get_4bit_type("nf4", device="cpu")
        out = torch.ops.bitsandbytes.gemv_4bit(A, packed, [96, 512], absmax, code, 64)
        exact = A.double() @ Wd.double().t()
        bound = float((A.double().abs() @ Wd.double().abs().t()).max()) * (2 * torch.finfo(dtype).eps + 512 * 2.0 ** -24)
        assert out.dtype == dtype and out.shape == (1, 96)
        assert float((out.double() - exact).abs().max()) <= bound, dt


def test_has_avx512bf16_is_kbits_answer():
    kbnb.install()
    cpu = ctypes.CDLL(kbit.load("cpu").path)
    cpu.has_avx512bf16_cpu.restype = ctypes.c_bool
    assert bnb.functional.has_avx512bf16() is bool(cpu.has_avx512bf16_cpu())
    assert bnb.nn.modules.has_avx512bf16() is bnb.functional.has_avx512bf16()


@pytest.mark.parametrize("qt", ["nf4", "fp4"])
def test_gemv_4bit_on_bitsandbytes_repacked_cpu_layout(qt):
    # F._convert_weight_packed_for_cpu's layout (what eval-mode Linear4bit uses when has_avx512bf16()):
    # served by the backend's gemv_4bit_inference_cpu_*_bf16 whatever the CPU, rows of A rounded to bf16.
    kbnb.install()
    g = torch.Generator().manual_seed(11)
    W = torch.randn(64, 256, generator=g)
    for dtype, rows in ((torch.float32, 1), (torch.bfloat16, 3), (torch.float16, 2)):
        qB, state = bnb.functional.quantize_4bit(W, blocksize=64, quant_type=qt)
        Wd = bnb.functional.dequantize_4bit(qB, state).double()
        qB, state = bnb.functional._convert_weight_packed_for_cpu(qB, state)
        assert kbnb._is_repacked(state.absmax) and state.absmax.dtype == torch.bfloat16
        A = torch.randn(rows, 256, generator=g).to(dtype)
        out = bnb.functional.gemv_4bit(A, qB, state=state)
        assert out.dtype == dtype and out.shape == (rows, 64)
        xr = A.bfloat16().double()
        xw = xr @ Wd.t()
        # bf16 block scales (2^-9 relative), bf16 result (2^-9), fp32 accumulation over 256 products
        bound = 2.0 ** -8 * xw.abs() + 2.0 ** -9 * (xr.abs() @ Wd.abs().t()) + 256 * 2.0 ** -24 * (
            xr.abs() @ Wd.abs().t()) + torch.finfo(dtype).eps * xw.abs()
        assert bool(((out.double() - xw).abs() <= bound).all()), (qt, dtype)
    with pytest.raises(ValueError, match="last dimension 128 is not the weight's 256"):
        bnb.functional.gemv_4bit(torch.randn(1, 128), qB, state=state)


def test_cuda_tensors_are_served_only_with_a_gpu_and_a_cuda_backend(monkeypatch):
    kbnb.install()
    assert kbnb.devices() == ["cpu"] + (["cuda"] if torch.cuda.is_available() and kbnb._cuda_served(torch) else [])
    real = kbnb.backend_for

    def no_cuda_backend(device_type):
        if device_type == "cuda":
            raise kbit.KbitError("kbit_loader_open", 6, "KBIT_STATUS_NOT_SUPPORTED", "cuda: no usable device")
        return real(device_type)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU, but the loader opens no backend
    monkeypatch.setattr(kbnb, "backend_for", no_cuda_backend)
    assert kbnb._cuda_served(torch) is False
    monkeypatch.setattr(kbnb, "backend_for", lambda device_type: object())  # and with one
    assert kbnb._cuda_served(torch) is True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a backend, but torch has no GPU
    assert kbnb._cuda_served(torch) is False


def test_a_rejected_call_raises_with_kbits_message():
    kbnb.install()
    with pytest.raises(kbit.KbitError, match="blocksize 48 is not one of"):
        torch.ops.bitsandbytes.quantize_blockwise(torch.randn(64), torch.zeros(256), 48)
    with pytest.raises(kbit.KbitError, match="cdequantize_blockwise_fp32"):
        kbnb._KERNELS["dequantize_blockwise"](torch.zeros(64, dtype=torch.uint8), torch.ones(1),
                                              torch.zeros(256), 48, torch.float32)
    with pytest.raises(ValueError, match="unsupported optimizer 'nadam'"):
        torch.ops.bitsandbytes.optimizer_update_32bit("nadam", torch.zeros(4), torch.zeros(4), torch.zeros(4), None,
                                                      None, 0.0, 0.0, 0.9, 0.999, 0.0, 0.0, 1e-8, 0.0, 1, 1e-3, 1.0)


def test_not_covered_ops_are_named():
    assert set(kbnb.NOT_COVERED).isdisjoint(kbnb.OPS)
    for name in kbnb.NOT_COVERED:
        assert hasattr(torch.ops.bitsandbytes, name), name
