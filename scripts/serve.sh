#!/usr/bin/env bash
# Sets up what is missing (first run: ~25 min of tool builds), then builds and serves the app on
# http://127.0.0.1:8080/ (PORT=… to change; DEV=1 for `trunk serve` with live reload).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec bash tests/serve.sh
