#!/usr/bin/env bash
# Go test output kept, and the failures' own messages gathered where the end
# of a long run can print them. A CI log is cut in the middle; the messages
# that say why a test failed (its t.Errorf and t.Fatalf lines) sit in the
# middle of the test's log output and were cut with it. make test prints
# what this collects (TESTLOG_FAILURES) after its phase summary.
#
# Sourced after init.sh.

TESTLOG_DIR="${OUTPUT_DIR}/test-logs"
TESTLOG_FAILURES="${TESTLOG_DIR}/failures.txt"
# The most lines one failing command adds to TESTLOG_FAILURES.
TESTLOG_MAX_LINES="${TESTLOG_MAX_LINES:-200}"

# testlog::run LABEL COMMAND...: runs COMMAND (a go test), its output shown
# and kept in TESTLOG_DIR/LABEL.log; when it fails, appends to
# TESTLOG_FAILURES the failed tests and the lines the tests themselves wrote
# (file_test.go:N: and the lines that continue them), at most
# TESTLOG_MAX_LINES. Returns COMMAND's status.
testlog::run() {
  local label="$1" log rc=0
  shift
  mkdir -p "${TESTLOG_DIR}"
  log="${TESTLOG_DIR}/${label//\//_}.log"
  "$@" 2>&1 | tee "${log}" || rc=$?
  if ((rc != 0)); then
    {
      printf '=== %s failed (exit %d; whole output: %s)\n' "${label}" "${rc}" "${log#"${REPO_ROOT}/"}"
      testlog::digest "${log}" | head -n "${TESTLOG_MAX_LINES}"
    } >>"${TESTLOG_FAILURES}"
  fi
  return "${rc}"
}

# testlog::digest LOG: the lines of a go test output that say why it failed:
# "--- FAIL", "FAIL <package>", panics, and what a test wrote from its own
# file (xxx_test.go:N: ...) with the lines that continue a multi-line message
# (indented, not another file:line: log line).
testlog::digest() {
  awk '
    /^[[:space:]]*--- FAIL:/ || /^FAIL[[:space:]]/ || /^panic:/ || /^[[:space:]]*\[FAILED\]/ { print; keep = 0; next }
    /^[[:space:]]+[[:alnum:]_.-]+_test\.go:[0-9]+: / { print; keep = 1; next }
    /^[[:space:]]+[[:alnum:]_.-]+\.go:[0-9]+: / || /^(=== |--- |ok |PASS|[IWEF][0-9]{4} )/ { keep = 0; next }
    keep && /^[[:space:]]/ { print; next }
    { keep = 0 }
  ' "$1"
}

# testlog::reset: forgets the failures of an earlier run.
testlog::reset() {
  rm -f "${TESTLOG_FAILURES}"
}

# testlog::print_failures: prints what TESTLOG_FAILURES gathered, if any.
testlog::print_failures() {
  [[ -s "${TESTLOG_FAILURES}" ]] || return 0
  printf '\n+++ the failed tests and their messages (%s):\n' "${TESTLOG_FAILURES#"${REPO_ROOT}/"}" >&2
  cat "${TESTLOG_FAILURES}" >&2
}
