"""kbit.optim: bitsandbytes' optimizer classes on numpy parameters, 32-bit state against a float64
reference of the update rules (docs/behaviour.md §8.3), 8-bit blockwise state against the 32-bit results and
the quantization bounds (§5.4), bitsandbytes' defaults, state layout, schedules and step counting."""
import math
import re

import ml_dtypes
import numpy as np
import pytest

import kbit
from kbit import optim
from conftest import misaligned



def reference_steps(name, p, grads, lr, betas, eps, wd, alpha=0.0, t_alpha=None, t_beta3=None):
    """float64 reference of the 32-bit kernels (decoupled decay after the step for Adam/AdEMAMix,
    coupled for Momentum/RMSprop/Adagrad, before the step for Lion)."""
    p = p.astype(np.float64)
    s1 = np.zeros_like(p)
    s2 = np.zeros_like(p)
    m2 = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        b1, b2 = betas[0], betas[1]
        if name == "adam":
            s1 = b1 * s1 + (1 - b1) * g
            s2 = b2 * s2 + (1 - b2) * g * g
            c1, c2 = 1 - b1**t, math.sqrt(1 - b2**t)
            p = p - lr * c2 / c1 * (s1 / (np.sqrt(s2) + eps * c2))
            p = p * (1 - lr * wd)
        elif name == "ademamix":
            a_t = alpha if t_alpha is None else min(t * alpha / t_alpha, alpha)
            b3 = betas[2]
            if t_beta3 is not None:
                x = t / t_beta3
                b3 = min(math.exp(math.log(b1) * math.log(b3) / ((1 - x) * math.log(b3) + x * math.log(b1))), b3)
            s1 = b1 * s1 + (1 - b1) * g
            m2 = b3 * m2 + (1 - b3) * g
            s2 = b2 * s2 + (1 - b2) * g * g
            c1, c2 = 1 - b1**t, math.sqrt(1 - b2**t)
            p = p - lr * ((s1 / c1 + a_t * m2) / (np.sqrt(s2) / c2 + eps))
            p = p * (1 - lr * wd)
        elif name == "momentum":
            g = g + p * wd
            s1 = g if t == 1 else s1 * b1 + g
            p = p - lr * s1
        elif name == "rmsprop":
            g = g + p * wd
            s1 = b1 * s1 + (1 - b1) * g * g
            p = p - lr * g / (np.sqrt(s1) + eps)
        elif name == "adagrad":
            g = g + p * wd
            s1 = s1 + g * g
            p = p - lr * g / (np.sqrt(s1) + eps)
        elif name == "lion":
            p = p * (1 - lr * wd)
            p = p - lr * np.sign(b1 * s1 + (1 - b1) * g)
            s1 = b2 * s1 + (1 - b2) * g
    return p


CASES = [  # class, reference name, constructor arguments, (betas, eps) the reference uses
    (optim.Adam, "adam", dict(lr=1e-2), ((0.9, 0.999), 1e-8, 0.0)),
    (optim.AdamW, "adam", dict(lr=1e-2), ((0.9, 0.999), 1e-8, 1e-2)),
    (optim.AdEMAMix, "ademamix", dict(lr=1e-2), ((0.9, 0.999, 0.9999), 1e-8, 1e-2)),
    (optim.Lion, "lion", dict(lr=1e-3, weight_decay=0.1), ((0.9, 0.99), 0.0, 0.1)),
    (optim.SGD, "momentum", dict(lr=1e-2, momentum=0.9, weight_decay=1e-3), ((0.9, 0.0), 0.0, 1e-3)),
    (optim.RMSprop, "rmsprop", dict(lr=1e-3), ((0.99, 0.0), 1e-8, 0.0)),
    (optim.Adagrad, "adagrad", dict(lr=1e-2, weight_decay=1e-2), ((0.0, 0.0), 1e-10, 1e-2)),
]


def grads(rng, n, steps, shape=None):
    return [(rng.standard_normal(n) * 0.1 + 0.01).astype(np.float32).reshape(shape or (n,)) for _ in range(steps)]


@pytest.mark.parametrize("cls,name,kwargs,hyper", CASES, ids=[c[0].__name__ for c in CASES])
def test_32bit_matches_the_update_rules(rng, cls, name, kwargs, hyper):
    n, steps = 3000, 5
    p = rng.standard_normal(n).astype(np.float32)
    gs = grads(rng, n, steps)
    expected = reference_steps(name, p, gs, kwargs["lr"], hyper[0], hyper[1], hyper[2],
                               alpha=5.0 if name == "ademamix" else 0.0)
    opt = cls([p], **kwargs)
    for g in gs:
        opt.step([g])
    assert opt.state[0]["step"] == steps and opt.state[0]["state1"].dtype == np.float32
    np.testing.assert_allclose(p, expected, rtol=2e-5, atol=2e-6 if name != "lion" else 0)


