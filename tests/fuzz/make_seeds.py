#!/usr/bin/env python3
"""Writes the checked-in seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/):

  fuzz_args_<iface>: one input per function family, each a valid, non-empty call with small sizes
    (and a few edge cases: empty calls, K = 0 GEMMs, NULL optional pointers), encoded the way
    fuzz_harness.h decodes inputs; the fuzzer mutates from there.
  fuzz_elf: a tiny hand-made ELF64 x86-64 shared object (536 bytes, which dlopen accepts) and
    a few truncations and header variants of it.

Run it after changing the decoding in fuzz_harness.h or a family's argument order:
    tests/fuzz/make_seeds.py            (rewrites tests/fuzz/corpus)
"""
import os
import re
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def def_names(iface):
    with open(os.path.join(ROOT, "abi", f"kbit_{iface}.def")) as f:
        return re.findall(r"^KBIT_FN\(\d+,[^,]+,\s*(\w+),", f.read(), re.M)


# ---- encodings of fuzz_harness.h's Reader (only its stable raw forms) --------------------------

def i32(v):  # Reader::integer(false): 0..95 as one byte, else 0xF0 + 4 raw bytes
    return bytes([128 + v]) if 0 <= v < 96 else b"\xf0" + struct.pack("<i", v)


def i64(v):  # Reader::integer(true): 0..95 as one byte, else 0xF0 + 8 raw bytes
    return bytes([128 + v]) if 0 <= v < 96 else b"\xf0" + struct.pack("<q", v)


def f32(v):  # Reader::f32: 0xFF + 4 raw bytes
    return b"\xff" + struct.pack("<f", v)


def size(v):  # Reader::size: a selector byte (6 = an integer follows), then integer(false)
    return b"\x06" + i32(v)


def coin(b):
    return b"\x01" if b else b"\x00"


def sel(index):  # Call::selector: the index-th valid value
    return bytes([index])


BUF = b"\x00"  # Call::buf: allocated, at offset 0
NULL = b"\x07"  # Call::buf: NULL
OVERLAP = b"\x0f"  # Call::maybe_overlap: move the output into the other buffer (then a u16 offset)
APART = b"\x00"  # Call::maybe_overlap: leave it
NO_STREAM = b"\x00"


def call(names, fn, *parts, fill=2):
    """The input calling `fn`: its index, the call's PRNG seed and fill mode, then `parts`."""
    return bytes([names.index(fn)]) + struct.pack("<Q", 0x9E3779B97F4A7C15) + bytes([fill]) + b"".join(parts)


def ignored(present=True):  # Call::ignored: a coin (size 0 or 1), then the buffer choice
    return coin(True) + (BUF if present else NULL)


# ---- fuzz_args_<iface> --------------------------------------------------------------------------

def seeds_4bit():
    n = def_names("4bit")
    return {
        "quantize_fp32_nf4": call(n, "cquantize_blockwise_fp32_nf4", i32(64), i32(77), ignored(False), BUF, BUF, BUF),
        # out moved into A: must be refused
        "quantize_fp16_fp4_overlap": call(n, "cquantize_blockwise_fp16_fp4", i32(64), i32(77), ignored(False), BUF,
                                          BUF, BUF, OVERLAP + struct.pack("<H", 6), APART, APART),
        "dequantize_bf16_fp4": call(n, "cdequantize_blockwise_bf16_fp4", i32(32), i32(70), ignored(), BUF, BUF, BUF,
                                    NO_STREAM),
        "gemv_fp16": call(n, "cgemm_4bit_inference_naive_fp16", i32(5), i32(1), i32(64), i32(0), i32(32), i32(0),
                          i32(64), BUF, BUF, BUF, BUF, BUF, NO_STREAM),
        # nested GEMM: M, N, K, blocksize, quant_type; A, B, coin + absmax_8bit, absmax, code, offset, out, bias
        "gemm_fp32_nested": call(n, "cgemm_4bit_fp32", i32(2), i32(3), i32(64), i32(32), i32(2), BUF, BUF,
                                 coin(True), BUF, BUF, BUF, BUF, BUF, BUF, NO_STREAM),
        # K = 0: out = bias, every input may be NULL
        "gemm_bf16_k0": call(n, "cgemm_4bit_bf16", i32(3), i32(5), i32(0), i32(64), i32(1), NULL, NULL, coin(False),
                             NULL, ignored(False), ignored(False), BUF, BUF, NO_STREAM),
        "quantize_4bit_fp16": call(n, "kbit_quantize_4bit", sel(1), sel(1), i64(128), i64(90), BUF, BUF, BUF,
                                   NO_STREAM),
        "nested_quantize": call(n, "kbit_nested_absmax_quantize", i64(90), i64(32), BUF, BUF, BUF, BUF, BUF,
                                NO_STREAM),
        "nested_dequantize": call(n, "kbit_nested_absmax_dequantize", i64(90), i64(32), f32(0.25), BUF, BUF, BUF,
                                  BUF, NO_STREAM),
        "torchao_quantize_fp32": call(n, "kbit_quantize_nf4_torchao_fp32", i64(256), i64(64), i64(2), BUF, BUF, BUF,
                                      BUF, BUF, NO_STREAM),
        "torchao_dequantize_bf16": call(n, "kbit_dequantize_nf4_torchao_bf16", i64(128), i64(32), i64(4), BUF, BUF,
                                        BUF, BUF, BUF, NO_STREAM),
    }


