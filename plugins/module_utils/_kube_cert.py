# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A control plane's certificates as `kubeadm certs check-expiration` prints them, and whether to renew them.

The table is kubeadm's (cmd/kubeadm/app/cmd/certs.go, a tabwriter): columns are found from the header line, not by position.
The time left is kubeadm's own RESIDUAL TIME (apimachinery's ShortHumanDuration: ``364d``, ``9y``, ``23h``, ``<invalid>``), so
that the judgement uses the node's clock, not the controller's."""

from __future__ import annotations

import datetime
import re

CERTIFICATE_COLUMNS = ("CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED")
AUTHORITY_COLUMNS = ("CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME", "EXTERNALLY MANAGED")
MISSING = "!MISSING! "
RESIDUAL = re.compile(r"(\d+)([smhdy])\Z")


class KubeCertError(ValueError):
    """The output or an option cannot be used: one sentence."""


def residual_days(text):
    """Whole days left from kubeadm's RESIDUAL TIME; -1 for ``<invalid>`` (expired)."""
    if text == "<invalid>":
        return -1
    match = RESIDUAL.match(text)
    if not match:
        raise KubeCertError(f"kubeadm certs check-expiration printed a residual time '{text}' that is not a duration such as 364d or 9y")
    number, unit = int(match.group(1)), match.group(2)
    return {"s": 0, "m": 0, "h": 0, "d": number, "y": number * 365}[unit]


def expiry_iso(text):
    """``Aug 19, 2026 09:03 UTC`` -> ``2026-08-19T09:03:00Z``."""
    try:
        moment = datetime.datetime.strptime(text, "%b %d, %Y %H:%M UTC")
    except ValueError:
        raise KubeCertError(f"kubeadm certs check-expiration printed an expiry '{text}' that is not a date such as 'Aug 19, 2026 09:03 UTC'") from None
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def _cells(line):
    """A line's cells: Go's tabwriter pads each with at least 3 spaces (kubeadm's padding), and no cell holds two spaces."""
    return re.split(r" {2,}", line.strip())


def _table(lines, columns):
    """The rows under the header line made of ``columns``, up to a blank line. The header names the cells; positions are not
    used, since tabwriter sizes a column per block of adjacent lines and a ``!MISSING!`` line ends the block."""
    for index, line in enumerate(lines):
        if tuple(_cells(line)) == columns:
            break
    else:
        return None
    rows = []
    for line in lines[index + 1:]:
        if not line.strip():
            break
        if line.startswith(MISSING):
            rows.append({"name": line[len(MISSING):].split()[0], "missing": True})
            continue
        cells = _cells(line)
        if len(cells) != len(columns):
            raise KubeCertError(f"kubeadm certs check-expiration printed a row '{line.strip()}' that does not have the {len(columns)} "
                                f"columns {', '.join(columns)}")
        rows.append(dict(zip(columns, cells), missing=False))
    return rows


def parse_check_expiration(stdout):
    """{certificates: [...], authorities: [...]}, each ``{name, missing, expires, residual, days_left, externally_managed}``
    (and ``authority`` for a certificate), from the stdout of ``kubeadm certs check-expiration``."""
    if not isinstance(stdout, str):
        raise KubeCertError("kube_cert_expiration takes the stdout of kubeadm certs check-expiration, a string")
    lines = stdout.splitlines()
    certificates, authorities = _table(lines, CERTIFICATE_COLUMNS), _table(lines, AUTHORITY_COLUMNS)
    if certificates is None or authorities is None:
        raise KubeCertError("the output of kubeadm certs check-expiration has no certificate table and certificate authority table "
                            "(is kubeadm older than 1.20, or the command not check-expiration?)")

    def entry(row, name_column):
        if row["missing"]:
            return {"name": row["name"], "missing": True}
        return {"name": row[name_column], "missing": False, "expires": expiry_iso(row["EXPIRES"]), "residual": row["RESIDUAL TIME"],
                "days_left": residual_days(row["RESIDUAL TIME"]), "externally_managed": row["EXTERNALLY MANAGED"] == "yes"}

    parsed_certificates = []
    for row in certificates:
        item = entry(row, "CERTIFICATE")
        if not row["missing"]:
            item["authority"] = row["CERTIFICATE AUTHORITY"]
        parsed_certificates.append(item)
    return {"certificates": parsed_certificates, "authorities": [entry(row, "CERTIFICATE AUTHORITY") for row in authorities]}


