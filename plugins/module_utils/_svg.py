# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the collection's SVG charts share: the font and its text widths, names fitted to a width without cutting a word,
colour-blind-safe colours, hatch patterns, legend swatches drawn like the marks they stand for, and labels placed clear of
lines.

The charts are laid out in Python, so the text must be measured here: widths are DejaVu Sans' advance widths (the font
the charts ask for first, and the sans-serif of most Linux desktops); Arial and Helvetica, the fall-backs, are narrower,
so a label measured to fit fits in them too. Plain Python without Ansible imports.
"""

from __future__ import annotations

import math
import re
from html import escape

FONT_FAMILY = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
# DejaVu Sans advance widths in thousandths of an em for " " to "~"; other characters count as the widest of these.
_WIDTHS = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636, 636, 636, 636, 636,
    337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,
    611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974,
    634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)
# DejaVu Sans Bold is at most 1.23 times as wide per character and about 1.1 times over a word.
_BOLD = 1.15
# Above and below the baseline, in ems: what a box around a line of text covers.
ASCENT, DESCENT = 0.8, 0.25
ELLIPSIS = "\u2026"

# Okabe and Ito's palette ("Color Universal Design", 2008), told apart with every kind of colour vision. Vermillion is
# left out of it: red is the threshold's alone.
BLUE, ORANGE, GREEN, PURPLE, SKY, BLACK, YELLOW = "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#F0E442"
THRESHOLD = "#d62728"
GREY = "#BDBDBD"
SERIES = (BLUE, ORANGE, GREEN, PURPLE, SKY, BLACK, "#8C8C8C", YELLOW)

_WORDS = re.compile(r"[^\s\-_.+/:,]+[\s\-_.+/:,]*|[\s\-_.+/:,]+")


def text_width(text, size, bold=False):
    """The width in user units of ``text`` set at ``size``."""
    units = sum(_WIDTHS[ord(char) - 32] if 32 <= ord(char) < 127 else 1000 for char in str(text))
    return units * size / 1000 * (_BOLD if bold else 1.0)


def fit(text, width, size, bold=False):
    """``text`` when it fits ``width``, else as many whole words of its end as fit, an ellipsis, and as many whole
    words of its start as still fit (``dc1-…gpu-node-017``, ``…node-017``): the end tells nodes of one rack apart.
    Only a last word wider than ``width`` is cut inside, keeping two thirds of the room for its end."""
    text = str(text)
    if text_width(text, size, bold) <= width:
        return text
    room = width - text_width(ELLIPSIS, size, bold)
    words = _WORDS.findall(text)
    tail = ""
    while words and text_width(words[-1] + tail, size, bold) <= room:
        tail = words.pop() + tail
    if tail:
        head = ""
        for word in words:
            if text_width(head + word + tail, size, bold) > room:
                break
            head += word
        return head + ELLIPSIS + tail
    head, tail = "", ""
    for char in reversed(text):
        if text_width(char + tail, size, bold) > room * 2 / 3:
            break
        tail = char + tail
    for char in text:
        if text_width(head + char + tail, size, bold) > room:
            break
        head += char
    return head + ELLIPSIS + tail


def wrap(text, width, size, bold=False, max_lines=3):
    """``text`` in lines that fit ``width``, broken after spaces or, within a long name, after its separators
    (``-``, ``.``, ``_``, ``/``, ``:``); what is left when ``max_lines`` are full goes on the last line, fitted with an
    ellipsis in its middle, as does a word wider than a line."""
    lines, current = [], ""
    # Spaces first: a name's separators break only a word wider than the line, so "600,000" or "1.5" stay whole.
    words = [part for word in re.findall(r"\S+\s*|\s+", str(text))
             for part in (_WORDS.findall(word) if text_width(word.rstrip(), size, bold) > width else [word])]
    for word in words:
        if current and text_width((current + word).rstrip(), size, bold) > width:
            lines.append(current)
            current = ""
        current += word
    lines.append(current)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + ["".join(lines[max_lines - 1:])]
    return [fit(line.strip(), width, size, bold) for line in lines]


def text(x, y, content, anchor="start", size=None, extra=""):
    """A <text> element; ``size`` only where it differs from the document's."""
    font = f' font-size="{size:g}"' if size else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{font}{extra}>{escape(str(content))}</text>'


def box(x, y, content, anchor="start", size=12, bold=False):
    """(left, top, right, bottom) of a line of text drawn by ``text``."""
    width = text_width(content, size, bold)
    left = x - {"start": 0, "middle": width / 2, "end": width}[anchor]
    return (left, y - ASCENT * size, left + width, y + DESCENT * size)