@pytest.mark.parametrize("cls,name,kwargs,hyper", CASES, ids=[c[0].__name__ for c in CASES])
def test_8bit_state_layout_and_one_step(rng, cls, name, kwargs, hyper):
    n = 8192 + 300  # a partial last block
    p8 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    p32 = p8.copy()
    g = grads(rng, n, 1)[0]
    o8, o32 = cls([p8], optim_bits=8, **kwargs), cls([p32], **kwargs)
    o8.step([g])
    o32.step([g])
    st = o8.state[0]
    blocks = -(-n // 256)
    lead = (2,) if name == "ademamix" else ()
    assert st["bits"] == 8 and st["step"] == 1
    assert st["state1"].dtype == np.uint8 and st["state1"].shape == lead + (n,)
    assert st["absmax1"].dtype == np.float32 and st["absmax1"].shape == lead + (blocks,)
    assert np.array_equal(st["qmap1"], kbit.create_dynamic_map(signed=True))
    states = [("state1", "absmax1", "qmap1")]
    if name in ("adam", "ademamix"):
        assert st["state2"].shape == (n,) and st["absmax2"].shape == (blocks,)
        assert np.array_equal(st["qmap2"], kbit.create_dynamic_map(signed=False))
        states.append(("state2", "absmax2", "qmap2"))
    else:
        assert st["state2"] is None and st["absmax2"] is None
    # From zero state both kernels compute the same new states (up to the order of the fp32 operations,
    # which differs between the two kernel families); the 8-bit one stores them as codes: per block
    # absmax = max |state|, and each code dequantizes to within one gap of the map (the nearest code,
    # or one further by the sign fix).
    for key, amax_key, map_key in states:
        kl = lead if key == "state1" else ()  # AdEMAMix: state1 holds m1 and m2
        exact = o32.state[0][key].reshape(kl + (n,))
        amax = st[amax_key]
        pad = np.zeros(kl + (blocks * 256,), np.float32)
        pad[..., :n] = np.abs(exact)
        np.testing.assert_allclose(amax, pad.reshape(kl + (blocks, 256)).max(-1), rtol=1e-6, atol=0, err_msg=key)
        scale = np.repeat(amax, 256, axis=-1)[..., :n]
        deq = st[map_key][st[key]] * scale
        gap = np.diff(st[map_key]).max()
        assert (np.abs(deq - exact) <= gap * scale * 1.0001 + 1e-6 * np.abs(exact)).all(), key


@pytest.mark.parametrize("cls,name,kwargs,hyper", CASES, ids=[c[0].__name__ for c in CASES])
def test_8bit_training_tracks_32bit(rng, cls, name, kwargs, hyper):
    n, steps = 8192, 20
    p8 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    p0, p32 = p8.copy(), p8.copy()
    if name in ("rmsprop", "adagrad"):
        # bitsandbytes' 8-bit RMSprop/Adagrad step with the raw gradient (no weight-decay term in the
        # numerator, docs/behaviour.md §8.8): compare without decay.
        kwargs = dict(kwargs, weight_decay=0.0)
    o8, o32 = cls([p8], optim_bits=8, **kwargs), cls([p32], **kwargs)
    for g in grads(rng, n, steps):
        o8.step([g])
        o32.step([g])
    # Measured 0.7-1.7 % of the distance moved for every family (8-bit states round each step).
    moved = np.abs(p32.astype(np.float64) - p0).mean()
    err = np.abs(p8.astype(np.float64) - p32).mean()
    assert err <= 0.05 * moved, (err, moved)


def test_first_8bit_step_equals_the_32bit_step(rng):
    # From zero state the first update uses the unquantized new moments in both kernels.
    n = 4096
    p8 = rng.standard_normal(n).astype(np.float32)
    p32 = p8.copy()
    g = rng.standard_normal(n).astype(np.float32)
    optim.Adam8bit([p8], lr=1e-3).step([g])
    optim.Adam32bit([p32], lr=1e-3).step([g])
    np.testing.assert_allclose(p8, p32, rtol=1e-6, atol=0)


def test_min_8bit_size_keeps_small_tensors_in_32bit(rng):
    big, small = rng.standard_normal(4096).astype(np.float32), rng.standard_normal(4095).astype(np.float32)
    opt = optim.Adam8bit([big, small])
    opt.step([np.ones(4096, np.float32), np.ones(4095, np.float32)])
    assert opt.state[0]["state1"].dtype == np.uint8 and opt.state[1]["state1"].dtype == np.float32
    opt2 = optim.Adam([small], optim_bits=8, min_8bit_size=100)
    opt2.step([np.ones(4095, np.float32)])
    assert opt2.state[0]["state1"].dtype == np.uint8


def test_bitsandbytes_defaults():
    p = [np.zeros(8, np.float32)]
    d = lambda o: {k: v for k, v in o.defaults.items()}  # noqa: E731
    assert d(optim.Adam(p)) == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, optim_bits=32,
                                    min_8bit_size=4096, max_unorm=0.0)
    assert d(optim.AdamW8bit(p))["weight_decay"] == 1e-2 and d(optim.AdamW8bit(p))["optim_bits"] == 8
    assert d(optim.AdEMAMix(p)) == dict(lr=1e-3, betas=(0.9, 0.999, 0.9999), alpha=5.0, t_alpha=None, t_beta3=None,
                                        eps=1e-8, weight_decay=1e-2, optim_bits=32, min_8bit_size=4096,
                                        max_unorm=0.0)
    assert d(optim.Lion(p))["lr"] == 1e-4 and d(optim.Lion(p))["betas"] == (0.9, 0.99)
    assert d(optim.RMSprop(p))["lr"] == 1e-2 and d(optim.RMSprop(p))["betas"] == (0.99, 0)
    assert d(optim.Adagrad(p))["eps"] == 1e-10 and d(optim.Adagrad(p))["betas"] == (0.0, 0.0)
    assert d(optim.SGD8bit(p, lr=0.1, momentum=0.9))["betas"] == (0.9, 0)
    assert d(optim.LAMB(p)) == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, optim_bits=32,
                                    min_8bit_size=4096, max_unorm=1.0)
    assert d(optim.LARS(p, lr=0.1, momentum=0.9))["max_unorm"] == 0.02


