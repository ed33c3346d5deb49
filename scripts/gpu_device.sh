#!/usr/bin/env bash
# One call of a lent GPU machine (the `device` tool's `run`): bring one part of the bundle, and on
# the last part run scripts/gpu_check.sh and put what it wrote where the tool brings files back
# ($OUT: at most 8 files), so nothing it measured is left behind.
#
#   here:   ../shared/tools/gpu-bundle scenedetect-headless==0.7.2 scikit-video==1.1.11 py-spy==0.4.3 pillow
#           (makes .gpu/p1 .. .gpu/pN)
#   there:  one call a part, back to back (a machine idle for 30 s is given back), each carrying
#           its part (carry: [".gpu/pK"]):
#             bash scripts/gpu_device.sh .gpu/p1
#             bash scripts/gpu_device.sh .gpu/p2
#             bash scripts/gpu_device.sh .gpu/p3        (the last: runs the check, about 8 minutes;
#                                                        give that call timeout_s 560)
#
# Until every part is there a call only stores its part and says how many are there. The last
# runs gpu_check.sh into a folder outside $OUT and, every BRING_EVERY_S seconds while it runs and
# once at its end, copies summary.json and steps.tsv to $OUT and packs the whole folder (every
# step's log and JSON) into $OUT/gpu-check.tar.gz: a call the device tool stops at its limit
# (which can be shorter than the timeout_s asked, when less device time is left) still brings
# back what the steps before had measured. Exit status: gpu_check.sh's (0: no step failed or ran
# out of time), 2 when the bundle could not be set up, 3 when part K finds fewer than K parts
# there (the machine was given back between calls: start again from p1). GPU_ENV (default
# /tmp/gpu-env.sh, what the bundle's last go.sh writes), OUT and GPU_CHECK_BUDGET_S (gpu_check.sh's budget, default 470 s:
# lower it when the device tool has less time left) may be set.
set -uo pipefail

PART=${1:?usage: bash scripts/gpu_device.sh PART_FOLDER (e.g. .gpu/p1)}
ENV_FILE=${GPU_ENV:-/tmp/gpu-env.sh}
BACK=${OUT:?OUT is not set: this runs on the GPU machine through the device tool}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${GPU_CHECK_DIR:-/tmp/gpu-check}

[ -f "$PART/go.sh" ] || { echo "gpu_device: $PART/go.sh not found (carry the part folder)"; exit 2; }
said=$(bash "$PART/go.sh") || { echo "$said"; echo "gpu_device: $PART/go.sh failed"; exit 2; }
echo "$said"
if [ ! -f "$ENV_FILE" ]; then
    # part K of N with fewer than K here: the machine holding the earlier parts was given back
    # (idle 30 s) and this one is bare; a part is not worth storing there alone
    number=$(basename "$PART" | sed -n 's/^p\([0-9][0-9]*\)$/\1/p')
    have=$(printf '%s\n' "$said" | sed -n 's/.* \([0-9][0-9]*\) of [0-9][0-9]* parts here.*/\1/p' | tail -1)
    if [ -n "$number" ] && [ -n "$have" ] && [ "$have" -lt "$number" ]; then
        echo "gpu_device: only $have part(s) here for part $number: the machine that held the earlier" \
            "parts was given back; bring every part again from p1, back to back"
        exit 3
    fi
    echo "gpu_device: part stored; bring the next one now (the machine is given back after 30 s idle)"
    exit 0
fi
# shellcheck disable=SC1090  # the bundle's environment: PYTHONPATH, LD_LIBRARY_PATH, cd to the project
. "$ENV_FILE"
cd "$ROOT" || exit 2
BRING_EVERY_S=${BRING_EVERY_S:-15}

bring_back() {  # what the check has written so far, into $OUT (the archive replaced whole)
    mkdir -p "$BACK"
    for f in summary.json steps.tsv; do
        [ -f "$WORK/$f" ] && cp "$WORK/$f" "$BACK/.$f.part" && mv "$BACK/.$f.part" "$BACK/$f"
    done
    # a step's log grows while it is read: GNU tar then says "file changed as we read it" and
    # exits 1 with the archive whole (up to what it read); only 2 and above are failures
    if [ -d "$WORK" ]; then
        tar --warning=no-file-changed -C "$(dirname "$WORK")" -czf "$BACK/.gpu-check.part" \
            "$(basename "$WORK")" 2>/dev/null
        [ $? -le 1 ] && mv "$BACK/.gpu-check.part" "$BACK/gpu-check.tar.gz"
    fi
    rm -f "$BACK"/.*.part
}

bash scripts/gpu_check.sh "$WORK" &
check=$!
waited=0
while kill -0 "$check" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if ((waited % BRING_EVERY_S == 0)) && kill -0 "$check" 2>/dev/null; then bring_back; fi
done
wait "$check"
rc=$?
bring_back
echo "gpu_device: brought back summary.json, steps.tsv and gpu-check.tar.gz (every log and JSON)"
exit "$rc"
