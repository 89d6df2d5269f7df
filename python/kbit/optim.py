"""bitsandbytes.optim on numpy: 32-bit and 8-bit blockwise Adam/AdamW, AdEMAMix, Lion, SGD with
momentum, RMSprop and Adagrad, LAMB and LARS (update-norm clipping with 32-bit state), PytorchLARS,
GlobalOptimManager's per-parameter overrides, and the paged variants,
over the kbit optimizer interface (kbit_optim8.h).

    opt = kbit.optim.Adam8bit([w1, w2], lr=1e-3)        # parameters: numpy float32/float16/bfloat16
    opt.step([g1, g2])                                   # gradients in the same order; updates in place

Parameters are given as a list of arrays or of param groups ({"params": [...], "lr": ...}), as in
torch. `step(grads)` takes the gradients in the order the parameters were given (flattened over the
groups); a None gradient skips its parameter. Without an argument, step() reads `p.grad` of each
parameter (torch-style objects). State per parameter (`opt.state[i]`, i = that order) follows
bitsandbytes: "step", "state1", "state2", and for 8-bit state "qmap1", "qmap2", "absmax1", "absmax2".
8-bit state is used for parameters with at least min_8bit_size (4096) elements when optim_bits=8;
smaller ones use the 32-bit kernels, as in bitsandbytes.

Every class bitsandbytes.optim (0.50.2) also defines takes its parameters with the same names, order
and defaults. `args` is bitsandbytes' legacy settings object: its optim_bits, min_8bit_size,
max_unorm and skip_zeros replace the keyword values (see _from_args; percentile clipping and
non-blockwise 8-bit state, which older bitsandbytes read from it, are refused). `is_paged=True` pages
the state as the Paged classes do.

Paged classes (PagedAdamW8bit, ...) keep state1/state2 of parameters with at least 1e5 elements in
the backend's managed memory (cget_managed_ptr; CUDA unified memory, plain host memory on the CPU)
as numpy arrays over it, prefetched to the parameter's device before each step, and freed
(kbit_free_managed_ptr) when the last array over it is gone.
"""
import ctypes
import inspect
import math
import numbers
import types
import weakref

import ml_dtypes
import numpy as np

from ._devices import Ctx, DeviceArray, adapter
from .functional import _check_saved, create_dynamic_map

BLOCKSIZE = 256  # KBIT_OPTIM8_BLOCKSIZE
_SUFFIX = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(ml_dtypes.bfloat16): "bf16"}
# 32-bit momentum/RMSprop/Adagrad carry bitsandbytes' _32/_16 names; bf16 is kbit's addition.
_SUFFIX_32_LEGACY = {"fp32": "c{name}32bit_grad_32", "fp16": "c{name}32bit_grad_16", "bf16": "kbit_{name}32bit_grad_bf16"}
_TWO_STATE = ("adam", "ademamix")
PAGED_MIN_SIZE = 100_000  # bitsandbytes pages state of parameters with at least 1e5 elements
_PAGED_KEYS = ("state1", "state2")  # the state that paged optimizers keep in managed memory


def _c_name(name, bits, suffix):
    if bits == 8:
        return f"c{name}_8bit_blockwise_grad_{suffix}"
    if name in ("momentum", "rmsprop", "adagrad"):
        return _SUFFIX_32_LEGACY[suffix].format(name=name)
    return f"c{name}32bit_grad_{suffix}"


class _Stepping:
    """step() and zero_grad() over self.param_groups / self._params, calling self._update(i, p, g, group)
    for each parameter with a gradient."""

    def zero_grad(self):
        pass  # gradients are passed to step(); nothing is kept

    def step(self, grads=None):
        """One optimizer step for every parameter with a gradient (see the module docstring)."""
        if grads is None:
            grads = [getattr(p, "grad", None) for p in self._params]
        grads = list(grads)
        if len(grads) != len(self._params):
            raise ValueError(f"{type(self).__name__}.step: {len(grads)} gradients for {len(self._params)} parameters")
        i = 0
        for group in self.param_groups:
            for p in group["params"]:
                if grads[i] is not None:
                    self._update(i, p, grads[i], group)
                i += 1


