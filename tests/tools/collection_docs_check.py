# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Import the collection tarball with galaxy-importer as Galaxy does, and fail on what Galaxy would report or drop.

    python collection_docs_check.py TARBALL WORK_DIR

Run with the interpreter of the environment that holds galaxy-importer and ansible-core (tests/tools/collection_docs.sh
makes it), with that environment's bin first on PATH: the importer reads the docs through ``ansible-doc``.

Fails when the importer logs an error (it exits 0 even when ansible-doc failed and every plugin's docs were dropped),
when a module of its result has no docs, or when a module or filter of the installed tarball has none: the importer
keys its result by plugin file, so a filter whose name is not its file's is checked through ansible-doc directly.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

IMPORTER_CONFIG = """\
[galaxy-importer]
# make lint (production profile) and make sanity run these on the checkout.
run_ansible_lint = False
run_ansible_test = False
run_flake8 = False
ansible_local_tmp = {tmp}
"""
PLUGIN_TYPES = ("module", "filter")


def with_repository(tarball: Path, work: Path) -> Path:
    """The tarball as Galaxy gets it; galaxy.yml without ``repository`` (no public address yet) gets this checkout's."""
    with tarfile.open(tarball) as archive:
        members = [(member, archive.extractfile(member).read() if member.isfile() else None) for member in archive.getmembers()]
    manifest_index = next(index for index, (member, _data) in enumerate(members) if member.name == "MANIFEST.json")
    manifest = json.loads(members[manifest_index][1])
    if manifest["collection_info"].get("repository"):
        return tarball
    checkout = Path(__file__).resolve().parents[2]
    print(f"galaxy.yml has no repository, which Galaxy requires for an upload: importing with repository file://{checkout}")
    manifest["collection_info"]["repository"] = f"file://{checkout}"
    data = json.dumps(manifest, indent=4).encode()
    member = members[manifest_index][0]
    member.size = len(data)
    members[manifest_index] = (member, data)
    patched = work / "import" / tarball.name
    patched.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(patched, "w:gz") as archive:
        for member, content in members:
            archive.addfile(member, io.BytesIO(content) if content is not None else None)
    return patched


def run_importer(tarball: Path, work: Path) -> tuple[list[str], dict, list[str]]:
    config = work / "galaxy-importer.cfg"
    config.write_text(IMPORTER_CONFIG.format(tmp=work / "tmp"), encoding="utf-8")
    environment = dict(os.environ, GALAXY_IMPORTER_CONFIG=str(config))
    finished = subprocess.run([sys.executable, "-m", "galaxy_importer.main", str(tarball)], cwd=work, env=environment,
                              capture_output=True, text=True, check=False)
    log = (finished.stdout + finished.stderr).splitlines()
    problems = [line for line in log if line.startswith(("ERROR", "Traceback"))]
    if finished.returncode:
        problems.append(f"galaxy-importer exited {finished.returncode}")
    result_file = work / "importer_result.json"
    result = json.loads(result_file.read_text(encoding="utf-8")) if result_file.exists() else {}
    if not result:
        problems.append("galaxy-importer wrote no importer_result.json")
    return problems, result, log


def undocumented_modules(result: dict) -> list[str]:
    contents = (result.get("docs_blob") or {}).get("contents") or []
    return sorted(content["content_name"] for content in contents
                  if content["content_type"] == "module" and not ((content.get("doc_strings") or {}).get("doc") or {}).get("short_description"))


def ansible_doc_problems(tarball: Path, work: Path) -> tuple[list[str], dict[str, int]]:
    """Each module and filter of the installed tarball without docs, as ansible-doc reads them; and the counts."""
    collections = work / "installed"
    target = collections / "ansible_collections" / "onprem" / "gpu"
    target.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(target, filter="data")
    environment = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections))
    problems, counts = [], {}
    for plugin_type in PLUGIN_TYPES:
        listed = json.loads(subprocess.run(["ansible-doc", "--list", "--type", plugin_type, "--json", "onprem.gpu"], env=environment,
                                           capture_output=True, text=True, check=True).stdout)
        names = sorted(listed)
        counts[plugin_type] = len(names)
        docs, error = read_docs(plugin_type, names, environment)
        if error:
            # One plugin without docs fails the whole call (as it failed the importer's): ask for each to name them all.
            for name in names:
                docs[name], error = read_docs(plugin_type, [name], environment)
                docs[name] = docs[name].get(name) or {"error": error}
        for name in names:
            entry = docs.get(name) or {}
            if not (entry.get("doc") or {}).get("short_description"):
                problems.append(f"{plugin_type} {name} has no documentation: {entry.get('error') or 'ansible-doc found none'}")
    return problems, counts


def read_docs(plugin_type: str, names: list[str], environment: dict) -> tuple[dict, str]:
    """ansible-doc's JSON for ``names``, and its error when it failed."""
    finished = subprocess.run(["ansible-doc", "--type", plugin_type, "--json", *names], env=environment,
                              capture_output=True, text=True, check=False)
    if finished.returncode:
        return {}, finished.stderr.strip() or f"ansible-doc exited {finished.returncode}"
    return json.loads(finished.stdout), ""


def main(tarball: str, work: str) -> int:
    tarball, work = Path(tarball), Path(work)
    work.mkdir(parents=True, exist_ok=True)
    importer_problems, result, log = run_importer(with_repository(tarball, work), work)
    warnings = [line for line in log if line.startswith("WARNING")]
    for line in warnings:
        print(f"galaxy-importer: {line}")
    # An ansible-doc failure names every plugin of its type: the whole line is in importer.log.
    problems = [f"galaxy-importer: {line if len(line) < 400 else line[:400] + ' ...'}" for line in importer_problems]
    problems += [f"galaxy-importer: module {name} has no documentation in the import result" for name in undocumented_modules(result)]
    doc_problems, counts = ansible_doc_problems(tarball, work)
    problems += doc_problems
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"The collection's documentation is not what Galaxy can show ({len(problems)} problems; galaxy-importer's whole log: "
              f"{work / 'importer.log'}).", file=sys.stderr)
        (work / "importer.log").write_text("\n".join(log) + "\n", encoding="utf-8")
        return 1
    kinds = {}
    for content in result.get("contents") or []:
        kinds[content["content_type"]] = kinds.get(content["content_type"], 0) + 1
    print(f"galaxy-importer: imported with no error ({', '.join(f'{count} {kind}' for kind, count in sorted(kinds.items()))}); "
          f"every one of the {counts['module']} modules and {counts['filter']} filters has documentation")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
