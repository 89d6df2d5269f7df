#!/usr/bin/env python3
"""atheris fuzz target: Optimizer.load_state_dict.

    PYTHONPATH=python python tests/fuzz/python/fuzz_optim_state.py -max_total_time=20 CORPUSDIR

Each input builds an optimizer (Adam8bit, Adam (32-bit), AdEMAMix8bit, Lion8bit, PagedAdam8bit, and
AdEMAMix32bit, LAMB and SGD8bit for the other state layouts) over 1 to 3 small numpy parameters
(float32 / float16 / bfloat16, one or two param groups, min_8bit_size small enough that small
parameters get 8-bit state; PagedAdam8bit sometimes gets a parameter of PAGED_MIN_SIZE elements),
steps it 0 to 2 times, takes a copy of its state_dict() and applies up to 6 mutations from the input:
state arrays replaced by arrays of other dtypes, sizes, shapes, strides, flags (read-only, misaligned,
zero-strided) or values (NaN, inf, arbitrary bytes in qmap/absmax), by aliases of other state or of
the parameter, by no array at all; "step", "bits" and "paged" set to other values and types; state
keys renamed, duplicated, deleted, added; param groups' settings changed, deleted or retyped; the
dict itself malformed. Then load_state_dict.

The contract checked (any violation raises, which atheris reports as a finding with the input):
  * a refusal is a ValueError, TypeError or KeyError whose message starts with "load_state_dict" and
    leaves the optimizer exactly as it was: the same state dicts holding the same array objects with
    the same contents, the same param group settings, the parameters untouched; any other exception,
    a crash or a hang (libFuzzer's -timeout) is a finding;
  * an accepted state dict steps: opt.step(grads) with valid gradients runs without an exception, and
    the unmutated state dict is always accepted.

Run with KBIT_LIBRARY_DIR=build-asan/lib and LD_PRELOAD=libasan.so (run.sh: KBIT_FUZZ_ASAN=1) to have
ASan/UBSan check the kernels' reads and writes of the loaded state.
"""
import math
import sys

import _fuzzcommon as fc
from _fuzzcommon import any_value, describe, message, mutate_array, pick

import atheris
import numpy as np

kbit = fc.import_kbit()
optim = kbit.optim

CLASSES = [(optim.Adam8bit, {}), (optim.Adam, {}), (optim.AdEMAMix8bit, {}), (optim.Lion8bit, {}),
           (optim.PagedAdam8bit, {}), (optim.AdEMAMix32bit, {}), (optim.LAMB, {}),
           (optim.SGD8bit, {"lr": 0.01, "momentum": 0.9})]
SIZES = [1, 7, 255, 256, 257, 300, 1000, 5017]
PDTYPES = [np.dtype(np.float32), np.dtype(np.float16), fc.BF16]
STATE_KEYS = ["state1", "state2", "qmap1", "qmap2", "absmax1", "absmax2", "unorm_vec", "step", "bits", "paged",
              "junk"]
STEPS = [0, 1, 2, -1, 2**31 - 2, 2**31 - 1, 2**31, 2**63, 1.0, 1.5, True, False, None, "3", np.int64(5),
         np.uint64(2**64 - 1), np.int8(-1), np.int32(2**31 - 2), [1], float("nan")]
BITS = [8, 32, 16, 0, None, True, "8", 8.0, np.int64(8), np.uint8(32), -8]
PAGED = [True, False, None, 1, 0, "yes", np.bool_(True), [True]]
STATE_INDEX = [0, 1, 2, 3, -1, "0", "1", "01", " 0", "٠", 1.0, True, np.int64(0), np.uint8(1), None, "x", (0,)]
GROUP_KEYS = ["lr", "betas", "eps", "weight_decay", "optim_bits", "min_8bit_size", "max_unorm", "alpha",
              "t_alpha", "t_beta3", "params", "junk"]
GROUP_VALUES = {
    "optim_bits": [8, 32, 16, None, True, "8", 8.0, np.int64(32)],
    "min_8bit_size": [0, 1, 64, 4096, 2**40, -1, None, 64.0, True, "64"],
    "max_unorm": [0.0, 1.0, -1.0, float("nan"), float("inf"), None, True, "1", np.float32(0.5), 0],
    "params": [[], [0], [0, 1], [0, 1, 2], [0, 1, 2, 3], None, 3, "ab", {"a": 1}, (0,)],
}


class Finding(AssertionError):
    pass


def fail(log, what):
    raise Finding(what + "\n  mutations: " + ("; ".join(log) or "none"))


def copied(sd):
    """state_dict() with every array copied and every dict / list fresh (what saving gives)."""
    def cp(v):
        if isinstance(v, np.ndarray):
            return v.copy()
        if isinstance(v, dict):
            return {k: cp(x) for k, x in v.items()}
        if isinstance(v, list):
            return [cp(x) for x in v]
        return v
    return cp(sd)


def same(a, b):
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays or odd objects: unequal
        return False


