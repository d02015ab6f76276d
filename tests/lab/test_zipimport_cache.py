"""The lab image's zipimport bytecode cache (lab/image/python/onprem_gpu_lab_zipimport_cache.py).

It must give the code Python would compile (same behaviour, tracebacks naming the file in this zip), reuse it only for the
same source at the same path inside a zip, and fall back to zipimport's compile on any error.
"""

import importlib.util
import pathlib
import sys
import traceback
import zipfile
import zipimport

import pytest

HOOK = pathlib.Path(__file__).resolve().parents[2] / "lab" / "image" / "python" / "onprem_gpu_lab_zipimport_cache.py"


@pytest.fixture()
def hook(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("onprem_gpu_lab_zipimport_cache_under_test", HOOK)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(zipimport, "_compile_source", zipimport._compile_source)  # restored after the test
    spec.loader.exec_module(module)  # as root it installs itself; the test calls it directly either way
    monkeypatch.setattr(module, "CACHE", str(tmp_path / "cache"))
    return module


def payload(tmp_path, name, source):
    """A zip like an AnsiballZ payload: the package path inside, a fresh temporary directory outside."""
    directory = tmp_path / f"ansible-tmp-{name}"
    directory.mkdir()
    archive = directory / "payload.zip"
    with zipfile.ZipFile(archive, "w") as written:
        written.writestr("ansible/module_utils/sample.py", source)
    return str(archive / "ansible" / "module_utils" / "sample.py")


SOURCE = b"def fail():\n    def inner():\n        raise ValueError('from sample')\n    inner()\n\nANSWER = 42\n"


def run(code):
    namespace = {}
    exec(code, namespace)  # noqa: S102 - the code under test is this file's own sample
    return namespace


def test_the_second_payload_gets_the_cached_code_with_its_own_file_name(hook, tmp_path):
    first = payload(tmp_path, "one", SOURCE)
    code = hook._cached_compile_source(first, SOURCE)
    assert len(list((tmp_path / "cache").iterdir())) == 1
    second = payload(tmp_path, "two", SOURCE)
    cached = hook._cached_compile_source(second, SOURCE)
    assert len(list((tmp_path / "cache").iterdir())) == 1  # a hit, not a second entry
    assert cached.co_code == code.co_code and cached.co_filename == second
    namespace = run(cached)
    assert namespace["ANSWER"] == 42
    with pytest.raises(ValueError) as raised:
        namespace["fail"]()
    # The nested function's frame names the second payload's file, not the first one's.
    assert traceback.extract_tb(raised.value.__traceback__)[-1].filename == second


def test_other_source_or_another_path_in_the_zip_is_compiled_again(hook, tmp_path):
    hook._cached_compile_source(payload(tmp_path, "one", SOURCE), SOURCE)
    changed = SOURCE.replace(b"42", b"43")
    assert run(hook._cached_compile_source(payload(tmp_path, "two", changed), changed))["ANSWER"] == 43
    elsewhere = str(tmp_path / "other.zip" / "ansible" / "module_utils" / "other.py")
    hook._cached_compile_source(elsewhere, SOURCE)
    assert len(list((tmp_path / "cache").iterdir())) == 3


def test_a_broken_cache_falls_back_to_zipimport_compile(hook, tmp_path):
    (tmp_path / "cache").write_text("not a directory")
    code = hook._cached_compile_source(payload(tmp_path, "one", SOURCE), SOURCE)
    assert run(code)["ANSWER"] == 42


def test_a_corrupt_entry_falls_back_to_zipimport_compile(hook, tmp_path):
    path = payload(tmp_path, "one", SOURCE)
    hook._cached_compile_source(path, SOURCE)
    (entry,) = (tmp_path / "cache").iterdir()
    entry.write_bytes(b"\x00garbage")
    assert run(hook._cached_compile_source(path, SOURCE))["ANSWER"] == 42
    assert entry.read_bytes() != b"\x00garbage"  # written again


def test_a_syntax_error_is_raised_as_python_would(hook, tmp_path):
    with pytest.raises(SyntaxError):
        hook._cached_compile_source(payload(tmp_path, "one", b"def (:\n"), b"def (:\n")


def test_the_pth_file_imports_the_hook():
    pth = HOOK.with_suffix(".pth").read_text()
    assert pth.strip() == f"import {HOOK.stem}"
    assert sys.implementation.cache_tag  # the cache directory is per interpreter version
