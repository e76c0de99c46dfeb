"""What a log says about the environment it ran in: package versions (pip freeze, pip list,
`collect_env`, `transformers-cli env`, banners), CUDA (nvidia-smi, nvcc, torch's +cuXYZ), glibc,
GPUs (by name or compute capability), torch's C++ ABI and a flash-attn wheel's build tags."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from ..facts import Facts, Gpu, GpuInfo, Package, Platform, TorchInfo

# log spelling (lower case) -> distribution
_NAMES = {
    "torch": "torch", "pytorch": "torch",
    "triton": "triton", "pytorch-triton": "triton",
    "flash_attn": "flash-attn", "flash-attn": "flash-attn", "flash-attention": "flash-attn", "flash_attention": "flash-attn",
    "transformers": "transformers",
    "xformers": "xformers",
    "x-transformers": "x-transformers", "x_transformers": "x-transformers",
    "flash-linear-attention": "flash-linear-attention", "flash_linear_attention": "flash-linear-attention",
    "fla-core": "fla-core", "fla_core": "fla-core",
    "llamafactory": "llamafactory", "llama-factory": "llamafactory", "llama_factory": "llamafactory",
    "accelerate": "accelerate", "peft": "peft", "deepspeed": "deepspeed", "vllm": "vllm",
}
_NAME_RE = "|".join(sorted((re.escape(n) for n in _NAMES), key=len, reverse=True))
_VERSION = r"v?(?P<version>\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*(?:\+\w+(?:\.\w+)*)?)"

# Literal substrings a line must contain to be worth reading for versions (case-sensitive).
ANCHORS = [
    "torch", "Torch", "TORCH", "triton", "Triton", "flash_attn", "flash-attn", "Flash-Attention", "flash_attention",
    "transformers", "Transformers", "xformers", "fla-core", "fla_core", "flash-linear-attention", "llamafactory",
    "LLaMA-Factory", "LlamaFactory", "llama_factory", "accelerate", "peft", "deepspeed", "DeepSpeed", "vllm",
    "CUDA Version", "CUDA used to build", "compilation tools", "Libc version", "GNU libc", "GLIBC ", "glibc ",
    "GPU 0", "GPU 1", "NVIDIA", "Tesla", "Quadro", "capability", "Capability", "_GLIBCXX_USE_CXX11_ABI",
    "you have", "cpython-3", "Building wheel", "Failed to build", "Failed building wheel", "Running setup.py install for",
    # a GPU named in the text itself ("on my GTX2080 Ti", "V100s"): _GPU_NAMED. The short names (T4,
    # L4, A10...) are read on lines another anchor brings ("Tesla T4", an error): alone, as anchors,
    # they hit a log's every other hex string.
    "RTX", "GTX", "rtx", "gtx", "TITAN", "V100", "v100", "A100", "a100", "H100", "h100", "H200", "h200", "H800", "A800", "B200",
    "L40", "P100", "0ti", "0Ti", "0 Ti", "0TI", "0 ti", "pro6000", "PRO6000", "Pro6000", "PRO 6000", "Pro 6000",
    # a traceback's frames name the environment the log came from: PREFIX/lib/pythonX.Y/site-packages
    "site-packages", "dist-packages",
    # AMD GPUs: an LLVM target (gfx942, gcnArchName) or a model name (gpus.toml's amd_gpu)
    "gfx", "Radeon", "Instinct", " MI2", " MI3", "RX 6", "RX 7", "RX 9", "RX7", "RX9",
]

_PKG = re.compile(
    rf"(?:^|(?<=[\s\[(`'\"|,*]))(?i:(?P<name>{_NAME_RE}))[`'\"]?"
    # markdown's bold around a label ("**PyTorch Version:** 2.7.1+cu128", ComfyUI's system report)
    # or the version glued to the name ("torch2.3.1 cuda11"; not a conda prompt's "(torch2.1)")
    r"(?:\s+(?i:version))?(?:\s*\((?:GPU\?|CPU|CUDA)[^)]*\))?\s*(?:===?|:|=|\s|(?<!\(torch)(?<!\(pytorch)(?=\d))\**\s*"
    rf"{_VERSION}(?![\w.]*/)"
)
_WHEEL = re.compile(
    r"flash_attn-(?P<version>\d+\.\d+[\w.]*?)\+cu(?P<cuda>\d+)torch(?P<torch>\d+\.\d+)cxx11abi(?P<abi>TRUE|FALSE)", re.IGNORECASE
)
_CUDA_DRIVER = re.compile(r"CUDA Version\s*:\s*(?P<v>\d+\.\d+)")
_DRIVER = re.compile(r"Driver Version\s*:\s*(?P<v>\d+\.\d+(?:\.\d+)?)")
# collect_env's line, or conda's cudatoolkit on a line that names torch too ("conda install pytorch==1.7.1
# cudatoolkit=10.2": the CUDA that conda build of torch was made with and pins)
_TORCH_CUDA = re.compile(r"CUDA used to build PyTorch\s*:\s*(?P<v>\d+\.\d+)|\bcudatoolkit\s*(?:==?|\s)\s*(?P<v2>\d+\.\d+)")
_PACKAGES_PER_LINE = 64
# words before a package name that make its version what something was built with, not the package's
_BUILT_WITH = re.compile(r"(?i)\b(?:used to build|built (?:for|with)|compiled (?:for|with|against))\s*$")
# torch's conda builds compile in a folder named for the build's start, in milliseconds since 1970
# (/opt/conda/conda-bld/pytorch_1556653099582/work/aten/...): a frame or a THC message shows the date
_CONDA_BUILD = re.compile(r"conda-bld[/\\]pytorch_(?P<ts>1[0-9]{9})[0-9]{3}[/\\]")
_NVCC = re.compile(r"Cuda compilation tools, release (?P<v>\d+\.\d+)")
_LIBC = re.compile(r"(?:Libc version:\s*glibc-|ldd \(GNU libc\)\s*|\bGLIBC |\bglibc )(?P<v>2\.\d+)")
_ABI = re.compile(r"_GLIBCXX_USE_CXX11_ABI\W{0,4}(?P<v>True|False|1|0)\b")
# the distribution pip (or uv) was building when a build failed
_BUILDING = re.compile(r"(?:Building wheels? for(?: collected packages:)?|Failed to build|Failed building wheel for|Running setup\.py install for)\s+`?(?P<name>[A-Za-z0-9][\w.-]*?)(?:==[\w.+]+)?`?(?=[\s(:]|$)")
_YOU_HAVE = re.compile(r"\(you have (?P<v>\d+\.\d+[\w.+]*)\)")
_PYTHON = re.compile(r"cpython-(?P<major>3)(?P<minor>\d{1,2})-")
# the environment of a traceback's frame: its prefix and Python (conda envs, venvs, /usr/local, Windows' Lib)
_SITE = re.compile(r"(?P<prefix>(?:[A-Za-z]:)?[/\\][^\s\"':,()<>|]*?)[/\\](?:lib(?:64)?[/\\]python(?P<v>3\.\d{1,2})|Lib)[/\\](?:site|dist)-packages[/\\]")
_SM = re.compile(
    # markdown's bold around the value ("compute capability **SM120**")
    r"(?:compute capability|Compute Capability|capability)[:\s]+\**(?:[sS][mM]_?)?(?P<cap>\d{1,2}\.\d|\d{2,3})\b|"
    r"run on a sm (?P<cap2>\d{1,2}\.\d) gpu|"
    r"GPU has capability \((?P<major>\d{1,2}), (?P<minor>\d)\)"  # xformers: "...but your GPU has capability (7, 5)"
)
_UNUSED = (
    r"(?P<name>(?:NVIDIA |Tesla |Quadro )?(?:GeForce )?(?:RTX |GTX |TITAN )?"
    r"(?:[ABHLTVPK]\d{1,4}[A-Za-z]?|GB\d{3}|B\d{3}|RTX (?:PRO )?\d{4}(?: Ti| Ada)?|\d{4}(?: Ti)?|A\d{4}|V)"
    r"(?:[- ](?:SXM\d?|PCIe|NVL|HBM\d?e?|\d+GB|80GB|40GB))*)"
)
_GPU_LINE = re.compile(r"GPU \d+:\s*(?P<name>[^()\n]+?)\s*(?:\(UUID|$)|(?:^|\|)\s*\d+\s+(?P<smi>(?:NVIDIA|Tesla|Quadro)[^|]+?)\s{2,}(?:On|Off)\s+\||(?P<torch>(?:NVIDIA|Tesla|Quadro)[\w -]+?) with CUDA capability sm_(?P<sm>\d+)")

# A GPU named in free text, as people write them: "GTX2080 Ti", "2080ti", "Tesla V100S", "v100s",
# "RTX4090". Only forms that name a GPU and nothing else: the long model numbers in any case, the
# short ones (T4, L4, A10...) only as NVIDIA writes them; never inside a word or a path (ASCII
# boundaries: "在V100s等" names one).
_GPU_NAMED = re.compile(
    r"(?<![A-Za-z0-9_/.-])(?P<name>(?:(?i:nvidia|tesla|geforce|quadro)[ -]?)*(?:"
    r"(?i:rtx|gtx)[ -]?(?i:pro[ -]?)?\d{3,4}(?:[ -]?(?i:ti|super|ada)\b)?"
    r"|(?:20|30|40|50)\d0[ -]?(?i:ti|super)"
    r"|(?i:titan)[ -](?:RTX|V|Xp)"
    r"|(?i:pro)[ -]?6000"  # the RTX PRO 6000 (Blackwell), as users shorten it
    r"|(?i:gh200|gb200|a100|a800|h100|h200|h800|b200|b100|v100s?|p100|l40s?)"
    r"|(?:T4|L4|A10G?|A30|A40|H20|P40|K80)"
    r"))(?![A-Za-z0-9_+])"  # "A100+": a requirement, not a GPU here
)
# What a message requires is no GPU of the user's: "bf16 is only supported on A100 GPUs".
# GPUs named as what a requirement asks for ("only supports A100", "needs Ada/Hopper GPUs (L40S/H100",
# "e.g. an H100"): examples of the floor, not the GPU the text ran on
_REQUIRED = re.compile(r"(?i)(?:(?:support(?:s|ed)?|requires?|needs?|only|at least|minimum|or newer than)\W+(?:\w+\W+){0,2}"
                       r"|GPUs?\s*\((?:[\w -]+(?:[/,]|\bor\b|\band\b)\s*){0,4}"
                       r"|(?:e\.g\.|such as|for example)\W+(?:an? )?(?:[\w-]+\s*(?:[/,]|\bor\b|\band\b)\s*(?:an? )?){0,4})$")
_FLOOR_AFTER = re.compile(r"(?i)\+|\s*(?:or|and) (?:higher|newer|above|later|greater)|\s*(?:is |are )?(?:required|needed)")


def _named_gpu(name: str) -> str:
    """A GPU name as written, spelled as the capability table reads names: `GTX2080 Ti`, `2080ti`
    -> `RTX 2080 Ti` (no GTX was ever a 20xx or newer), `v100s` -> `V100S`."""
    name = re.sub(r"(?i)\b(rtx|gtx)[ -]?(?=\d)", lambda m: m.group(1).upper() + " ", name)
    name = re.sub(r"(?i)(?<=\d)[ -]?(ti|super)\b", lambda m: " Ti" if m.group(1).lower() == "ti" else " SUPER", name)
    name = re.sub(r"(?:\bGTX )?(?<!RTX )\b((?:20|30|40|50)\d0)\b", r"RTX \1", name)
    name = re.sub(r"(?i)^(?:(?:nvidia|geforce|quadro)[ -]?)*(?:rtx[ -]?)?pro[ -]?6000$", "RTX PRO 6000", name)
    return re.sub(r"(?i)\b(?:[a-z]{1,2}\d{2,3}[a-z]?)\b", lambda m: m.group(0).upper(), name)


@dataclass
class LogVersions:
    """What the log showed, in order of appearance; the last value of each wins."""

    packages: dict[str, list[str]] = field(default_factory=dict)
    torch_cuda: list[str] = field(default_factory=list)
    building: list[str] = field(default_factory=list)  # wheels pip was building, in order
    driver_cuda: list[str] = field(default_factory=list)
    driver: list[str] = field(default_factory=list)
    nvcc: list[str] = field(default_factory=list)
    libc: list[str] = field(default_factory=list)
    torch_cxx11_abi: list[bool] = field(default_factory=list)
    python: list[str] = field(default_factory=list)
    gpus: dict[str, Optional[str]] = field(default_factory=dict)  # name -> capability
    capabilities: list[str] = field(default_factory=list)  # seen without a name
    wheel: dict[str, str] = field(default_factory=dict)  # flash-attn wheel build tags
    prefixes: list[str] = field(default_factory=list)  # environments whose site-packages a frame shows
    amd: list[str] = field(default_factory=list)  # AMD GPUs named, as their LLVM targets (gfx942)
    torch_built: list[str] = field(default_factory=list)  # the dates (ISO) of torch conda builds a path shows

    def _add(self, seq: list, value) -> None:
        if value not in seq:
            seq.append(value)
        elif seq[-1] != value:
            seq.remove(value)
            seq.append(value)

    def package(self, name: str, version: str) -> None:
        self._add(self.packages.setdefault(name, []), version)

    def last(self, name: str) -> Optional[str]:
        values = self.packages.get(name)
        return values[-1] if values else None

    def empty(self) -> bool:
        return not any((self.packages, self.torch_cuda, self.driver_cuda, self.nvcc, self.libc, self.gpus, self.capabilities, self.torch_cxx11_abi))

    def read(self, line: str, gpu_table: list[tuple[re.Pattern, str]]) -> None:
        """Extract whatever versions a normalised line states."""
        you_have = _YOU_HAVE.search(line)
        for count, m in enumerate(_PKG.finditer(line)):
            if count >= _PACKAGES_PER_LINE:
                break  # a line naming more is a dump (a pip freeze on one line): its first ones are read
            if you_have and m.start() < you_have.start():
                continue  # "built for PyTorch X (you have Y)": X is what something was built for, not what is installed
            if _BUILT_WITH.search(line, max(0, m.start() - 40), m.start()):
                continue  # collect_env's "CUDA used to build PyTorch: 11.3": the CUDA, not torch's version
            name = _NAMES[m.group("name").lower()]
            version = m.group("version")
            if name == "torch" and "+cu" in version:
                digits = version.split("+cu", 1)[1][:3]
                if digits.isdigit() and len(digits) == 3:
                    self._add(self.torch_cuda, f"{digits[:2]}.{digits[2]}")
            self.package(name, version)
        if "flash_attn-" in line:
            m = _WHEEL.search(line)
            if m:
                self.package("flash-attn", m.group("version"))
                self.wheel = {"torch": m.group("torch"), "cuda": m.group("cuda"), "cxx11_abi": m.group("abi").upper()}
        for regex, seq in ((_CUDA_DRIVER, self.driver_cuda), (_DRIVER, self.driver), (_TORCH_CUDA, self.torch_cuda), (_NVCC, self.nvcc), (_LIBC, self.libc)):
            m = regex.search(line)
            if m:
                self._add(seq, m.group("v") or m.groupdict().get("v2"))
        m = _ABI.search(line)
        if m:
            self._add(self.torch_cxx11_abi, m.group("v") in ("True", "1"))
        m = you_have
        if m and ("xFormers" in line or "PyTorch" in line):
            version = m.group("v")
            self.package("torch", version)
            digits = version.split("+cu", 1)[1][:3] if "+cu" in version else ""
            if digits.isdigit() and len(digits) == 3:
                self._add(self.torch_cuda, f"{digits[:2]}.{digits[2]}")
        m = _CONDA_BUILD.search(line)
        if m:
            self._add(self.torch_built, datetime.fromtimestamp(int(m.group("ts")), timezone.utc).date().isoformat())
        m = _BUILDING.search(line)
        if m:
            self.building.append(m.group("name").rstrip("."))
        m = _PYTHON.search(line)
        if m:
            self._add(self.python, f"{m.group('major')}.{m.group('minor')}")
        for m in _SITE.finditer(line):
            if m.group("v"):
                self._add(self.python, m.group("v"))
            self._add(self.prefixes, m.group("prefix"))
        for m in _SM.finditer(line):
            if _REQUIRED.search(line, max(0, m.start() - 40), m.start()) or _FLOOR_AFTER.match(line, m.end()):
                continue  # "requires compute capability 8.9 or higher": a floor, not this GPU
            cap = m.group("cap") or m.group("cap2") or (f"{m.group('major')}.{m.group('minor')}" if m.group("major") else None)
            if cap and "." not in cap:
                cap = f"{cap[:-1]}.{cap[-1]}"
            if cap:
                self._add(self.capabilities, cap)
        for m in _GPU_LINE.finditer(line):
            name = (m.group("name") or m.group("smi") or m.group("torch") or "").strip()
            if not name:
                continue
            cap = None
            if m.group("sm"):
                sm = m.group("sm")
                cap = f"{sm[:-1]}.{sm[-1]}"
            self.gpus[name] = cap or gpu_capability(name, gpu_table)
        if re.search(r"(?i)gfx\d|radeon|instinct|\bmi[23]\d\d|\brx ?[679]\d", line):
            self.read_amd(line)
        for m in _GPU_NAMED.finditer(line):
            name = m.group("name").strip()
            if _REQUIRED.search(line, max(0, m.start() - 40), m.start()):
                continue
            if name in self.gpus or any(name in known for known in self.gpus):
                continue  # the same GPU, read from a GPU line above
            cap = gpu_capability(_named_gpu(name), gpu_table)
            if cap:  # a name the table does not know says nothing
                self.gpus[name] = cap

    def read_amd(self, line: str) -> None:
        from ..gpus import amd_gpus_in

        for _name, gfx in amd_gpus_in(line):
            self._add(self.amd, gfx)

    def torch_abi(self) -> tuple[Optional[bool], str]:
        """torch's C++ ABI: printed in the log, else inferred from its version (pip wheels use the
        C++11 ABI from 2.6 on cu126 and from 2.7 on every build)."""
        if self.torch_cxx11_abi:
            return self.torch_cxx11_abi[-1], "printed in the input"
        version = self.last("torch")
        if not version:
            return None, ""
        m = re.match(r"(\d+)\.(\d+)", version)
        if not m:
            return None, ""
        mm = (int(m.group(1)), int(m.group(2)))
        local = version.split("+", 1)[1] if "+" in version else ""
        if mm >= (2, 7) or (mm == (2, 6) and local.startswith("cu") and local[2:].isdigit() and int(local[2:]) >= 126):
            return True, f"inferred from torch {version}"
        if mm < (2, 6):
            return False, f"inferred from torch {version} (pip wheels before 2.6 use the old ABI)"
        return None, ""

    def to_facts(self) -> Facts:
        """Partial facts: only what the log showed (rules read the rest as unknown)."""
        facts = Facts()
        facts.packages = {name: Package(version=values[-1]) for name, values in self.packages.items()}
        torch_version = self.last("torch")
        if torch_version or self.torch_cuda or self.torch_cxx11_abi:
            facts.torch = TorchInfo(
                version=torch_version,
                cuda=self.torch_cuda[-1] if self.torch_cuda else None,
                cxx11_abi=self.torch_cxx11_abi[-1] if self.torch_cxx11_abi else None,
            )
        devices = [Gpu(index=i, name=name, capability=cap) for i, (name, cap) in enumerate(self.gpus.items()) if cap]
        known = {d.capability for d in devices}
        devices += [Gpu(index=len(devices) + i, name=f"a GPU of compute capability {c}", capability=c) for i, c in enumerate(c for c in self.capabilities if c not in known)]
        if devices or self.driver_cuda:
            facts.gpu = GpuInfo(
                source="log",
                devices=devices,
                cuda_driver_version=self.driver_cuda[-1] if self.driver_cuda else None,
                driver_version=self.driver[-1] if self.driver else None,
            )
        if self.libc or self.python:
            facts.platform = Platform(
                libc="glibc" if self.libc else None,
                libc_version=self.libc[-1] if self.libc else None,
                python_version=self.python[-1] if self.python else "",
            )
        return facts

    def summary(self) -> dict[str, str]:
        """One flat dict for reports: the last value of each thing seen."""
        out = {name: values[-1] for name, values in sorted(self.packages.items())}
        for key, seq in (("torch_cuda", self.torch_cuda), ("driver_cuda", self.driver_cuda), ("driver", self.driver), ("nvcc", self.nvcc), ("glibc", self.libc), ("python", self.python)):
            if seq:
                out[key] = seq[-1]
        if self.torch_cxx11_abi:
            out["torch_cxx11_abi"] = str(self.torch_cxx11_abi[-1]).lower()
        if self.torch_built:
            out["torch_built"] = self.torch_built[-1]
        if self.prefixes:
            out["environment"] = self.prefixes[-1]
        for key, value in self.wheel.items():
            out[f"flash_attn_wheel_{key}"] = value
        gpus = [f"{n} (sm{c.replace('.', '')})" if c else n for n, c in self.gpus.items()]
        gpus += [f"sm{c.replace('.', '')}" for c in self.capabilities if c not in self.gpus.values()]
        if gpus:
            out["gpus"] = ", ".join(gpus)
        return out


def gpu_table_from(data: dict) -> list[tuple[re.Pattern, str]]:
    """recipes' [data.gpu_capability]: regular expression over a GPU name -> compute capability."""
    table = data.get("gpu_capability", {})
    return [(re.compile(pattern), str(cap)) for pattern, cap in table.items()]


def gpu_capability(name: str, table: list[tuple[re.Pattern, str]]) -> Optional[str]:
    for regex, cap in table:
        if regex.search(name):
            return cap
    return None
