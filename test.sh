#!/usr/bin/env bash
# The test command: checks the build prerequisites, then runs every test.
#
# Tests that need something this machine may lack are `#[ignore = "needs …"]`.
# With no arguments, this script runs them too (`--include-ignored`) whenever
# what they need is here, and names those it leaves out and why; they show as
# "filtered out" in cargo's counts. With arguments, they go to `cargo test`
# as they are (`./test.sh --test kafka`, `./test.sh -- --ignored kcat_`).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh --tests

if [ $# -gt 0 ]; then
  exec cargo test --locked "$@"
fi

skip=()
leave_out() { # leave_out TEST_NAME_PREFIX WHY
  skip+=(--skip "$1")
  echo "test.sh: leaving out $1* (ignored): $2" >&2
}
[ -n "${FEEDLOG_TEST_KAFKA:-}" ] ||
  leave_out real_broker "no Kafka broker: set FEEDLOG_TEST_KAFKA=host:port (.ci/run starts tansu when installed)"
# What the real broker lacks (.ci/run names tansu's; docs/testing.md has the
# evidence): the real-broker tests that need it are left out, saying why.
for gap in ${FEEDLOG_TEST_KAFKA_GAPS:-}; do
  case "$gap" in
    expiry) leave_out real_broker_expiry_ \
      "the broker's group coordinator never expels a killed or stopped member" ;;
    delete-records) leave_out real_broker::positions_before_retention \
      "the broker cannot delete records (DeleteRecords)" ;;
    *) echo "test.sh: unknown FEEDLOG_TEST_KAFKA_GAPS entry '$gap' (expiry, delete-records)" >&2
      exit 2 ;;
  esac
done
command -v kcat >/dev/null 2>&1 ||
  leave_out kcat_ "kcat is not installed (scripts/setup.sh --tests installs it)"
{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } ||
  leave_out ui_ "chromium and chromedriver are not installed (scripts/setup.sh --tests installs them)"
[ -f ../shared/data/CollegeMsg.txt ] ||
  leave_out real_network_ "../shared/data/CollegeMsg.txt (SNAP) is not present"
probe="$(mktemp -d)"
if mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
  umount "$probe"
else
  leave_out disk_full_ "cannot mount a tmpfs here (needs root)"
fi
rmdir "$probe"

exec cargo test --locked --workspace -- --include-ignored ${skip[@]+"${skip[@]}"}
