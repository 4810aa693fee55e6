#include "minigrad/viz/backward_page.h"

#include <fmt/format.h>

#include "minigrad/tensor/error.h"
#include "minigrad/viz/report.h"
#include "minigrad/viz/svg.h"

namespace mg::viz {
namespace {

constexpr const char* kStyle = R"CSS(
body{font-family:system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:21px;margin:0 0 4px} h3{font-size:14px;margin:14px 0 4px;color:#444}
.meta{color:#555;font-size:13px;margin-bottom:8px;max-width:1100px}
#controls{position:sticky;top:0;background:#fff;padding:6px 0;border-bottom:1px solid #ddd;z-index:2;font-size:14px}
#controls button{font-size:14px;margin-right:4px} #slider{width:360px;vertical-align:middle}
#main{display:flex;gap:18px;align-items:flex-start}
#graphbox{flex:0 0 auto;max-width:52vw;max-height:84vh;overflow:auto;border:1px solid #eee}
#panel{flex:1 1 auto;min-width:380px;max-height:84vh;overflow:auto;font-size:13px}
g.node rect{fill:#fff;stroke:#888;stroke-width:1} g.node text{font-size:11px;pointer-events:none}
g.node{cursor:pointer} g.node.leaf rect{fill:#eef3fb} g.node.done rect{fill:#e6f2e6}
g.node.leaf.done rect{fill:#cfe3cf} g.node.waiting rect{fill:#fff4dc;stroke:#d9a13b}
g.node.current rect{stroke:#c0392b;stroke-width:3} g.node.picked rect{stroke:#1f5fbf;stroke-width:3;stroke-dasharray:4 2}
path.edge{fill:none;stroke:#ccc;stroke-width:1.2} path.edge.quiet{stroke-dasharray:3 3}
path.edge.sent{stroke:#8a8a8a} path.edge.in{stroke:#1f5fbf;stroke-width:2.5} path.edge.out{stroke:#c0392b;stroke-width:2.5}
path.edge.onpath{stroke:#1f5fbf;stroke-width:2;stroke-dasharray:6 3}
text.elabel{font-size:10px;fill:#555} text.elabel.out{fill:#c0392b} text.elabel.in{fill:#1f5fbf}
#op{font-size:16px} #rule{background:#f6f6f6;padding:6px;white-space:pre-wrap;margin:4px 0}
table.t{border-collapse:collapse;margin:4px 0;font-family:monospace;font-size:11px}
table.t td{border:1px solid #eee;padding:1px 4px;text-align:right}
.cap{color:#666;font-size:11px} .contrib{border-left:3px solid #1f5fbf;padding-left:6px;margin:6px 0}
.send{border-left:3px solid #c0392b;padding-left:6px;margin:6px 0} .ok{color:#1a7f37} .bad{color:#b00}
#errors{color:#b00;font-family:monospace;white-space:pre-wrap}
canvas.heat{image-rendering:pixelated;border:1px solid #ddd}
)CSS";

constexpr const char* kScript = R"JS(
'use strict';
const errors = document.getElementById('errors');
window.addEventListener('error', e => { errors.textContent += 'error: ' + e.message + '\n'; });
const D = JSON.parse(document.getElementById('data').textContent);
const N = D.nodes;
const state = {walk: 0, step: 0, picked: null, timer: null};
const $ = id => document.getElementById(id);
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };

// 8 significant digits, as the page shows every number (the cell's title holds the whole double)
function num(v) { return typeof v === 'string' ? v : String(Number(v.toPrecision(8))); }
function val(v) { return typeof v === 'string' ? (v === 'nan' ? NaN : v === 'inf' ? Infinity : -Infinity) : v; }
function shape(s) { return '(' + s.join(', ') + (s.length === 1 ? ',' : '') + ')'; }
function name(id) {
  const n = N[id];
  if (n.op === 'leaf') return n.label;
  return n.label ? n.label + ' = ' + n.op : n.op;
}

// ---- the graph of one walk: the nodes it ran or sent to, and one edge per input --------------
function graphOf(w) {
  const steps = D.walks[w].steps, ids = [], at = new Map(), edges = [];
  const add = id => { if (!at.has(id)) { at.set(id, ids.length); ids.push(id); } };
  steps.forEach(s => { add(s.node); s.sends.forEach(r => add(r.to)); });
  steps.forEach((s, k) => {
    const sent = new Set();
    s.sends.forEach(r => { edges.push({from: s.node, to: r.to, input: r.input, send: r, step: k}); sent.add(r.input); });
    (N[s.node].inputs || []).forEach((inp, i) => {
      if (inp.from >= 0 && !sent.has(i) && at.has(inp.from)) edges.push({from: s.node, to: inp.from, input: i, send: null, step: k});
    });
  });
  // ranks: longest path from a root (the steps are in topological order); the leaves at the bottom
  const rank = new Map(ids.map(id => [id, 0]));
  edges.forEach(e => rank.set(e.to, Math.max(rank.get(e.to), rank.get(e.from) + 1)));
  let bottom = 0;
  rank.forEach(r => { bottom = Math.max(bottom, r); });
  ids.forEach(id => { if (N[id].op === 'leaf') rank.set(id, bottom); });
  const layers = [];
  ids.forEach(id => { const r = rank.get(id); (layers[r] = layers[r] || []).push(id); });
  for (let r = 0; r < layers.length; ++r) layers[r] = layers[r] || [];
  // order within a layer: means of the neighbours' positions, swept down and up a few times
  const pos = new Map();
  const place = () => layers.forEach(l => l.forEach((id, i) => pos.set(id, i)));
  place();
  const up = new Map(ids.map(id => [id, []])), down = new Map(ids.map(id => [id, []]));
  edges.forEach(e => { down.get(e.from).push(e.to); up.get(e.to).push(e.from); });
  for (let sweep = 0; sweep < 6; ++sweep) {
    const nb = sweep % 2 === 0 ? up : down;
    const order = sweep % 2 === 0 ? layers.keys() : [...layers.keys()].reverse();
    for (const r of order) {
      const key = id => { const n = nb.get(id); return n.length ? n.reduce((a, m) => a + pos.get(m), 0) / n.length : pos.get(id); };
      layers[r].sort((a, b) => key(a) - key(b));
      layers[r].forEach((id, i) => pos.set(id, i));
    }
  }
  const BW = 132, BH = 34, GX = 14, GY = 58, widest = Math.max(...layers.map(l => l.length));
  const xy = new Map();
  layers.forEach((l, r) => {
    const off = (widest - l.length) * (BW + GX) / 2;
    l.forEach((id, i) => xy.set(id, {x: 10 + off + i * (BW + GX), y: 10 + r * (BH + GY)}));
  });
  return {steps, ids, edges, xy, BW, BH, width: 20 + widest * (BW + GX), height: 20 + layers.length * (BH + GY)};
}

let G = null;
const SVG = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) { const e = document.createElementNS(SVG, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; }

function drawGraph() {
  G = graphOf(state.walk);
  const svg = svgEl('svg', {width: G.width, height: G.height});
  const defs = svgEl('defs', {});
  const marker = svgEl('marker', {id: 'arrow', viewBox: '0 0 8 8', refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: 'auto'});
  marker.appendChild(svgEl('path', {d: 'M0,0 L8,4 L0,8 z', fill: '#888'}));
  defs.appendChild(marker), svg.appendChild(defs);
  G.edges.forEach((e, k) => {
    const a = G.xy.get(e.from), b = G.xy.get(e.to);
    const x1 = a.x + G.BW / 2, y1 = a.y + G.BH, x2 = b.x + G.BW / 2, y2 = b.y, my = (y1 + y2) / 2;
    const p = svgEl('path', {d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, class: 'edge' + (e.send ? '' : ' quiet'),
                             'marker-end': 'url(#arrow)', 'data-edge': k});
    svg.appendChild(p);
    if (e.send) {
      const t = svgEl('text', {x: (x1 + x2) / 2 + 3, y: my - 2, class: 'elabel', 'data-edge': k});
      svg.appendChild(t);
    }
  });
  G.ids.forEach(id => {
    const {x, y} = G.xy.get(id), n = N[id];
    const g = svgEl('g', {class: 'node' + (n.op === 'leaf' ? ' leaf' : ''), 'data-node': id, transform: `translate(${x},${y})`});
    g.appendChild(svgEl('rect', {width: G.BW, height: G.BH, rx: n.op === 'leaf' ? 2 : 12}));
    const t1 = svgEl('text', {x: G.BW / 2, y: 14, 'text-anchor': 'middle'});
    t1.textContent = name(id).slice(0, 22);
    const t2 = svgEl('text', {x: G.BW / 2, y: 27, 'text-anchor': 'middle', fill: '#666'});
    t2.textContent = shape(n.out_shape);
    g.appendChild(t1), g.appendChild(t2);
    const title = svgEl('title', {});
    title.textContent = name(id) + ' ' + shape(n.out_shape);
    g.appendChild(title);
    g.addEventListener('click', () => { state.picked = id; render(); });
    svg.appendChild(g);
  });
  $('graphbox').replaceChildren(svg);
  $('slider').max = G.steps.length - 1;
}

// ---- tensors as numbers or as a heatmap ------------------------------------------------------
function shade(v, m) {
  if (!isFinite(v) || m === 0) return '';
  const t = Math.max(-1, Math.min(1, v / m)), c = (a, b) => Math.round(a + (b - a) * Math.abs(t));
  return t < 0 ? `rgb(${c(255, 120)},${c(255, 160)},${c(255, 230)})` : `rgb(${c(255, 235)},${c(255, 130)},${c(255, 110)})`;
}
function tensorView(t, cls) {
  const box = el('div', cls);
  if (!t) { box.textContent = '-'; return box; }
  const numel = t.shape.reduce((a, b) => a * b, 1);
  if (t.full) {
    const cols = t.shape.length ? Math.max(1, t.shape[t.shape.length - 1]) : 1, rows = numel / cols;
    const m = Math.max(0, ...t.values.map(v => isFinite(val(v)) ? Math.abs(val(v)) : 0));
    const table = el('table', 't');
    for (let r = 0; r < rows; ++r) {
      const tr = el('tr');
      for (let c = 0; c < cols; ++c) {
        const v = t.values[r * cols + c], td = el('td', 'v', num(v));
        td.title = typeof v === 'string' ? v : String(v);
        td.style.background = shade(val(v), m);
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    box.appendChild(table);
    box.appendChild(el('div', 'cap', shape(t.shape) + (t.shape.length > 2 ? ', as ' + rows + ' rows of ' + cols : '') +
                                      ', norm ' + num(t.norm)));
    return box;
  }
  const canvas = el('canvas', 'heat'), h = t.heat, k = Math.max(4, Math.floor(240 / Math.max(h.rows, h.cols)));
  canvas.width = h.cols, canvas.height = h.rows, canvas.style.width = h.cols * k + 'px', canvas.style.height = h.rows * k + 'px';
  const ctx = canvas.getContext('2d'), img = ctx.createImageData(h.cols, h.rows);
  const m = Math.max(0, ...h.cells.map(v => isFinite(val(v)) ? Math.abs(val(v)) : 0));
  h.cells.forEach((v, i) => {
    const s = shade(val(v), m) || 'rgb(255,255,255)', c = s.match(/\d+/g).map(Number);
    img.data.set([c[0], c[1], c[2], 255], 4 * i);
  });
  ctx.putImageData(img, 0, 0);
  box.appendChild(canvas);
  box.appendChild(el('div', 'cap', shape(t.shape) + ': ' + numel + ' entries, shown as ' + h.rows + ' x ' + h.cols +
                                    ' block means; norm ' + num(t.norm) + ', min ' + num(t.min) + ', max ' + num(t.max)));
  box.appendChild(el('div', 'cap', 'largest: ' + t.top.map(e => '[' + e.index.join(',') + '] ' + num(e.value)).join(', ')));
  return box;
}

// ---- one step ----------------------------------------------------------------------------------
function incoming(node, k) { return G.edges.filter(e => e.to === node && e.send && e.step < k); }

function renderStep() {
  const k = state.step, s = G.steps[k], n = N[s.node];
  $('counter').textContent = `step ${k + 1} of ${G.steps.length}`;
  $('slider').value = k;
  const op = $('op');
  op.textContent = name(s.node) + ' ' + shape(n.out_shape);
  op.dataset.node = s.node, op.dataset.op = n.op;
  $('rule').textContent = n.op === 'leaf' ? 'a leaf: the engine adds what arrives into its .grad() (AccumulateGrad)'
                                          : (n.rule || '(docs/03-writing-an-op.md lists no rule for this op)');
  $('where').textContent = n.where ? 'written above ' + n.where : '';
  // what arrived: each contribution, then their sum as the engine computed it
  const contribs = $('contribs');
  contribs.replaceChildren();
  const ins = incoming(s.node, k);
  if (s.seed) {
    const d = el('div', 'contrib');
    d.appendChild(el('div', '', 'the seed: the gradient backward starts from (d loss / d loss)'));
    d.appendChild(tensorView(s.seed));
    contribs.appendChild(d);
  }
  const many = ins.length + (s.seed ? 1 : 0) > 1;
  ins.forEach(e => {
    const d = el('div', 'contrib');
    d.appendChild(el('div', '', 'from ' + name(e.from) + ' (its input ' + e.input + ', at step ' + (e.step + 1) + ')'));
    if (many) d.appendChild(tensorView(e.send.fitted));
    contribs.appendChild(d);
  });
  $('arrivedtitle').textContent = many ? `their sum (${ins.length + (s.seed ? 1 : 0)} contributions, added by the engine):`
                                       : 'the gradient that arrived:';
  $('arrived').replaceChildren(tensorView(s.arrived));
  $('hooks').textContent = s.hooks ? s.hooks + ' hook(s) on this output ' + (s.after_hooks ? 'replaced it; the rule used:' : 'ran and left it as it was') : '';
  $('afterhooks').replaceChildren(s.after_hooks ? tensorView(s.after_hooks) : '');
  // what the rule sent
  const sends = $('sends');
  sends.replaceChildren();
  if (!s.ran) sends.appendChild(el('div', 'cap', 'its rule did not run (no input of it needs a gradient here)'));
  if (n.op === 'leaf') sends.appendChild(el('div', 'cap', 'nothing: a leaf is where the walk ends'));
  s.sends.forEach(r => {
    const d = el('div', 'send');
    d.appendChild(el('div', '', 'to ' + name(r.to) + ' (input ' + r.input + ', ' + shape(N[s.node].inputs[r.input] ? N[s.node].inputs[r.input].shape : r.fitted.shape) + ')'));
    if (r.broadcast_undone) {
      d.appendChild(el('div', 'cap', 'the rule returned ' + shape(r.returned.shape) + ':'));
      d.appendChild(tensorView(r.returned));
      d.appendChild(el('div', 'cap', 'the engine summed it over the broadcast dims to ' + shape(r.fitted.shape) + ' (fit_gradient):'));
    }
    d.appendChild(tensorView(r.fitted));
    sends.appendChild(d);
  });
  $('leafgrad').replaceChildren();
  if (s.leaf_grad) {
    $('leafgrad').appendChild(el('h3', '', '.grad() of ' + n.label + ' after this step'));
    $('leafgrad').appendChild(tensorView(s.leaf_grad));
  }
  // the check: finite differences on the probe entry, and the engine's sum against its parts
  const fd = $('fd');
  fd.replaceChildren();
  fd.dataset.agrees = '';
  if (s.fd) {  // the gradient that arrived, before hooks: what moving the output changes in the loss
    const e = val(s.fd.engine), m = val(s.fd.numeric), diff = Math.abs(e - m), ok = diff <= 1e-6 * Math.max(1, Math.abs(e), Math.abs(m));
    fd.dataset.agrees = ok ? 'yes' : 'no';
    fd.appendChild(el('div', '', 'entry [' + s.fd.index.join(', ') + '] of the gradient that arrived: the engine says ' + num(s.fd.engine)));
    fd.appendChild(el('div', '', 'moving that entry by \u00b1' + s.fd.eps + ' in the forward: (L(+) - L(-)) / 2\u03b5 = ' + num(s.fd.numeric)));
    fd.appendChild(el('div', ok ? 'ok' : 'bad', (ok ? 'they agree' : 'they differ') + ': |difference| ' + diff.toExponential(1)));
  } else {
    fd.appendChild(el('div', 'cap', n.view ? 'no finite differences here: this op\'s output is a view of its input (the same numbers), checked at the node it reads'
                                            : 'no finite differences recorded for this node'));
  }
  if (many && s.arrived.full && ins.every(e => e.send.fitted.full)) {
    // summed here in float64; the engine summed in the gradient's own dtype (float32 rounds at 1e-7)
    const parts = ins.map(e => e.send.fitted).concat(s.seed ? [s.seed] : []);
    let worst = 0, scale = 1;
    s.arrived.values.forEach((v, i) => {
      const sum = parts.reduce((a, p) => a + val(p.values[i]), 0);
      worst = Math.max(worst, Math.abs(sum - val(v)));
      scale = Math.max(scale, ...parts.map(p => Math.abs(val(p.values[i]))));
    });
    const ok = worst <= 1e-6 * scale;
    fd.dataset.sums = ok ? 'yes' : 'no';
    fd.appendChild(el('div', ok ? 'ok' : 'bad', 'the contributions above ' + (ok ? 'add up' : 'do not add up') +
                      ' to the sum the engine used: largest |difference| ' + worst.toExponential(1)));
  }
  // the forward's numbers
  const fw = $('forward');
  fw.replaceChildren();
  if (n.op !== 'leaf') (n.inputs || []).forEach((inp, i) => {
    fw.appendChild(el('div', 'cap', 'input ' + i + ' ' + shape(inp.shape) + (inp.from >= 0 ? ' from ' + name(inp.from) : ' (a constant: no gradient)')));
    fw.appendChild(tensorView(inp.value || (inp.from >= 0 ? N[inp.from].value : null)));
  });
  fw.appendChild(el('div', 'cap', n.op === 'leaf' ? 'its value' : 'output'));
  fw.appendChild(tensorView(n.value));
}

// ---- the graph's colours for this step, and the picked node's paths ---------------------------
function renderGraph() {
  const k = state.step, cur = G.steps[k].node, ran = new Set(G.steps.slice(0, k).map(s => s.node));
  const waiting = new Set(G.edges.filter(e => e.send && e.step < k).map(e => e.to));
  const onPath = state.picked === null ? new Set() : pathEdges(state.picked).edges;
  document.querySelectorAll('g.node').forEach(g => {
    const id = +g.dataset.node;
    g.classList.toggle('current', id === cur);
    g.classList.toggle('done', ran.has(id));
    g.classList.toggle('waiting', !ran.has(id) && id !== cur && waiting.has(id));
    g.classList.toggle('picked', id === state.picked);
  });
  document.querySelectorAll('path.edge').forEach(p => {
    const e = G.edges[+p.dataset.edge];
    p.classList.toggle('sent', !!e.send && e.step < k);
    p.classList.toggle('out', !!e.send && e.step === k);
    p.classList.toggle('in', !!e.send && e.step < k && e.to === cur);
    p.classList.toggle('onpath', onPath.has(+p.dataset.edge) && !(e.step === k) && !(e.to === cur && e.step < k));
  });
  document.querySelectorAll('text.elabel').forEach(t => {
    const e = G.edges[+t.dataset.edge], shown = e.step <= k;
    t.textContent = shown ? '|g| ' + num(e.send.fitted.norm) : '';
    t.setAttribute('class', 'elabel' + (e.step === k ? ' out' : e.to === cur ? ' in' : ''));
  });
  const g = document.querySelector(`g.node[data-node="${cur}"]`);
  if (g && g.scrollIntoView && !state.timer) g.scrollIntoView({block: 'nearest', inline: 'nearest'});
}

// Every path along which a gradient went from a root to `target`: the edges on them and up to 64
// paths spelled out (the count is exact: paths into a node add up over its incoming edges).
function pathEdges(target) {
  const into = new Map();
  G.edges.forEach((e, i) => { if (e.send) (into.get(e.to) || into.set(e.to, []).get(e.to)).push(i); });
  const count = new Map(), edges = new Set(), seen = new Set();
  const roots = new Set(G.steps.filter(s => s.seed).map(s => s.node));
  const paths = id => {
    if (count.has(id)) return count.get(id);
    let c = roots.has(id) ? 1 : 0;
    (into.get(id) || []).forEach(i => { c += paths(G.edges[i].from); });
    count.set(id, c);
    return c;
  };
  const total = paths(target);
  const mark = id => {
    if (seen.has(id)) return;
    seen.add(id);
    (into.get(id) || []).forEach(i => { if (paths(G.edges[i].from) > 0) { edges.add(i); mark(G.edges[i].from); } });
  };
  mark(target);
  const spelled = [];
  const walk = (id, tail) => {
    if (spelled.length >= 64) return;
    if (roots.has(id)) spelled.push([id].concat(tail));
    (into.get(id) || []).forEach(i => { if (paths(G.edges[i].from) > 0) walk(G.edges[i].from, [id].concat(tail)); });
  };
  walk(target, []);
  return {total, edges, spelled, nodes: seen};
}

function renderPaths() {
  const box = $('paths');
  box.replaceChildren();
  if (state.picked === null) { box.textContent = 'Click a node (a parameter, say) to see every path its gradient came along.'; box.dataset.count = ''; return; }
  const p = pathEdges(state.picked);
  box.dataset.count = p.total;
  box.appendChild(el('div', '', p.total + ' path(s) from the loss reach ' + name(state.picked) + (p.total > p.spelled.length ? ' (the first ' + p.spelled.length + ' below)' : '') + ':'));
  const ol = el('ol');
  p.spelled.forEach(path => ol.appendChild(el('li', '', path.map(name).join(' \u2192 '))));
  box.appendChild(ol);
  // where they met: every node on those paths that received more than one contribution
  const meets = [...p.nodes].filter(id => incoming(id, Infinity).length > 1);
  if (meets.length) {
    box.appendChild(el('div', '', 'Where the paths met, the engine added the contributions:'));
    meets.forEach(id => {
      const ins = incoming(id, Infinity), s = G.steps.find(t => t.node === id);
      box.appendChild(el('div', 'contrib', name(id) + ': ' + ins.map(e => '|' + num(e.send.fitted.norm) + '| from ' + name(e.from)).join(' + ') +
                                           (s ? ' \u2192 sum with norm ' + num(s.arrived.norm) : '')));
    });
  }
}

function render() { renderStep(); renderGraph(); renderPaths(); }
function go(k) { state.step = Math.max(0, Math.min(G.steps.length - 1, k)); render(); }
function stop() { if (state.timer) clearInterval(state.timer); state.timer = null; $('play').textContent = 'Play'; }

function setup() {
  const meta = Object.entries(D.meta || {}).map(([k, v]) => k + ': ' + v).join(' \u00b7 ');
  $('meta').textContent = meta;
  $('size').textContent = 'This recording keeps ' + D.numbers + ' numbers (bound ' + D.bounds.max_numbers + '); a tensor of at most ' +
    D.bounds.full_values + ' entries is kept whole, a larger one as a ' + D.bounds.heatmap_size + ' x ' + D.bounds.heatmap_size +
    ' heatmap of block means and its ' + D.bounds.top_entries + ' largest entries.';
  const sel = $('walk');
  D.walks.forEach((w, i) => sel.appendChild(el('option', '', 'walk ' + (i + 1) + (w.create_graph ? ' (create_graph: recorded)' : '') +
                                                              (w.completed ? '' : ' (stopped by an error)'))));
  sel.value = sel.options[0] ? sel.options[0].value : '';
  sel.addEventListener('change', () => {
    if (!D.walks[sel.selectedIndex].steps.length) return;  // a walk stopped before its first node
    stop(); state.walk = sel.selectedIndex; state.picked = null; drawGraph(); go(0);
  });
  sel.style.display = D.walks.length > 1 ? '' : 'none';
  $('next').addEventListener('click', () => go(state.step + 1));
  $('back').addEventListener('click', () => go(state.step - 1));
  $('slider').addEventListener('input', () => go(+$('slider').value));
  $('play').addEventListener('click', () => {
    if (state.timer) return stop();
    $('play').textContent = 'Pause';
    state.timer = setInterval(() => { if (state.step >= G.steps.length - 1) stop(); else go(state.step + 1); }, 900);
  });
  document.addEventListener('keydown', e => {
    if (e.target.closest && e.target.closest('input, select, button')) return;  // the control's own keys
    if (e.key === 'ArrowRight') go(state.step + 1);
    if (e.key === 'ArrowLeft') go(state.step - 1);
  });
  state.walk = D.walks.findIndex(w => w.steps.length > 0);
  if (state.walk < 0) { $('panel').textContent = 'The recording has no step of a backward walk.'; return; }
  sel.selectedIndex = state.walk;
  drawGraph();
  go(0);
}
setup();

// #selftest: step through every node with the Next button and write what the page showed.
if (location.hash === '#selftest') {
  const result = {steps: G.steps.length, visited: []};
  go(0);
  for (let k = 0; k < G.steps.length; ++k) {
    if (k > 0) $('next').click();
    result.visited.push({step: state.step, node: +$('op').dataset.node, op: $('op').dataset.op,
                         arrived: [...document.querySelectorAll('#arrived td.v')].map(td => td.textContent),
                         fd: $('fd').dataset.agrees, current: document.querySelectorAll('g.node.current').length});
  }
  $('back').click();
  result.back_to = state.step;
  const leaves = G.ids.filter(id => N[id].op === 'leaf');
  const target = leaves.length ? leaves[leaves.length - 1] : G.ids[G.ids.length - 1];
  document.querySelector(`g.node[data-node="${target}"]`).dispatchEvent(new MouseEvent('click', {bubbles: true}));
  result.picked = state.picked;
  result.paths = +$('paths').dataset.count;
  result.path_items = document.querySelectorAll('#paths li').length;
  result.errors = errors.textContent;
  $('selftest').textContent = JSON.stringify(result);
}
)JS";

}  // namespace

std::string backward_html(const std::string& title, const std::string& recording_json) {
  MG_CHECK(
      !recording_json.empty() && recording_json.front() == '{' &&
          recording_json.find("\"minigrad-backward-1\"") != std::string::npos,
      ValueError,
      "backward_html: the text is not a backward recording (format \"minigrad-backward-1\"), it starts with \"{}\"",
      recording_json.substr(0, 40));
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{1}</style></head>\n"
      "<body>\n<h1>{0}</h1>\n<div class=\"meta\" id=\"meta\"></div>\n"
      "<div class=\"meta\">Each step is one node, in the order minigrad's engine ran it (autograd/engine.cpp): a node "
      "runs once every node that uses its output has sent it a gradient; the engine adds those contributions and hands "
      "the sum to the node's rule, which returns one gradient per input. Blue edges: what arrived at the current node. "
      "Red edges: what its rule sent. Click any node to see every path that reached it. <span id=\"size\"></span></div>\n"
      "<div id=\"controls\"><button id=\"back\">Back</button><button id=\"next\">Next</button>"
      "<button id=\"play\">Play</button> <input type=\"range\" id=\"slider\" min=\"0\" step=\"1\" value=\"0\"> "
      "<span id=\"counter\"></span> <select id=\"walk\"></select></div>\n"
      "<div id=\"main\"><div id=\"graphbox\"></div><div id=\"panel\">"
      "<div><b id=\"op\"></b></div><h3>The rule</h3><pre id=\"rule\"></pre><div class=\"cap\" id=\"where\"></div>"
      "<h3>What arrived</h3><div id=\"contribs\"></div><div id=\"arrivedtitle\"></div><div id=\"arrived\"></div>"
      "<div class=\"cap\" id=\"hooks\"></div><div id=\"afterhooks\"></div>"
      "<h3>What the rule sent</h3><div id=\"sends\"></div><div id=\"leafgrad\"></div>"
      "<h3>Check</h3><div id=\"fd\"></div>"
      "<details><summary>The forward's numbers at this node</summary><div id=\"forward\"></div></details>"
      "<h3>Paths</h3><div id=\"paths\"></div></div></div>\n"
      "<div id=\"errors\"></div><pre id=\"selftest\"></pre>\n"
      "<script type=\"application/json\" id=\"data\">{2}</script>\n<script>{3}</script>\n</body></html>\n",
      escape(title), kStyle, json_in_script(recording_json), kScript);
}

std::string write_backward_page(const std::string& path, const std::string& title, const std::string& recording_json) {
  write_file(path, backward_html(title, recording_json));
  return path;
}

}  // namespace mg::viz
