"""Every optimizer class of bitsandbytes.optim (8-bit and 32-bit, paged or not) for a few steps on
bitsandbytes' own CPU path and through kbit.bitsandbytes, on the same parameters and gradients. Needs
torch and bitsandbytes (skipped without them; kbit itself needs neither).

As in test_bitsandbytes_shim.py, two child interpreters run the same seeded steps: "bnb" (bitsandbytes
as installed, KBIT_BITSANDBYTES=0 so that an installed kbit's entry point stays out) and "kbit"
(after kbit.bitsandbytes.install()). This file is also the child's script (python FILE LEG OUT).

Each run has three parameters: W float32 [64, 80] (5120 elements: 8-bit state for the 8-bit classes),
V bfloat16 [32, 160] (8-bit state too) and b float32 [80] (below min_8bit_size: always 32-bit state).
The bounds are derived in the tests below."""

import pytest

STEPS = 4
SHAPES = (("W", (64, 80), "float32"), ("V", (32, 160), "bfloat16"), ("b", (80,), "float32"))
# Constructor arguments beside the parameters, per family (the class name without Paged / 8bit / 32bit).
KWARGS = {"Adam": dict(lr=1e-3, weight_decay=1e-2), "AdamW": dict(lr=1e-3), "AdEMAMix": dict(lr=1e-3),
          "Lion": dict(lr=1e-4, weight_decay=1e-2), "SGD": dict(lr=1e-2, momentum=0.9, weight_decay=1e-3),
          "RMSprop": dict(lr=1e-3), "Adagrad": dict(lr=1e-2), "LAMB": dict(lr=1e-3, weight_decay=1e-2),
          "LARS": dict(lr=1e-2, momentum=0.9)}


def family(name):
    base = name.removeprefix("Paged")
    for suffix in ("8bit", "32bit"):
        base = base.removesuffix(suffix)
    return base


def optimizer_classes(torch, bnb):
    """Every public optimizer class of bitsandbytes.optim that calls bitsandbytes' ops (PytorchLARS is
    plain torch: tested against kbit.optim.PytorchLARS in test_bnb_names.py instead)."""
    return sorted(n for n in dir(bnb.optim) if not n.startswith("_") and isinstance(getattr(bnb.optim, n), type)
                  and issubclass(getattr(bnb.optim, n), torch.optim.Optimizer) and n != "PytorchLARS")


def _child(leg):
    import warnings

    import torch
    import bitsandbytes as bnb
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # bitsandbytes warns that paged optimizers fall back on the CPU
    meta = {"leg": leg}
    if leg == "kbit":
        import kbit.bitsandbytes
        meta["installed"] = kbit.bitsandbytes.install()
    results = {}
    for name in optimizer_classes(torch, bnb):
        gen = torch.Generator().manual_seed(sum(map(ord, name)))
        params = [torch.nn.Parameter((torch.randn(shape, generator=gen) * 0.1).to(getattr(torch, dt)))
                  for _, shape, dt in SHAPES]
        init = [p.detach().clone() for p in params]
        try:
            opt = getattr(bnb.optim, name)(params, **KWARGS[family(name)])
            for _ in range(STEPS):
                for p in params:
                    p.grad = (torch.randn(p.shape, generator=gen) * 0.01).to(p.dtype)
                opt.step()
        except Exception as e:  # recorded, compared by the parent
            results[name] = {"error": f"{type(e).__name__}: {e}"}
            continue
        r = {}
        for (pname, _, _), p, p0 in zip(SHAPES, params, init):
            r[pname], r[f"init:{pname}"] = p.detach().clone(), p0
            for key, v in opt.state[p].items():
                if isinstance(v, torch.Tensor) and not key.startswith("qmap"):
                    r[f"{pname}.{key}"] = v.detach().clone()
        results[name] = r
    return {"meta": meta, "results": results}


if __name__ == "__main__":
    from conftest import child_main
    child_main(_child)


torch = pytest.importorskip("torch", reason="torch not installed: kbit.bitsandbytes needs torch and bitsandbytes")
bnb = pytest.importorskip("bitsandbytes", reason="bitsandbytes not installed")
from conftest import child_legs  # noqa: E402

NAMES = optimizer_classes(torch, bnb)


@pytest.fixture(scope="session")
def legs(tmp_path_factory):
    return child_legs(__file__, tmp_path_factory.mktemp("bnb_optimizers"))


def test_every_class_is_covered():
    # The families above cover every class bitsandbytes has (a new class fails here until it is added).
    assert {family(n) for n in NAMES} == set(KWARGS)
    assert len(NAMES) == 39  # 9 families x {plain, 8bit, 32bit} + Paged{Adam, AdamW, AdEMAMix, Lion} x 3


# bitsandbytes 0.50.2's AdEMAMix32bit derives from Optimizer2State, not AdEMAMix, so its state1 has the
# parameter's size instead of two moments: its own CPU path fails (RuntimeError: a shape mismatch), and
# kbit's kernels, which would write past its end, refuse it with a ValueError before the call.
BNB_FAILS = {"AdEMAMix32bit", "PagedAdEMAMix32bit"}


