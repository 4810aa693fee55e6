#!/bin/sh
# The attention explorer in a real browser: headless Chromium opens explorer.html#selftest, whose
# own script moves the step slider, switches to scores, clicks a head and writes what it saw into
# <pre id="selftest">; Chromium dumps the DOM after the scripts ran. Checked here: no script
# errors (none caught by the page, no console message), one grid cell per head, the slider and the
# mode change the large map, a click selects, the graph mode draws one edge per weight >= 0.05. Then a screenshot for people to look at.
#   test_explorer.sh FIXTURE OUTDIR
# Without Chromium: skipped (exit 77), unless MG_REQUIRE_BROWSER=1 (make test sets it, after
# scripts/install-deps installed Debian's chromium).
set -eu
fixture=$1
out=$2
. "$(dirname "$0")/chromium.sh"  # $browser (or skip), an empty $out, run, selftest
"$fixture" "$out/explorer.html"
selftest "$out/explorer.html"
result=$(sed -n 's:.*<pre id="selftest">\(.*\)</pre>.*:\1:p' "$out/dom.html")
echo "selftest: $result"
fail=0
expect() {  # expect KEY VALUE: "KEY":VALUE appears in the result
  case "$result" in
    *"\"$1\":$2"*) ;;
    *) echo "FAIL: expected \"$1\":$2"; fail=1 ;;
  esac
}
[ -n "$result" ] || { echo "FAIL: the page wrote no self-test result (did its script run?)"; exit 1; }
expect cells 3       # layer0: 2 heads, layer1: 1 head
expect heads 3
expect records 4     # steps 1, 3, 6, 9
expect slider_changes_map true
expect slider_changes_label true
expect mode_changes_map true
expect click_selects true
expect big_cells 100 # the selected head's 10 x 10 map
expect graph_edges_match true  # graph mode: one edge per weight >= 0.05
expect graph_hides_table true
expect errors '""'
if grep -n 'CONSOLE(' "$out/console.log"; then
  echo "FAIL: the page wrote to the console (above)"
  fail=1
fi
run --hide-scrollbars --window-size=1280,1000 --screenshot="$out/explorer.png" "file://$out/explorer.html" > /dev/null 2>&1 || true
[ -s "$out/explorer.png" ] || { echo "FAIL: no screenshot"; fail=1; }
[ $fail -eq 0 ] && echo "explorer passed in $("$browser" --version 2>/dev/null | head -1); screenshot $out/explorer.png"
exit $fail