def snapshot(opt):
    return {"state": {i: (st, dict(st), {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in st.items()})
                      for i, st in opt.state.items()},
            "state_obj": opt.state,
            "groups": [(g, dict(g), g["params"], list(g["params"])) for g in opt.param_groups],
            "params": [p.copy() for p in opt._params]}


def check_unchanged(opt, snap, log, e):
    why = f" after refusing with {type(e).__name__}: {message(e)}"
    if opt.state is not snap["state_obj"] or opt.state.keys() != snap["state"].keys():
        fail(log, "the state dict was replaced or its parameters changed" + why)
    for i, (st, entries, contents) in snap["state"].items():
        now = opt.state.get(i)
        if now is not st:
            fail(log, f"state[{i}] was replaced" + why)
        if now.keys() != entries.keys() or any(now[k] is not v for k, v in entries.items()):
            fail(log, f"state[{i}]'s entries changed" + why)
        for k, v in contents.items():
            if not same(now[k], v):
                fail(log, f"state[{i}][{k!r}] changed: {describe(v)} -> {describe(now[k])}" + why)
    if len(opt.param_groups) != len(snap["groups"]):
        fail(log, "the number of param groups changed" + why)
    for j, (g, settings, params, plist) in enumerate(snap["groups"]):
        now = opt.param_groups[j]
        if now is not g or now["params"] is not params or now["params"] != plist:
            fail(log, f"param_groups[{j}] or its params were replaced" + why)
        if now.keys() != settings.keys() or not all(same(now[k], v) for k, v in settings.items()):
            fail(log, f"param_groups[{j}] settings changed: {settings} -> {now}" + why)
    for i, (p, old) in enumerate(zip(opt._params, snap["params"])):
        if p.tobytes() != old.tobytes():
            fail(log, f"parameter {i} changed" + why)


# ---- building and mutating -------------------------------------------------------------------------

