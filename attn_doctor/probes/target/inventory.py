"""What is installed in the target interpreter, read from the files alone (nothing is imported):
the distributions on sys.path, each site-packages folder's entries and RECORDs (fix's snapshots),
and what an install killed half-way leaves behind (pip's stash, a module folder without metadata,
a RECORD naming files that are gone).

Runs where attn-doctor may not be installed (child.py): standard library only, Python 3.8+.
"""

from __future__ import annotations

import json
import os
import re
import sys


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _strip_credentials(url):
    # https://user:token@host/... -> https://***@host/...
    if "://" in url and "@" in url.split("://", 1)[1].split("/", 1)[0]:
        scheme, rest = url.split("://", 1)
        return scheme + "://***@" + rest.split("@", 1)[1]
    return url


def _metadata_name_version(folder):
    """Name and Version from a METADATA / PKG-INFO file: the header lines only."""
    for filename in ("METADATA", "PKG-INFO"):
        text = _read(os.path.join(folder, filename))
        if text is None:
            continue
        name = version = None
        for line in text.splitlines():
            if not line.strip():
                break  # end of the headers
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        return name, version
    return None, None


# Requirements worth keeping, by distribution: torch's pin of the triton it was built with.
_KEPT_REQUIRES = {"torch": ("triton", "pytorch-triton")}


def _metadata_requires(folder, names):
    """Requires-Dist header lines whose project is one of names (markers kept)."""
    text = _read(os.path.join(folder, "METADATA"))
    out = []
    for line in (text or "").splitlines():
        if not line.strip():
            break  # end of the headers
        if line.startswith("Requires-Dist:"):
            req = line[len("Requires-Dist:"):].strip()
            project = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
            if project and _canonical(project.group(0)) in names:
                out.append(req)
    return out


def collect_packages():
    """Installed distributions, as importlib.metadata would find them on sys.path, and the
    requirements of _KEPT_REQUIRES: ({name: record}, {name: [Requires-Dist lines]}).

    Fast: a `.dist-info` folder is named `{name}-{version}.dist-info` (names escaped with `_`),
    so most distributions need no file read at all; `.egg-info` folders and odd names fall back
    to the METADATA headers. The first distribution on sys.path wins, as for imports.
    """
    packages, requires = {}, {}
    for entry in sys.path:
        folder = entry or os.getcwd()
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for filename in names:
            if filename.startswith("~"):
                continue  # pip's uninstall stash (~riton-3.1.0.dist-info): not an installed distribution
            if filename.endswith(".dist-info"):
                stem = filename[: -len(".dist-info")]
            elif filename.endswith(".egg-info"):
                stem = None
            else:
                continue
            path = os.path.join(folder, filename)
            name, _, version = stem.rpartition("-") if stem else ("", "", "")
            if not name or not version or not version[0].isdigit():
                name, version = _metadata_name_version(path)
                if not name or not version:
                    continue
            key = _canonical(name)
            if key in packages:
                continue
            record = {"version": version}
            installer = _read(os.path.join(path, "INSTALLER"))
            if installer and installer.strip():
                record["installer"] = installer.strip()
            direct = _read(os.path.join(path, "direct_url.json"))
            if direct:
                try:
                    url = json.loads(direct).get("url")
                except ValueError:
                    url = None
                if url and not url.startswith("file:"):
                    record["url"] = _strip_credentials(url)
            packages[key] = record
            if key in _KEPT_REQUIRES:
                kept = _metadata_requires(path, _KEPT_REQUIRES[key])
                if kept:
                    requires[key] = kept
    return packages, requires


# Distributions whose install is checked against its RECORD, and the module folder each provides:
# torch, triton and the attention libraries (attn_doctor.facts.MODULE_DISTRIBUTIONS, plus torch).
CHECKED_INSTALLS = {
    "torch": "torch", "triton": "triton", "pytorch-triton": "triton", "pytorch-triton-rocm": "triton",
    "flash-attn": "flash_attn", "xformers": "xformers", "flash-linear-attention": "fla", "fla-core": "fla",
}
# At most this many files of a RECORD are looked for (evenly spread, besides every top-level
# entry): torch lists about 15,000, and stat-ing them all would cost check 60 ms; 64 cost 2 ms.
RECORD_SAMPLE = 64


def _site_folders():
    seen = []
    for entry in sys.path:
        if entry and os.path.basename(entry) in ("site-packages", "dist-packages"):
            folder = os.path.realpath(entry)
            if folder not in seen and os.path.isdir(folder):
                seen.append(folder)
    return seen


def _record_paths(text):
    """The paths a RECORD names (CSV: a path with a comma in it is quoted), outside ../ and /."""
    out = []
    for line in text.splitlines():
        if line.startswith('"'):
            import csv

            path = next(csv.reader([line]), [""])[0]
        else:
            path = line.split(",", 1)[0]
        if path and not path.startswith(("..", "/")):
            out.append(path)
    return out


def collect_site():
    """For fix's snapshots and recovery: each site-packages folder's entries, and for every
    distribution the top-level entries its RECORD names (None: it has no RECORD) and how many of
    its files are gone (a stat per file: about 0.1 s for a CUDA torch; fix only)."""
    out = []
    for folder in _site_folders():
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        dists = {}
        for filename in names:
            if filename.endswith(".dist-info") and not filename.startswith("~"):
                name, _, version = filename[: -len(".dist-info")].rpartition("-")
                text = _read(os.path.join(folder, filename, "RECORD"))
                paths = _record_paths(text) if text is not None else []
                tops = None if text is None else sorted({p.split("/", 1)[0] for p in paths} | {filename})
                # Files RECORD names that are gone (bytecode aside: it may be cleaned away), every
                # one of them: pip's uninstall moves single files out of site-packages altogether.
                missing = sum(1 for p in paths if not p.endswith(".pyc") and not os.path.lexists(os.path.join(folder, p)))
                dists[_canonical(name)] = {"info": filename, "version": version, "tops": tops, "missing": missing}
        out.append({"path": folder, "names": names, "dists": dists})
    return out


