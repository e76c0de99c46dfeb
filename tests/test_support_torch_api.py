"""The table of torch APIs by the release that added them (recipes/support/torch_api.json.gz, read
from torch's own sources by benchmarks/catalogue/extract_torch_api.py), as explain reads it."""

import gzip
import json

from attn_doctor.support import torch_api


def test_the_shipped_table_names_the_releases_read_and_what_they_added():
    doc = torch_api.table()
    assert doc["releases"][0] == "1.7.1" and doc["releases"][-1] == "2.13.0"
    assert torch_api.added_in("torch.library", "register_fake") == ("2.2.2", "2.4.1")
    assert torch_api.added_in("torch.profiler") == ("1.7.1", "1.10.2")
    assert torch_api.added_in("torch.distributed", "checkpoint") is None  # a submodule: an attribute only once imported


def test_what_every_release_has_or_none_has_says_nothing_of_the_torch_age():
    assert torch_api.added_in("torch", "cuda") is None  # in every release read
    assert torch_api.added_in("torch._six") is None  # removed: no release read after 1.13 has it
    assert torch_api.added_in("torch.nn", "no_such_name") is None
    assert torch_api.added_in("numpy") is None


def test_keywords_are_read_from_the_python_sources_and_the_argument_parsers():
    # a Python function's keyword (torch/__init__.py's compile)
    assert torch_api.keyword_added_in("compile", "recompile_limit") == ("2.10.0", "2.13.0")
    # a C function's keyword, from the parser's signature in libtorch_python: 2.0.1's stub lists SDPA's
    # scale, its parser does not
    assert torch_api.keyword_added_in("scaled_dot_product_attention", "scale") == ("2.0.1", "2.2.2")
    assert torch_api.keyword_added_in("scaled_dot_product_attention", "enable_gqa") == ("2.4.1", "2.6.0")


def test_a_keyword_the_function_always_took_or_took_through_kwargs_says_nothing():
    assert torch_api.keyword_added_in("compile", "options") is None  # torch.compile had it from its first release
    assert torch_api.keyword_added_in("load", "weights_only") is None  # 1.7.1's load took **pickle_load_args
    assert torch_api.keyword_added_in("forward", "padding_mask") is None  # no torch function of that name


def test_a_damaged_table_reads_as_empty(tmp_path, monkeypatch):
    bad = tmp_path / "torch_api.json.gz"
    bad.write_bytes(gzip.compress(json.dumps({"releases": "x"}).encode()))
    monkeypatch.setattr(torch_api, "default_path", lambda: bad)
    torch_api.table.cache_clear()
    try:
        assert torch_api.added_in("torch.library", "register_fake") is None
        assert torch_api.keyword_added_in("compile", "recompile_limit") is None
        bad.write_bytes(b"not gzip")
        torch_api.table.cache_clear()
        assert torch_api.added_in("torch.profiler") is None
    finally:
        torch_api.table.cache_clear()
