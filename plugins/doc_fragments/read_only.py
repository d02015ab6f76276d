# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The attributes of a module that only reads: modules extend ansible.builtin.action_common_attributes and this."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: The module only reads; it runs the same way in check mode.
  diff_mode:
    support: none
"""