def test_ademamix_schedules(rng):
    n, steps = 2048, 6
    p = rng.standard_normal(n).astype(np.float32)
    gs = grads(rng, n, steps)
    expected = reference_steps("ademamix", p, gs, 1e-2, (0.9, 0.999, 0.9999), 1e-8, 1e-2, alpha=5.0, t_alpha=4,
                               t_beta3=10)
    opt = optim.AdEMAMix([p], lr=1e-2, t_alpha=4, t_beta3=10)
    assert opt._hyper(opt.param_groups[0], 2)[3] == 2.5 and opt._hyper(opt.param_groups[0], 9)[3] == 5.0
    beta3_1 = opt._hyper(opt.param_groups[0], 1)[2]
    assert beta3_1 == pytest.approx(math.exp(math.log(0.9) * math.log(0.9999) /
                                             (0.9 * math.log(0.9999) + 0.1 * math.log(0.9))))
    for g in gs:
        opt.step([g])
    np.testing.assert_allclose(p, expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("cls", [optim.Adam, optim.Adam8bit, optim.SGD, optim.SGD8bit, optim.RMSprop, optim.Adagrad8bit,
                                 optim.Lion8bit, optim.AdEMAMix8bit])
def test_16bit_parameters(rng, dtype, cls):
    n = 5000
    p = rng.standard_normal(n).astype(dtype)
    p_ref = p.astype(np.float32)
    kw = dict(lr=1e-3, momentum=0.9) if cls.name == "momentum" else dict(lr=1e-3)
    gs = grads(rng, n, 3)
    o, o_ref = cls([p], **kw), cls([p_ref], **kw)
    for g in gs:
        o.step([g.astype(dtype)])
        o_ref.step([g.astype(dtype).astype(np.float32)])
    eps = 2.0**-8 if dtype is ml_dtypes.bfloat16 else 2.0**-11
    # Each step rounds the parameter once to the 16-bit type.
    assert (np.abs(p.astype(np.float32) - p_ref) <= 3 * eps * np.abs(p_ref) + 1e-3).all()


def test_param_groups_none_gradients_and_step_counting(rng):
    a, b, c = (rng.standard_normal(100).astype(np.float32) for _ in range(3))
    a0, b0, c0 = a.copy(), b.copy(), c.copy()
    opt = optim.Adam([{"params": [a, b], "lr": 1e-2}, {"params": [c], "lr": 1e-1}])
    g = np.ones(100, np.float32)
    opt.step([g, None, g])
    opt.step([g, None, g])
    assert opt.state[0]["step"] == 2 and 1 not in opt.state and opt.state[2]["step"] == 2
    assert np.array_equal(b, b0)
    ra, rc = a0.copy(), c0.copy()
    o1, o2 = optim.Adam([ra], lr=1e-2), optim.Adam([rc], lr=1e-1)
    for _ in range(2):
        o1.step([g])
        o2.step([g])
    assert np.array_equal(a, ra) and np.array_equal(c, rc)


def test_step_reads_grad_attributes():
    class Param(np.ndarray):
        pass
    p = np.zeros(64, np.float32).view(Param)
    p.grad = np.ones(64, np.float32)
    optim.Lion([p], lr=0.5).step()
    assert np.array_equal(np.asarray(p), np.full(64, -0.5, np.float32))


def copied(state_dict):
    """A state_dict whose arrays are copies (what saving and loading it gives)."""
    return {"state": {k: {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in s.items()}
                      for k, s in state_dict["state"].items()}, "param_groups": state_dict["param_groups"]}


def test_state_dict_round_trip(rng):
    p1 = rng.standard_normal(5000).astype(np.float32)
    p2 = p1.copy()
    gs = grads(rng, 5000, 4)
    o1 = optim.Adam8bit([p1], lr=1e-3)
    for g in gs:
        o1.step([g])
    o2 = optim.Adam8bit([p2], lr=1e-3)
    for g in gs[:2]:
        o2.step([g])
    saved = o2.state_dict()
    saved = copied(saved)
    o3 = optim.Adam8bit([p2], lr=1e-3)
    o3.load_state_dict(saved)
    for g in gs[2:]:
        o3.step([g])
    assert np.array_equal(p1, p2) and o3.state[0]["step"] == 4


# Constructor arguments each optimizer refuses: (exception, message pattern, the call on a parameter p).
CONSTRUCTOR_ERRORS = [
    (NotImplementedError, "SGD without momentum", lambda p: optim.SGD([p], lr=0.1)),
    (ValueError, "optim_bits must be 8 or 32", lambda p: optim.Adam([p], optim_bits=16)),
    (TypeError, "parameter 0 has dtype float64", lambda p: optim.Adam([np.zeros(4)])),
    (ValueError, "parameter 0 must be C-contiguous", lambda p: optim.Adam([np.zeros((8, 8), np.float32).T])),
    (ValueError, r"LAMB8bit only supports max_unorm=1.0 \(its 8-bit update has no update-norm clipping\), not 0.5",
     lambda p: optim.LAMB8bit([p], max_unorm=0.5)),
    (ValueError, "LAMB8bit does not support amsgrad=True", lambda p: optim.LAMB8bit([p], amsgrad=True)),
    (ValueError, "LARS8bit: the args object has no optim_bits, min_8bit_size, max_unorm, skip_zeros",
     lambda p: optim.LARS8bit([p], lr=0.1, momentum=0.9, args=object())),
    (ValueError, r"Adam8bit only supports optim_bits=32 \(default value for compatibility\)",
     lambda p: optim.Adam8bit([p], optim_bits=8)),
    (ValueError, r"Adagrad8bit only supports optim_bits=8", lambda p: optim.Adagrad8bit([p], optim_bits=32)),
    (NotImplementedError, "LARS without momentum", lambda p: optim.LARS([p], lr=0.1)),
    (NotImplementedError, "always bias-corrects", lambda p: optim.LAMB([p], adam_w_mode=False)),
    (ValueError, "max_unorm must be >= 0", lambda p: optim.LAMB([p], max_unorm=-1.0)),
]


@pytest.mark.parametrize("exc,match,construct", CONSTRUCTOR_ERRORS, ids=[m for _, m, _ in CONSTRUCTOR_ERRORS])
def test_constructor_errors(exc, match, construct):
    with pytest.raises(exc, match=match):
        construct(np.zeros(64, np.float32))


def test_optimizer_errors(rng):
    p = np.zeros(64, np.float32)
    opt = optim.Adam([p])
    with pytest.raises(ValueError, match=r"Adam.step: 2 gradients for 1 parameters"):
        opt.step([p, p])
    with pytest.raises(TypeError, match="gradient 0 has dtype float16, its parameter float32"):
        opt.step([np.zeros(64, np.float16)])
    with pytest.raises(ValueError, match=r"gradient 0 has shape \(32,\), its parameter \(64,\)"):
        opt.step([np.zeros(32, np.float32)])
    assert 0 not in opt.state  # nothing happened


def clipped_reference(name, p, grads, lr, betas, eps, wd, max_unorm):
    """float64 reference of the 32-bit update with update-norm clipping (docs/behaviour.md §8.4): LAMB is
    Adam, LARS is Momentum; the norm leaves weight decay out and is compared with max_unorm * ||p||
    of the parameter before the step."""
    p = p.astype(np.float64)
    s1, s2 = np.zeros_like(p), np.zeros_like(p)
    scales = []
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        b1, b2 = betas
        limit = max_unorm * np.linalg.norm(p)
        if name == "adam":
            s1 = b1 * s1 + (1 - b1) * g
            s2 = b2 * s2 + (1 - b2) * g * g
            c1, c2sq = 1 - b1**t, 1 - b2**t
            norm = math.sqrt(np.sum(((s1 / c1) / (np.sqrt(s2 / c2sq) + eps)) ** 2))
            u = limit / norm if norm > limit else 1.0
            p = p - u * lr * math.sqrt(c2sq) / c1 * (s1 / (np.sqrt(s2) + eps * math.sqrt(c2sq)))
            p = p * (1 - lr * wd)
        else:  # momentum: the norm of the state without weight decay, then the coupled-decay step
            s_norm = g if t == 1 else s1 * b1 + g
            norm = math.sqrt(np.sum(s_norm * s_norm))
            u = (limit + eps) / norm if norm > limit + eps else 1.0
            g = g + p * wd
            s1 = g if t == 1 else s1 * b1 + g
            p = p - u * lr * s1
        scales.append(u)
    return p, scales


@pytest.mark.parametrize("cls,name,kwargs,betas,eps", [
    (optim.LAMB, "adam", dict(lr=0.05, weight_decay=1e-2), (0.9, 0.999), 1e-8),
    (optim.LARS, "momentum", dict(lr=0.5, momentum=0.9, weight_decay=1e-3), (0.9, 0.0), 0.0),
], ids=["LAMB", "LARS"])
def test_lamb_lars_clip_the_update_norm(rng, cls, name, kwargs, betas, eps):
    n, steps = 3000, 6
    p = (rng.standard_normal(n) * 0.05).astype(np.float32)  # small weights: the clipping bites
    gs = grads(rng, n, steps)
    max_unorm = 1.0 if cls is optim.LAMB else 0.02
    expected, scales = clipped_reference(name, p, gs, kwargs["lr"], betas, eps, kwargs["weight_decay"], max_unorm)
    assert min(scales) < 0.5  # the clipping is active in this case, not only the plain rule
    opt = cls([p], **kwargs)
    assert opt.param_groups[0]["max_unorm"] == max_unorm
    for g in gs:
        opt.step([g])
    assert opt.state[0]["unorm_vec"].shape == (1,)
    np.testing.assert_allclose(p, expected, rtol=2e-5, atol=2e-6)


def test_lamb_without_clipping_is_adam(rng):
    p1 = rng.standard_normal(3000).astype(np.float32)
    p2 = p1.copy()
    a, b = optim.LAMB([p1], lr=1e-3, max_unorm=1e30), optim.Adam([p2], lr=1e-3)
    for g in grads(rng, 3000, 3):
        a.step([g])
        b.step([g])
    assert np.array_equal(p1, p2)


@pytest.mark.parametrize("paged,plain", [(optim.PagedAdamW8bit, optim.AdamW8bit), (optim.PagedAdamW, optim.AdamW),
                                         (optim.PagedLion8bit, optim.Lion8bit),
                                         (optim.PagedAdEMAMix8bit, optim.AdEMAMix8bit)],
                         ids=["PagedAdamW8bit", "PagedAdamW", "PagedLion8bit", "PagedAdEMAMix8bit"])
def test_paged_state_lives_in_managed_memory_and_steps_identically(rng, paged, plain):
    big = rng.standard_normal(optim.PAGED_MIN_SIZE + 7).astype(np.float32)
    small = rng.standard_normal(5000).astype(np.float32)
    pa, pb = [big.copy(), small.copy()], [big.copy(), small.copy()]
    a, b = paged(pa, lr=1e-3), plain(pb, lr=1e-3)
    assert paged.__name__ == "Paged" + plain.__name__ and paged.__module__ == "kbit.optim"
    for _ in range(3):
        gs = [rng.standard_normal(x.size).astype(np.float32) * 0.01 for x in pa]
        a.step(gs)
        b.step(gs)
    assert all(np.array_equal(x, y) for x, y in zip(pa, pb))
    assert a.state[0].get("paged") and not a.state[1].get("paged")  # below 1e5 elements: not paged
    st = a.state[0]["state1"]
    assert not st.flags.owndata and isinstance(st.base, np.ndarray)  # a view over the managed buffer
    assert np.array_equal(st, b.state[0]["state1"])


def test_paged_state_is_freed_after_its_last_view(rng, monkeypatch):
    import gc
    freed = []
    real = optim._free_managed
    monkeypatch.setattr(optim, "_free_managed", lambda lib, addr: (freed.append(addr), real(lib, addr)))
    p = rng.standard_normal(optim.PAGED_MIN_SIZE).astype(np.float32)
    opt = optim.PagedAdam32bit([p])
    opt.step([np.ones_like(p)])
    view = opt.state[0]["state2"][:10]  # a view keeps its managed buffer alive
    addr1, addr2 = opt.state[0]["state1"].ctypes.data, opt.state[0]["state2"].ctypes.data
    del opt
    gc.collect()
    assert freed == [addr1]
    assert np.all(view > 0)  # still readable: v after one step with g = 1
    del view
    gc.collect()
    assert sorted(freed) == sorted([addr1, addr2])


def test_paged_state_dict_round_trip(rng):
    p1 = rng.standard_normal(optim.PAGED_MIN_SIZE).astype(np.float32)
    p2 = p1.copy()
    gs = grads(rng, p1.size, 4)
    o1 = optim.PagedAdamW8bit([p1])
    for g in gs:
        o1.step([g])
    o2 = optim.PagedAdamW8bit([p2])
    for g in gs[:2]:
        o2.step([g])
    saved = o2.state_dict()
    saved = copied(saved)
    o3 = optim.PagedAdamW8bit([p2])
    o3.load_state_dict(saved)
    assert not o3.state[0]["state1"].flags.owndata  # copied back into managed memory
    for g in gs[2:]:
        o3.step([g])
    assert np.array_equal(p1, p2)


# ---- load_state_dict checks every state array before a kernel writes it ------------------------

def stepped(cls, n, rng, **kwargs):
    """An optimizer of `cls` over one parameter of n elements after one step, and its copied state_dict."""
    p = rng.standard_normal(n).astype(np.float32)
    opt = cls([p], **kwargs)
    opt.step([np.ones(n, np.float32)])
    return opt, copied(opt.state_dict())


def assert_unchanged(opt, before):
    """Nothing of a refused state_dict was loaded: the same state arrays, step and group settings."""
    assert opt.state.keys() == before["state"].keys()
    for i, st in before["state"].items():
        assert opt.state[i].keys() == st.keys()
        assert all(opt.state[i][k] is v for k, v in st.items()), i
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.state_dict()["param_groups"]] == \
        [{k: v for k, v in g.items() if k != "params"} for g in before["param_groups"]]


