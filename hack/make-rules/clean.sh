#!/usr/bin/env bash
# `make clean`: removes _output/. Refuses while a materialised tree holds
# commits or edits that are not exported to patches/ (FORCE=1 overrides).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

if [[ -z "${FORCE:-}" ]]; then
  while read -r line c; do
    LINE="${line}" component::load "${c}"
    component::check_no_local_work
  done < <(line::components)
fi
rm -rf "${OUTPUT_DIR}"
log "removed ${OUTPUT_DIR}"
