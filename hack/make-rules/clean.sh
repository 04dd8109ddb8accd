#!/usr/bin/env bash
# `make clean`: removes _output/. Refuses while a materialised tree holds
# commits or edits that are not exported to patches/ (FORCE=1 overrides).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/init.sh"

if [[ -z "${FORCE:-}" ]]; then
  for line in $(line::all); do
    while read -r c; do
      LINE="${line}" component::load "${c}"
      component::check_no_local_work
    done < <(LINE="${line}" component::all)
  done
fi
rm -rf "${OUTPUT_DIR}"
log "removed ${OUTPUT_DIR}"