class Optimizer(_Stepping):
    """Base of the optimizer classes: param groups, state initialisation, step counting, and the call
    of the kbit kernel for each parameter. Subclasses set `name` (the C kernel family) and defaults."""

    name = None
    _fixed_bits = None  # 8 or 32 in the 8bit / 32bit classes
    _paged = False  # the Paged* classes: paged whatever is_paged says

    def __init__(self, params, defaults, optim_bits=32, min_8bit_size=4096, max_unorm=0.0, args=None,
                 is_paged=False):
        """`args` (bitsandbytes' legacy settings object) replaces optim_bits, min_8bit_size and max_unorm
        and gives skip_zeros (see _from_args); `is_paged` keeps large state in managed memory, as the
        Paged* classes do."""
        self.skip_zeros = False
        if args is not None:
            optim_bits, min_8bit_size, max_unorm, self.skip_zeros = _from_args(type(self).__name__, args)
        else:  # bitsandbytes' MockArgs of the keywords
            args = types.SimpleNamespace(optim_bits=optim_bits, min_8bit_size=min_8bit_size, max_unorm=max_unorm,
                                         skip_zeros=False)
        self.args = args
        self.is_paged = bool(is_paged) or self._paged
        if optim_bits not in (8, 32):
            raise ValueError(f"{type(self).__name__}: optim_bits must be 8 or 32, not {optim_bits!r}")
        if max_unorm < 0:
            raise ValueError(f"{type(self).__name__}: max_unorm must be >= 0, not {max_unorm!r}")
        self.defaults = dict(defaults, optim_bits=optim_bits, min_8bit_size=min_8bit_size, max_unorm=max_unorm)
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for g in groups:
            group = dict(self.defaults)
            group.update(g)
            group["params"] = list(g["params"])
            self.param_groups.append(group)
        self._params = [p for g in self.param_groups for p in g["params"]]
        self._index = [(gi, pi) for gi, g in enumerate(self.param_groups) for pi in range(len(g["params"]))]
        for i, p in enumerate(self._params):
            a = adapter(p)
            _, _, dtype, contiguous, _ = a.info(p)
            if dtype not in _SUFFIX:
                raise TypeError(f"{type(self).__name__}: parameter {i} has dtype {dtype.name}; "
                                "expected float32, float16 or bfloat16")
            if not contiguous:
                raise ValueError(f"{type(self).__name__}: parameter {i} must be C-contiguous")
            if isinstance(p, np.ndarray) and not p.flags.writeable:
                raise ValueError(f"{type(self).__name__}: parameter {i} is read-only")
        self.state = {}

    # -- state ----------------------------------------------------------------------------------

    def _config(self, i, group):
        """The settings of parameter i: its group's, with GlobalOptimManager's overrides for it on top
        (by (group, position) from register_parameters, by the parameter itself from override_config,
        then register_module_override), checked as the constructor checks them."""
        extra = GlobalOptimManager.get_instance()._overrides(self._params[i], self._index[i])
        if not extra:
            return group
        config = dict(group)
        config.update(extra)
        _check_group(f"{type(self).__name__}: GlobalOptimManager override of parameter {i}", config)
        return config

    def _layout(self, p, group):
        """(bits, {key: (shape, dtype), or None where the kernel gets NULL}) of the state this optimizer
        keeps for p: what _init_state allocates and load_state_dict requires of a loaded state."""
        shape = tuple(adapter(p).info(p)[1])
        n = math.prod(shape)
        bits = 8 if group["optim_bits"] == 8 and n >= group["min_8bit_size"] else 32
        two = self.name in _TWO_STATE
        lead = (2,) if self.name == "ademamix" else ()  # AdEMAMix keeps m1 and m2 in state1
        f32, u8 = np.dtype(np.float32), np.dtype(np.uint8)
        unorm = {"unorm_vec": ((1,), f32)} if group["max_unorm"] > 0 else {}  # kept for 8-bit state too, as there
        if bits == 32:
            return bits, {"state1": (lead + shape, f32), "state2": (shape, f32) if two else None, **unorm}
        blocks = (n + BLOCKSIZE - 1) // BLOCKSIZE
        layout = {"state1": (lead + shape, u8), "qmap1": ((256,), f32), "absmax1": (lead + (blocks,), f32)}
        if two:
            layout.update(state2=(shape, u8), qmap2=((256,), f32), absmax2=((blocks,), f32))
        else:
            layout.update(state2=None, qmap2=None, absmax2=None)
        return bits, {**layout, **unorm}

    def _init_state(self, i, p, group, ctx):
        bits, layout = self._layout(p, group)
        st = {"step": 0, "bits": bits}
        paged = self.is_paged and math.prod(adapter(p).info(p)[1]) >= PAGED_MIN_SIZE
        if paged:
            st["paged"] = True
        for key, spec in layout.items():
            if spec is None:
                st[key] = None
            elif key.startswith("qmap"):
                st[key] = ctx.from_numpy(create_dynamic_map(signed=key == "qmap1"))
            elif paged and key in _PAGED_KEYS:
                st[key] = _paged_zeros(ctx.lib, *spec)
            else:
                st[key] = ctx.from_numpy(np.zeros(*spec))
        self.state[i] = st
        return st

    def _hyper(self, group, step):
        """(beta1, beta2, beta3, alpha, eps) passed to the kernel at this step."""
        betas = tuple(group["betas"]) + (0.0, 0.0)
        return betas[0], betas[1], 0.0, 0.0, group["eps"]

    # -- stepping -------------------------------------------------------------------------------

    def _update(self, i, p, g, group):
        cls = type(self).__name__
        group = self._config(i, group)
        ctx = Ctx(p)
        pa, ga = adapter(p), adapter(g)
        p_ptr, p_shape, dtype, _, _ = pa.info(p)
        if ga.device_type(g) != ctx.device_type:
            raise ValueError(f"{cls}.step: gradient {i} is on {ga.device_type(g)!r}, its parameter on {ctx.device_type!r}")
        g_ptr, g_shape, g_dtype, g_contiguous, _ = ga.info(g)
        if g_dtype != dtype:
            raise TypeError(f"{cls}.step: gradient {i} has dtype {g_dtype.name}, its parameter {dtype.name}")
        if tuple(g_shape) != tuple(p_shape):
            raise ValueError(f"{cls}.step: gradient {i} has shape {tuple(g_shape)}, its parameter {tuple(p_shape)}")
        if not g_contiguous:
            raise ValueError(f"{cls}.step: gradient {i} must be C-contiguous")
        n = int(np.prod(p_shape, dtype=np.int64))
        if n > 2**31 - 1 or (self.name == "ademamix" and 2 * n > 2**31 - 1):
            raise ValueError(f"{cls}.step: parameter {i} is too large for the kernels' 32-bit sizes")
        st = self.state.get(i) or self._init_state(i, p, group, ctx)
        st["step"] += 1
        step = st["step"]
        beta1, beta2, beta3, alpha, eps = self._hyper(group, step)
        lr, wd = float(group["lr"]), float(group.get("weight_decay", 0.0))
        suffix = _SUFFIX[dtype]
        fn = getattr(ctx.lib.checked, _c_name(self.name, st["bits"], suffix))
        ptr = _ptr_or_null
        skip_zeros = bool(group.get("skip_zeros", self.skip_zeros))  # args.skip_zeros, or an override of it
        if st.get("paged"):
            _prefetch(ctx.lib, p, (st["state1"], st["state2"]))
        if st["bits"] == 32:
            max_unorm = float(group["max_unorm"])
            unorm, param_norm = None, 0.0
            if max_unorm > 0:
                unorm, param_norm = ptr(st["unorm_vec"]), _param_norm(p, ctx)
            fn(g_ptr, p_ptr, ptr(st["state1"]), ptr(st["state2"]), unorm, max_unorm, param_norm, beta1, beta2,
               beta3, alpha, eps, wd, step, lr, 1.0, skip_zeros, n)
        else:
            fn(p_ptr, g_ptr, ptr(st["state1"]), ptr(st["state2"]), beta1, beta2, beta3, alpha, eps, step, lr,
               ptr(st["qmap1"]), ptr(st["qmap2"]), ptr(st["absmax1"]), ptr(st["absmax2"]), wd, 1.0, skip_zeros, n)

    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [...]} with the state arrays as they are (copy them
        to save); groups list parameter indices instead of arrays, as torch does."""
        groups, i = [], 0
        for g in self.param_groups:
            d = {k: v for k, v in g.items() if k != "params"}
            d["params"] = list(range(i, i + len(g["params"])))
            i += len(g["params"])
            groups.append(d)
        return {"state": {k: dict(v) for k, v in self.state.items()}, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads what state_dict() gave (for parameters of the same sizes). Every state array is checked
        against what this optimizer keeps for its parameter (_layout: dtype, element count, C-contiguous,
        device, writable), as is `step`, before anything changes: the kernels write the state in place,
        so a short array would be overwritten past its end. A bad state_dict raises and leaves the
        optimizer as it was."""
        fn = "load_state_dict"
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("state"), dict) or \
                not isinstance(state_dict.get("param_groups"), (list, tuple)):
            raise ValueError(f"{fn}: expected a dict with 'state' (a dict) and 'param_groups' (a list)")
        if len(state_dict["param_groups"]) != len(self.param_groups):
            raise ValueError(f"{fn}: the number of param groups differs")
        groups = []
        for j, (group, saved) in enumerate(zip(self.param_groups, state_dict["param_groups"])):
            if not isinstance(saved, dict) or not isinstance(saved.get("params", ()), (list, tuple)) or \
                    len(saved.get("params", ())) != len(group["params"]):
                raise ValueError(f"{fn}: a param group has a different number of parameters")
            merged = dict(group)
            merged.update({k: v for k, v in saved.items() if k != "params"})
            _check_group(f"{fn}: param_groups[{j}]", merged)
            groups.append(merged)
        group_of = [g for g in groups for _ in g["params"]]
        state = {}
        for k, saved in state_dict["state"].items():
            i = int(k) if isinstance(k, str) and k.isdecimal() else k
            if not _is_int(i) or not 0 <= i < len(self._params):
                raise ValueError(f"{fn}: state key {k!r} is not a parameter index (0 to {len(self._params) - 1})")
            if int(i) in state:
                raise ValueError(f"{fn}: state of parameter {i} given twice")
            state[int(i)] = self._checked_state(fn, int(i), saved, self._config(int(i), group_of[i]))
        first = 0
        for j, merged in enumerate(groups):  # the settings the next step() reads, at the steps it takes
            count = len(merged["params"])
            steps = {state[i]["step"] + 1 if i in state else 1 for i in range(first, first + count)}
            first += count
            self._check_hyper(f"{fn}: param_groups[{j}]", merged, sorted(steps))
        for i, st in state.items():  # paged state goes back into managed memory of its backend
            if st.get("paged"):
                ctx = Ctx(self._params[i])
                for key in _PAGED_KEYS:
                    if st[key] is not None:
                        host = np.asarray(ctx.to_numpy(st[key]))
                        st[key] = _paged_zeros(ctx.lib, host.shape, host.dtype)
                        st[key][...] = host
        for group, merged in zip(self.param_groups, groups):
            group.update(merged)
        self.state = state

    def _check_hyper(self, where, group, steps):
        """lr, weight_decay and what _hyper makes of betas, alpha, eps (t_alpha, t_beta3) must be real
        numbers at each of `steps`: a loaded group with lr None, betas "ab" or t_alpha 0 is refused here,
        not by step() after it has counted the step and updated the parameters before it."""
        for key in ("lr", "weight_decay"):
            if _real(group.get(key, 0.0)) is None:
                raise ValueError(f"{where}: {key} must be a real number, not {group.get(key)!r}")
        for step in steps:
            try:
                values = self._hyper(group, step)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError) as e:
                raise ValueError(f"{where}: its betas, alpha, eps, t_alpha, t_beta3 give no step {step} "
                                 f"({type(e).__name__}: {e})") from None
            if any(_real(v) is None for v in values):
                raise ValueError(f"{where}: at step {step} its betas, alpha, eps give (beta1, beta2, beta3, alpha, "
                                 f"eps) = {values!r}, not real numbers")

    def _checked_state(self, fn, i, saved, group):
        """A copy of the loaded state of parameter i after checking it against _layout."""
        where = f"{fn}: state[{i}]"
        if not isinstance(saved, dict):
            raise TypeError(f"{where} must be a dict, not {type(saved).__name__}")
        st = dict(saved)
        p = self._params[i]
        bits, layout = self._layout(p, group)
        if not _is_int(st.get("bits")) or st["bits"] != bits:
            raise ValueError(f"{where}['bits'] is {st.get('bits')!r}, the parameter needs {bits} "
                             f"(optim_bits={group['optim_bits']}, min_8bit_size={group['min_8bit_size']})")
        step = st.get("step")
        # step + 1 is the kernels' int32 step
        if not _is_int(step) or not 0 <= step < 2**31 - 1:
            raise ValueError(f"{where}['step'] must be an integer in [0, 2^31 - 1), not {step!r}")
        st["step"], st["bits"] = int(step), bits
        device = adapter(p).device_type(p)
        for key, spec in layout.items():
            if spec is None:
                if st.get(key) is not None:
                    raise ValueError(f"{where}[{key!r}] must be None: {type(self).__name__} keeps no {key} in "
                                     f"{bits}-bit state")
                st[key] = None
                continue
            if key not in st:
                raise ValueError(f"{where} has no {key!r}")
            copied = bool(st.get("paged")) and key in _PAGED_KEYS  # copied into managed memory, from anywhere
            _check_saved(f"{where}[{key!r}]", st[key], spec[1], math.prod(spec[0]), "the parameter needs",
                         device=None if copied else device, writable=not copied and not key.startswith("qmap"))
        return st