def seeds_8bit():
    n = def_names("8bit")
    live = bytes([0])  # Context: kinds 0..4 are a live context
    return {
        "quantize_fp16": call(n, "cquantize_blockwise_fp16", i32(256), i32(90), BUF, BUF, BUF, BUF),
        "dequantize_fp32": call(n, "cdequantize_blockwise_fp32", i32(64), i32(90), BUF, BUF, BUF, BUF, NO_STREAM),
        # out moved into absmax (the second Call::maybe_overlap): must be refused
        "dequantize_bf16_overlap": call(n, "cdequantize_blockwise_bf16", i32(32), i32(90), BUF, BUF, BUF, BUF,
                                        NO_STREAM, APART, OVERLAP + struct.pack("<H", 4), APART),
        "quantize_8bit_bf16": call(n, "kbit_quantize_blockwise_8bit", sel(2), i64(32), i64(77), BUF, BUF, BUF, BUF,
                                   NO_STREAM, fill=1),
        "int8_vector_quant": call(n, "cint8_vector_quant", f32(6.0), i32(5), i32(33), BUF, BUF, BUF, NO_STREAM),
        "igemmlt_8_rowscale": call(n, "cigemmlt_8_rowscale", live, i32(33), i32(5), i32(7), i32(33), i32(40),
                                   i32(7), BUF, BUF, BUF, BUF, NO_STREAM),
        "igemmlt_32_m0": call(n, "cigemmlt_32", live, i32(0), i32(4), i32(3), i32(0), i32(0), i32(3), NULL, NULL,
                              BUF, ignored(False), NO_STREAM),
        "dequant_mm": call(n, "cdequant_mm_int32_fp16", i32(4), i32(9), BUF, BUF, BUF, BUF, BUF, NO_STREAM),
        "vectorwise_quant": call(n, "kbit_int8_vectorwise_quant", f32(6.0), i64(4), i64(17), BUF, BUF, BUF, BUF,
                                 NO_STREAM, fill=1),
        "outlier_matmul": call(n, "kbit_int8_outlier_matmul_fp16", i64(3), i64(5), i64(17), BUF, BUF, BUF, BUF, BUF,
                               NO_STREAM),
        "context_destroy": call(n, "kbit_context_destroy", live),
        "get_context": call(n, "get_context"),
    }


def seeds_optim8():
    n = def_names("optim8")
    hyper = f32(0.9) + f32(0.999) + f32(0.9999) + f32(5.0) + f32(1e-8) + f32(0.01) + f32(1e-3) + f32(1.0)

    def optim32(fn, count, max_unorm):
        return call(n, fn, i32(count), i32(3), f32(max_unorm), f32(10.0), hyper, coin(False), BUF, BUF, BUF, BUF,
                    coin(max_unorm > 0), BUF if max_unorm > 0 else b"")

    def optim8(fn, count, skip):
        return call(n, fn, i32(count), i32(2), hyper, coin(skip), BUF, BUF, BUF, BUF, BUF, BUF, BUF, BUF)

    return {
        "adam32_fp32": optim32("cadam32bit_grad_fp32", 90, 0.0),
        "lion32_bf16_clip": optim32("clion32bit_grad_bf16", 77, 1.0),
        "ademamix8_fp16": optim8("cademamix_8bit_blockwise_grad_fp16", 300, False),
        "momentum8_fp32_skip": optim8("cmomentum_8bit_blockwise_grad_fp32", 257, True),
        "managed_ptr": call(n, "cget_managed_ptr", size(4096)),
        "prefetch": call(n, "cprefetch", size(64), i32(0), BUF),
        "fill_fp32": call(n, "cfill_fp32", i64(90), f32(0.5), BUF, ignored(False)),
    }


