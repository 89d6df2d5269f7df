"""Checkpoints in the exact safetensors layout of transformers / bitsandbytes (docs/behaviour.md §11).

A 4-bit linear layer with module prefix P ("model.layers.0.mlp.down_proj") is stored as
  P.weight                         uint8 [(n+1)//2, 1]   packed nibbles of the row-major [N, K] weight
  P.weight.absmax                  float32 [blocks], or uint8 [blocks] when nested
  P.weight.quant_map               float32 [16]
  P.weight.nested_absmax           float32 [ceil(blocks/256)]        (nested only)
  P.weight.nested_quant_map        float32 [256]                     (nested only)
  P.weight.quant_state.bitsandbytes__nf4 (or __fp4)   uint8 JSON of quant_type, blocksize, dtype,
                                   shape [, nested_blocksize, nested_dtype, nested_offset]
an LLM.int8 layer as P.weight int8 [out, in], P.SCB float32 [out], P.weight_format uint8 scalar 0.
A 4-bit parameter (a bare nn.Parameter such as transformers v5's fused experts
"model.layers.0.mlp.experts.gate_up_proj", [E, N, K]) is stored the same way under its own key T:
T (the packed data), T.absmax, T.quant_map, ..., T.quant_state.bitsandbytes__nf4 with the 3-D shape
(docs/behaviour.md §11.3); expert_4bit() takes one expert's [N, K] out of it.

    tensors = {}
    tensors.update(kbit.checkpoint.tensors_4bit("model.layers.0.mlp.down_proj", packed, state))
    kbit.checkpoint.save("model.safetensors", tensors)
    packed, state = kbit.checkpoint.load_4bit(kbit.checkpoint.load("model.safetensors"), "model.layers.0.mlp.down_proj")
"""
import math

import numpy as np

from ._devices import Ctx, adapter, to_host
from .functional import QuantState, _blocks, _check_saved, _plain_absmax

WEIGHT_FORMAT_ROW = 0  # the only LLM.int8 weight_format bitsandbytes still accepts ("row")


def _host(x):
    return adapter(x).to_numpy(x, None) if not isinstance(x, np.ndarray) else x


def tensors_4bit(prefix, packed, state, parameter=False):
    """The safetensors entries of a 4-bit weight: {P.weight, P.weight.absmax, ...} (host arrays).
    parameter=True: `prefix` is the key T of a bare parameter (fused experts), and the entries are
    {T, T.absmax, ...}."""
    if not isinstance(state, QuantState) or state.quant_type not in ("nf4", "fp4"):
        raise TypeError("tensors_4bit: state must be the QuantState of a 4-bit weight")
    name = prefix if parameter else f"{prefix}.weight"
    out = {name: _host(packed)}
    for key, value in state.as_dict(packed=True).items():
        out[f"{name}.{key}"] = _host(value)
    return out


def tensors_int8(prefix, CB, SCB):
    """The safetensors entries of an LLM.int8 weight: {P.weight: int8 [out, in], P.SCB: float32 [out],
    P.weight_format: uint8 0}."""
    CB, SCB = _host(CB), _host(SCB)
    if CB.dtype != np.int8 or CB.ndim != 2:
        raise TypeError(f"tensors_int8: CB must be a 2-D int8 array, not {CB.dtype} {CB.shape}")
    if SCB.dtype != np.float32 or SCB.shape != (CB.shape[0],):
        raise TypeError(f"tensors_int8: SCB must be float32 [{CB.shape[0]}], not {SCB.dtype} {SCB.shape}")
    return {f"{prefix}.weight": CB, f"{prefix}.SCB": SCB,
            f"{prefix}.weight_format": np.array(WEIGHT_FORMAT_ROW, dtype=np.uint8)}


def save(path, tensors, metadata=None):
    """Writes host arrays with safetensors' numpy API. metadata defaults to {"format": "pt"}, which
    transformers requires of a PyTorch checkpoint."""
    from safetensors.numpy import save_file
    host = {k: _host(v) for k, v in tensors.items()}
    # (np.ascontiguousarray would turn weight_format's 0-d array into shape [1].)
    save_file({k: v if v.flags.c_contiguous else np.ascontiguousarray(v) for k, v in host.items()}, str(path),
              metadata=metadata if metadata is not None else {"format": "pt"})