def document(width, height, size, title, body, defs=()):
    """A standalone SVG document with a white background, its title as a tooltip, ``defs`` and ``body``."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" font-family="{FONT_FAMILY}" font-size="{size:g}">'
        f"<title>{escape(str(title))}</title>" + ("<defs>" + "".join(defs) + "</defs>" if defs else "")
        + f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>'
        + "".join(body) + "</svg>\n"
    )


def hatch(pattern_id, colour, background="#ffffff"):
    """A diagonal-stripes fill, ``url(#pattern_id)``: a mark that differs by pattern as well as by colour."""
    return (f'<pattern id="{pattern_id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
            f'<rect width="6" height="6" fill="{background}"/><rect width="3" height="6" fill="{colour}"/></pattern>')


def stroke(colour, width=2.0, dash=""):
    """The attributes of a line, shared by the line and its legend swatch so that the two always look alike."""
    return f'stroke="{colour}" stroke-width="{width:g}"' + (f' stroke-dasharray="{dash}"' if dash else "")


# On text that may sit on a line: a white outline under the glyphs keeps it readable where the two meet.
HALO = ' paint-order="stroke" stroke="#ffffff" stroke-width="3" stroke-linejoin="round"'


def line(x1, y1, x2, y2, attributes):
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" {attributes}/>'


def crosses(rect, segment):
    """Whether a straight ``segment`` ((x1, y1), (x2, y2)) passes through ``rect`` (left, top, right, bottom)."""
    (x1, y1), (x2, y2) = segment
    left, top, right, bottom = rect
    # Clip the segment to the rectangle's slab on each axis (Liang-Barsky).
    low, high = 0.0, 1.0
    for delta, start, minimum, maximum in ((x2 - x1, x1, left, right), (y2 - y1, y1, top, bottom)):
        if delta == 0:
            if not minimum <= start <= maximum:
                return False
            continue
        first, second = (minimum - start) / delta, (maximum - start) / delta
        low, high = max(low, min(first, second)), min(high, max(first, second))
        if low > high:
            return False
    return True


def overlaps(first, second):
    return first[0] < second[2] and second[0] < first[2] and first[1] < second[3] and second[1] < first[3]


def place(candidates, content, segments, taken, bounds, size=12):
    """The first of ``candidates`` ((x, y, anchor)) whose text crosses none of ``segments``, overlaps no box in ``taken``
    and stays inside ``bounds``; else the first. The chosen box joins ``taken``."""
    for x, y, anchor in candidates:
        rect = box(x, y, content, anchor, size)
        inside = bounds[0] <= rect[0] and rect[2] <= bounds[2] and bounds[1] <= rect[1] and rect[3] <= bounds[3]
        if inside and not any(crosses(rect, segment) for segment in segments) and not any(overlaps(rect, other) for other in taken):
            taken.append(rect)
            return x, y, anchor
    x, y, anchor = candidates[0]
    taken.append(box(x, y, content, anchor, size))
    return x, y, anchor


def nice_step(span, most):
    """A round step (1, 2, 2.5 or 5 x 10^k) that divides ``span`` into at most ``most`` intervals."""
    if span <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(span / most))
    for factor in (1, 2, 2.5, 5, 10):
        if span / (factor * magnitude) <= most + 1e-9:
            return factor * magnitude
    return 10 * magnitude


def axis(peak, most=6):
    """The top of a value axis from 0 that holds ``peak`` with a little room, and its ticks (at most ``most`` steps)."""
    step = nice_step(max(peak, 1e-9) * 1.05, most)
    top = math.ceil(max(peak, 1e-9) * 1.05 / step - 1e-9) * step
    return round(top, 9), [round(step * index, 9) for index in range(int(round(top / step)) + 1)]


def tick_labels(values, unit=1.0, suffix=""):
    """Labels for evenly spaced ``values`` divided by ``unit``, with the fewest decimals that keep every label exact
    (``0k 0.5k 1k 1.5k``, never ``0k 0k 1k 1k``)."""
    for decimals in range(0, 7):
        labels = [f"{value / unit:,.{decimals}f}" for value in values]
        if all(abs(float(label.replace(",", "")) - value / unit) < 1e-9 * max(1.0, abs(value / unit)) for label, value in zip(labels, values)):
            break
    return [label + suffix if value else "0" for label, value in zip(labels, values)]


def legend(x, y, entries, width, size, line_height):
    """A legend from (x, y) down: each entry is ``(swatch, label)``, ``swatch(x, y)`` drawing a 30 px wide sample centred
    on y, and the label wrapped to ``width`` beside it. Returns the parts and the y below the last entry."""
    parts = []
    for swatch, label in entries:
        if swatch is not None:
            parts.append(swatch(x, y))
        lines = wrap(label, width - 38, size)
        parts.extend(text(x + 38, y + size * 0.35 + number * line_height, part) for number, part in enumerate(lines))
        y += len(lines) * line_height + 5
    return parts, y


def row_legend(x, y, entries, size):
    """A legend on one line from (x, y): each entry ``("rect", fill, edge, label)`` (an 18 x 11 swatch) or ``("line",
    stroke attributes, None, label)`` (an 18 px line), its label beside it. Returns the parts and the x after the last."""
    parts = []
    for kind, style, edge, label in entries:
        if kind == "rect":
            parts.append(f'<rect x="{x:.1f}" y="{y - 9}" width="18" height="11" fill="{style}" stroke="{edge}"/>')
        else:
            parts.append(line(x, y - 4, x + 18, y - 4, style))
        parts.append(text(x + 24, y, label))
        x += 24 + text_width(label, size) + 24
    return parts, x


def legend_height(entries, width, size, line_height):
    return sum(len(wrap(label, width - 38, size)) * line_height + 5 for _swatch, label in entries)
