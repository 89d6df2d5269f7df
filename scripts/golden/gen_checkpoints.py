#!/usr/bin/env python3
"""Records golden checkpoints from transformers + bitsandbytes, once, in a throwaway environment with
torch (the tests read them without it): a tiny Llama built from a config with a fixed seed, saved dense
(float32 and bfloat16), then loaded with each BitsAndBytesConfig on the CPU and saved again with
save_pretrained, as a user of transformers would make a bnb-4bit or LLM.int8 checkpoint.

Writes tests/golden/checkpoints/<case>/ (model.safetensors, config.json) for the cases
  dense-fp32, dense-bf16                                    the inputs
  {nf4,fp4}-{plain,dq}-{fp32,bf16}, int8-{fp32,bf16}        what transformers + bitsandbytes wrote
and tests/golden/checkpoints/versions.json (the versions that wrote them).
Usage: VENV/bin/python scripts/golden/gen_checkpoints.py
"""
import json
import shutil
from pathlib import Path

import torch
import transformers
import bitsandbytes
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

OUT = Path(__file__).resolve().parent.parent.parent / "tests" / "golden" / "checkpoints"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, vocab_size=16, max_position_embeddings=32, tie_word_embeddings=False)
    torch.manual_seed(20261202)
    model = LlamaForCausalLM(config)
    for dt, torch_dt in DTYPES.items():
        model.to(torch_dt).save_pretrained(OUT / f"dense-{dt}")
    for dt, torch_dt in DTYPES.items():
        cases = {f"{qt}-{'dq' if dq else 'plain'}-{dt}": BitsAndBytesConfig(
                     load_in_4bit=True, bnb_4bit_quant_type=qt, bnb_4bit_use_double_quant=dq,
                     bnb_4bit_compute_dtype=torch.bfloat16)
                 for qt in ("nf4", "fp4") for dq in (False, True)}
        cases[f"int8-{dt}"] = BitsAndBytesConfig(load_in_8bit=True)
        for name, qc in cases.items():
            q = AutoModelForCausalLM.from_pretrained(OUT / f"dense-{dt}", quantization_config=qc, dtype=torch_dt,
                                                     device_map="cpu")
            q.save_pretrained(OUT / name)
    (OUT / "versions.json").write_text(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                                                   "bitsandbytes": bitsandbytes.__version__}, indent=1) + "\n")
    for d in sorted(OUT.iterdir()):
        if d.is_dir():
            for f in list(d.iterdir()):
                if f.name not in ("model.safetensors", "config.json"):
                    f.unlink()  # generation_config.json and the like: not what the tests compare
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
