# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Make ``ansible_collections.onprem.gpu`` importable when pytest runs from a plain checkout, for every test folder.

The collection is reached through ``.build/collections/ansible_collections/onprem/gpu``, a relative link to the
repository root (the Makefile makes the same link; whichever runs first wins, the other leaves it alone).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
COLLECTIONS_DIR = REPOSITORY_ROOT / ".build" / "collections"
COLLECTION_LINK = COLLECTIONS_DIR / "ansible_collections" / "onprem" / "gpu"


def _link_collection():
    if os.path.lexists(COLLECTION_LINK):
        return
    COLLECTION_LINK.parent.mkdir(parents=True, exist_ok=True)
    try:
        COLLECTION_LINK.symlink_to(os.path.relpath(REPOSITORY_ROOT, COLLECTION_LINK.parent), target_is_directory=True)
    except FileExistsError:
        pass  # made concurrently by the Makefile or another test run


_link_collection()
if str(COLLECTIONS_DIR) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS_DIR))
