#include "minigrad/viz/explorer.h"

#include <fmt/format.h>

#include "minigrad/tensor/error.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"

namespace mg::viz {
namespace {

// The page's style and script. The data sits in <script type="application/json" id="data">.
constexpr const char* kStyle = R"CSS(
body{font-family:system-ui,sans-serif;margin:20px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px} .meta{color:#555;font-size:13px;margin-bottom:12px}
#controls{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;z-index:2}
#controls label{margin-right:16px;font-size:14px} #step{width:420px;vertical-align:middle}
#grid{display:grid;gap:10px;margin:14px 0}
.cell{border:2px solid transparent;padding:4px;cursor:pointer;font-size:11px;line-height:1.3}
.cell.selected{border-color:#c0392b} .cell canvas{width:100%;image-rendering:pixelated;display:block}
.rowname{font-weight:bold;font-size:12px;align-self:center;overflow-wrap:anywhere}
#detail{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
#big{border-collapse:collapse;font-size:10px} #big td{width:16px;height:16px;padding:0}
#big th{font-weight:normal;padding:0 2px;color:#444} #big th.col{writing-mode:vertical-rl;transform:rotate(180deg);height:auto}
#big td.masked{background:repeating-linear-gradient(45deg,#ddd,#ddd 3px,#bbb 3px,#bbb 5px)}
#readout{font-family:monospace;font-size:13px;min-height:1.4em;margin:6px 0}
#errors{color:#b00;font-family:monospace;white-space:pre-wrap}
.curves svg{background:#fafafa;border:1px solid #eee}
#graph svg{border:1px solid #eee}
)CSS";

constexpr const char* kScript = R"JS(
'use strict';
const errors = document.getElementById('errors');
window.addEventListener('error', e => { errors.textContent += 'error: ' + e.message + '\n'; });
const D = JSON.parse(document.getElementById('data').textContent);
const R = D.records, L = D.layers;
const state = {rec: R.length - 1, layer: 0, head: 0, mode: 'weights'};
const maxHeads = Math.max(...L.map(l => l.heads));

// colours: weights white -> dark red over [0, 1]; scores blue - white - red over [-m, m]
function mix(a, b, t) { return a.map((x, i) => Math.round(x + (b[i] - x) * t)); }
function colour(v, m) {
  if (v === null) return null;
  if (state.mode !== 'scores') {  // weights, as numbers or as a graph
    const t = Math.max(0, Math.min(1, v));
    return t < 0.5 ? mix([255, 255, 229], [254, 153, 41], t * 2) : mix([254, 153, 41], [128, 0, 38], (t - 0.5) * 2);
  }
  const t = Math.max(-1, Math.min(1, v / (m || 1)));
  return t < 0 ? mix([247, 247, 247], [33, 102, 172], -t) : mix([247, 247, 247], [178, 24, 43], t);
}
function rgb(c) { return c ? 'rgb(' + c.join(',') + ')' : ''; }
function mapOf(rec, l, h) { return (state.mode === 'scores' ? R[rec].scores : R[rec].weights)[l][h]; }
function absmax(m) { let a = 0; for (const r of m) for (const v of r) if (v !== null) a = Math.max(a, Math.abs(v)); return a; }
function scoreOf(rec, l, h) { return R[rec].heads.find(s => s.layer === L[l].name && s.head === h); }
function fmt(v, d) { return v === null || v === undefined ? '-' : v.toFixed(d); }

function drawSmall(canvas, m) {
  const n = m.length, k = m[0].length, ctx = canvas.getContext('2d');
  canvas.width = k, canvas.height = n;
  const img = ctx.createImageData(k, n), a = absmax(m);
  for (let i = 0; i < n; ++i) for (let j = 0; j < k; ++j) {
    const c = colour(m[i][j], a) || [200, 200, 200], o = 4 * (i * k + j);
    img.data[o] = c[0], img.data[o + 1] = c[1], img.data[o + 2] = c[2], img.data[o + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

function buildGrid() {
  const g = document.getElementById('grid');
  g.style.gridTemplateColumns = '110px repeat(' + maxHeads + ', minmax(90px, 1fr))';
  L.forEach((layer, l) => {
    const name = document.createElement('div');
    name.className = 'rowname', name.textContent = layer.name;
    g.appendChild(name);
    for (let h = 0; h < maxHeads; ++h) {
      const cell = document.createElement('div');
      if (h < layer.heads) {
        cell.className = 'cell', cell.dataset.layer = l, cell.dataset.head = h;
        cell.innerHTML = '<canvas></canvas><div class="cap"></div>';
        cell.addEventListener('click', () => { state.layer = l, state.head = h; render(); });
      }
      g.appendChild(cell);
    }
  });
}

function renderGrid() {
  for (const cell of document.querySelectorAll('.cell')) {
    const l = +cell.dataset.layer, h = +cell.dataset.head, s = scoreOf(state.rec, l, h);
    drawSmall(cell.querySelector('canvas'), mapOf(state.rec, l, h));
    // a cross-attention head has no scores (null): its label says why
    cell.querySelector('.cap').textContent = 'head ' + h + ': ' + s.label + (s.previous_token === null ? '' : ' (prev ' +
      fmt(s.previous_token, 2) + ', first ' + fmt(s.first_token, 2) + ', ind ' + fmt(s.induction, 2) +
      (s.copying === null ? '' : ', copy ' + fmt(s.copying, 2)) + ')');
    cell.classList.toggle('selected', l === state.layer && h === state.head);
  }
}

function renderBig() {
  const l = state.layer, h = state.head, m = mapOf(state.rec, l, h), a = absmax(m);
  const qt = L[l].query_tokens, kt = L[l].key_tokens, s = scoreOf(state.rec, l, h);
  document.getElementById('bigtitle').textContent = L[l].name + ' head ' + h + ' at step ' + R[state.rec].step + ': ' +
    ({weights: 'weights after softmax', scores: 'scores before softmax', graph: 'weights as a graph'})[state.mode] +
    ' (' + s.label + ')';
  let html = '<tr><th></th>' + m[0].map((_, j) => '<th class="col">' + esc(kt[j]) + '</th>').join('') + '</tr>';
  m.forEach((row, i) => {
    html += '<tr><th>' + esc(qt[i]) + '</th>' + row.map((v, j) =>
      v === null ? '<td class="masked" data-q="' + i + '" data-k="' + j + '" data-v="masked"></td>'
                 : '<td style="background:' + rgb(colour(v, a)) + '" data-q="' + i + '" data-k="' + j + '" data-v="' + v + '"></td>').join('') + '</tr>';
  });
  const t = document.getElementById('big'), g = document.getElementById('graph');
  t.innerHTML = html;
  t.dataset.signature = m.map(r => r.map(v => v === null ? 'x' : v).join(',')).join(';');
  t.style.display = state.mode === 'graph' ? 'none' : '';
  g.innerHTML = state.mode === 'graph' ? graphOf(m, qt, kt) : '';
}

// The weights as a graph: the keys on the lower line, the queries on the upper one, and a straight
// edge from key j to query i as wide as the weight (weights under 0.05 left out). Two lines of nodes
// (viz::attention_graph_svg draws one line with arcs) fit cross-attention as well as self-attention.
function graphOf(m, qt, kt) {
  const n = Math.max(qt.length, kt.length), sp = Math.max(18, Math.min(56, Math.floor(900 / Math.max(n, 1))));
  const w = 60 + n * sp, top = 40, bottom = 240, x = i => 40 + i * sp;
  let svg = '<svg width="' + w + '" height="' + (bottom + 60) + '" font-size="10">', edges = 0;
  svg += '<text x="4" y="' + (top - 22) + '" font-size="11" fill="#444">queries (each reads the keys below it)</text>';
  m.forEach((row, i) => row.forEach((v, j) => {
    if (v === null || v < 0.05) return;
    ++edges;
    svg += '<line x1="' + x(j) + '" y1="' + bottom + '" x2="' + x(i) + '" y2="' + top + '" stroke="#b2182b" stroke-width="' +
      (0.5 + 4.5 * v).toFixed(2) + '" stroke-opacity="' + (0.2 + 0.8 * v).toFixed(2) + '"><title>' + esc(qt[i]) + ' reads ' +
      esc(kt[j]) + ': ' + v.toFixed(3) + '</title></line>';
  }));
  qt.forEach((q, i) => svg += '<circle cx="' + x(i) + '" cy="' + top + '" r="4" fill="#444"/><text x="' + x(i) + '" y="' +
    (top - 8) + '" text-anchor="middle">' + esc(q) + '</text>');
  kt.forEach((k, j) => svg += '<circle cx="' + x(j) + '" cy="' + bottom + '" r="4" fill="#444"/><text x="' + x(j) + '" y="' +
    (bottom + 16) + '" text-anchor="middle">' + esc(k) + '</text>');
  svg += '<text x="4" y="' + (bottom + 40) + '" font-size="11" fill="#444">keys</text>';
  return svg.replace('<svg ', '<svg data-edges="' + edges + '" ') + '</svg>';
}
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c])); }

// small SVG line chart: series [{name, colour, ys}] over the recorded steps, a marker at the current one
function chart(title, series, height) {
  const w = 460, h = height || 150, left = 46, right = 10, top = 20, bottom = 22, steps = R.map(r => r.step);
  const ys = series.flatMap(s => s.ys.filter(v => v !== null && v !== undefined));
  if (!ys.length) return '';
  let lo = Math.min(...ys), hi = Math.max(...ys);
  if (hi === lo) hi = lo + 1;
  const x = s => left + (w - left - right) * (steps.length > 1 ? (s - steps[0]) / (steps[steps.length - 1] - steps[0]) : 0);
  const y = v => top + (h - top - bottom) * (1 - (v - lo) / (hi - lo));
  let svg = '<svg width="' + w + '" height="' + h + '"><text x="4" y="13" font-size="12" font-weight="bold">' + esc(title) + '</text>';
  svg += '<text x="' + (left - 4) + '" y="' + (top + 8) + '" font-size="10" text-anchor="end">' + hi.toFixed(2) + '</text>';
  svg += '<text x="' + (left - 4) + '" y="' + (h - bottom) + '" font-size="10" text-anchor="end">' + lo.toFixed(2) + '</text>';
  svg += '<text x="' + left + '" y="' + (h - 6) + '" font-size="10">step ' + steps[0] + '</text>';
  svg += '<text x="' + (w - right) + '" y="' + (h - 6) + '" font-size="10" text-anchor="end">' + steps[steps.length - 1] + '</text>';
  series.forEach((s, k) => {
    const pts = s.ys.map((v, i) => v === null || v === undefined ? null : x(steps[i]).toFixed(1) + ',' + y(v).toFixed(1)).filter(p => p);
    svg += '<polyline fill="none" stroke="' + s.colour + '" stroke-width="1.5" points="' + pts.join(' ') + '"/>';
    svg += '<text x="' + (left + 6 + 110 * k) + '" y="' + (top + 10) + '" font-size="10" fill="' + s.colour + '">' + esc(s.name) + '</text>';
  });
  const cx = x(steps[state.rec]);
  svg += '<line x1="' + cx + '" x2="' + cx + '" y1="' + top + '" y2="' + (h - bottom) + '" stroke="#888" stroke-dasharray="3,3"/>';
  return svg + '</svg>';
}

function renderCurves() {
  const l = state.layer, h = state.head, pick = k => R.map((r, i) => { const s = scoreOf(i, l, h); return s ? s[k] : null; });
  let html = chart('training loss', [{name: 'loss', colour: '#1f77b4', ys: R.map(r => r.loss)}]);
  if (R.some(r => r.icl)) html += chart('in-context learning score (late - early loss)',
                                        [{name: 'ICL score', colour: '#2ca02c', ys: R.map(r => r.icl ? r.icl.score : null)}]);
  html += chart(L[l].name + ' head ' + h + ': scores', [
    {name: 'previous', colour: '#1f77b4', ys: pick('previous_token')}, {name: 'first', colour: '#ff7f0e', ys: pick('first_token')},
    {name: 'induction', colour: '#d62728', ys: pick('induction')}]);
  document.getElementById('curves').innerHTML = html;
}

function render() {
  const r = R[state.rec];
  document.getElementById('steplabel').textContent = 'step ' + r.step + (r.loss === null ? '' : ', loss ' + fmt(r.loss, 4)) +
    (r.icl ? ', ICL score ' + fmt(r.icl.score, 3) : '');
  renderGrid(), renderBig(), renderCurves();
}

const slider = document.getElementById('step');
slider.max = R.length - 1, slider.value = state.rec;
slider.addEventListener('input', () => { state.rec = +slider.value; render(); });
for (const b of document.querySelectorAll('input[name=mode]'))
  b.addEventListener('change', () => { state.mode = b.value; render(); });
document.getElementById('big').addEventListener('mousemove', e => {
  const td = e.target.closest('td');
  if (!td) return;
  const l = state.layer, i = +td.dataset.q, j = +td.dataset.k;
  document.getElementById('readout').textContent = 'query ' + i + ' "' + L[l].query_tokens[i] + '" -> key ' + j + ' "' +
    L[l].key_tokens[j] + '": ' + (state.mode === 'scores' ? 'score ' : 'weight ') + td.dataset.v;
});
buildGrid();
render();

// explorer.html#selftest: move the slider and the mode as a user would, and write down what changed.
if (location.hash === '#selftest') {
  const result = {cells: document.querySelectorAll('.cell').length, heads: L.reduce((a, l) => a + l.heads, 0), records: R.length};
  slider.value = 0, slider.dispatchEvent(new Event('input'));
  const first = document.getElementById('big').dataset.signature, firstLabel = document.getElementById('steplabel').textContent;
  slider.value = R.length - 1, slider.dispatchEvent(new Event('input'));
  const last = document.getElementById('big').dataset.signature;
  result.slider_changes_map = first !== last;
  result.slider_changes_label = firstLabel !== document.getElementById('steplabel').textContent;
  const scores = document.querySelector('input[name=mode][value=scores]');
  scores.checked = true, scores.dispatchEvent(new Event('change'));
  result.mode_changes_map = document.getElementById('big').dataset.signature !== last;
  document.querySelectorAll('.cell')[result.cells - 1].click();
  result.click_selects = document.querySelectorAll('.cell.selected').length === 1 && state.layer === L.length - 1;
  result.big_cells = document.querySelectorAll('#big td').length;
  // the graph: one edge per weight of at least 0.05 in the selected head's map, and the table hidden
  const graph = document.querySelector('input[name=mode][value=graph]');
  graph.checked = true, graph.dispatchEvent(new Event('change'));
  const wm = R[state.rec].weights[state.layer][state.head], svg = document.querySelector('#graph svg');
  const expected = wm.flat().filter(v => v !== null && v >= 0.05).length;
  result.graph_edges_match = !!svg && +svg.dataset.edges === expected && svg.querySelectorAll('line').length === expected &&
    expected > 0;
  result.graph_hides_table = document.getElementById('big').style.display === 'none';
  result.errors = errors.textContent;
  document.getElementById('selftest').textContent = JSON.stringify(result);
}
)JS";

}  // namespace

std::string explorer_html(const std::string& title, const std::string& telemetry_json) {
  MG_CHECK(!telemetry_json.empty() && telemetry_json.front() == '{' &&
               telemetry_json.find("\"minigrad-telemetry-1\"") != std::string::npos,
           ValueError,
           "explorer_html: the text is not minigrad telemetry (format \"minigrad-telemetry-1\"), it starts with \"{}\"",
           telemetry_json.substr(0, 40));
  const std::string data = json_in_script(telemetry_json);  // (viz/svg.h)
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{1}</style></head>\n<body>\n"
      "<h1>{0}</h1>\n<div class=\"meta\">Attention of every head, recorded during training (inspect::Telemetry). Click a head; "
      "move the slider over the training steps.</div>\n"
      "<div id=\"controls\"><label><input type=\"range\" id=\"step\" min=\"0\" step=\"1\"> <span id=\"steplabel\"></span></label>"
      "<label><input type=\"radio\" name=\"mode\" value=\"weights\" checked> weights (after softmax)</label>"
      "<label><input type=\"radio\" name=\"mode\" value=\"scores\"> scores (before softmax)</label>"
      "<label><input type=\"radio\" name=\"mode\" value=\"graph\"> graph (weights as edges)</label></div>\n"
      "<div id=\"grid\"></div>\n<div id=\"detail\"><div><div id=\"bigtitle\"></div><div id=\"readout\"></div>"
      "<table id=\"big\"></table><div id=\"graph\"></div></div><div id=\"curves\" class=\"curves\"></div></div>\n"
      "<div id=\"errors\"></div><pre id=\"selftest\"></pre>\n"
      "<script type=\"application/json\" id=\"data\">{2}</script>\n<script>{3}</script>\n</body></html>\n",
      escape(title), kStyle, data, kScript);
}

std::string write_explorer(const std::string& path, const std::string& title, const std::string& telemetry_json) {
  write_file(path, explorer_html(title, telemetry_json));
  return path;
}

}  // namespace mg::viz
