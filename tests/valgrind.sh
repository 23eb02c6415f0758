#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only
# Run the given unit tests and a few tool runs under valgrind memcheck:
# zero errors and zero leaks (definite, indirect, possible) required.
#
#   tests/valgrind.sh BUILD_DIR UNIT_BIN...
#
# Criterion runs every test in a worker process that it forks and then
# re-executes, and it ignores how a worker exits once its test has reported.
# So valgrind must follow exec (--trace-children=yes), and the verdict comes
# from every process's own log ("ERROR SUMMARY: 0 errors"), not from the
# exit status of the runner alone. A log without a summary (a process that
# died before valgrind could finish) counts as a failure too. The programs a
# test runs that are not btk's (system()'s shell and what it runs, mkfs.btrfs,
# the reference btrfs) are not traced: they are not under test, and memcheck
# on them cost a quarter of this script's time. A forked child is silent
# until it execs (every fork in the unit tests execs at once): otherwise the
# child that execs an untraced program would leave a log without a summary.
set -uo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR UNIT_BIN..." >&2
    exit 2
fi
build=$(cd "$1" && pwd) || exit 2
shift
top=$(cd "$(dirname "$0")/.." && pwd)

if ! command -v valgrind >/dev/null; then
    echo "valgrind.sh: valgrind is not installed (scripts/install-deps installs it)" >&2
    exit 1
fi

logroot=$build/valgrind
rm -rf "$logroot"
mkdir -p "$logroot"

jobs=$(nproc 2>/dev/null || echo 2)

# run NAME CMD... : run CMD under valgrind in the background (at most $jobs at
# once), logs in $logroot/NAME/, verdict in $logroot/NAME/verdict.
run() {
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n
    done
    run_one "$@" &
}

run_one() {
    local name=$1 dir=$logroot/$1 status log bad=0 start=$SECONDS
    shift
    mkdir -p "$dir"
    valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
        --trace-children=yes --child-silent-after-fork=yes \
        --trace-children-skip='*/sh,*/bash,*/dash,*/mkfs.btrfs,*/btrfs,*/btrfstune,*/btrfs-image' \
        --num-callers=40 --log-file="$dir/%p.log" \
        "$@" >"$dir/stdout" 2>"$dir/stderr" </dev/null
    status=$?
    for log in "$dir"/*.log; do
        [ -e "$log" ] || continue
        if ! grep -q 'ERROR SUMMARY: ' "$log"; then
            echo "   $(basename "$log"): no error summary (process killed?)"
            bad=1
        elif ! grep -q 'ERROR SUMMARY: 0 errors' "$log"; then
            bad=1
        fi
    done
    # a unit binary's tests run in workers it execs: their logs must be there
    if [[ $name == test_* ]] && [ "$(ls "$dir" | grep -c '\.log$')" -lt 2 ]; then
        echo "   no log of a test worker: valgrind did not follow the workers"
        bad=1
    fi
    if [ "$status" -ne 0 ] || [ "$bad" -ne 0 ]; then
        {
            echo "FAIL $name (exit status $status)"
            for log in "$dir"/*.log; do
                [ -e "$log" ] && grep -q "ERROR SUMMARY: 0 errors" "$log" && continue
                echo "---- $log"
                cat "$log"
            done
            echo "---- stderr"
            tail -n 40 "$dir/stderr"
        } >"$dir/report"
        echo fail >"$dir/verdict"
        cat "$dir/report"
    else
        echo ok >"$dir/verdict"
        echo "ok   $name ($((SECONDS - start)) s)"
    fi
}

for bin in "$@"; do
    run "$(basename "$bin")" "$bin" --jobs 1 --short-filename
done

inspect=$build/btk-inspect
image=$build/sample.img
xzimage=$top/tests/images/sample.img.xz
if [ -e "$xzimage" ] && { [ ! -e "$image" ] || [ "$xzimage" -nt "$image" ]; }; then
    xz -dc "$xzimage" >"$image.tmp" && mv "$image.tmp" "$image"
fi
if [ ! -x "$inspect" ]; then
    echo "skip btk-inspect runs: $inspect is not built"
elif [ ! -e "$image" ]; then
    echo "skip btk-inspect runs: no $image (tests/images/sample.img.xz missing)"
else
    run inspect-super "$inspect" super "$image"
    run inspect-super-json "$inspect" super --format json "$image"
    run inspect-tree "$inspect" tree "$image"
    run inspect-tree-jsonl "$inspect" tree --format jsonl "$image"
    run inspect-map "$inspect" map "$image"
    run inspect-usage "$inspect" usage "$image"
    run inspect-usage-json "$inspect" usage --format json "$image"
    [ -x "$build/btk-check" ] && run check "$build/btk-check" "$image"
    [ -x "$build/btk-check" ] && run check-json "$build/btk-check" --format json "$image"
    [ -x "$build/btk-convert" ] && run convert-dry-run "$build/btk-convert" profile --metadata single --dry-run "$image"
    if [ -x "$build/btk-image" ]; then
        # the restore reads an image made beforehand (without valgrind), so both runs go in parallel
        "$build/btk-image" dump -q "$image" "$logroot/sample.btkimg" &&
            run image-restore "$build/btk-image" restore -q "$logroot/sample.btkimg" "$logroot/restored.img"
        run image-dump "$build/btk-image" dump -q -j 2 "$image" "$logroot/sample-vg.btkimg"
        run image-info "$build/btk-image" info --format json "$logroot/sample.btkimg"
    fi
fi
wait

runs=$(find "$logroot" -name verdict | wc -l)
failed=$(grep -l fail "$logroot"/*/verdict 2>/dev/null | wc -l)
if [ "$failed" -ne 0 ]; then
    echo "valgrind: $failed of $runs runs failed (logs in $logroot)"
    exit 1
fi
echo "valgrind: $runs runs, no errors, no leaks"