def seeds_core():
    n = def_names("core")
    return {
        "probe": call(n, "kbit_backend_probe"),
        "info": call(n, "kbit_backend_info"),
        "status_string": call(n, "kbit_status_string", coin(False), i32(100)),
        "device_malloc": call(n, "kbit_device_malloc", size(100), BUF),
        "memcpy": call(n, "kbit_memcpy", size(90), sel(2), BUF, BUF),
        "last_error": call(n, "kbit_last_error_message"),
    }


# ---- fuzz_elf -------------------------------------------------------------------------------------

def tiny_elf(elf_class=2, machine=62, e_type=3):
    """An ELF64 little-endian shared object: one PT_LOAD (RW: ld.so relocates the dynamic section in
    place) of the whole file, a PT_DYNAMIC with DT_HASH/DT_STRTAB/DT_SYMTAB/DT_STRSZ/DT_SYMENT, a null
    symbol, and a section header table (null,
    .dynamic, .shstrtab) at the end, as a linker would place it."""
    ehdr_size, phdr_size, shdr_size = 64, 56, 64
    phnum = 2
    dynstr = b"\0"
    dynsym = bytes(24)  # the null symbol
    dynhash = struct.pack("<IIII", 1, 1, 0, 0)  # SysV hash: one bucket, one chain (the null symbol)
    shstrtab = b"\0.dynamic\0.shstrtab\0"
    off = ehdr_size + phnum * phdr_size
    dynstr_off = off
    dynsym_off = dynstr_off + 8
    hash_off = dynsym_off + len(dynsym)
    dyn_off = hash_off + len(dynhash)
    dyn = b"".join(struct.pack("<qQ", tag, val) for tag, val in
                   [(4, hash_off), (5, dynstr_off), (6, dynsym_off), (10, len(dynstr)), (11, 24), (0, 0)])
    shstr_off = dyn_off + len(dyn)
    shoff = (shstr_off + len(shstrtab) + 7) // 8 * 8
    shnum = 3
    size = shoff + shnum * shdr_size
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", e_type, machine, 1, 0, ehdr_size, shoff, 0, ehdr_size, phdr_size,
                               phnum, shdr_size, shnum, 2)
    # PT_LOAD (RW) of the whole file at vaddr 0; PT_DYNAMIC
    load = struct.pack("<IIQQQQQQ", 1, 6, 0, 0, 0, size, size, 0x1000)
    dynamic = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8)
    body = ehdr + load + dynamic
    body += dynstr.ljust(8, b"\0") + dynsym + dynhash + dyn + shstrtab
    body = body.ljust(shoff, b"\0")
    sh_null = bytes(shdr_size)
    sh_dyn = struct.pack("<IIQQQQIIQQ", 1, 6, 3, dyn_off, dyn_off, len(dyn), 0, 0, 8, 16)
    sh_str = struct.pack("<IIQQQQIIQQ", 10, 3, 0, 0, shstr_off, len(shstrtab), 0, 0, 1, 0)
    body += sh_null + sh_dyn + sh_str
    assert len(body) == size
    return body, shoff


def seeds_elf():
    elf, shoff = tiny_elf()
    return {
        "tiny.so": elf,
        "truncated_ident": elf[:10],
        "truncated_header": elf[:63],
        "truncated_phdrs": elf[:64 + 56 + 20],
        "truncated_segment": elf[:200],
        "truncated_sections": elf[:shoff + 100],
        "elf32": tiny_elf(elf_class=1)[0][:52],
        "aarch64": tiny_elf(machine=183)[0],
        "exec": tiny_elf(e_type=2)[0],
    }


def main():
    targets = {"fuzz_args_4bit": seeds_4bit(), "fuzz_args_8bit": seeds_8bit(), "fuzz_args_optim8": seeds_optim8(),
               "fuzz_args_core": seeds_core(), "fuzz_elf": seeds_elf()}
    out = sys.argv[1] if len(sys.argv) > 1 else OUT
    for target, seeds in targets.items():
        d = os.path.join(out, target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
