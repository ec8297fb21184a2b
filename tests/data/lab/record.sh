#!/bin/sh
# Records the lab fixtures: the --json report of real lab runs (root, network namespaces).
# Each NAME.json here is what `tcpdoctor lab ARGS --json` printed; the tests read them back
# and render them (NAME.txt, NAME.html: the golden text and page) and judge them again
# without root (crates/lab/tests/fixtures.rs). Usage, from the repository root:
#   sudo tests/data/lab/record.sh [NAME...]     (all when no NAME; needs target/release/tcpdoctor)
# then `TDOC_BLESS=1 cargo test -p tcpdoctor-lab --test fixtures` writes the goldens anew.
set -eu
bin=${TDOC_BIN:-target/release/tcpdoctor}
dir=$(dirname "$0")
record() {
    name=$1; shift
    if [ -n "$only" ] && ! echo " $only " | grep -q " $name "; then return 0; fi
    echo "$name: tcpdoctor lab $*" >&2
    # Exit 1 (findings) and 3 (not reproduced) are outcomes; 2 is an error.
    rc=0; "$bin" lab "$@" --json > "$dir/$name.json.new" || rc=$?
    if [ "$rc" -eq 2 ]; then rm -f "$dir/$name.json.new"; echo "$name: failed" >&2; exit 2; fi
    mv "$dir/$name.json.new" "$dir/$name.json"
    echo "$name: tcpdoctor lab $*" >> "$dir/commands.txt.new"
}
only="$*"
: > "$dir/commands.txt.new"
record accept-overflow accept-overflow
record accept-overflow-fix accept-overflow --fix
record accept-overflow-remedies accept-overflow --remedies
record syn-drop syn-drop
record syn-drop-fix syn-drop --fix
record syn-drop-remedies syn-drop --remedies
record port-exhaustion port-exhaustion
record port-exhaustion-fix port-exhaustion --fix
record port-exhaustion-remedies port-exhaustion --remedies
record timewait-collision timewait-collision
record timewait-collision-fix timewait-collision --fix
record timewait-collision-remedies timewait-collision --remedies
record slow-reader slow-reader
record slow-reader-fix slow-reader --fix
record slow-reader-remedies slow-reader --remedies
record stale-ack-race stale-ack-race
record stale-ack-race-fix stale-ack-race --fix
record stale-ack-race-remedies stale-ack-race --remedies
record incast incast --rounds 20
record incast-fix incast --fix --rounds 20
record incast-sweep incast --sweep senders=2,4,8 --rounds 20 --out /tmp/tdoc-fixture-sweep
record incast-remedies incast --remedies --rounds 20
# Keep the commands of fixtures not re-recorded this time.
if [ -f "$dir/commands.txt" ]; then
    cut -d: -f1 "$dir/commands.txt.new" > "$dir/.names"
    grep -v -F -f "$dir/.names" "$dir/commands.txt" >> "$dir/commands.txt.new" || true
    rm -f "$dir/.names"
fi
sort "$dir/commands.txt.new" > "$dir/commands.txt"
rm -f "$dir/commands.txt.new"
