"""The README's Python quick start, extracted from README.md and run verbatim in a fresh interpreter."""
import re
import subprocess
import sys

from conftest import ROOT, subprocess_env


def quick_start():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Quick start"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_quick_start_runs_as_written(tmp_path):
    code = quick_start()
    assert "kbit.quantize_4bit" in code and "kbit.optim.Adam8bit" in code and "kbit.gemv_4bit" in code
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("dequantize max error: ") and float(lines[0].split()[-1]) < 0.02
    assert lines[1].startswith("gemv max error: ") and float(lines[1].split()[-1]) < 1e-4
    assert lines[2] == "state: uint8 step 1"
    assert lines[3].startswith("KBIT_STATUS_INVALID_ARGUMENT: cdequantize_blockwise_fp32_nf4: blocksize 48")
    assert (tmp_path / "quickstart.safetensors").is_file()