ROUND_TRIP = [(optim.Adam8bit, {}), (optim.AdEMAMix8bit, {}), (optim.AdEMAMix32bit, {}), (optim.Lion8bit, {}),
              (optim.Lion32bit, {}), (optim.SGD8bit, dict(lr=0.1, momentum=0.9)), (optim.RMSprop32bit, {}),
              (optim.LAMB, {}), (optim.LARS, dict(lr=0.1, momentum=0.9)), (optim.PagedAdEMAMix8bit, {})]


@pytest.mark.parametrize("cls,kwargs", ROUND_TRIP, ids=[c[0].__name__ for c in ROUND_TRIP])
def test_load_state_dict_accepts_every_layout_it_saves(rng, cls, kwargs):
    # The checks follow the state the optimizer allocates: every family and both state widths load back.
    n = optim.PAGED_MIN_SIZE if cls._paged else 5000 + 17
    a, saved = stepped(cls, n, rng, **kwargs)
    p = a._params[0].copy()
    b = cls([p], **kwargs)
    b.load_state_dict(saved)
    g = np.full(n, 0.5, np.float32)
    a.step([g])
    b.step([g])
    assert np.array_equal(a._params[0], p) and b.state[0]["step"] == 2


def test_load_state_dict_rejects_a_short_8bit_state(rng):
    # A 100-byte state1 made the next 8-bit step write 8092 bytes past its end.
    opt, good = stepped(optim.Adam8bit, 8192, rng)
    before = opt.state_dict()
    bad = copied(good)
    bad["state"][0]["state1"] = np.zeros(100, np.uint8)
    bad["param_groups"][0]["lr"] = 0.5
    with pytest.raises(ValueError, match=r"^load_state_dict: state\[0\]\['state1'\] has 100 elements, "
                                         r"the parameter needs 8192$"):
        opt.load_state_dict(bad)
    assert_unchanged(opt, before)
    assert opt.param_groups[0]["lr"] == 1e-3
    opt.step([np.ones(8192, np.float32)])
    assert opt.state[0]["step"] == 2


