#!/usr/bin/env bash
# Each component's generators (build/<c>/codegen.sh, upstream's own) leave its
# patched tree unchanged (verify-codegen.sh; the tree is put back afterwards).
#
# Usage: verify/codegen.sh [component...]   (default: every component)
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/init.sh"

mapfile -t components < <(component::named_or_all "$@")
rc=0
for c in "${components[@]}"; do
  "${REPO_ROOT}/hack/make-rules/apply.sh" "${c}" >/dev/null
  "${REPO_ROOT}/hack/make-rules/verify-codegen.sh" "${c}" || rc=1
done
exit "${rc}"