def build(fdp):
    cls, kwargs = pick(fdp, CLASSES)
    kwargs = dict(kwargs)
    nparams = fdp.ConsumeIntInRange(1, 3)
    dtype = pick(fdp, PDTYPES)
    rng = np.random.default_rng(fdp.ConsumeIntInRange(0, 1 << 16))
    sizes = [pick(fdp, SIZES) for _ in range(nparams)]
    if cls._paged and fdp.ConsumeBool():
        sizes[0] = optim.PAGED_MIN_SIZE
    shapes = [(n,) if n % 2 or not fdp.ConsumeBool() else (2, n // 2) for n in sizes]
    params = [(rng.standard_normal(s) * 0.1).astype(dtype) for s in shapes]
    if fdp.ConsumeBool() and cls is not optim.LAMB:
        kwargs["min_8bit_size"] = pick(fdp, [1, 64, 256, 4096])
    if nparams > 1 and fdp.ConsumeBool():
        groups = [{"params": params[:1]}, {"params": params[1:], "lr": 1e-4}]
    else:
        groups = params
    opt = cls(groups, **kwargs)
    for _ in range(fdp.ConsumeIntInRange(0, 2)):
        opt.step([g if fdp.ConsumeIntInRange(0, 3) else None for g in make_grads(rng, params)])
    return opt, rng


def make_grads(rng, params):
    return [(rng.standard_normal(p.shape) * 0.01).astype(p.dtype) for p in params]


def on_part(key, kind):
    """A mutation of one part of the state dict, sd[key]: called with that part where it is a `kind`,
    skipped (nothing consumed) otherwise."""
    def wrap(mutate):
        def run(fdp, sd, log):
            part = sd.get(key)
            if isinstance(part, kind):
                mutate(fdp, part, log)
        return run
    return wrap


@on_part("state", dict)
def mutate_state_entry(fdp, states, log):
    if not states:
        return
    i = pick(fdp, list(states))
    st = states[i]
    if not isinstance(st, dict):
        return
    key = pick(fdp, sorted(st, key=str) + STATE_KEYS)
    how = fdp.ConsumeIntInRange(0, 5)
    if how == 0 and key in st:
        del st[key]
        log.append(f"del state[{i!r}][{key!r}]")
        return
    if key == "step":
        value = pick(fdp, STEPS)
    elif key == "bits":
        value = pick(fdp, BITS)
    elif key == "paged":
        value = pick(fdp, PAGED)
    elif how == 1:  # an alias: another state array of this dict, or a parameter
        pool = [v for s in states.values() if isinstance(s, dict) for v in s.values() if isinstance(v, np.ndarray)]
        pool += PARAMS
        value = pick(fdp, pool) if pool else None
    elif how == 2:
        value = None
    elif how == 3:
        value = any_value(fdp)
    elif isinstance(st.get(key), np.ndarray):
        value = mutate_array(fdp, st[key])
    else:
        value = fc.small_array(fdp)
    st[key] = value
    log.append(f"state[{i!r}][{key!r}]={describe(value)}")


@on_part("state", dict)
def mutate_state_keys(fdp, states, log):
    how = fdp.ConsumeIntInRange(0, 3)
    if how == 0 and states:  # move an entry to another key
        old = pick(fdp, list(states))
        new = pick(fdp, STATE_INDEX)
        try:
            states[new] = states.pop(old)
        except TypeError:  # unhashable
            return
        log.append(f"state key {old!r} -> {new!r}")
    elif how == 1 and states:  # the same entry under a second key
        old = pick(fdp, list(states))
        new = pick(fdp, STATE_INDEX)
        try:
            states[new] = states[old] if fdp.ConsumeBool() else copied(states[old])
        except TypeError:
            return
        log.append(f"state key {old!r} also as {new!r}")
    elif how == 2 and states:
        old = pick(fdp, list(states))
        del states[old]
        log.append(f"del state[{old!r}]")
    else:
        new = pick(fdp, STATE_INDEX)
        value = any_value(fdp) if fdp.ConsumeBool() else {"step": 1, "bits": pick(fdp, [8, 32])}
        try:
            states[new] = value
        except TypeError:
            return
        log.append(f"state[{new!r}]={describe(value)}")


@on_part("param_groups", list)
def mutate_groups(fdp, groups, log):
    how = fdp.ConsumeIntInRange(0, 3)
    if how == 0 and groups:
        g = pick(fdp, groups)
        if not isinstance(g, dict):
            return
        key = pick(fdp, GROUP_KEYS + sorted(g))
        value = pick(fdp, GROUP_VALUES[key]) if key in GROUP_VALUES and fdp.ConsumeBool() else any_value(fdp)
        g[key] = value
        log.append(f"group[{key!r}]={describe(value)}")
    elif how == 1 and groups:
        g = pick(fdp, groups)
        if isinstance(g, dict) and g:
            key = pick(fdp, sorted(g))
            del g[key]
            log.append(f"del group[{key!r}]")
    elif how == 2 and groups:
        j = fdp.ConsumeIntInRange(0, len(groups) - 1)
        groups[j] = any_value(fdp)
        log.append(f"param_groups[{j}]={describe(groups[j])}")
    elif how == 3:
        if groups and fdp.ConsumeBool():
            groups.pop()
            log.append("a param group fewer")
        else:
            groups.append(copied(groups[0]) if groups else {})
            log.append("a param group more")


def mutate_top(fdp, sd, log):
    """The state_dict malformed as a whole (returns the new one)."""
    how = fdp.ConsumeIntInRange(0, 4)
    if how == 0:
        sd["state"] = pick(fdp, [[], None, {}, (), "state", [sd.get("state")]])
    elif how == 1:
        sd.pop(pick(fdp, ["state", "param_groups"]), None)
    elif how == 2:
        sd["param_groups"] = pick(fdp, [None, {}, (), tuple(sd.get("param_groups") or ()), "x"])
    elif how == 3:
        sd["junk"] = any_value(fdp)
    else:
        sd = pick(fdp, [None, [], "state", 0, [sd]])
        log.append(f"state_dict={describe(sd)}")
        return sd
    log.append(f"top-level edit {how}: state={describe(sd.get('state'))}, "
               f"param_groups={describe(sd.get('param_groups'))}")
    return sd


PARAMS = []


def TestOneInput(data):
    fc.tick(data)
    fdp = atheris.FuzzedDataProvider(data)
    opt, rng = build(fdp)
    PARAMS[:] = [p for p in opt._params]
    sd = copied(opt.state_dict())
    log = []
    for _ in range(fdp.ConsumeIntInRange(0, 6)):
        kind = fdp.ConsumeIntInRange(0, 9)
        if kind <= 4:
            mutate_state_entry(fdp, sd, log)
        elif kind <= 6:
            mutate_state_keys(fdp, sd, log)
        elif kind <= 8:
            mutate_groups(fdp, sd, log)
        else:
            sd = mutate_top(fdp, sd, log)
            if not isinstance(sd, dict):
                break
    snap = snapshot(opt)
    try:
        opt.load_state_dict(sd)
    except Exception as e:  # noqa: BLE001 - classified here
        if not log:
            fail(log, f"the unmutated state_dict was refused: {type(e).__name__}: {e}")
        if not isinstance(e, (ValueError, TypeError, KeyError)):
            fail(log, f"unexpected exception {type(e).__name__}: {e}")
        if not message(e).startswith("load_state_dict"):
            fail(log, f"refusal without the function's name: {type(e).__name__}: {message(e)}")
        check_unchanged(opt, snap, log, e)
        fc.count(f"refused {type(e).__name__}")
        return
    fc.count("accepted" + (" mutated" if log else ""))
    grads = make_grads(rng, opt._params)
    try:
        opt.step(grads)
    except Exception as e:  # noqa: BLE001 - every exception here is a finding
        fail(log, f"step after an accepted state_dict raised {type(e).__name__}: {e}")


def main():
    atheris.Setup(sys.argv, fc.keep_going(TestOneInput))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