def collect_leftovers():
    """What an install killed half-way leaves in site-packages: pip's uninstall stash (`~riton/`,
    `~riton-3.1.0.dist-info/`), a module folder of CHECKED_INSTALLS without its metadata, and for
    CHECKED_INSTALLS a dist-info without RECORD or whose RECORD names files that are gone.
    One directory listing per site-packages folder, one RECORD read per checked distribution."""
    found = []
    for folder in _site_folders():
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        dists = {}  # canonical name -> (dist-info folder name, version)
        for filename in names:
            if filename.endswith(".dist-info") and not filename.startswith("~"):
                name, _, version = filename[: -len(".dist-info")].rpartition("-")
                dists[_canonical(name)] = (filename, version)
        for filename in names:
            if filename.startswith("~"):
                found.append(_stash(folder, filename, names))
        for dist, module in CHECKED_INSTALLS.items():
            if dist in dists:
                problem = _record_problem(folder, *dists[dist])
                if problem:
                    found.append(dict(problem, package=dist, version=dists[dist][1]))
        for module in sorted(set(CHECKED_INSTALLS.values())):
            providers = [d for d, m in CHECKED_INSTALLS.items() if m == module]
            if (module in names and os.path.isdir(os.path.join(folder, module)) and not any(d in dists for d in providers)
                    and not _shipped_by_relative(folder, module, providers, dists)):
                found.append({"path": os.path.join(folder, module), "kind": "no-metadata", "package": providers[0],
                              "version": None, "detail": "a module folder that no installed distribution owns"})
    return found


def _shipped_by_relative(folder, module, providers, dists):
    """Whether a distribution of the providers' family (flash-attn-4 ships flash_attn/cute into
    flash-attn's folder) names `module` in its RECORD: only those few RECORDs are read."""
    for dist, (info, _version) in dists.items():
        if any(dist.startswith(p + "-") for p in providers):
            text = _read(os.path.join(folder, info, "RECORD"))
            if text is not None and any(p.split("/", 1)[0] == module for p in _record_paths(text)):
                return True
    return False


# pip's AdjacentTempDirectory: `~` then up to len(name)-1 of these replace the name's first characters.
_STASH_CHARS = "-~.=%0123456789"


def _stash(folder, filename, names):
    path = os.path.join(folder, filename)
    package = version = None
    if filename.endswith(".dist-info"):
        package, version = _metadata_name_version(path)  # the stash keeps the real METADATA
        package = _canonical(package) if package else None
    if package is None:
        tail = filename[1:].lstrip(_STASH_CHARS)
        tail = tail.split("-")[0] if filename.endswith(".dist-info") else tail
        candidates = [n for n in names if not n.startswith("~") and n.endswith(tail) and len(n) > len(tail) and "." not in n]
        candidates += [m for m in CHECKED_INSTALLS.values() if m.endswith(tail) and len(m) > len(tail)]
        if candidates:
            module = candidates[0]
            package = next((d for d, m in CHECKED_INSTALLS.items() if m == module), _canonical(module))
    return {"path": path, "kind": "stash", "package": package, "version": version,
            "detail": "pip's uninstall stash, left by an install or uninstall that was killed"}


def _record_problem(folder, info, version):
    path = os.path.join(folder, info)
    installer = (_read(os.path.join(path, "INSTALLER")) or "").strip()
    try:
        with open(os.path.join(path, "RECORD"), "rb") as fh:
            data = fh.read()
    except OSError:
        data = None
    if data is None:
        if installer == "conda":
            return None  # conda's own packages may carry no RECORD
        if not os.path.exists(os.path.join(path, "METADATA")):
            return {"path": path, "kind": "no-metadata", "detail": "a dist-info folder without METADATA"}
        return {"path": path, "kind": "no-record", "detail": "a dist-info without RECORD: the install stopped before its end"}
    # Only the lines at RECORD_SAMPLE evenly spread offsets are cut out and decoded: torch's RECORD
    # is 1.4 MB of 15,000 lines, which splitting whole costs more than the rest of the probe.
    lines = set()
    for i in range(RECORD_SAMPLE + 1):
        at = min(len(data) - 1, len(data) * i // RECORD_SAMPLE)
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        lines.add(data[start:] if end < 0 else data[start:end])
    files = _record_paths(b"\n".join(sorted(lines)).decode("utf-8", "replace"))
    looked = sorted({f.split("/", 1)[0] for f in files}) + files
    missing = sorted({f for f in looked if not os.path.lexists(os.path.join(folder, f))})
    if not missing:
        return None
    return {"path": path, "kind": "missing-files",
            "detail": "RECORD lists files that are gone (%d of %d looked for), e.g. %s" % (len(missing), len(looked), missing[0])}


def _canonical(name):
    out, prev = [], False
    for ch in name.lower():
        if ch in "-_.":
            if not prev:
                out.append("-")
            prev = True
        else:
            out.append(ch)
            prev = False
    return "".join(out)