def _real(v):
    """float(v) where v converts to a double as step() and ctypes convert it (a real number, numpy
    scalar or 0-d array, a torch scalar tensor), else None; bools and strings count as none."""
    if isinstance(v, (bool, np.bool_, str, bytes, bytearray)):
        return None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_group(where, group):
    """The settings _layout reads from a loaded param group, as the constructor checks them."""
    bits, size, unorm = group.get("optim_bits"), group.get("min_8bit_size"), group.get("max_unorm")
    if not _is_int(bits) or bits not in (8, 32):
        raise ValueError(f"{where}: optim_bits must be 8 or 32, not {bits!r}")
    if not _is_int(size):
        raise ValueError(f"{where}: min_8bit_size must be an integer, not {size!r}")
    if isinstance(unorm, bool) or not isinstance(unorm, numbers.Real) or not unorm >= 0:
        raise ValueError(f"{where}: max_unorm must be a number >= 0, not {unorm!r}")


_ARGS_READ = ("optim_bits", "min_8bit_size", "max_unorm", "skip_zeros")


def _from_args(cls, args):
    """(optim_bits, min_8bit_size, max_unorm, skip_zeros) from bitsandbytes' legacy `args` object. As
    in bitsandbytes, these four come from it and the keyword values are not read, so each must be
    there (bitsandbytes fails with an AttributeError at its first step; here the constructor raises a
    ValueError). Older bitsandbytes also read percentile_clipping and block_wise from it: kbit has no
    percentile clipping and only blockwise 8-bit state, so an args object asking for either is
    refused rather than ignored."""
    missing = [k for k in _ARGS_READ if not hasattr(args, k)]
    if missing:
        raise ValueError(f"{cls}: the args object has no {', '.join(missing)}; bitsandbytes reads "
                         f"{', '.join(_ARGS_READ)} from it in place of the keyword arguments")
    clip = getattr(args, "percentile_clipping", 100)
    if clip != 100:
        raise NotImplementedError(f"{cls}: args.percentile_clipping={clip!r}: kbit has no percentile clipping "
                                  "of the gradient norm (only 100, off, is supported)")
    optim_bits = args.optim_bits
    if not getattr(args, "block_wise", True) and optim_bits == 8:
        raise ValueError(f"{cls}: args.block_wise=False with optim_bits=8: kbit keeps 8-bit optimizer state only "
                         "blockwise (256-element blocks)")
    return optim_bits, args.min_8bit_size, args.max_unorm, bool(args.skip_zeros)


