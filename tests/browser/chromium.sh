# Sourced by the browser tests (test_explorer.sh, test_backward_page.sh), after they set $out:
# finds Chromium as $browser, or skips (exit 77) without it, unless MG_REQUIRE_BROWSER=1 (make
# test sets it, after scripts/install-deps installed Debian's chromium), where a missing browser
# fails; empties $out; defines run, which runs headless Chromium with its profile in $out and its
# log on stderr, and selftest PAGE, which opens PAGE#selftest and dumps the DOM after the page's
# scripts ran into $out/dom.html (the log into $out/console.log).
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  if [ "${MG_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "FAIL: chromium is not installed (scripts/install-deps installs it)"
    exit 1
  fi
  echo "chromium is not installed: skipped"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
run() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$out/profile" --enable-logging=stderr --v=0 "$@"
}
selftest() {
  run --virtual-time-budget=5000 --dump-dom "file://$1#selftest" > "$out/dom.html" 2> "$out/console.log" || {
    echo "FAIL: chromium exited with an error"; tail -20 "$out/console.log"; exit 1; }
}
