# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one "what do the repositories offer" check of the collection, run on the managed node by a module.

Fetches each repository's signing key and asks the repositories themselves, through a private APT configuration (or DNF
``--repofrompath``), which versions of the requested packages they offer, before any file is written: so check mode,
a preflight and a first run get the same answer, and the host's own package lists do not change. The package_source
module (which then writes the sources), kube_node_facts (kube_node's preflight) and container_runtime_facts use it;
the pure logic (probe configuration, parsing, judging) lives in _package_source.
"""

from __future__ import annotations

import pwd

from ansible.module_utils.urls import fetch_url

from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source

C_LOCALE = {"LC_ALL": "C", "LANG": "C"}
# A repository as the package_source role writes it: the argument spec of the modules that take one.
REPOSITORY_OPTIONS = {
    "name": {"type": "str", "required": True},
    "url": {"type": "str", "required": True},
    "suites": {"type": "list", "elements": "str", "default": []},
    "components": {"type": "list", "elements": "str", "default": []},
    "key_url": {"type": "str", "required": True, "no_log": False},
    # The full OpenPGP fingerprint the key must have; required for an http:// key_url (module_utils/_package_source.key_url_problem).
    "key_fingerprint": {"type": "str", "default": "", "no_log": False},
}


def fetch_key(module, repository):
    """The answer of a repository's key URL: {name, url, status, msg, content (bytes), problem (None when usable)}.

    The module fails, before the key is used anywhere, when the key may not be fetched as given (plain HTTP without a pinned
    fingerprint) or the key fetched is not the one pinned."""
    refusal = source.key_url_problem(repository)
    if refusal:
        module.fail_json(msg=refusal)
    response, info = fetch_url(module, repository["key_url"], timeout=30)
    content = response.read() if response is not None else b""
    mismatch = source.key_pin_problem(repository, content) if info.get("status") == 200 and content else None
    if mismatch:
        module.fail_json(msg=mismatch)
    answer = {"name": repository["name"], "url": repository["key_url"], "status": info.get("status", -1), "msg": info.get("msg", ""),
              "content": content}
    answer["problem"] = source.key_problem(answer)
    return answer


def apt_uid(family):
    """The uid of APT's unprivileged download user (_apt), which must write the probe's lists; None elsewhere."""
    if family != "Debian":
        return None
    try:
        return pwd.getpwnam("_apt").pw_uid
    except KeyError:
        return None


def probe(module, family, codename, repositories, requests):
    """What ``repositories`` offer of ``requests`` ("name" or "name=version").

    Returns {keys: [key answers], unreadable: sentence or None, offered: {name: [versions]}, missing: [requests], problems:
    [sentences]}: a key that cannot be fetched, repositories APT or DNF cannot read, or requests not offered each give a
    sentence; no problems means every key was fetched and every request is offered.
    """

    def run(argv):
        return module.run_command(argv, environ_update=C_LOCALE)

    answers = [fetch_key(module, repository) for repository in repositories]
    result = {"keys": answers, "unreadable": None, "offered": {}, "missing": [], "problems": []}
    result["problems"] = [source.key_sentence(answer) for answer in answers if answer["problem"]]
    if result["problems"]:
        return result
    keys = {answer["name"]: answer["content"] for answer in answers}
    names = sorted({source.split_request(request)[0] for request in requests})
    offers, result["unreadable"] = source.repository_offers(run, family, repositories, keys, codename, names, apt_uid(family))
    if result["unreadable"]:
        result["problems"].append(result["unreadable"] + ".")
        return result
    result.update(source.judge_offers(offers, requests))
    if result["missing"]:
        result["problems"].append(f"{source.describe(repositories, codename)} offers no {', '.join(result['missing'])}.")
    return result
