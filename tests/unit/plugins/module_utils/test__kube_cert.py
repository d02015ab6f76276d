# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A control plane's certificates from kubeadm certs check-expiration, and whether and when to renew them."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._kube_cert import (
    KubeCertError,
    parse_check_expiration,
    renewal_plan,
    renewed_problems,
    residual_days,
)

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "kube_cert"
FIXTURE = (FIXTURES / "check-expiration-1.35.txt").read_text()
NAMES = ["admin.conf", "apiserver", "apiserver-etcd-client", "apiserver-kubelet-client", "controller-manager.conf", "etcd-healthcheck-client",
         "etcd-peer", "etcd-server", "front-proxy-client", "scheduler.conf", "super-admin.conf"]


def cell(text, row, old, new):
    """The fixture with one cell of the row starting with ``row`` changed, padded to keep the columns."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith(row + " "):
            start = line.index(old)
            lines[index] = line[:start] + new.ljust(len(old)) + line[start + max(len(old), len(new)):]
    return "".join(lines)


def aged(text, residual):
    for name in NAMES:
        text = cell(text, name, "360d", residual)
    return text


def test_both_tables_are_read_from_their_headers():
    report = parse_check_expiration(FIXTURE)
    assert [item["name"] for item in report["certificates"]] == NAMES
    apiserver = report["certificates"][1]
    assert apiserver == {"name": "apiserver", "missing": False, "expires": "2026-08-19T09:03:00Z", "residual": "360d", "days_left": 360,
                         "externally_managed": False, "authority": "ca"}
    assert report["certificates"][2]["authority"] == "etcd-ca"
    assert [(item["name"], item["days_left"]) for item in report["authorities"]] == [("ca", 3285), ("etcd-ca", 3285), ("front-proxy-ca", 3285)]


def test_a_joined_control_plane_lacks_super_admin_conf():
    text = FIXTURE.replace("super-admin.conf           Aug 19, 2026 09:03 UTC   360d            ca                      no      ",
                           "!MISSING! super-admin.conf\t\t\t\t")
    report = parse_check_expiration(text)
    assert report["certificates"][-1] == {"name": "super-admin.conf", "missing": True}
    assert renewal_plan(report, "dc1-cp2", 60, 365)["soonest"]["name"] == "admin.conf"


@pytest.mark.parametrize("text, days", [("364d", 364), ("9y", 3285), ("23h", 0), ("59m", 0), ("5s", 0), ("0s", 0), ("<invalid>", -1)])
def test_residual_time_is_kubeadms_short_human_duration(text, days):
    assert residual_days(text) == days


@pytest.mark.parametrize("text, message", [
    ("CERTIFICATE   EXPIRES\nfoo  bar\n", "has no certificate table"),
    (FIXTURE.replace("Aug 19, 2026 09:03 UTC   360d", "Aug 19, 2026 09:03 UTC   360 days", 1), "residual time '360 days'"),
    (FIXTURE.replace("Aug 19, 2026 09:03 UTC", "2026-08-19 09:03 UTC   ", 1), "expiry '2026-08-19 09:03 UTC'"),
])
def test_output_that_is_not_kubeadms_is_refused_in_a_sentence(text, message):
    with pytest.raises(KubeCertError, match=message):
        parse_check_expiration(text)


def test_nothing_is_due_on_a_young_cluster():
    plan = renewal_plan(parse_check_expiration(FIXTURE), "dc1-cp1", 60, 365)
    assert plan["renew"] is False and plan["due"] == [] and plan["refusal"] == ""
    assert plan["summary"] == "certificates: admin.conf expires in 360 days (2026-08-19) first; CA ca expires in 3285 days (2035-08-17)"


def test_an_eleven_months_old_cluster_is_due():
    plan = renewal_plan(parse_check_expiration(aged(FIXTURE, "24d")), "dc1-cp1", 60, 365)
    assert plan["renew"] is True and plan["due"] == NAMES and plan["refusal"] == ""
    assert plan["summary"].endswith("; due for renewal (within 60 days): " + ", ".join(NAMES))


def test_the_threshold_is_inclusive_and_force_renews_a_young_cluster():
    report = parse_check_expiration(aged(FIXTURE, "60d"))
    assert renewal_plan(report, "dc1-cp1", 60, 365)["renew"] is True
    assert renewal_plan(report, "dc1-cp1", 59, 365)["renew"] is False
    assert renewal_plan(parse_check_expiration(FIXTURE), "dc1-cp1", 60, 365, force=True)["renew"] is True


def test_renewal_is_refused_when_the_ca_would_expire_first():
    text = cell(aged(FIXTURE, "24d"), "etcd-ca", "9y", "200d")
    plan = renewal_plan(parse_check_expiration(text), "dc1-cp1", 60, 365)
    assert plan["renew"] is False
    assert plan["refusal"] == (
        "dc1-cp1: the etcd-ca CA expires in 200 days (2035-08-17), sooner than kube_cert_ca_min_days (365): certificates renewed now "
        "would outlive it, so nothing was renewed. Rotate the CA first (Kubernetes documentation, \"Manual Rotation of CA Certificates\"), "
        "then run certificates.yml again.")


def test_an_expired_ca_is_named_so():
    text = cell(aged(FIXTURE, "<invalid>"), "ca ", "9y", "<invalid>")
    plan = renewal_plan(parse_check_expiration(text), "dc1-cp1", 60, 365)
    assert plan["refusal"].startswith("dc1-cp1: the ca CA expired on 2035-08-17, sooner than")


def test_a_short_ca_alone_does_not_stop_a_report():
    plan = renewal_plan(parse_check_expiration(cell(FIXTURE, "ca ", "9y", "200d")), "dc1-cp1", 60, 365)
    assert plan["renew"] is False and plan["refusal"] == "" and plan["ca_soonest"]["name"] == "ca"


def test_certificates_of_an_external_ca_are_not_renewed():
    text = aged(FIXTURE, "24d")
    for name in ("front-proxy-client",):
        text = cell(text, name, "no      ", "yes     ")
    plan = renewal_plan(parse_check_expiration(text), "dc1-cp1", 60, 365)
    assert plan["renew"] is False and "the front-proxy-ca CA key is not on the node (an external CA)" in plan["refusal"]


@pytest.mark.parametrize("days, message", [(0, "kube_cert_renew_days must be a whole number of days, at least 1, not 0"),
                                           ("60", "not '60'"), (True, "not True")])
def test_bad_thresholds_are_refused(days, message):
    with pytest.raises(KubeCertError, match=message):
        renewal_plan(parse_check_expiration(FIXTURE), "dc1-cp1", days, 365)


def test_a_node_without_kubeadm_certificates_is_refused():
    report = {"certificates": [{"name": name, "missing": True} for name in NAMES], "authorities": []}
    with pytest.raises(KubeCertError, match="dc1-gpu1 has none of the certificates kubeadm manages"):
        renewal_plan(report, "dc1-gpu1", 60, 365)


def test_after_a_renewal_nothing_may_be_left_due():
    assert renewed_problems(parse_check_expiration(cell(FIXTURE, "apiserver", "360d", "364d")), "dc1-cp1", 60) == []
    problems = renewed_problems(parse_check_expiration(cell(FIXTURE, "etcd-peer", "360d", "24d")), "dc1-cp1", 60)
    assert problems == ["dc1-cp1: etcd-peer expires in 24 days (2026-08-19) after kubeadm certs renew all"]


def test_rows_after_a_missing_certificate_are_read_whatever_their_column_widths():
    text = (FIXTURES / "check-expiration-missing.txt").read_text()
    report = parse_check_expiration(text)
    missing = [item["name"] for item in report["certificates"] if item["missing"]]
    assert missing == ["apiserver-etcd-client", "etcd-healthcheck-client", "etcd-peer", "etcd-server", "super-admin.conf"]
    front_proxy = next(item for item in report["certificates"] if item["name"] == "front-proxy-client")
    assert front_proxy["authority"] == "front-proxy-ca" and front_proxy["days_left"] == 364 and front_proxy["externally_managed"] is False