def load(path):
    """{key: numpy array} of a safetensors file."""
    from safetensors.numpy import load_file
    return load_file(str(path))


def _quant_state_owner(key):
    """T of a key T.quant_state.bitsandbytes__<type> (the type without a dot), else None: T is P.weight
    for a linear layer P, the parameter's own key for a 4-bit parameter."""
    head, sep, tail = key.rpartition(".quant_state.bitsandbytes__") if isinstance(key, str) else ("", "", "")
    return head if sep and head and "." not in tail else None


def is_parameter_4bit(tensors, prefix):
    """Whether `prefix` names a 4-bit parameter (stored under its own key, like fused experts) rather
    than a linear layer: the checkpoint has a key `prefix.quant_state.bitsandbytes__<type>`."""
    return any(_quant_state_owner(k) == prefix for k in tensors)


def load_4bit(tensors, prefix):
    """(packed, QuantState) of the 4-bit weight `prefix` from checkpoint entries, by the rules
    transformers follows (QuantState.from_dict over the keys under P.weight., which checks the JSON
    fields and the scales against them). Raises ValueError for entries that disagree. A 4-bit
    parameter (is_parameter_4bit: fused experts) is read from the keys T and T.* instead."""
    name = prefix if is_parameter_4bit(tensors, prefix) else f"{prefix}.weight"
    if name not in tensors:
        raise KeyError(f"load_4bit: {name} not in the checkpoint")
    # Full keys, so that from_dict's messages name the tensor (it strips them to the last component).
    # In name order, as a file loads: where two keys strip to the same field (P.weight.absmax and
    # P.weight.x.absmax) the later name wins, whatever order the caller's dict holds them in (the C
    # reader's rule too).
    state = QuantState.from_dict({k: tensors[k] for k in sorted(k for k in tensors if isinstance(k, str)
                                                                and k.startswith(name + "."))})
    packed = tensors[name]
    # Any quant_storage dtype ([(n+1)//(2*itemsize), 1]): only the byte count is fixed by the shape.
    shape, dtype = _check_saved(f"load_4bit: {name}", packed, None)
    n = math.prod(state.shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != (n + 1) // 2:
        raise ValueError(f"load_4bit: {name} holds {nbytes} bytes, its quant_state shape {list(state.shape)} "
                         f"needs {(n + 1) // 2}")
    # The bytes and scales fix only the element count (to within one for odd counts), not how it is
    # split into dimensions: a transposed [K, N] looks the same. The one other record of the layout is
    # the bias of the Linear4bit, [N] for a weight [N, K]; without a bias a transposition goes unseen.
    bias = tensors.get(f"{prefix}.bias")
    if bias is not None and len(state.shape) == 2 and name != prefix:
        _check_saved(f"load_4bit: {prefix}.bias", bias, None, state.shape[0],
                     f"the quant_state shape {list(state.shape)} of {name} needs")
    return packed, state


def load_int8(tensors, prefix):
    """(CB int8 [out, in], SCB float32 [out]) of the LLM.int8 weight `prefix`; rejects weight formats
    other than "row" (0), as bitsandbytes does, and an SCB that is not one scale per row."""
    fmt = tensors.get(f"{prefix}.weight_format")
    if fmt is not None:
        try:
            fmt = to_host(fmt)  # a device array is copied, never read through its pointer
        except (ValueError, TypeError):  # a ragged list
            raise ValueError(f"load_int8: {prefix}.weight_format must be one integer, not {type(fmt).__name__}") \
                from None
        if fmt.size != 1 or fmt.dtype.kind not in "iu":
            raise ValueError(f"load_int8: {prefix}.weight_format must be one integer, not {fmt.dtype} {fmt.shape}")
        if int(fmt.reshape(-1)[0]) != WEIGHT_FORMAT_ROW:
            raise ValueError(f"load_int8: {prefix}.weight_format is {int(fmt.reshape(-1)[0])}; only 0 (row) is "
                             "supported")
    for key in (f"{prefix}.weight", f"{prefix}.SCB"):
        if key not in tensors:
            raise KeyError(f"load_int8: {key} not in the checkpoint")
    CB, SCB = tensors[f"{prefix}.weight"], tensors[f"{prefix}.SCB"]
    shape, _ = _check_saved(f"load_int8: {prefix}.weight", CB, np.int8)
    if len(shape) != 2:
        raise ValueError(f"load_int8: {prefix}.weight must be 2-D [out, in], not {list(shape)}")
    scb_shape, _ = _check_saved(f"load_int8: {prefix}.SCB", SCB, np.float32, shape[0],
                                f"the weight's {shape[0]} rows need")
    if len(scb_shape) != 1:
        raise ValueError(f"load_int8: {prefix}.SCB must be 1-D [{shape[0]}], not {list(scb_shape)}")
    return CB, SCB


def expert_4bit(packed, state, e):
    """(packed, QuantState) of expert `e` of a 4-bit parameter of shape [E, N, K] (as load_4bit returns
    it): its [N, K] weight, whose codes and scales are contiguous slices because the parameter is
    quantized flat. Needs N * K to be a multiple of the blocksize, so that no block spans two experts.
    Nested scales stay nested when each expert has a whole number of nested blocks (N * K / blocksize a
    multiple of nested_blocksize, 256); otherwise the expert gets its float32 scales, decoded from the
    codes as dequantize_4bit decodes them. The slices are views of `packed` and the scales (copies only
    for decoded scales): dequantize_4bit of the result equals expert e of the whole tensor's, byte for
    byte."""
    fn = "expert_4bit"
    if not isinstance(state, QuantState) or state.shape is None or len(state.shape) != 3:
        raise ValueError(f"{fn}: state must be the QuantState of a 3-D [E, N, K] weight, not shape "
                         f"{None if not isinstance(state, QuantState) else state.shape}")
    E, N, K = state.shape
    if isinstance(e, bool) or not isinstance(e, (int, np.integer)) or not 0 <= e < E:
        raise ValueError(f"{fn}: expert {e!r} is not in 0 ... {E - 1}")
    per = N * K
    if per % state.blocksize:
        raise ValueError(f"{fn}: an expert's {N} x {K} = {per} elements are not a multiple of the blocksize "
                         f"{state.blocksize}: its blocks span two experts")
    bpe = per // state.blocksize  # blocks per expert
    flat = _host(packed).reshape(-1).view(np.uint8)
    weight = flat[e * per // 2:(e + 1) * per // 2].reshape(-1, 1)
    common = dict(shape=(N, K), code=state.code, blocksize=state.blocksize, quant_type=state.quant_type,
                  dtype=state.dtype)
    absmax = _host(state.absmax)
    if not state.nested:
        return weight, QuantState(absmax=absmax[e * bpe:(e + 1) * bpe], **common)
    nb = state.state2.blocksize
    if bpe % nb == 0:
        s2 = state.state2
        state2 = QuantState(absmax=_host(s2.absmax)[e * bpe // nb:(e + 1) * bpe // nb], code=s2.code,
                            blocksize=nb, dtype=s2.dtype)
        return weight, QuantState(absmax=absmax[e * bpe:(e + 1) * bpe], offset=state.offset, state2=state2,
                                  **common)
    plain, _ = _plain_absmax(Ctx(absmax), fn, state, _blocks(E * per, state.blocksize))
    return weight, QuantState(absmax=np.array(plain[e * bpe:(e + 1) * bpe]), **common)


def quantized_prefixes(tensors):
    """{"4bit": [...], "int8": [...]}: the module prefixes of the quantized weights in `tensors`; 4-bit
    parameters (keys T.quant_state.bitsandbytes__<type>, T not ending in .weight) by their key T."""
    owners = {_quant_state_owner(k) for k in tensors} - {None}
    four = sorted(t[:-len(".weight")] if t.endswith(".weight") else t for t in owners)
    eight = sorted(k[:-len(".SCB")] for k in tensors if k.endswith(".SCB") and k[:-len(".SCB")] + ".weight" in tensors)
    return {"4bit": four, "int8": eight}