def _ptr_or_null(x):
    return None if x is None else adapter(x).info(x)[0]


def _param_norm(p, ctx):
    """||p||_2 evaluated in float32, as bitsandbytes' torch.norm(p.float()) (class F: the summation
    order is the array library's)."""
    mod = type(p).__module__.split(".")[0]
    if mod == "torch":
        return float(p.detach().float().norm())
    if mod == "cupy":
        cupy = __import__("cupy")
        return float(cupy.linalg.norm(p.astype(cupy.float32).ravel()))
    host = np.asarray(ctx.to_numpy(p), dtype=np.float32).ravel()
    return float(np.sqrt(np.dot(host, host), dtype=np.float32))


def _paged_zeros(lib, shape, dtype):
    """A zeroed numpy array over managed memory of `lib` (cget_managed_ptr). The memory is freed with
    kbit_free_managed_ptr once the array and every view of it are gone."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    addr = lib.cget_managed_ptr(max(nbytes, 1))
    if not addr:
        raise MemoryError(f"kbit: cget_managed_ptr({nbytes}) failed on backend {lib.name}")
    buf = (ctypes.c_ubyte * max(nbytes, 1)).from_address(addr)
    weakref.finalize(buf, _release, lib, addr)  # buf lives while any view of it does
    arr = np.frombuffer(buf, dtype=np.uint8, count=nbytes).view(dtype).reshape(shape)
    arr[...] = 0
    return arr


def _release(lib, addr):
    _free_managed(lib, addr)


def _free_managed(lib, addr):
    lib.kbit_free_managed_ptr(addr)


def _prefetch(lib, p, arrays):
    """cprefetch of paged state towards the parameter's device (-1: the host), as bitsandbytes does
    before each paged step."""
    mod = type(p).__module__.split(".")[0]
    device = -1
    if mod == "torch" and p.device.type == "cuda":
        device = p.device.index if p.device.index is not None else 0
    elif mod == "cupy":
        device = p.device.id
    elif adapter(p).device_type(p) == "cuda" or (isinstance(p, DeviceArray) and p.device_type != "cpu"):
        device = 0  # the one device of a vendor backend's DeviceArray (OpenCL)
    for a in arrays:
        if a is not None:
            lib.checked.cprefetch(a.ctypes.data, a.nbytes, device)


def _bits(cls_bits, optim_bits):
    return cls_bits if cls_bits is not None else optim_bits


def _variant(base, name, bits=None, paged=False, drop=(), defaults=None):
    """The subclass `name` of base (Adam8bit, PagedAdamW, ...) with bitsandbytes' signature for it:
    base's parameters less those in `drop` (base's defaults then apply to them), with `defaults`
    changed. bits=8 or 32 fixes the bits of the state whatever optim_bits says (as there, an args
    object still overrides them); an 8-bit class that keeps optim_bits takes only its default, as
    bitsandbytes' Adam8bit (optim_bits=32) and Adagrad8bit (optim_bits=8) do. paged=True pages the
    state whatever is_paged says (bitsandbytes' PagedAdam keeps is_paged and ignores it)."""
    sig = inspect.signature(base.__init__)
    defaults = defaults or {}
    params = [p.replace(default=defaults.get(p.name, p.default)) for p in sig.parameters.values()
              if p.name not in drop]
    sig = sig.replace(parameters=params)
    fixed = bits if bits is not None else base._fixed_bits

    def __init__(self, *a, **kw):
        bound = sig.bind(self, *a, **kw)
        bound.apply_defaults()
        kwargs = dict(bound.arguments)
        del kwargs["self"]
        only = sig.parameters.get("optim_bits")
        if fixed == 8 and only is not None and kwargs["optim_bits"] != only.default:
            raise ValueError(f"{name} only supports optim_bits={only.default} (default value for compatibility)")
        base.__init__(self, **kwargs)

    __init__.__signature__ = sig
    __init__.__qualname__ = f"{name}.__init__"
    what = ("paged state (managed memory), " if paged else "") + (f"{bits}-bit state, " if bits else "")
    doc = f"{base.__name__} with {what}bitsandbytes' {name} signature (see the module docstring)."
    return type(name, (base,), {"__init__": __init__, "_fixed_bits": fixed, "_paged": paged or base._paged,
                                "__doc__": doc, "__module__": __name__})


def _bits_variants(cls, **kw):
    """cls's 8-bit and 32-bit classes (Adam8bit, Adam32bit, ...)."""
    return tuple(_variant(cls, f"{cls.__name__}{bits}bit", bits=bits, **kw) for bits in (8, 32))


def _paged_variants(*classes, **kw):
    """The Paged classes of `classes` (PagedAdam, PagedAdam8bit, ...)."""
    return tuple(_variant(cls, "Paged" + cls.__name__, paged=True, **kw) for cls in classes)


# ---- the optimizer families -----------------------------------------------------------------

class Adam(Optimizer):
    """Adam (bitsandbytes: decoupled weight decay, so weight_decay > 0 behaves like AdamW). `args`:
    bitsandbytes' legacy settings object (its optim_bits, min_8bit_size, max_unorm, skip_zeros replace
    the keywords); `is_paged`: state of tensors with at least 1e5 elements in managed memory."""
    name = "adam"
    _fixed_bits = None

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                 optim_bits=32, args=None, min_8bit_size=4096, is_paged=False):
        if amsgrad:
            raise NotImplementedError(f"{type(self).__name__}: amsgrad is not supported (as in bitsandbytes)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay),
                         _bits(self._fixed_bits, optim_bits), min_8bit_size, args=args, is_paged=is_paged)


