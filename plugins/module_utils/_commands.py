# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Finding the vendor tools the modules run (nvidia-smi, all_reduce_perf, mpirun)."""

from __future__ import annotations

import os


def find_command(module, wanted):
    """Return the executable for ``wanted``, or None when the host lacks it.

    A bare name is looked up in PATH and the usual system directories (``get_bin_path``); a path is
    taken as it is, so an operator can point at a tool installed outside PATH.
    """
    if os.path.basename(wanted) == wanted:
        return module.get_bin_path(wanted)
    return wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else None
