# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kernel messages read from a file since a point in time, with each log format's stamp."""

from __future__ import annotations

import time

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _kernel_log
from ansible_collections.onprem.gpu.plugins.module_utils._kernel_log import (
    SinceError, boot_time, line_time, lines_since, parse_since, read_kernel_log_file)

NOW = 1761275642.0  # 2025-10-24T03:14:02Z


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("line, stamp", [
    # rsyslog's RSYSLOG_FileFormat, Debian 12's default for /var/log/kern.log
    ("2025-10-24T03:14:02.123456+02:00 gpu1 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", NOW - 7200 + 0.123456),
    ("2025-10-24T03:14:02+0000 n1 kernel: NVRM: Xid (PCI:0000:01:00): 79", NOW),  # journalctl -o short-iso
    ("2025-10-24T03:14:02,000000+00:00 NVRM: Xid (PCI:0000:01:00): 79", NOW),  # dmesg --time-format iso
    ("Oct 24 03:14:02 gpu1 kernel: [ 2621.850000] NVRM: Xid (PCI:0000:01:00): 79", NOW),  # traditional syslog
    ("[Fri Oct 24 03:14:02 2025] NVRM: Xid (PCI:0000:01:00): 79", NOW),  # dmesg -T
    ("[ 2621.850000] NVRM: Xid (PCI:0000:01:00): 79", 1.0e9 + 2621.85),  # dmesg, seconds since the boot
    ("NVRM: Xid (PCI:0000:01:00): 79", None),
])
def test_line_time(line, stamp):
    found = line_time(line, boot=1.0e9, now=NOW)
    assert found == (pytest.approx(stamp) if stamp is not None else None)


def test_a_syslog_date_ahead_of_now_was_last_year():
    assert line_time("Dec 31 23:00:00 gpu1 kernel: x", now=NOW) == pytest.approx(1735686000.0)  # 2024-12-31T23:00Z


@pytest.mark.parametrize("text, since", [
    ("-2h", NOW - 7200), ("-1h 30min", NOW - 5400), ("90min ago", NOW - 5400), ("-30s", NOW - 30), ("now", NOW),
    ("today", 1761264000.0), ("yesterday", 1761177600.0), ("2025-10-24 03:00", NOW - 842), ("2025-10-24", 1761264000.0),
    ("03:00", NOW - 842), ("@1761270000", 1761270000.0), ("boot", 1.0e9),
])
def test_parse_since(text, since):
    assert parse_since(text, NOW, boot=1.0e9) == pytest.approx(since)


@pytest.mark.parametrize("text", ["last tuesday", "-2 fortnights", "2025-13", ""])
def test_parse_since_refuses_what_it_cannot_read(text):
    with pytest.raises(SinceError, match="is not a time this collection reads from a kernel log file"):
        parse_since(text, NOW)


def test_lines_since_keeps_unstamped_lines_and_drops_an_earlier_boot():
    text = ("2025-10-24T01:00:00+00:00 n1 kernel: old\n"
            "2025-10-24T03:00:00+00:00 n1 kernel: new\n"
            "no stamp at all\n"
            f"[{NOW - 1.0e9 + 100:.6f}] from a longer boot before this one\n"
            "[ 5.000000] early in this boot\n")
    assert lines_since(text, NOW - 3600, boot=1.0e9, now=NOW) == "2025-10-24T03:00:00+00:00 n1 kernel: new\nno stamp at all\n"
    assert lines_since(text, 1.0e9, boot=1.0e9, now=NOW).splitlines() == [
        "2025-10-24T01:00:00+00:00 n1 kernel: old", "2025-10-24T03:00:00+00:00 n1 kernel: new", "no stamp at all",
        "[ 5.000000] early in this boot"]
    assert lines_since("", None) == ""


def test_read_kernel_log_file(tmp_path, monkeypatch):
    log = tmp_path / "kernel.log"
    log.write_text("[ 10.000000] NVRM: one\n[ 20.000000] NVRM: two\n", encoding="utf-8")
    assert read_kernel_log_file(str(log), "-5s", now=1.0e9 + 24, boot=1.0e9) == ("[ 20.000000] NVRM: two\n", None)
    assert read_kernel_log_file(str(log), now=1.0e9 + 24, boot=1.0e9) == ("[ 10.000000] NVRM: one\n[ 20.000000] NVRM: two\n", None)
    monkeypatch.setattr(_kernel_log, "MAX_READ_BYTES", 30)
    assert read_kernel_log_file(str(log), boot=None) == ("[ 20.000000] NVRM: two\n", None)
    assert read_kernel_log_file(str(tmp_path / "nope")) == (None, f"The kernel log file {tmp_path / 'nope'} cannot be read: No such file or directory.")


def test_boot_time(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nbtime 1761200000\nprocesses 5\n", encoding="ascii")
    assert boot_time(str(stat)) == 1761200000.0
    assert boot_time(str(tmp_path / "absent")) is None