class AdamW(Adam):
    """Adam with bitsandbytes' AdamW default weight_decay=1e-2 (the same decoupled decay)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 optim_bits=32, args=None, min_8bit_size=4096, is_paged=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, optim_bits, args, min_8bit_size, is_paged)


Adam8bit, Adam32bit = _bits_variants(Adam)
AdamW8bit, AdamW32bit = _bits_variants(AdamW)
PagedAdam, PagedAdam8bit, PagedAdam32bit = _paged_variants(Adam, Adam8bit, Adam32bit)
PagedAdamW, PagedAdamW8bit, PagedAdamW32bit = _paged_variants(AdamW, AdamW8bit, AdamW32bit, drop=("is_paged",))


class AdEMAMix(Optimizer):
    """AdEMAMix with bitsandbytes' host schedules: alpha_t = min(t*alpha/t_alpha, alpha) and
    beta3_t = min(exp(ln b1 * ln b3 / ((1-s) ln b3 + s ln b1)), b3), s = t/t_beta3, when t_alpha /
    t_beta3 are given. `is_paged` as Adam's; bitsandbytes' AdEMAMix takes no `args`."""
    name = "ademamix"
    _fixed_bits = None

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999, 0.9999), alpha=5.0, t_alpha=None, t_beta3=None,
                 eps=1e-8, weight_decay=1e-2, optim_bits=32, min_8bit_size=4096, is_paged=False):
        if len(betas) != 3:
            raise ValueError(f"{type(self).__name__}: betas must be (beta1, beta2, beta3)")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), alpha=alpha, t_alpha=t_alpha, t_beta3=t_beta3,
                                      eps=eps, weight_decay=weight_decay), _bits(self._fixed_bits, optim_bits),
                         min_8bit_size, is_paged=is_paged)

    def _hyper(self, group, step):
        beta1, beta2, beta3 = group["betas"]
        alpha, t_alpha, t_beta3 = group["alpha"], group["t_alpha"], group["t_beta3"]
        alpha_t = alpha if t_alpha is None else min(step * alpha / t_alpha, alpha)
        if t_beta3 is None:
            beta3_t = beta3
        else:
            s = step / t_beta3
            ln1, ln3 = math.log(beta1), math.log(beta3)
            beta3_t = min(math.exp(ln1 * ln3 / ((1 - s) * ln3 + s * ln1)), beta3)
        return beta1, beta2, beta3_t, alpha_t, group["eps"]


AdEMAMix8bit, AdEMAMix32bit = _bits_variants(AdEMAMix, drop=("optim_bits",))
PagedAdEMAMix, PagedAdEMAMix8bit, PagedAdEMAMix32bit = _paged_variants(AdEMAMix, AdEMAMix8bit, AdEMAMix32bit,
                                                                       drop=("is_paged",))


class Lion(Optimizer):
    """Lion; `args` and `is_paged` as Adam's (see the module docstring)."""
    name = "lion"
    _fixed_bits = None

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0, optim_bits=32, args=None,
                 min_8bit_size=4096, is_paged=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=0.0, weight_decay=weight_decay),
                         _bits(self._fixed_bits, optim_bits), min_8bit_size, args=args, is_paged=is_paged)


