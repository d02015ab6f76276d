"""Tests of the iproute2 dcb double (lab/doubles/dcb/README.md), against the dcb-app(8) and dcb-pfc(8) examples, and
of the rdma role's boot script (roles/rdma/files/onprem-rdma-apply) setting the inbox stack's QoS and the ARP
settings through it."""

import importlib.machinery
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "lab" / "doubles" / "dcb" / "dcb"
APPLY = ROOT / "roles" / "rdma" / "files" / "onprem-rdma-apply"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


@pytest.fixture()
def lab(tmp_path, monkeypatch):
    (tmp_path / "net" / "eth0").mkdir(parents=True)
    (tmp_path / "net" / "ib0").mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "dcb").write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (PYTHON, DOUBLE))
    (tmp_path / "bin" / "dcb").chmod(0o755)
    monkeypatch.setenv("DCB_DOUBLE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("DCB_DOUBLE_SYS_NET", str(tmp_path / "net"))
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path / "bin", os.environ["PATH"]))
    return tmp_path


def dcb(*args):
    return subprocess.run(["dcb"] + list(args), capture_output=True, text=True, check=False)


def test_app_table_as_the_man_page_shows_it(lab):
    assert dcb("app", "add", "dev", "eth0", "dscp-prio", "0:0", "24:3", "48:6").returncode == 0
    assert dcb("app", "add", "dev", "eth0", "dscp-prio", "24:2").returncode == 0
    assert dcb("app", "show", "dev", "eth0", "dscp-prio").stdout == "dscp-prio 0:0 CS3:2 CS3:3 CS6:6\n"
    assert dcb("-N", "app", "show", "dev", "eth0", "dscp-prio").stdout == "dscp-prio 0:0 24:2 24:3 48:6\n"
    assert dcb("app", "replace", "dev", "eth0", "dscp-prio", "24:4").returncode == 0
    assert dcb("app", "show", "dev", "eth0", "dscp-prio").stdout == "dscp-prio 0:0 CS3:4 CS6:6\n"
    assert dcb("app", "flush", "dev", "eth0", "dscp-prio").returncode == 0
    assert dcb("app", "show", "dev", "eth0", "dscp-prio").stdout == ""


def test_pfc_as_the_man_page_shows_it(lab):
    assert dcb("pfc", "set", "dev", "eth0", "prio-pfc", "all:off", "6:on", "7:on", "delay", "0x1000").returncode == 0
    assert dcb("pfc", "show", "dev", "eth0").stdout == (
        "pfc-cap 8 macsec-bypass off delay 4096\nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:on 7:on\n")
    assert dcb("pfc", "show", "dev", "eth0", "prio-pfc").stdout == "prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:on 7:on\n"


def test_devices_without_dcb(lab):
    missing = dcb("pfc", "show", "dev", "eth9")
    assert missing.returncode == 1 and "Cannot find device \"eth9\"" in missing.stderr
    assert dcb("pfc", "show", "dev", "ib0").returncode == 1


def load_apply():
    loader = importlib.machinery.SourceFileLoader("onprem_rdma_apply", str(APPLY))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


CONFIG = {"trust": "dscp", "pfc_priorities": [3], "cable_len": 0}


def test_boot_script_sets_inbox_qos_with_dcb_and_reads_it_back(lab, capsys):
    apply = load_apply()
    check = apply.Rail({"netdev": "eth0"}, check=True)
    apply.apply_qos_dcb(check, CONFIG)
    assert check.changes == ["trust", "pfc"]
    assert dcb("-N", "app", "show", "dev", "eth0").stdout == ""
    rail = apply.Rail({"netdev": "eth0"}, check=False)
    apply.apply_qos_dcb(rail, CONFIG)
    changes = ["changed: eth0 trust pcp -> dscp", "changed: eth0 pfc 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0"]
    assert capsys.readouterr().out.splitlines()[-2:] == changes
    assert dcb("pfc", "show", "dev", "eth0", "prio-pfc").stdout == "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n"
    table = dcb("-N", "app", "show", "dev", "eth0", "dscp-prio").stdout.split()[1:]
    assert len(table) == 64 and "26:3" in table and "63:7" in table
    again = apply.Rail({"netdev": "eth0"}, check=False)
    apply.apply_qos_dcb(again, CONFIG)
    assert again.changes == []
    apply.apply_qos_dcb(apply.Rail({"netdev": "eth0"}, check=False), dict(CONFIG, trust="pcp"))
    assert dcb("-N", "app", "show", "dev", "eth0").stdout == ""


def test_boot_script_refuses_what_dcb_cannot_do(lab, monkeypatch):
    apply = load_apply()
    with pytest.raises(apply.ApplyError, match="cable length of eth0 can only be set with mlnx_qos"):
        apply.apply_qos_dcb(apply.Rail({"netdev": "eth0"}, check=False), dict(CONFIG, cable_len=5))
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(apply.ApplyError, match=r"dcb \(iproute2 5.11 or later\) is not installed"):
        apply.apply_qos_dcb(apply.Rail({"netdev": "eth0"}, check=False), CONFIG)


def test_boot_script_sets_the_arp_settings(tmp_path, monkeypatch, capsys):
    apply = load_apply()
    conf = tmp_path / "conf" / "eth0"
    conf.mkdir(parents=True)
    for name, value in (("arp_ignore", "0"), ("arp_announce", "2"), ("rp_filter", "1")):
        (conf / name).write_text(value + "\n")
    monkeypatch.setattr(apply, "PROC_NET_CONF", str(tmp_path / "conf"))
    apply.apply_arp(apply.Rail({"netdev": "eth0"}, check=False), {})
    assert [(conf / name).read_text() for name in ("arp_ignore", "arp_announce", "rp_filter")] == ["1\n", "2\n", "2\n"]
    assert capsys.readouterr().out.splitlines() == ["changed: eth0 arp_ignore 0 -> 1", "ok: eth0 arp_announce is 2",
                                                    "changed: eth0 rp_filter 1 -> 2"]