def test_bitsandbytes_own_failures_are_refused_by_kbit(legs):
    failed = {n for n, r in legs["bnb"]["results"].items() if "error" in r}
    assert failed == BNB_FAILS
    for name in sorted(BNB_FAILS):
        assert legs["bnb"]["results"][name]["error"].startswith("RuntimeError: output with shape")
        assert legs["kbit"]["results"][name]["error"] == (
            "ValueError: kbit.bitsandbytes: optimizer_update_32bit('ademamix'): state1 is torch.float32 with 5120 "
            "elements on cpu, the kernel needs torch.float32 with 10240 on cpu")


def _pair(legs, name):
    b, k = legs["bnb"]["results"][name], legs["kbit"]["results"][name]
    assert "error" not in b, b["error"]
    assert "error" not in k, k["error"]
    assert set(b) == set(k)
    return b, k


def _dequantized(r, pname, state):
    """An 8-bit state as values: code table entry times its block's absmax (state1: signed map, state2:
    unsigned; AdEMAMix's two moments are consecutive blocks of the same layout)."""
    table = bnb.functional.create_dynamic_map(state == "state1").double()
    codes = r[f"{pname}.{state}"].long().reshape(-1)
    absmax = r[f"{pname}.absmax{state[-1]}"].double().reshape(-1)
    per = r[f"{pname}.{state}"].reshape(absmax.numel() // -(-r[pname].numel() // 256), -1)  # rows: moments
    scales = absmax.reshape(per.shape[0], -1).repeat_interleave(256, dim=1)[:, :per.shape[1]].reshape(-1)
    return table[codes] * scales, float(absmax.abs().max()), float((table[1:] - table[:-1]).max())


@pytest.mark.parametrize("name", [n for n in NAMES if n not in BNB_FAILS])
def test_steps_equal_bitsandbytes_cpu_path(legs, name):
    b, k = _pair(legs, name)
    for pname, _, dt in SHAPES:
        want, got, start = b[pname].double(), k[pname].double(), b[f"init:{pname}"].double()
        eps = torch.finfo(getattr(torch, dt)).eps
        moved = (want - start).abs()
        diff = (want - got).abs()
        eight = b[f"{pname}.state1"].dtype == torch.uint8
        # Each leg rounds the parameter to its dtype once per step (together at most eps * |p|).
        rounding = STEPS * eps * want.abs()
        if eight:
            # 8-bit state: kbit re-quantizes to the exact nearest code, bitsandbytes' CPU path with an
            # approximate search, so a state element can sit one code apart after any step. For a state
            # near zero that changes the element's normalized step by up to the whole step: no element
            # apart by more than the largest movement of any element, and on average by 1% of the average
            # movement (only elements whose state lies between two codes differ).
            assert bool((diff <= rounding + moved.max()).all()), f"{pname}: max diff {float(diff.max())}"
            assert float((diff - rounding).clamp_min(0).mean()) <= 0.01 * float(moved.mean()), pname
        else:
            # 32-bit state: the same fp32 formulas in another order (and with fused multiply-adds): a few
            # fp32 roundings of the step, far below 1e-4 of the largest movement.
            assert bool((diff <= rounding + 1e-4 * moved.max()).all()), f"{pname}: max diff {float(diff.max())}"
        for key in sorted(kk for kk in b if kk.startswith(pname + ".")):
            bs, ks = b[key], k[key]
            assert bs.dtype == ks.dtype and bs.shape == ks.shape, key
            state = key.split(".")[1]
            if bs.dtype == torch.uint8:
                # One code apart per re-quantization at most, and the recurrences shrink older differences
                # (beta < 1; Adagrad's sum adds them): values within STEPS codes of the widest gap of the map.
                vb, top, gap = _dequantized(b, pname, state)
                vk, _, _ = _dequantized(k, pname, state)
                assert float((vb - vk).abs().max()) <= STEPS * gap * top, key
            elif state.startswith("absmax"):
                # the block maxima of those states: within the same STEPS codes, relative to the maximum
                gap = float((lambda t: (t[1:] - t[:-1]).max())(bnb.functional.create_dynamic_map(True)))
                assert torch.allclose(bs.double(), ks.double(), rtol=STEPS * gap, atol=0), key
            else:
                # fp32 states: the same recurrences in another order, a few fp32 roundings of terms up to
                # ten times the state (Lion's gradient term): 1e-5 of the largest state. With 16-bit
                # parameters kbit rounds the coupled weight decay g + wd * p to the parameter's dtype (as
                # bitsandbytes' CUDA kernels), the CPU path keeps it in fp32: eps of the dtype per step.
                scale = float(bs.double().abs().max())
                atol = (STEPS * eps if dt != "float32" else 1e-5) * scale
                assert torch.allclose(bs.double(), ks.double(), rtol=1e-4, atol=atol), key