Lion8bit, Lion32bit = _bits_variants(Lion, drop=("optim_bits",))
PagedLion, PagedLion8bit, PagedLion32bit = _paged_variants(Lion, Lion8bit, Lion32bit, drop=("is_paged",))


class SGD(Optimizer):
    """SGD with momentum (momentum > 0 required, as in bitsandbytes); dampening and nesterov are
    accepted and ignored there too. `args` as Adam's (see the module docstring)."""
    name = "momentum"
    _fixed_bits = None

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, optim_bits=32,
                 args=None, min_8bit_size=4096):
        if momentum == 0:
            raise NotImplementedError(f"{type(self).__name__}: SGD without momentum is not supported")
        super().__init__(params, dict(lr=lr, betas=(momentum, dampening), eps=0.0, weight_decay=weight_decay),
                         _bits(self._fixed_bits, optim_bits), min_8bit_size, args=args)


SGD8bit, SGD32bit = _bits_variants(SGD, drop=("optim_bits",))


class RMSprop(Optimizer):
    """RMSprop without centering (alpha > 0); `args` as Adam's (see the module docstring)."""
    name = "rmsprop"
    _fixed_bits = None

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 optim_bits=32, args=None, min_8bit_size=4096):
        if alpha == 0:
            raise NotImplementedError(f"{type(self).__name__}: alpha = 0 is not supported")
        if centered:
            raise NotImplementedError(f"{type(self).__name__}: centered RMSprop is not supported")
        super().__init__(params, dict(lr=lr, betas=(alpha, momentum), eps=eps, weight_decay=weight_decay),
                         _bits(self._fixed_bits, optim_bits), min_8bit_size, args=args)


