#!/bin/sh
# The backward-pass page in a real browser: headless Chromium opens backward.html#selftest, whose
# own script presses Next through every node of examples/backward_walk's recording 2 (hand_attention's
# head), reading the node it outlines and the gradient's numbers it shows, then presses Back and
# clicks a parameter to count the paths that reached it; Chromium dumps the DOM after the scripts
# ran. The fixture then checks every step against the recording: the node the engine ran, every
# number, the finite-difference verdicts, the path count. No script error, no console message.
# Then a screenshot for people to look at.
#   test_backward_page.sh FIXTURE OUTDIR
# Without Chromium: skipped (exit 77), unless MG_REQUIRE_BROWSER=1 (make test sets it).
set -eu
fixture=$1
out=$2
. "$(dirname "$0")/chromium.sh"  # $browser (or skip), an empty $out, run, selftest
"$fixture" write "$out/backward.html"
selftest "$out/backward.html"
sed -n 's:.*<pre id="selftest">\(.*\)</pre>.*:\1:p' "$out/dom.html" | sed 's/&quot;/"/g; s/&amp;/\&/g; s/&lt;/</g; s/&gt;/>/g' > "$out/selftest.json"
[ -s "$out/selftest.json" ] || { echo "FAIL: the page wrote no self-test result (did its script run?)"; exit 1; }
fail=0
"$fixture" check "$out/backward.html.json" "$out/selftest.json" || fail=1
if grep -n 'CONSOLE(' "$out/console.log"; then
  echo "FAIL: the page wrote to the console (above)"
  fail=1
fi
run --hide-scrollbars --window-size=1400,1000 --screenshot="$out/backward.png" "file://$out/backward.html" > /dev/null 2>&1 || true
[ -s "$out/backward.png" ] || { echo "FAIL: no screenshot"; fail=1; }
[ $fail -eq 0 ] && echo "backward page passed in $("$browser" --version 2>/dev/null | head -1); screenshot $out/backward.png"
exit $fail