def _positive_days(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KubeCertError(f"{name} must be a whole number of days, at least 1, not {value!r}")
    return value


def _soonest(items):
    present = [item for item in items if not item["missing"]]
    return min(present, key=lambda item: item["days_left"]) if present else None


def _left(item):
    return f"expired on {item['expires'][:10]}" if item["days_left"] < 0 else f"expires in {item['days_left']} days ({item['expires'][:10]})"


def renewal_plan(report, host, renew_days, ca_min_days, force=False):
    """Whether this control plane's certificates are to be renewed now, and a refusal sentence when they may not be.

    Due: a certificate within ``renew_days`` of its expiry (or ``force``). Refused: a due renewal whose CA has fewer than
    ``ca_min_days`` left (the renewed certificates would outlive it) or whose CA key is not on the node (externally managed)."""
    renew_days = _positive_days(renew_days, "kube_cert_renew_days")
    ca_min_days = _positive_days(ca_min_days, "kube_cert_ca_min_days")
    certificates = [item for item in report["certificates"] if not item["missing"]]
    if not certificates:
        raise KubeCertError(f"{host} has none of the certificates kubeadm manages: is it a control-plane node that kubeadm set up?")
    due = [item["name"] for item in certificates if item["days_left"] <= renew_days]
    renew = bool(due) or bool(force)
    refusal = ""
    if renew:
        authorities = {item["name"]: item for item in report["authorities"] if not item["missing"]}
        used = sorted({item["authority"] for item in certificates})
        short = [authorities[name] for name in used if name in authorities and authorities[name]["days_left"] < ca_min_days]
        external = sorted({item["authority"] for item in certificates if item["externally_managed"]})
        if short:
            ca = min(short, key=lambda item: item["days_left"])
            refusal = (f"{host}: the {ca['name']} CA {_left(ca)}, sooner than kube_cert_ca_min_days ({ca_min_days}): certificates renewed "
                       f"now would outlive it, so nothing was renewed. Rotate the CA first (Kubernetes documentation, \"Manual Rotation of "
                       f"CA Certificates\"), then run certificates.yml again.")
        elif external:
            refusal = (f"{host}: the {', '.join(external)} CA key is not on the node (an external CA): kubeadm cannot renew the "
                       f"certificates it signs, so nothing was renewed. Renew them with that CA (Kubernetes documentation, \"Certificate "
                       f"Management with kubeadm\", external CA mode).")
    soonest, ca_soonest = _soonest(report["certificates"]), _soonest(report["authorities"])
    return {"renew": renew and not refusal, "due": due, "refusal": refusal,
            "soonest": soonest, "ca_soonest": ca_soonest,
            "summary": (f"certificates: {soonest['name']} {_left(soonest)} first"
                        + (f"; CA {ca_soonest['name']} {_left(ca_soonest)}" if ca_soonest else "")
                        + (f"; due for renewal (within {renew_days} days): {', '.join(due)}" if due else ""))}


def renewed_problems(report, host, renew_days):
    """After a renewal: sentences for each certificate still within ``renew_days`` of its expiry (the renewal did not take)."""
    renew_days = _positive_days(renew_days, "kube_cert_renew_days")
    return [f"{host}: {item['name']} {_left(item)} after kubeadm certs renew all" for item in report["certificates"]
            if not item["missing"] and item["days_left"] <= renew_days]
