#!/usr/bin/env bash
# Render every chart of the network benchmark and occupancy reports at sites of 5, 24 and 64 nodes (synthetic data)
# with headless Chromium, to look at them: SVG and PNG side by side in DIR (default /tmp/charts).
#
#   bash tests/tools/chart_screenshots.sh [DIR]
#
# Needs chromium (Debian: apt-get install chromium) and the venv (make .venv).
set -euo pipefail

cd "$(dirname "$0")/../.."
dir=$(realpath -m "${1:-/tmp/charts}")
CHART_SCREENSHOTS=$dir .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit/plugins/module_utils/test_chart_screenshots.py
ls "$dir"/*.png
