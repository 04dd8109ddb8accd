#!/usr/bin/env bash
# Exporting each component's tree gives back patches/<component> byte for
# byte, each commit in the folder of its topic (the export is written to a
# scratch folder, never over patches/).
#
# Usage: verify/export.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
rc=0
for c in "${components[@]}"; do
  "${REPO_ROOT}/hack/make-rules/apply.sh" "${c}" >/dev/null
  component::load "${c}"
  tmp="$(mktemp -d)"
  component::export_series "${tmp}"
  have="${COMPONENT_PATCHES}"
  [[ -d "${have}" ]] || have="$(mktemp -d)" # no series yet: an empty one
  if ! diff -r --exclude=.gitkeep --exclude=TOPIC.md --exclude=topics --exclude=line.env --exclude=codegen.verified --exclude=overlay "${have}" "${tmp}" >&2; then
    echo "$(component::rel_patches) differs from an export of ${COMPONENT_TREE} (see the diff above)" >&2
    rc=1
  fi
  rm -rf "${tmp}"
  [[ "${have}" == "${COMPONENT_PATCHES}" ]] || rm -rf "${have}"
done
exit "${rc}"
