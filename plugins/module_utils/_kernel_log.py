# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read kernel messages from a file (``/var/log/kern.log`` as rsyslog writes it) since a point in time.

``since`` takes what ``journalctl --since`` takes for the usual cases (``-2h``, ``-1h 30min``, ``90min ago``,
``2025-10-24 03:00``, ``03:00``, ``today``, ``yesterday``, ``now``, ``@1761275640``), so a play can use the same value
for the journal and for a file. A line's time is read from its start: an ISO 8601 / RFC 3339 stamp (rsyslog's
default file format since Debian 12, ``journalctl -o short-iso``, ``dmesg --time-format iso``), a traditional syslog
stamp (``Oct 24 03:14:02``, no year: the latest such date not after now), ``dmesg -T``'s ``[Fri Oct 24 03:14:02
2025]``, or ``dmesg``'s seconds since boot (``[ 2621.850000]``, turned into a time with the boot time, as ``dmesg -T``
does). A line without a stamp is always kept: nothing says it is old.

Plain Python, no Ansible import; times are POSIX seconds, local times as the node's time zone reads them.
"""

from __future__ import annotations

import datetime
import os
import re
import time

# A kern.log that is never rotated can grow without bound; the check reads only its tail.
MAX_READ_BYTES = 32 * 1024 * 1024

_MONTHS = {name: number for number, name in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:?\d{2})?(?=\s|$)")
_SYSLOG = re.compile(r"^(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})\s")
_DMESG_T = re.compile(r"^\[(?:[A-Z][a-z]{2} )?([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\]")
_UPTIME = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")
_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1, "sec": 1, "second": 1, "seconds": 1,
          "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_DATE_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?$")
_TIME_ONLY = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2}))?$")


class SinceError(ValueError):
    """A ``since`` value this reader does not understand; the message is one sentence."""


def boot_time(stat_path="/proc/stat"):
    """The kernel's boot time (``btime`` of /proc/stat) in POSIX seconds; None when unreadable."""
    try:
        with open(stat_path, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _local(year, month, day, hour=0, minute=0, second=0):
    return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))


def _span(text):
    """Seconds of a systemd time span (``2h``, ``1h 30min``, ``90``); None when it is not one."""
    text = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = _SPAN_PART.findall(text)
    if not parts or _SPAN_PART.sub("", text).strip() or any(unit not in _UNITS for dummy, unit in parts):
        return None
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def parse_since(text, now, boot=None):
    """POSIX seconds for a ``journalctl --since`` value; None for ``boot`` without a known boot time.

    ``now`` is the current time in POSIX seconds; ``boot`` the boot time (for ``boot``, which this reader also takes).
    Raises SinceError for anything else.
    """
    value = (text or "").strip()
    lowered = value.lower()
    today = datetime.datetime.fromtimestamp(now)
    midnight = _local(today.year, today.month, today.day)
    named = {"now": now, "today": midnight, "yesterday": midnight - 86400, "boot": boot}
    if lowered in named:
        return named[lowered]
    if value.startswith("@") and re.fullmatch(r"@\d+(?:\.\d+)?", value):
        return float(value[1:])
    if value[:1] in "+-":
        seconds = _span(value[1:])
        if seconds is not None:
            return now - seconds if value[0] == "-" else now + seconds
    if lowered.endswith(" ago"):
        seconds = _span(lowered[:-4])
        if seconds is not None:
            return now - seconds
    found = _DATE_TIME.match(value)
    if found:
        return _local(*(int(part or 0) for part in found.groups()))
    found = _TIME_ONLY.match(value)
    if found:
        return _local(today.year, today.month, today.day, *(int(part or 0) for part in found.groups()))
    raise SinceError(
        f"kernel_log_since {text!r} is not a time this collection reads from a kernel log file; use a relative span "
        f"such as -2h or '90min ago', a date and time such as '2025-10-24 03:00', today, yesterday or @EPOCH.")


def line_time(line, boot=None, now=None):
    """POSIX seconds a kernel log line was written at, from its leading stamp; None when it has none."""
    found = _ISO.match(line)
    if found:
        year, month, day, hour, minute, second = (int(part) for part in found.groups()[:6])
        fraction = float(f"0.{found.group(7)}") if found.group(7) else 0.0
        zone = found.group(8)
        if zone is None:
            return _local(year, month, day, hour, minute, second) + fraction
        offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (
            int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
        stamp = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone.utc)
        return stamp.timestamp() - offset + fraction
    found = _SYSLOG.match(line)
    if found:
        month, day, hour, minute, second = _MONTHS[found.group(1)], *(int(part) for part in found.groups()[1:])
        year = datetime.datetime.fromtimestamp(now if now is not None else time.time()).year
        stamp = _local(year, month, day, hour, minute, second)
        # Traditional syslog stamps carry no year: a date ahead of now was last year's.
        if now is not None and stamp > now + 86400:
            stamp = _local(year - 1, month, day, hour, minute, second)
        return stamp
    found = _DMESG_T.match(line)
    if found:
        month = _MONTHS.get(found.group(1))
        if month:
            return _local(int(found.group(6)), month, int(found.group(2)),
                          *(int(part) for part in found.groups()[2:5]))
    found = _UPTIME.match(line)
    if found and boot is not None:
        return boot + float(found.group(1))
    return None


def lines_since(text, since, boot=None, now=None):
    """The lines of ``text`` written at or after ``since`` (POSIX seconds), and those without a stamp.

    A ``dmesg`` uptime stamp later than ``now`` belongs to an earlier boot (the uptime was larger then): dropped.
    """
    kept = []
    for line in text.splitlines():
        stamp = line_time(line, boot, now)
        earlier_boot = stamp is not None and now is not None and _UPTIME.match(line) and stamp > now + 1
        if stamp is None or since is None or (stamp >= since and not earlier_boot):
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept else "")


def read_kernel_log_file(path, since_text=None, now=None, boot=None):
    """Return ``(text, problem)``: the file's kernel messages since ``since_text`` (default: the current boot).

    ``problem`` is one sentence when the file cannot be read (then ``text`` is None). Raises SinceError for a
    ``since_text`` it cannot read.
    """
    now = time.time() if now is None else now
    since = parse_since(since_text, now, boot) if since_text else boot
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_READ_BYTES:
                handle.seek(size - MAX_READ_BYTES)
                handle.readline()  # the first line is cut
            data = handle.read()
    except OSError as error:
        return None, f"The kernel log file {path} cannot be read: {error.strerror or error}."
    return lines_since(data.decode("utf-8", "replace"), since, boot, now), None
