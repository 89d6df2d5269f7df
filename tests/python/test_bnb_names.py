"""kbit.functional and kbit.optim against the public names of bitsandbytes.functional and
bitsandbytes.optim: every name is there or deliberately absent (ABSENT says why), the names added for
issue 40 have bitsandbytes' parameters and defaults, and the numpy-only ones that need no kernel
(PytorchLARS, int8_vectorwise_dequant) give bitsandbytes' values. Needs torch and bitsandbytes
(skipped without them). Every optimizer class both define has bitsandbytes' signature."""
import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed: this compares kbit with bitsandbytes")
bnb = pytest.importorskip("bitsandbytes", reason="bitsandbytes not installed")
import bitsandbytes.functional as bnbf  # noqa: E402
import bitsandbytes.optim as bnbo  # noqa: E402

import kbit.functional as kf  # noqa: E402
import kbit.optim as ko  # noqa: E402

# bitsandbytes.functional names kbit leaves out on purpose, and why.
ABSENT = {
    "CUBLAS_Context": "torch's per-device cuBLAS handles; kbit keeps its int8 GEMM context per library itself",
    "GlobalPageManager": "paged torch tensors; kbit.optim's Paged* classes manage their managed memory themselves",
    "get_paged": "paged torch tensors (as GlobalPageManager); kbit.load() has cget_managed_ptr",
    "prefetch_tensor": "paged torch tensors (as GlobalPageManager); kbit.load() has cprefetch",
    "fill": "paged torch tensors (as GlobalPageManager); kbit.load() has cfill_fp32 / cfill_uint8",
    "elementwise_func": "the dispatcher of fill and _mul on paged tensors",
    "get_ptr": "a torch tensor's pointer; kbit reads any array's pointer itself",
    "is_on_gpu": "torch device checks; kbit checks every argument's device itself",
    "has_avx512bf16": "bitsandbytes' switch for its repacked CPU layout; kbit.bitsandbytes answers it for bitsandbytes",
    "igemm": "deprecated in bitsandbytes (FutureWarning); int8_linear_matmul replaces it",
    "batched_igemm": "deprecated in bitsandbytes (FutureWarning); int8_linear_matmul replaces it",
    "check_matmul": "the argument check of igemm and batched_igemm",
    "optimizer_update_32bit": "the op wrapper bitsandbytes' optimizers call; kbit.optim calls the C kernels, "
                              "kbit.load() has them under their C names",
    "optimizer_update_8bit_blockwise": "as optimizer_update_32bit",
}
# The names issue 40 added to kbit: bitsandbytes' parameters and defaults.
ADDED = {kf: ["int8_double_quant", "int8_vectorwise_dequant", "create_linear_map", "create_normal_map",
              "create_fp8_map", "quantize_fp4", "quantize_nf4", "dequantize_fp4", "dequantize_nf4", "get_4bit_type"],
         ko: ["LAMB8bit", "LARS8bit", "LAMB32bit", "LARS32bit", "PytorchLARS", "GlobalOptimManager"]}


def public(module):
    """The functions and classes a module defines (not what it imports), without a leading underscore;
    kbit.bitsandbytes' replacement of has_avx512bf16 counts as bitsandbytes' own (an installed kbit's entry
    point puts it there on import)."""
    top = module.__name__.split(".")[0]

    def own(v):
        where = getattr(v, "__module__", "") or ""
        return (inspect.isfunction(v) or inspect.isclass(v)) and (where.split(".")[0] == top
                                                                  or where == "kbit.bitsandbytes")
    return {n for n, v in vars(module).items() if not n.startswith("_") and own(v)}


def test_every_functional_name_is_there_or_deliberately_absent():
    missing = public(bnbf) - set(dir(kf))
    assert missing == set(ABSENT), sorted(missing ^ set(ABSENT))


