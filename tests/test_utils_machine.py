"""What runs record beside their results: the CPU model and kernel flags parsed from /proc/cpuinfo, the
MKL/oneDNN builds from torch's build description, the thread count; on the texts those sources give."""

from __future__ import annotations

import platform

import torch

from xsyn.utils import machine
from xsyn.utils.machine import cpu_model, cpu_platform, kernel_libraries

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu vme sse sse2 ssse3 sse4_1 fma avx avx2 hypervisor avx512f avx512_bf16 amx_tile amx_bf16 avx512_fp16 f16c

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu avx512f
"""

CONFIG = """PyTorch built with:
  - GCC 13.3
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture applications
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)
  - CPU capability usage: AVX512
"""


def test_the_first_processor_gives_the_model_and_only_the_flags_kernels_choose_by():
    assert cpu_model(CPUINFO) == {
        "cpu": "Intel(R) Xeon(R) Platinum 8480+ (GenuineIntel family 6 model 143 stepping 8)",
        "cpu_flags": "amx_bf16 amx_tile avx avx2 avx512_bf16 avx512_fp16 avx512f f16c fma sse sse2 sse4_1 ssse3"}


def test_without_cpuinfo_the_processor_python_reports_is_recorded(monkeypatch):
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert cpu_model("") == {"cpu": "arm", "cpu_flags": ""}


def test_mkl_and_onednn_versions_are_read_from_the_build_description_or_none():
    assert kernel_libraries(CONFIG) == {"mkl": "2024.2-Product Build 20240605", "onednn": "3.12.0"}
    assert kernel_libraries("PyTorch built with:\n  - GCC 13.3\n") == {"mkl": None, "onednn": None}


def test_the_platform_records_the_threads_in_use_and_this_torchs_build(monkeypatch, tmp_path):
    (tmp_path / "cpuinfo").write_text(CPUINFO, encoding="utf-8")
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "cpuinfo")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        recorded = cpu_platform()
    finally:
        torch.set_num_threads(before)
    assert recorded == {**cpu_model(CPUINFO), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                        **kernel_libraries(torch.__config__.show()), "threads": 3}
