# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One validator per kind of input (names, label keys and values, whole numbers, quantities, CIDRs, mappings and lists,
key fingerprints).

Each returns None for a good value, else one sentence naming the input, the value (as Python writes it, so a trailing
newline or a space shows) and what is allowed. Patterns are matched with ``re.fullmatch``: ``$`` also matches before a
trailing newline, so ``re.match("^[a-z]+$", "dc1\\n")`` accepts a value that kubelet, kubeadm or a path would not.
Plain Python without Ansible imports: module_utils, filters and tests call it directly.
"""

from __future__ import annotations

import ipaddress
import re
from fractions import Fraction

# RFC 1123 label and subdomain, as Kubernetes validates object and cluster names (apimachinery validation.IsDNS1123Label).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes label values and the name part of label keys (apimachinery validation.IsQualifiedName, IsValidLabelValue).
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# A Kubernetes quantity without a sign (apimachinery resource.Quantity): a decimal, then a binary or decimal SI suffix or an
# exponent (tried first, so 1E3 is 1000 and 1E is 10^18).
_QUANTITY = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[eE][-+]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])?")
_QUANTITY_SCALES = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_FINGERPRINT = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")


def shown(value) -> str:
    """The value as a sentence shows it: strings quoted with their escapes ('dc1\\n'), anything else as Python writes it."""
    return repr(value) if value is not None else "nothing"


def _is_text(value) -> bool:
    return isinstance(value, str)


def dns_label_problem(what: str, value, example: str = "dc1") -> str | None:
    """A DNS label (RFC 1123): lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63."""
    if _is_text(value) and len(value) <= 63 and _DNS_LABEL.fullmatch(value):
        return None
    return (f"{what} must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, "
            f"at most 63 characters, e.g. {example}), not {shown(value)}.")


def dns_subdomain_problem(what: str, value, example: str = "dc1") -> str | None:
    """A DNS subdomain (RFC 1123): DNS labels joined by '.', at most 253 characters."""
    if _is_text(value) and len(value) <= 253 and all(_DNS_LABEL.fullmatch(part) for part in value.split(".")):
        return None
    return (f"{what} must be a DNS name (lower-case letters, digits, '-' and '.', each part starting and ending with a letter or "
            f"digit, at most 253 characters, e.g. {example}), not {shown(value)}.")


def label_key_problem(what: str, key) -> str | None:
    """A Kubernetes label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters."""
    if _is_text(key):
        prefix, _slash, name = key.rpartition("/")
        prefix_ok = not _slash or (prefix and dns_subdomain_problem("", prefix) is None)
        if prefix_ok and len(name) <= 63 and _LABEL_NAME.fullmatch(name):
            return None
    return (f"{what} has the label key {shown(key)}, which Kubernetes refuses: a key is an optional DNS-name prefix and '/', then a "
            "name of at most 63 letters, digits, '-', '_' and '.' that starts and ends with a letter or digit (e.g. onprem.gpu/pool).")


def label_value_problem(what: str, key, value) -> str | None:
    """A Kubernetes label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        text = None
    else:
        text = str(value)
    if text is not None and (text == "" or (len(text) <= 63 and _LABEL_NAME.fullmatch(text))):
        return None
    return (f"{what} gives the label {key} the value {shown(value)}, which Kubernetes refuses (and a ',' or '=' would add labels to "
            "kubelet's --node-labels): a value is empty or at most 63 letters, digits, '-', '_' and '.' that starts and ends with a "
            "letter or digit.")


def labels_problems(what: str, labels) -> list[str]:
    """Every problem of a mapping of Kubernetes labels, one sentence each."""
    if not isinstance(labels, dict):
        return [mapping_problem(what, labels, "of label names to values, e.g. {onprem.gpu/pool: training}")]
    problems = [label_key_problem(what, key) for key in labels]
    problems += [label_value_problem(what, key, value) for key, value in labels.items()]
    return [problem for problem in problems if problem]


def whole_number_problem(what: str, value, low: int, high: int | None = None) -> str | None:
    """A whole number from ``low`` to ``high`` (no upper bound when None); a bool or a string of digits is not one."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high):
        return None
    allowed = f"from {low} to {high}" if high is not None else f"of {low} or more"
    return f"{what} must be a whole number {allowed}, not {shown(value)}."


def quantity(value) -> Fraction | None:
    """A Kubernetes quantity of 0 or more (8, 1.5, 500m, 512Gi, 1e3) as an exact number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        value = str(value)  # 2.7, not the binary fraction nearest it; inf, nan and -1 fail the pattern
    match = _QUANTITY.fullmatch(value) if _is_text(value) else None
    if match is None:
        return None
    suffix = match["suffix"] or ""
    scale = Fraction(10) ** int(suffix[1:]) if suffix[:1] in ("e", "E") and len(suffix) > 1 else _QUANTITY_SCALES[suffix]
    return Fraction(match["number"]) * scale


def quantity_problem(what: str, value) -> str | None:
    if quantity(value) is not None:
        return None
    return (f"{what} must be a Kubernetes quantity of 0 or more, a number with an optional unit (e.g. 64, 1.5, 500m, 512Gi), "
            f"not {shown(value)}.")


def network(value, strict: bool = True):
    """The IP network a CIDR (10.20.0.0/16) names, or None; a bare address has no prefix and is not one. ``strict``:
    host bits set (10.20.0.1/16) are refused too, as Kubernetes refuses them in a NetworkPolicy's ipBlock."""
    if not _is_text(value) or "/" not in value:
        return None
    try:
        return ipaddress.ip_network(value, strict=strict)
    except ValueError:
        return None


def cidr_problem(what: str, value, strict: bool = True) -> str | None:
    if network(value, strict) is not None:
        return None
    loose = network(value, strict=False)
    if loose is not None:
        return f"{what} {value} has host bits set: write the network, {loose}."
    return f"{what} must be a network in CIDR notation such as 10.20.0.0/16, not {shown(value)}."


def mapping_problem(what: str, value, of: str = "") -> str | None:
    if isinstance(value, dict):
        return None
    return f"{what} must be a mapping{' ' + of if of else ''}, not {type(value).__name__} {shown(value)}."


def list_problem(what: str, value, of: str = "") -> str | None:
    if isinstance(value, list):
        return None
    return f"{what} must be a list{' ' + of if of else ''}, not {type(value).__name__} {shown(value)}."


def fingerprint(value) -> str | None:
    """An OpenPGP fingerprint as written (spaces, colons, any case, optional 0x) in canonical form (upper-case hex), or None."""
    if not _is_text(value):
        return None
    text = re.sub(r"[\s:]", "", value).upper()
    text = text[2:] if text.startswith("0X") else text
    return text if _FINGERPRINT.fullmatch(text) else None


def fingerprint_problem(what: str, value) -> str | None:
    if value in (None, "") or fingerprint(value):
        return None
    return (f"{what} must be the full OpenPGP fingerprint of the key, 40 hexadecimal digits (64 for a version 6 key; spaces allowed), "
            f"as `gpg --show-keys --with-colons KEYFILE` prints it on its fpr line, not {shown(value)}.")