def _n_blocks(n):
    return -(-n // 256)


def _readonly(a):
    a.flags.writeable = False  # the kernels write absmax: np.load(mmap_mode="r") arrays must not pass
    return a


N = 5000 + 17  # a partial last block
BAD_STATES = [  # class, the field, its bad value (a function of n), exception, message after "state[0]['key'] "
    (optim.Adam8bit, "state1", lambda n: np.zeros(n, np.float32), TypeError, "has dtype float32, expected uint8"),
    (optim.Adam8bit, "state2", lambda n: np.zeros(n - 1, np.uint8), ValueError,
     f"has {N - 1} elements, the parameter needs {N}"),
    (optim.Adam8bit, "state2", lambda n: np.zeros(2 * n, np.uint8)[::2], ValueError, "must be C-contiguous"),
    (optim.Adam8bit, "absmax1", lambda n: np.zeros(_n_blocks(n) - 1, np.float32), ValueError,
     f"has {_n_blocks(N) - 1} elements, the parameter needs {_n_blocks(N)}"),
    (optim.Adam8bit, "absmax2", lambda n: np.zeros(_n_blocks(n), np.float16), TypeError,
     "has dtype float16, expected float32"),
    (optim.Adam8bit, "qmap1", lambda n: np.zeros(255, np.float32), ValueError,
     "has 255 elements, the parameter needs 256"),
    (optim.Adam8bit, "qmap2", lambda n: np.zeros(256, np.float64), TypeError, "has dtype float64, expected float32"),
    (optim.Adam8bit, "state1", lambda n: [0] * n, TypeError, "must be an array, not list"),
    (optim.Adam8bit, "state1", lambda n: None, TypeError, "must be an array, not NoneType"),
    (optim.Adam8bit, "absmax1", lambda n: _readonly(np.zeros(_n_blocks(n), np.float32)), ValueError, "is read-only"),
    # AdEMAMix keeps m1 and m2 in state1 and their scales in absmax1 (twice the size of state2's).
    (optim.AdEMAMix8bit, "state1", lambda n: np.zeros(n, np.uint8), ValueError,
     f"has {N} elements, the parameter needs {2 * N}"),
    (optim.AdEMAMix8bit, "absmax1", lambda n: np.zeros(_n_blocks(n), np.float32), ValueError,
     f"has {_n_blocks(N)} elements, the parameter needs {2 * _n_blocks(N)}"),
    (optim.AdEMAMix32bit, "state1", lambda n: np.zeros(n, np.float32), ValueError,
     f"has {N} elements, the parameter needs {2 * N}"),
    (optim.AdEMAMix32bit, "state2", lambda n: np.zeros(n, np.uint8), TypeError, "has dtype uint8, expected float32"),
    (optim.Lion32bit, "state1", lambda n: np.zeros(n, np.float64), TypeError, "has dtype float64, expected float32"),
    (optim.Lion32bit, "state2", lambda n: np.zeros(n, np.float32), ValueError,
     "must be None: Lion32bit keeps no state2 in 32-bit state"),
    (optim.Lion8bit, "absmax2", lambda n: np.zeros(_n_blocks(n), np.float32), ValueError,
     "must be None: Lion8bit keeps no absmax2 in 8-bit state"),
    (optim.LAMB, "unorm_vec", lambda n: np.zeros(0, np.float32), ValueError, "has 0 elements, the parameter needs 1"),
]


@pytest.mark.parametrize("cls,key,value,exc,msg", BAD_STATES,
                         ids=[f"{c[0].__name__}-{c[1]}-{i}" for i, c in enumerate(BAD_STATES)])
def test_load_state_dict_checks_each_state_array(rng, cls, key, value, exc, msg):
    opt, good = stepped(cls, N, rng)
    before = opt.state_dict()
    bad = copied(good)
    bad["state"][0][key] = value(N)
    with pytest.raises(exc, match=r"^" + re.escape(f"load_state_dict: state[0]['{key}'] {msg}") + "$"):
        opt.load_state_dict(bad)
    assert_unchanged(opt, before)


def test_load_state_dict_checks_the_step_bits_and_keys(rng):
    opt, good = stepped(optim.Adam8bit, N, rng)
    before = opt.state_dict()

    def refused(exc, msg, **changes):
        bad = copied(good)
        for k, v in changes.items():
            if v is KeyError:
                del bad["state"][0][k]
            else:
                bad["state"][0][k] = v
        with pytest.raises(exc, match=msg):
            opt.load_state_dict(bad)
        assert_unchanged(opt, before)

    for step in (-1, 1.5, True, "3", None, 2**31 - 1):
        refused(ValueError, re.escape(f"load_state_dict: state[0]['step'] must be an integer in [0, 2^31 - 1), "
                                      f"not {step!r}"), step=step)
    refused(ValueError, re.escape("load_state_dict: state[0]['bits'] is 32, the parameter needs 8 "
                                  "(optim_bits=8, min_8bit_size=4096)"), bits=32)
    refused(ValueError, re.escape("load_state_dict: state[0] has no 'absmax1'"), absmax1=KeyError)
    for key in (1, "x", -1, True):
        bad = copied(good)
        bad["state"] = {key: bad["state"][0]}
        with pytest.raises(ValueError, match=re.escape(f"load_state_dict: state key {key!r} is not a parameter "
                                                       "index (0 to 0)")):
            opt.load_state_dict(bad)
    bad = copied(good)
    bad["state"]["0"] = bad["state"][0]
    with pytest.raises(ValueError, match=r"load_state_dict: state of parameter 0 given twice"):
        opt.load_state_dict(bad)
    bad = copied(good)
    bad["state"][0] = [1, 2]
    with pytest.raises(TypeError, match=r"load_state_dict: state\[0\] must be a dict, not list"):
        opt.load_state_dict(bad)
    for field, value, msg in [("optim_bits", 16, "optim_bits must be 8 or 32, not 16"),
                              ("min_8bit_size", None, "min_8bit_size must be an integer, not None"),
                              ("max_unorm", float("nan"), "max_unorm must be a number >= 0, not nan"),
                              ("max_unorm", 1.0, r"state\[0\] has no 'unorm_vec'")]:  # kept when max_unorm > 0
        bad = copied(good)
        bad["param_groups"] = [dict(bad["param_groups"][0], **{field: value})]
        with pytest.raises(ValueError, match=r"load_state_dict: (param_groups\[0\]: )?" + msg):
            opt.load_state_dict(bad)
        assert_unchanged(opt, before)
    with pytest.raises(ValueError, match=r"load_state_dict: expected a dict with 'state' \(a dict\)"):
        opt.load_state_dict({"state": [], "param_groups": []})


def test_load_state_dict_refuses_a_state_dict_with_one_bad_parameter_whole(rng):
    # Parameter 0's state is fine, parameter 1's is short: neither is loaded.
    p = [rng.standard_normal(N).astype(np.float32) for _ in range(2)]
    opt = optim.AdamW8bit(p)
    opt.step([np.ones(N, np.float32)] * 2)
    good = copied(opt.state_dict())
    good["state"][0]["step"] = 7
    good["state"][1]["absmax2"] = np.zeros(3, np.float32)
    before = opt.state_dict()
    with pytest.raises(ValueError, match=r"state\[1\]\['absmax2'\] has 3 elements, the parameter needs 20"):
        opt.load_state_dict(good)
    assert_unchanged(opt, before)
    assert opt.state[0]["step"] == 1


def test_paged_load_state_dict_checks_before_copying_into_managed_memory(rng, monkeypatch):
    opt, good = stepped(optim.PagedAdamW8bit, optim.PAGED_MIN_SIZE, rng)
    before = opt.state_dict()
    allocated = []
    real = optim._paged_zeros
    monkeypatch.setattr(optim, "_paged_zeros", lambda *a: (allocated.append(a[1]), real(*a))[1])
    bad = copied(good)
    bad["state"][0]["state2"] = np.zeros(100, np.uint8)
    with pytest.raises(ValueError, match=r"^load_state_dict: state\[0\]\['state2'\] has 100 elements, "
                                         r"the parameter needs 100000$"):
        opt.load_state_dict(bad)
    assert allocated == [] and opt.state[0]["paged"]
    assert_unchanged(opt, before)
    # Paged state1/state2 are copied into new managed memory, so a read-only saved copy is fine there.
    ok = copied(good)
    ok["state"][0]["state1"].flags.writeable = False
    opt.load_state_dict(ok)
    assert allocated == [(optim.PAGED_MIN_SIZE,)] * 2 and opt.state[0]["state1"].flags.writeable
    assert np.array_equal(opt.state[0]["state1"], good["state"][0]["state1"])


# ---- found by tests/fuzz/python/fuzz_optim_state.py ------------------------------------------------

@pytest.mark.parametrize("cls,key", [(optim.Adam8bit, "absmax1"), (optim.Adam8bit, "qmap2"),
                                     (optim.Adam32bit, "state1"), (optim.LAMB, "unorm_vec")])
def test_load_state_dict_refuses_misaligned_float_state(rng, cls, key):
    # A float32 state one byte off its alignment was loaded and handed to the kernels as float*
    # (undefined behaviour: UBSan's "load of misaligned address" in the optimizer kernels).
    opt, good = stepped(cls, N, rng)
    before = opt.state_dict()
    bad = copied(good)
    bad["state"][0][key] = misaligned(bad["state"][0][key])
    with pytest.raises(ValueError, match=r"^" + re.escape(f"load_state_dict: state[0]['{key}'] is not aligned to "
                                                          "its 4-byte float32 elements") + "$"):
        opt.load_state_dict(bad)
    assert_unchanged(opt, before)


BAD_SETTINGS = [  # class, the param group's setting, its bad value, the message after "param_groups[0]: "
    (optim.Adam8bit, "lr", None, "lr must be a real number, not None"),
    (optim.Adam8bit, "lr", "1e-3", "lr must be a real number, not '1e-3'"),
    (optim.Adam8bit, "weight_decay", [0.1], r"weight_decay must be a real number, not \[0.1\]"),
    (optim.Adam8bit, "lr", 10**400, "lr must be a real number, not 1000"),
    (optim.Adam8bit, "betas", None, r"its betas, alpha, eps, t_alpha, t_beta3 give no step 2 \(TypeError: "),
    (optim.Adam32bit, "betas", "ab", r"at step 2 its betas, alpha, eps give \(beta1, beta2, beta3, alpha, eps\) = "
                                     r"\('a', 'b', 0.0, 0.0, 1e-08\), not real numbers"),
    (optim.Lion8bit, "eps", None, r"at step 2 .*, not real numbers"),
    (optim.AdEMAMix8bit, "betas", (0.9, 0.999), r".* give no step 2 \(ValueError: not enough values to unpack"),
    (optim.AdEMAMix8bit, "t_alpha", 0, r".* give no step 2 \(ZeroDivisionError: "),
    (optim.AdEMAMix8bit, "t_beta3", 0.0, r".* give no step 2 \(ZeroDivisionError: "),
    (optim.AdEMAMix32bit, "alpha", "5", r"at step 2 .*, not real numbers"),
]


@pytest.mark.parametrize("cls,field,value,msg", BAD_SETTINGS,
                         ids=[f"{c[0].__name__}-{c[1]}-{i}" for i, c in enumerate(BAD_SETTINGS)])
def test_load_state_dict_checks_the_settings_step_reads(rng, cls, field, value, msg):
    # Such a group was loaded; the next step() then raised (TypeError, ZeroDivisionError, ctypes'
    # ArgumentError) after counting the step, with the parameters before it already updated.
    opt, good = stepped(cls, N, rng)
    before = opt.state_dict()
    bad = copied(good)
    bad["param_groups"] = [dict(bad["param_groups"][0], **{field: value})]
    with pytest.raises(ValueError, match=r"^load_state_dict: param_groups\[0\]: " + msg):
        opt.load_state_dict(bad)
    assert_unchanged(opt, before)
    opt.step([np.ones(N, np.float32)])
    assert opt.state[0]["step"] == 2


def test_load_state_dict_takes_settings_that_convert_to_float(rng):
    # What step() (float()) and ctypes convert stays loadable: numpy scalars and 0-d arrays.
    opt, good = stepped(optim.AdEMAMix8bit, N, rng)
    ok = copied(good)
    ok["param_groups"] = [dict(ok["param_groups"][0], lr=np.array(1e-3), eps=np.float32(1e-8), t_alpha=np.int64(10),
                               betas=[np.float64(0.9), 0.999, np.float32(0.9999)], alpha=5)]
    opt.load_state_dict(ok)
    opt.step([np.ones(N, np.float32)])
    assert opt.state[0]["step"] == 2


def test_load_state_dict_checks_the_step_dependent_schedule_at_the_loaded_step(rng):
    # AdEMAMix's beta3 schedule divides by (1 - s) ln b3 + s ln b1, s = t / t_beta3: with beta1 = 1 it
    # is 0 at t = t_beta3, so a state loaded at step t_beta3 - 1 cannot take its next step.
    opt, good = stepped(optim.AdEMAMix8bit, N, rng)
    bad = copied(good)
    bad["param_groups"] = [dict(bad["param_groups"][0], betas=(1.0, 0.999, 0.9999), t_beta3=10)]
    bad["state"][0]["step"] = 9
    with pytest.raises(ValueError, match=r"^load_state_dict: param_groups\[0\]: .* give no step 10 "
                                         r"\(ZeroDivisionError: "):
        opt.load_state_dict(bad)
    bad["state"][0]["step"] = 3  # steps 4 ... 9 are fine: it loads (and steps)
    opt.load_state_dict(bad)
    opt.step([np.ones(N, np.float32)])


def test_load_state_dict_refuses_params_that_are_no_list(rng):
    # len(None) raised a TypeError that named neither the function nor the group.
    opt, good = stepped(optim.Adam8bit, N, rng)
    for params in (None, 1, 1.0):
        bad = copied(good)
        bad["param_groups"] = [dict(bad["param_groups"][0], params=params)]
        with pytest.raises(ValueError, match=r"^load_state_dict: a param group has a different number of parameters$"):
            opt.load_state_dict(bad)


# ---- bitsandbytes' args and is_paged (docs/python.md, kbit.optim) ---------------------------------------

class Args:
    """bitsandbytes' legacy settings object (its MockArgs / an argparse namespace)."""

    def __init__(self, **kw):
        self.__dict__.update(dict(optim_bits=32, min_8bit_size=4096, max_unorm=0.0, skip_zeros=False), **kw)


@pytest.mark.parametrize("cls,kwargs", [(optim.Adam8bit, {}), (optim.AdamW32bit, {}), (optim.Lion, {}),
                                        (optim.AdEMAMix8bit, {}), (optim.Adam, dict(optim_bits=8))],
                         ids=["Adam8bit", "AdamW32bit", "Lion", "AdEMAMix8bit", "Adam-optim_bits=8"])
def test_is_paged_keeps_state_in_managed_memory_and_steps_identically(rng, cls, kwargs):
    big = rng.standard_normal(optim.PAGED_MIN_SIZE + 3).astype(np.float32)
    pa, pb = [big.copy()], [big.copy()]
    a, b = cls(pa, is_paged=True, **kwargs), cls(pb, **kwargs)
    assert a.is_paged and not b.is_paged
    for _ in range(3):
        g = rng.standard_normal(big.size).astype(np.float32) * 0.01
        a.step([g])
        b.step([g])
    assert pa[0].tobytes() == pb[0].tobytes()
    assert a.state[0].get("paged") and not b.state[0].get("paged")
    assert not a.state[0]["state1"].flags.owndata  # a view over the managed buffer
    for key in ("state1", "state2", "absmax1", "absmax2"):
        if b.state[0].get(key) is not None:
            assert a.state[0][key].tobytes() == b.state[0][key].tobytes(), key


def test_paged_classes_page_whatever_is_paged_says_and_take_bitsandbytes_order(rng):
    p = [rng.standard_normal(optim.PAGED_MIN_SIZE).astype(np.float32)]
    assert optim.PagedAdam(p, is_paged=False).is_paged and optim.PagedAdamW8bit(p).is_paged
    # bitsandbytes' positional order: ..., amsgrad, optim_bits, args, min_8bit_size, is_paged
    opt = optim.Adam8bit(p, 1e-3, (0.9, 0.999), 1e-8, 0, False, 32, None, 4096, True)
    assert opt.is_paged and opt.defaults["optim_bits"] == 8
    opt.step([np.ones_like(p[0])])
    assert opt.state[0]["paged"] and opt.state[0]["state1"].dtype == np.uint8
    with pytest.raises(TypeError):
        optim.PagedAdamW(p, is_paged=True)  # not a parameter of bitsandbytes' PagedAdamW
    with pytest.raises(TypeError):
        optim.Lion8bit(p, optim_bits=8)  # nor optim_bits of Lion8bit


def test_args_replaces_the_keyword_settings(rng):
    p = rng.standard_normal(5000).astype(np.float32)
    # Adam8bit with args.optim_bits=32 keeps 32-bit state, as in bitsandbytes (args wins over the class)
    opt = optim.Adam8bit([p.copy()], args=Args(optim_bits=32))
    opt.step([p])
    assert opt.state[0]["bits"] == 32 and opt.args.optim_bits == 32
    # the keywords are not read when args is given
    opt = optim.Adam([p.copy()], optim_bits=32, min_8bit_size=1, args=Args(optim_bits=8, min_8bit_size=4096))
    assert opt.defaults["optim_bits"] == 8 and opt.defaults["min_8bit_size"] == 4096
    opt.step([p])
    assert opt.state[0]["bits"] == 8
    opt = optim.Lion8bit([p.copy()])  # without args, bitsandbytes' MockArgs of the keywords
    assert vars(opt.args) == dict(optim_bits=8, min_8bit_size=4096, max_unorm=0.0, skip_zeros=False)
    opt = optim.SGD([p.copy()], lr=0.1, momentum=0.9, args=Args(optim_bits=8, min_8bit_size=6000))
    opt.step([p])
    assert opt.state[0]["bits"] == 32  # 5000 < args.min_8bit_size
    opt = optim.LAMB32bit([p.copy()], max_unorm=1.0, args=Args(max_unorm=0.0))
    opt.step([p])
    assert opt.defaults["max_unorm"] == 0.0 and "unorm_vec" not in opt.state[0]


# skip_zeros applies to the 32-bit kernels but AdEMAMix's and the 1-state 8-bit ones (the 8-bit Adam and
# AdEMAMix kernels ignore it, as bitsandbytes' CUDA kernels do: docs/behaviour.md §8)
@pytest.mark.parametrize("cls,bits", [(optim.Adam, 32), (optim.Lion32bit, 32), (optim.Lion32bit, 8)],
                         ids=["Adam-32", "Lion32bit-32", "Lion32bit-8"])
def test_args_skip_zeros_reaches_the_kernels(rng, cls, bits):
    p0 = rng.standard_normal(5000).astype(np.float32)
    g1 = rng.standard_normal(5000).astype(np.float32)
    g2 = rng.standard_normal(5000).astype(np.float32)
    g2[::7] = 0
    pa, pb = p0.copy(), p0.copy()
    skip, plain = cls([pa], args=Args(skip_zeros=True, optim_bits=bits)), cls([pb], args=Args(optim_bits=bits))
    skip.step([g1])
    plain.step([g1])
    assert pa.tobytes() == pb.tobytes()  # no zero gradient yet
    before = pa.copy()
    skip.step([g2])
    plain.step([g2])
    zero = g2 == 0
    assert np.array_equal(pa[zero], before[zero])  # untouched where the gradient is 0
    assert not np.array_equal(pb[zero], before[zero])  # moved there by the momentum of step 1
    assert skip.state[0]["bits"] == bits  # args.optim_bits wins over the class's bits, as there


ARGS_ERRORS = [
    (NotImplementedError, r"Adam8bit: args.percentile_clipping=5: kbit has no percentile clipping",
     lambda p: optim.Adam8bit([p], args=Args(percentile_clipping=5))),
    (ValueError, r"AdamW: args.block_wise=False with optim_bits=8: kbit keeps 8-bit optimizer state only blockwise",
     lambda p: optim.AdamW([p], args=Args(optim_bits=8, block_wise=False))),
    (ValueError, r"Lion: the args object has no skip_zeros",
     lambda p: optim.Lion([p], args=type("A", (), dict(optim_bits=32, min_8bit_size=1, max_unorm=0.0))())),
    (TypeError, "percentile_clipping", lambda p: optim.Adam([p], percentile_clipping=100)),
    (TypeError, "block_wise", lambda p: optim.Adam8bit([p], block_wise=True)),
]


@pytest.mark.parametrize("exc,match,construct", ARGS_ERRORS, ids=[m for _, m, _ in ARGS_ERRORS])
def test_args_errors(exc, match, construct):
    with pytest.raises(exc, match=match):
        construct(np.zeros(64, np.float32))


def test_args_that_kbit_runs_as_asked(rng):
    p = rng.standard_normal(5000).astype(np.float32)
    # percentile_clipping=100 is off; block_wise=False is harmless with 32-bit state (bitsandbytes'
    # 32-bit update has no blocks)
    a = optim.Adam32bit([p.copy()], args=Args(percentile_clipping=100, block_wise=False))
    b = optim.Adam32bit([p.copy()])
    a.step([p])
    b.step([p])
    assert a._params[0].tobytes() == b._params[0].tobytes()