RMSprop8bit, RMSprop32bit = _bits_variants(RMSprop, drop=("optim_bits",))


class Adagrad(Optimizer):
    """Adagrad without lr_decay or an initial accumulator; `args` as Adam's (see the module docstring)."""
    name = "adagrad"
    _fixed_bits = None

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 optim_bits=32, args=None, min_8bit_size=4096):
        if initial_accumulator_value != 0:
            raise NotImplementedError(f"{type(self).__name__}: initial_accumulator_value != 0 is not supported")
        if lr_decay != 0:
            raise NotImplementedError(f"{type(self).__name__}: lr_decay != 0 is not supported")
        super().__init__(params, dict(lr=lr, betas=(0.0, 0.0), eps=eps, weight_decay=weight_decay),
                         _bits(self._fixed_bits, optim_bits), min_8bit_size, args=args)


Adagrad8bit = _variant(Adagrad, "Adagrad8bit", bits=8, defaults={"optim_bits": 8})
Adagrad32bit = _variant(Adagrad, "Adagrad32bit", bits=32)


class LAMB(Optimizer):
    """LAMB as bitsandbytes runs it: the Adam update with update-norm clipping (max_unorm, default 1.0:
    the update is scaled down when its norm exceeds max_unorm * ||p||). Clipping needs 32-bit state:
    with optim_bits=8, parameters with 8-bit state take the plain 8-bit Adam step, as bitsandbytes'
    8-bit blockwise update has no update norm either. `args` as Adam's (its max_unorm too)."""
    name = "adam"

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, adam_w_mode=True, optim_bits=32, args=None, min_8bit_size=4096, max_unorm=1.0):
        cls = type(self).__name__
        if amsgrad:
            raise NotImplementedError(f"{cls}: amsgrad is not supported (as in bitsandbytes)")
        if not bias_correction or not adam_w_mode:
            raise NotImplementedError(f"{cls}: bitsandbytes' LAMB always bias-corrects and decouples weight decay")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay), optim_bits,
                         min_8bit_size, max_unorm, args)


class LAMB8bit(LAMB):
    """LAMB with 8-bit state (bitsandbytes' LAMB8bit): max_unorm must stay 1.0 and amsgrad False (a
    ValueError otherwise, as there); clipping applies only to parameters below min_8bit_size, which
    keep 32-bit state."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, adam_w_mode=True, args=None, min_8bit_size=4096, max_unorm=1.0):
        if amsgrad:
            raise ValueError("LAMB8bit does not support amsgrad=True")
        if max_unorm != 1.0:
            raise ValueError(f"LAMB8bit only supports max_unorm=1.0 (its 8-bit update has no update-norm clipping), "
                             f"not {max_unorm!r}")
        super().__init__(params, lr, bias_correction, betas, eps, weight_decay, amsgrad, adam_w_mode, 8, args,
                         min_8bit_size, max_unorm)


class LAMB32bit(LAMB):
    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, adam_w_mode=True, args=None, min_8bit_size=4096, max_unorm=1.0):
        super().__init__(params, lr, bias_correction, betas, eps, weight_decay, amsgrad, adam_w_mode, 32, args,
                         min_8bit_size, max_unorm)


class LARS(Optimizer):
    """LARS as bitsandbytes runs it: SGD with momentum (required) and update-norm clipping (max_unorm,
    default 0.02), which needs 32-bit state (as LAMB). `args` as Adam's (its max_unorm too)."""
    name = "momentum"

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, optim_bits=32,
                 args=None, min_8bit_size=4096, max_unorm=0.02):
        if momentum == 0:
            raise NotImplementedError(f"{type(self).__name__}: LARS without momentum is not supported")
        super().__init__(params, dict(lr=lr, betas=(momentum, dampening), eps=0.0, weight_decay=weight_decay),
                         optim_bits, min_8bit_size, max_unorm, args)


class LARS8bit(LARS):
    """LARS with 8-bit state (bitsandbytes' LARS8bit): parameters with 8-bit state take the plain 8-bit
    momentum step (no update-norm clipping), smaller ones the clipped 32-bit one."""

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, args=None,
                 min_8bit_size=4096, max_unorm=0.02):
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, 8, args, min_8bit_size, max_unorm)


class LARS32bit(LARS):
    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, args=None,
                 min_8bit_size=4096, max_unorm=0.02):
        super().__init__(params, lr, momentum, dampening, weight_decay, nesterov, 32, args, min_8bit_size,
                         max_unorm)


