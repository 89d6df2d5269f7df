#!/usr/bin/env python3
"""Records golden vectors of torchao's NF4Tensor (to_nf4 and its dequantization) for the kbit
conformance suite. Needs torch and torchao, which kbit itself never needs: run it from a throwaway
environment, e.g.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch torchao numpy
    /tmp/torchvenv/bin/python scripts/golden/gen_torchao_nf4.py

torch runs on one thread: torchao's scaler mean is torch's fp32 sum, whose order depends on the
thread count (kbit follows the single-thread order; see src/ref/ref_4bit.cpp).
Writes tests/golden/torchao_nf4.bin (raw arrays) and tests/golden/torchao_nf4.json (index).
"""
import numpy as np
import torch
import torchao
from torchao.quantization import to_nf4

from golden_blob import Blob

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def raw(t):
    t = t.detach().contiguous().flatten()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def inputs(gen):
    """(name, shape, block_size, scaler_block_size, float32 tensor) cases."""
    cases = []
    def normal(shape, scale=0.02):
        return torch.randn(shape, generator=gen) * scale
    cases.append(("weights 128x128", (128, 128), 64, 256, normal((128, 128))))
    cases.append(("weights 64x128 outliers", (64, 128), 64, 64,
                  normal((64, 128)) * (1 + 30 * (torch.rand((64, 128), generator=gen) > 0.99))))
    cases.append(("1-D block 32 scalers 128", (32 * 128,), 32, 128, normal((32 * 128,), 1.0)))
    cases.append(("block 128 scalers 64", (128 * 64,), 128, 64, normal((128 * 64,), 3.0)))
    cases.append(("4 scalers (scalar sum)", (64 * 4,), 64, 2, normal((64 * 4,))))
    cases.append(("7 scalers", (64 * 7,), 64, 7, normal((64 * 7,))))
    cases.append(("19 scalers", (16 * 19,), 16, 19, normal((16 * 19,))))
    zero = normal((64 * 256,))
    zero[64 * 5:64 * 6] = 0  # a zero block: 0/0 -> index 0
    cases.append(("zero block", (64 * 256,), 64, 256, zero))
    cases.append(("constant (all scalers equal)", (64 * 256,), 64, 256, torch.full((64 * 256,), 0.25)))
    grid = torch.linspace(-1, 1, 64 * 64)  # dense values: many ties between table entries in bf16
    cases.append(("linspace -1..1", (64 * 64,), 64, 64, grid))
    big = normal((64 * 64,), 1.0) * 1000
    cases.append(("large values", (64 * 64,), 64, 64, big))
    return cases


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20260821)
    blob = Blob()
    put = blob.put
    out_cases = []

    for name, shape, bs, sbs, w32 in inputs(gen):
        for dt, tdt in DTYPES.items():
            w = w32.to(tdt).reshape(shape).contiguous()
            t = to_nf4(w, bs, sbs)
            deq = t.get_original_weight()
            out_cases.append({
                "name": name, "dtype": dt, "n": int(w.numel()), "block_size": bs, "scaler_block_size": sbs,
                "w": put(raw(w)),
                "quantized_data": put(raw(t.quantized_data).astype(np.uint8)),
                "quantized_scalers": put(t.quantized_scalers.contiguous().numpy().astype(np.int8)),
                "quantization_factor": put(raw(t.quantization_factor)),
                "scaler_mean": put(raw(t.scaler_mean.reshape(1))),
                "nf4": put(raw(t.nf4)),
                "dequantized": put(raw(deq)),
            })
    blob.save_cases("torchao_nf4",
                    source=f"torchao {torchao.__version__} NF4Tensor (to_nf4, get_original_weight), "
                           f"torch {torch.__version__}, one thread",
                    generator="scripts/golden/gen_torchao_nf4.py",
                    layout="offsets/bytes into torchao_nf4.bin; float32 or raw uint16 bits for fp16/bf16 values",
                    cases=out_cases)


if __name__ == "__main__":
    main()
