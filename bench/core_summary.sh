#!/usr/bin/env bash
# Summarises the criterion results of `cargo bench -p rustbloom-core --bench core` (target/criterion/*/*/*/new) as a
# markdown table of ns per item: the slope estimate (criterion's headline figure), per item for
# batch groups. Needs only awk; run after the bench.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/target/criterion"
[[ -d "$DIR" ]] || { echo "core_summary.sh: no $DIR; run cargo bench -p rustbloom-core --bench core first" >&2; exit 1; }

echo "| group | operation | filter | ns/item | 95% CI ns/item | items/s |"
echo "|---|---|---|---|---|---|"
for group in single batch100_loop batch100; do
    [[ -d "$DIR/$group" ]] || continue
    per=1; [[ "$group" == batch100* ]] && per=100
    for op in contains_member contains_nonmember insert_member insert_new; do
        for filter in 10M 100M; do
            f="$DIR/$group/$op/$filter/new/estimates.json"
            [[ -f "$f" ]] || continue
            # {"mean":{"confidence_interval":{"confidence_level":..,"lower_bound":..,"upper_bound":..},"point_estimate":..,...},...,"slope":{...}}
            tr -d '\n ' <"$f" | awk -v per="$per" -v g="$group" -v o="$op" -v fl="$filter" '{
                key = ($0 ~ /"slope":\{/) ? "slope" : "mean"
                s = substr($0, index($0, "\"" key "\":{"))
                match(s, /"lower_bound":[0-9.eE+-]+/); lo = substr(s, RSTART + 14, RLENGTH - 14)
                match(s, /"upper_bound":[0-9.eE+-]+/); hi = substr(s, RSTART + 14, RLENGTH - 14)
                match(s, /"point_estimate":[0-9.eE+-]+/); pt = substr(s, RSTART + 17, RLENGTH - 17)
                printf "| %s | %s | %s | %.1f | %.1f – %.1f | %.1fM |\n", g, o, fl, pt / per, lo / per, hi / per, 1e3 / (pt / per)
            }'
        done
    done
done