class PytorchLARS(_Stepping):
    """bitsandbytes' PytorchLARS on numpy: the reference LARS (SGD with momentum, dampening, optional
    Nesterov, coupled weight decay, then update-norm clipping against max_unorm * ||p||) in the
    parameter's float32 arithmetic, no kbit kernel. Parameters and step(grads) as the other optimizers;
    state[i]["momentum_buffer"]. Clipping needs float32 parameters (an assertion there, a TypeError
    here)."""

    def __init__(self, params, lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=False, max_unorm=0.02):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if momentum == 0:
            raise NotImplementedError("PytorchLARS: momentum 0 is not supported (bitsandbytes' step fails on it)")
        self.defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                             nesterov=nesterov, max_unorm=max_unorm)
        params = list(params)
        if not params:
            raise ValueError("PytorchLARS: empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = [{**self.defaults, **g, "params": list(g["params"])} for g in groups]
        self._params = [p for g in self.param_groups for p in g["params"]]
        for i, p in enumerate(self._params):
            if not isinstance(p, np.ndarray) or p.dtype not in _SUFFIX:
                raise TypeError(f"PytorchLARS: parameter {i} must be a numpy float32, float16 or bfloat16 array")
        self.state = {}

    def _update(self, i, p, g, group):
        g = np.asarray(g)
        if g.shape != p.shape or g.dtype != p.dtype:
            raise ValueError(f"PytorchLARS.step: gradient {i} is {g.dtype.name} {g.shape}, its parameter "
                             f"{p.dtype.name} {p.shape}")
        t = p.dtype.type
        d_p = g + t(group["weight_decay"]) * p if group["weight_decay"] != 0 else g
        st = self.state.setdefault(i, {})
        buf = st.get("momentum_buffer")
        if buf is None:
            buf = st["momentum_buffer"] = d_p.copy()
        else:
            buf *= t(group["momentum"])
            buf += d_p * t(1 - group["dampening"])
        update = d_p + buf * t(group["momentum"]) if group["nesterov"] else buf
        scale = 1.0
        if group["max_unorm"] > 0.0:
            if p.dtype != np.float32:
                raise TypeError(f"PytorchLARS: update-norm clipping needs float32 parameters, not {p.dtype.name}")
            pnorm = np.float32(np.sqrt(np.dot(p.ravel(), p.ravel()), dtype=np.float32))
            unorm = np.float32(np.sqrt(np.dot(update.ravel(), update.ravel()), dtype=np.float32))
            limit = np.float32(group["max_unorm"]) * pnorm
            if unorm > limit:
                scale = limit / unorm
        p += update * t(-group["lr"] * scale)


class GlobalOptimManager:
    """bitsandbytes' per-parameter overrides (one instance: get_instance()). override_config(p, key,
    value) or (p, key_value_dict=...) changes a setting of the optimizers for that parameter, e.g.
    optim_bits=32 for an embedding while the rest keeps 8-bit state; register_parameters(params) also
    records the overrides by (group, position), register_module_override(module, "weight", config) by
    a module's attribute. kbit.optim's optimizers read them at every step (8-bit or 32-bit state is
    chosen at a parameter's first step, as in bitsandbytes)."""

    _instance = None

    def __init__(self):
        raise RuntimeError("Call get_instance() instead")

    def initialize(self):
        self.pid2config = {}
        self.index2config = {}
        self.optimizer = None
        self.uses_config_override = False
        self.module_weight_config_triple = []

    @classmethod
    def get_instance(cls):
        if cls._instance is None:
            cls._instance = cls.__new__(cls)
            cls._instance.initialize()
        return cls._instance

    def register_parameters(self, params):
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for gi, group in enumerate(groups):
            for pi, p in enumerate(group["params"]):
                if id(p) in self.pid2config:
                    self.index2config[(gi, pi)] = self.pid2config[id(p)]

    def override_config(self, parameters, key=None, value=None, key_value_dict=None):
        self.uses_config_override = True
        if not isinstance(parameters, (list, tuple)):
            parameters = [parameters]
        if key is not None and value is not None:
            if key_value_dict is not None:
                raise ValueError("override_config: pass key and value, or key_value_dict, not both")
            key_value_dict = {key: value}
        if key_value_dict is None:
            return
        for p in parameters:
            if id(p) in self.pid2config:
                self.pid2config[id(p)].update(key_value_dict)
            else:
                self.pid2config[id(p)] = key_value_dict

    def register_module_override(self, module, param_name, config):
        self.module_weight_config_triple.append((module, param_name, config))

    def _overrides(self, p, index):
        """The overriding settings of parameter p at (group, position) `index`, in bitsandbytes' order."""
        out = dict(self.index2config.get(index, {}))
        out.update(self.pid2config.get(id(p), {}))
        for module, name, config in self.module_weight_config_triple:
            if getattr(module, name, None) is p:
                out.update(config)
        return out


__all__ = ["Optimizer", "Adam", "Adam8bit", "Adam32bit", "AdamW", "AdamW8bit", "AdamW32bit", "AdEMAMix",
           "AdEMAMix8bit", "AdEMAMix32bit", "Lion", "Lion8bit", "Lion32bit", "SGD", "SGD8bit", "SGD32bit",
           "RMSprop", "RMSprop8bit", "RMSprop32bit", "Adagrad", "Adagrad8bit", "Adagrad32bit", "LAMB", "LAMB8bit",
           "LAMB32bit", "LARS", "LARS8bit", "LARS32bit", "PytorchLARS", "GlobalOptimManager", "PagedAdam",
           "PagedAdam8bit", "PagedAdam32bit", "PagedAdamW", "PagedAdamW8bit",
           "PagedAdamW32bit", "PagedAdEMAMix", "PagedAdEMAMix8bit", "PagedAdEMAMix32bit", "PagedLion",
           "PagedLion8bit", "PagedLion32bit"]
