"""The lab's containers only: keep the bytecode of Python modules imported from zip files.

Ansible runs each module as an AnsiballZ payload, a zip of the module and its module_utils. Python's zipimport
compiles every .py in such a zip on every run (it cannot write __pycache__ into the zip): about 0.1 s of CPU per task,
40 % of a module run on the lab's 2-core host. This hook, loaded at interpreter start by a .pth file, keeps the
compiled code of each file in /var/cache/onprem-gpu-lab/zipimport, keyed by the file's path inside the zip and a
SHA-256 of its source, as __pycache__ does for files on disk: the code that runs is always compiled from the same
source, so nothing the modules do changes. Any error falls back to zipimport's own compile.
"""

import hashlib
import marshal
import os
import sys
import types
import zipimport

CACHE = os.path.join("/var/cache/onprem-gpu-lab/zipimport", sys.implementation.cache_tag or "none")
_compile_source = getattr(zipimport, "_compile_source", None)


def _with_filename(code, filename):
    consts = tuple(_with_filename(const, filename) if isinstance(const, types.CodeType) else const for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile_source(pathname, source):
    try:
        inner = pathname.rpartition(".zip" + os.sep)[2] or pathname
        key = hashlib.sha256(inner.encode("utf-8", "surrogateescape") + b"\0" + source).hexdigest()
        path = os.path.join(CACHE, key)
        try:
            with open(path, "rb") as cached:
                return _with_filename(marshal.loads(cached.read()), pathname)
        except (FileNotFoundError, EOFError, ValueError, TypeError, AttributeError):
            pass  # not cached yet, or an unreadable entry: compiled and written again
        code = _compile_source(pathname, source)
        os.makedirs(CACHE, exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "wb") as written:
            written.write(marshal.dumps(code))
        os.replace(temporary, path)
        return code
    # A cache must never break an import.
    except Exception:  # pylint: disable=broad-exception-caught
        return _compile_source(pathname, source)


if _compile_source is not None and os.geteuid() == 0:
    zipimport._compile_source = _cached_compile_source