def test_every_optim_name_is_there():
    names = {n for n in dir(bnbo) if not n.startswith("_") and inspect.isclass(getattr(bnbo, n))}
    assert "GlobalOptimManager" in names and "PytorchLARS" in names
    assert names - set(dir(ko)) == set()


def _parameters(f):
    out = []
    for p in inspect.signature(f).parameters.values():
        d = p.default
        if d is not inspect.Parameter.empty and isinstance(d, (torch.dtype, type)):
            d = str(d).split(".")[-1].strip("'>")  # torch.uint8 and numpy's uint8 alike
        out.append((p.name, d))
    return out


@pytest.mark.parametrize("module, name", [(m, n) for m, names in ADDED.items() for n in names],
                         ids=lambda x: x if isinstance(x, str) else x.__name__)
def test_added_names_have_bitsandbytes_signature(module, name):
    theirs = getattr(bnbf if module is kf else bnbo, name)
    assert _parameters(getattr(module, name)) == _parameters(theirs)


# Classes both kbit.optim and bitsandbytes.optim define whose signatures differ on purpose, and why
# (none: every one takes bitsandbytes 0.50.2's parameters, names, order and defaults).
SIGNATURE_EXCEPTIONS = {}


def _optim_classes():
    return sorted(n for n in dir(bnbo) if not n.startswith("_") and inspect.isclass(getattr(bnbo, n))
                  and inspect.isclass(getattr(ko, n, None)))


def test_the_signature_comparison_covers_every_optimizer():
    names = _optim_classes()
    assert len(names) >= 41 and {"Adam8bit", "PagedAdamW", "Lion32bit", "Adagrad8bit", "LAMB"} <= set(names)
    assert set(SIGNATURE_EXCEPTIONS) <= set(names)


@pytest.mark.parametrize("name", _optim_classes())
def test_every_optimizer_has_bitsandbytes_signature(name):
    """Parameter names, order and defaults of each class both packages define (args, is_paged,
    optim_bits where bitsandbytes has it, ...), so a call written for bitsandbytes binds the same."""
    if name in SIGNATURE_EXCEPTIONS:
        pytest.skip(SIGNATURE_EXCEPTIONS[name])
    assert _parameters(getattr(ko, name)) == _parameters(getattr(bnbo, name))


def test_pytorch_lars_equals_bitsandbytes():
    g = torch.Generator().manual_seed(3)
    p0 = torch.randn(500, generator=g)
    grads = [torch.randn(500, generator=g) for _ in range(5)]
    kw = dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=1e-2, max_unorm=0.02)
    theirs = torch.nn.Parameter(p0.clone())
    opt = bnbo.PytorchLARS([theirs], **kw)
    mine = p0.numpy().copy()
    kopt = ko.PytorchLARS([mine], **kw)
    for grad in grads:
        theirs.grad = grad.clone()
        opt.step()
        kopt.step([grad.numpy()])
    want = theirs.detach().double().numpy()
    # Both in fp32; torch fuses p + alpha * update and sums the norms in its own order: per step a few
    # fp32 roundings of |p| (the clipped step is far smaller than p)
    assert np.max(np.abs(mine - want)) <= 5 * 4 * 2.0 ** -24 * np.max(np.abs(want))
    buf = opt.state[theirs]["momentum_buffer"].numpy()  # its recurrence: the same few roundings per step
    assert np.max(np.abs(kopt.state[0]["momentum_buffer"] - buf)) <= 5 * 4 * 2.0 ** -24 * np.max(np.abs(buf))


def test_int8_vectorwise_dequant_equals_bitsandbytes():
    g = torch.Generator().manual_seed(4)
    A = torch.randint(-127, 128, (7, 33), generator=g, dtype=torch.int8)
    stats = torch.rand(7, generator=g) * 5
    want = bnbf.int8_vectorwise_dequant(A, stats)
    got = kf.int8_vectorwise_dequant(A.numpy(), stats.numpy())
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.numpy().view(np.uint32))
