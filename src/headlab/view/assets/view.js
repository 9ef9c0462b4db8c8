// headlab-view: draws the page of a run or a sweep from the JSON block #headlab-data (see
// src/headlab/view/run_data.py and sweep_data.py for its fields). No library, no network.
"use strict";
const D = JSON.parse(document.getElementById("headlab-data").textContent);
const app = document.getElementById("app");
const SVGNS = "http://www.w3.org/2000/svg";
const ROLE_COLORS = {previous_token: "#e7298a", local: "#d95f02", long_range: "#7570b3", broad: "#bbbbbb",
  vertical: "#1b9e77", mixed: "#e6ab02", next_token: "#66a61e", sink: "#a6761d", content: "#1f78b4"};
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
  [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];

function el(tag, attrs, parent) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}
function bytes(b64) {
  const bin = atob(b64), out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
// matrix `index` of a quantized stack (headlab.view.encode): byte / 255 * that matrix's maximum
function matrix(codes, scale, index, size) {
  const out = new Float32Array(size), m = scale[index] / 255, off = index * size;
  for (let i = 0; i < size; i++) out[i] = codes[off + i] * m;
  return out;
}
function color(v) {  // v in [0, 1] -> viridis
  const x = Math.max(0, Math.min(1, v)) * (VIRIDIS.length - 1), i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
}
function drawMap(canvas, values, n) {
  canvas.width = n; canvas.height = n;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(n, n);
  let max = 0;
  for (const v of values) max = Math.max(max, v);
  for (let i = 0; i < n * n; i++) {
    const [r, g, b] = color(max > 0 ? values[i] / max : 0);
    img.data.set([r, g, b, 255], 4 * i);
  }
  ctx.putImageData(img, 0, 0);
  canvas._values = values;  // what is drawn, for tests and the console
}
function nearest(list, step) {  // index in `list` of the value closest to `step`
  let best = 0;
  list.forEach((s, i) => { if (Math.abs(s - step) < Math.abs(list[best] - step)) best = i; });
  return best;
}
function fmt(v) { return v === null || v === undefined ? "-" : Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3); }

// A line chart over measurement indices (the slider's axis); series: [{values, color, label}], band: [lo, hi];
// range: [lo, hi] of the y axis shared with other charts (null: this chart's own data). Step labels under
// the x axis, the y range left of the plot (never over the line).
function lineChart(parent, name, steps, series, now, band, range) {
  const W = 258, H = 104, LM = 46, P = 4, B = 14, box = el("div", {class: "chart"}, parent);
  box.dataset.metric = name;
  el("div", {class: "name", text: name}, box);
  const svg = el("svg:svg", {width: W, height: H}, box);
  const all = series.flatMap(s => s.values).concat(band ? band.flat() : []).filter(v => v !== null && isFinite(v));
  if (!all.length) { el("svg:text", {x: 8, y: 40, text: "not measured", "font-size": 11}, svg); return box; }
  let lo = range ? range[0] : Math.min(...all), hi = range ? range[1] : Math.max(...all);
  if (hi === lo) { hi += 1e-9; lo -= 1e-9; }
  const n = steps.length, x = i => LM + (n > 1 ? i / (n - 1) : 0.5) * (W - LM - P), y = v => H - B - (v - lo) / (hi - lo) * (H - B - P);
  box.dataset.lo = lo; box.dataset.hi = hi;
  el("svg:rect", {x: LM, y: P, width: W - LM - P, height: H - B - P, fill: "#fafafa"}, svg);
  if (band) {
    const pts = band[1].map((v, i) => [i, v]).concat(band[0].map((v, i) => [i, v]).reverse()).filter(p => p[1] !== null);
    el("svg:polygon", {points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "#1f78b4", "fill-opacity": 0.2}, svg);
  }
  for (const s of series) {
    const pts = s.values.map((v, i) => [i, v]).filter(p => p[1] !== null && isFinite(p[1]));
    const line = el("svg:polyline", {points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none",
      stroke: s.color || "#1f78b4", "stroke-width": 1.5}, svg);
    el("svg:title", {text: s.label || name}, line);
    for (const [i, v] of pts) el("svg:title", {text: `${s.label ? s.label + ", " : ""}step ${steps[i]}: ${fmt(v)}`}, el("svg:circle", {cx: x(i), cy: y(v), r: 2, fill: s.color || "#1f78b4"}, svg));
  }
  if (now !== null) el("svg:line", {class: "now", x1: x(now), x2: x(now), y1: 0, y2: H - B, stroke: "#d95f02"}, svg);
  el("svg:text", {class: "y-hi", x: LM - 3, y: P + 8, "text-anchor": "end", "font-size": 10, text: fmt(hi)}, svg);
  el("svg:text", {class: "y-lo", x: LM - 3, y: H - B, "text-anchor": "end", "font-size": 10, text: fmt(lo)}, svg);
  el("svg:text", {class: "x-first", x: LM, y: H - 2, "text-anchor": "start", "font-size": 10, text: `step ${steps[0]}`}, svg);
  if (n > 1) el("svg:text", {class: "x-last", x: W - P, y: H - 2, "text-anchor": "end", "font-size": 10, text: `${steps[n - 1]}`}, svg);
  return box;
}
// [lo, hi] over every finite value of `rows` ([step][head] lists), or null when there is none
function extent(rows) {
  const all = rows.flat().filter(v => v !== null && isFinite(v));
  return all.length ? [Math.min(...all), Math.max(...all)] : null;
}
const UNIT_SCORES = new Set(["prev_token_score", "induction_score", "rep_induction_score", "duplicate_score", "copying_score"]);

function notes(list) {
  const ul = document.getElementById("notes");
  for (const n of list || []) el("li", {text: n}, ul);
}
// headlab-report's lines: which head does what, in words, most important first
function report(lines) {
  if (!lines || !lines.length) return;
  const box = el("details", {id: "report", open: ""}, document.querySelector("header"));
  el("summary", {text: "which head does what (headlab-report)"}, box);
  const ol = el("ol", {}, box);
  for (const line of lines) el("li", {text: line}, ol);
}

// ------------------------------------------------------------------------------------------ run
function runPage() {
  const L = D.n_layers, H = D.n_heads, steps = D.steps, S = {t: steps.length - 1, head: 0, sentence: 0, query: null, shared: true};
  const maps = D.maps ? {codes: bytes(D.maps.data), n: D.maps.size} : null;
  const tok = D.tokens ? {codes: bytes(D.tokens.data), w: D.tokens.width} : null;
  const controls = el("div", {class: "controls"}, app);
  const play = el("button", {id: "play", text: "play"}, controls);
  const sliderBox = el("div", {class: "slider-box"}, controls);
  const slider = el("input", {id: "step", type: "range", min: 0, max: steps.length - 1, value: S.t}, sliderBox);
  const marks = el("div", {id: "marks"}, sliderBox);
  const label = el("span", {id: "step-label"}, controls);
  const legend = el("span", {class: "legend"}, controls);
  legend.innerHTML = '<i style="background:#d95f02"></i>a role changes <i style="background:#1b9e77"></i>a head settles (bifurcation)';
  const pos = i => `${steps.length > 1 ? i / (steps.length - 1) * 100 : 50}%`;
  const byStep = {};
  for (const c of D.role_changes) (byStep[c.step] = byStep[c.step] || []).push(`L${Math.floor(c.head / H)}H${c.head % H} ${c.from} -> ${c.to}`);
  for (const [s, what] of Object.entries(byStep)) el("div", {class: "tick", title: `step ${s}: ${what.join("; ")}`, style: `left:${pos(steps.indexOf(+s))}`}, marks);
  const bif = {};
  (D.bifurcation || []).forEach((s, h) => { if (s !== null) (bif[s] = bif[s] || []).push(`L${Math.floor(h / H)}H${h % H}`); });
  for (const [s, who] of Object.entries(bif)) el("div", {class: "tick bif", title: `step ${s}: ${who.join(", ")} settle into their final role`, style: `left:${pos(steps.indexOf(+s))}`}, marks);
  const at = s => pos(nearest(steps, s));  // an event between two measurements: at the nearer one
  if (D.lm) {
    const ons = {};
    for (const [h, s] of Object.entries(D.lm.onsets)) (ons[s] = ons[s] || []).push(`L${Math.floor(h / H)}H${h % H}`);
    for (const [s, who] of Object.entries(ons)) el("div", {class: "tick onset", title: `step ${s}: induction onset of ${who.join(", ")}`, style: `left:${at(+s)}`}, marks);
    if (D.lm.loss_drop_step !== undefined) el("div", {class: "tick drop", title: `step ${D.lm.loss_drop_step}: the probe loss drops`, style: `left:${at(D.lm.loss_drop_step)}`}, marks);
    legend.innerHTML += ' <i style="background:#7570b3"></i>induction onset <i style="background:#000"></i>probe-loss drop';
  }

  el("h2", {text: maps ? "Every head's mean attention map (rows: queries, columns: keys; probe mean)" : "Heads (no attention maps stored; click one for its trajectories)"}, app);
  const grid = el("div", {id: "grid", class: maps ? "" : "nomaps"}, app), cells = [];
  for (let l = 0; l < L; l++) {
    const row = el("div", {class: "layer-row"}, grid);
    el("div", {class: "layer-label", text: `L${l}`}, row);
    for (let h = 0; h < H; h++) {
      const cell = el("div", {class: "cell", id: `cell-L${l}H${h}`, "data-layer": l, "data-head": h}, row);
      const title = el("div", {class: "cell-title"}, cell);
      const canvas = el("canvas", {}, cell);
      cell.addEventListener("click", () => { S.head = l * H + h; update(); });
      cells.push({cell, title, canvas});
    }
  }
  if (D.roles) {
    const rl = el("div", {class: "legend role-legend"}, app);
    rl.append(`${D.role_label || "role"}: `);
    for (const [r, c] of Object.entries(ROLE_COLORS)) { el("i", {style: `background:${c}`}, rl); rl.append(r.replace("_", " ") + " "); }
  }
  if (maps) cells.forEach((c, i) => c.canvas.addEventListener("mousemove", ev => {
    const n = maps.n, q = Math.min(n - 1, Math.floor(ev.offsetY / c.canvas.clientHeight * n)), k = Math.min(n - 1, Math.floor(ev.offsetX / c.canvas.clientWidth * n));
    const v = c.canvas._values ? c.canvas._values[q * n + k] : null;
    c.canvas.title = `L${Math.floor(i / H)}H${i % H}, map of step ${c.cell.dataset.mapStep}: query position ${q} -> key position ${k}: ${fmt(v)}`;
  }));
  const lmBox = D.lm ? el("section", {id: "lm"}, app) : null;
  const panels = el("div", {class: "panels"}, app);
  const detail = el("section", {id: "detail"}, panels);
  const tokens = el("section", {id: "tokens"}, app);

  function update() {
    const t = S.t, step = steps[t];
    slider.value = t;
    label.textContent = `step ${step} (${t + 1} of ${steps.length})`;
    const mi = maps ? nearest(D.maps.steps, step) : null;
    cells.forEach((c, i) => {
      const role = D.roles ? D.roles[t][i] : null, last = !D.roles && D.lm && D.lm.final_roles ? D.lm.final_roles[i] : null;
      c.title.textContent = `L${Math.floor(i / H)}H${i % H} ${role || (last ? last + " (final)" : "")}`;
      c.title.style.borderLeftColor = ROLE_COLORS[role] || "transparent";  // the colour beside dark text: readable
      c.cell.dataset.role = role || "";
      c.cell.classList.toggle("selected", i === S.head);
      if (maps) {
        drawMap(c.canvas, matrix(maps.codes, D.maps.scale, mi * L * H + i, maps.n * maps.n), maps.n);
        c.cell.dataset.mapStep = D.maps.steps[mi];
        c.canvas.title = D.maps.steps[mi] === step ? `step ${step}` : `map of step ${D.maps.steps[mi]} (none stored at ${step})`;
      }
    });
    drawDetail();
    drawTokens();
    if (lmBox) drawLM();
  }

  // Language-model scores: per score, the layer x head map at this step and every head over all steps,
  // both on one fixed 0-1 scale (the scores are shares of attention); the rLLC curves when headlab-llc ran.
  function drawLM() {
    lmBox.innerHTML = "";
    el("h2", {text: `Language-model scores at step ${steps[S.t]}: layer x head (colour: fixed 0-1 scale), and each head over training`}, lmBox);
    const bar = el("div", {class: "scale"}, lmBox);
    el("span", {text: "0"}, bar);
    for (let k = 0; k <= 10; k++) { const [r, g, b] = color(k / 10); el("i", {style: `background:rgb(${r},${g},${b})`}, bar); }
    el("span", {text: "1"}, bar);
    const row = el("div", {class: "lm-maps"}, lmBox);
    for (const name of D.lm.scores) {
      const vals = D.metrics[name], box = el("div", {class: "lm-score", "data-metric": name}, row);
      el("div", {class: "name", text: name}, box);
      const table = el("table", {class: "heat"}, box);
      const head = el("tr", {}, table);
      el("th", {}, head);
      for (let h = 0; h < H; h++) el("th", {text: `H${h}`}, head);
      for (let l = 0; l < L; l++) {
        const tr = el("tr", {}, table);
        el("th", {text: `L${l}`}, tr);
        for (let h = 0; h < H; h++) {
          const i = l * H + h, v = vals[S.t][i], [r, g, b] = color(v === null ? 0 : v);
          const td = el("td", {"data-head": i, "data-value": v === null ? "" : v, text: v === null ? "-" : v.toFixed(2),
            title: `L${l}H${h} ${name} at step ${steps[S.t]}: ${fmt(v)}`}, tr);
          td.style.background = v === null ? "#eee" : `rgb(${r},${g},${b})`;
          td.style.color = v !== null && v > 0.55 ? "#000" : "#fff";
          if (i === S.head) td.classList.add("selected");
          td.addEventListener("click", () => { S.head = i; update(); });
        }
      }
      const over = el("canvas", {class: "over-steps", title: `${name}: rows = heads L0H0.. L${L - 1}H${H - 1}, columns = measurements`}, box);
      over.width = steps.length; over.height = L * H;
      const ctx = over.getContext("2d"), img = ctx.createImageData(steps.length, L * H);
      for (let i = 0; i < L * H; i++) for (let t = 0; t < steps.length; t++) {
        const v = vals[t][i], [r, g, b] = color(v === null ? 0 : v);
        img.data.set(v === null ? [238, 238, 238, 255] : [r, g, b, 255], 4 * (i * steps.length + t));
      }
      ctx.putImageData(img, 0, 0);
      over._values = vals;
      const now = el("div", {class: "over-now", style: `left:${(S.t + 0.5) / steps.length * 100}%`}, el("div", {class: "over-box"}, box));
      now.parentNode.prepend(over);
    }
    if (D.metrics.rllc) {
      el("h3", {text: "refined LLC per head (headlab-llc; measured only at the sampled checkpoints)"}, lmBox);
      const series = [];
      for (let i = 0; i < L * H; i++) series.push({values: D.metrics.rllc.map(r => r[i]), color: `hsl(${(i % H) * 360 / H},60%,${30 + 25 * Math.floor(i / H) / Math.max(1, L - 1)}%)`, label: `L${Math.floor(i / H)}H${i % H}`});
      lineChart(el("div", {id: "rllc"}, lmBox), "rLLC, all heads (hover a point: head, step, value)", steps, series, S.t);
    }
  }

  function drawDetail() {
    detail.innerHTML = "";
    const i = S.head, l = Math.floor(i / H), h = i % H;
    el("h2", {id: "detail-title", text: `L${l}H${h}: trajectories over training`}, detail);
    if (D.roles) {
      el("h3", {text: `${D.role_label || "role"} (bifurcation: ${D.bifurcation && D.bifurcation[i] !== null ? "step " + D.bifurcation[i] : "never settled"})`}, detail);
      const tl = el("div", {class: "timeline", id: "role-timeline"}, detail);
      D.roles.map(r => r[i]).forEach((r, t) => el("span", {title: `step ${steps[t]}: ${r}`, class: t === S.t ? "now" : "", style: `background:${ROLE_COLORS[r] || "#fff"}`}, tl));
    }
    const toggle = el("label", {class: "legend"}, detail), box = el("input", {type: "checkbox", id: "shared-y"}, toggle);
    box.checked = S.shared;
    toggle.append(" one y scale per metric for every head (off: each chart its own range; shares of attention stay 0-1)");
    box.addEventListener("change", () => { S.shared = box.checked; drawDetail(); });
    const charts = el("div", {id: "charts"}, detail);
    for (const [name, values] of Object.entries(D.metrics)) {
      const range = UNIT_SCORES.has(name) && S.shared ? [0, 1] : S.shared ? extent(values) : null;
      lineChart(charts, name, steps, [{values: values.map(r => r[i])}], S.t, null, range);
    }
    const metric = ["q_cosine", "qk_cosine", "js", "corr"].find(m => D.pairs[m]);
    if (metric) {
      el("h3", {text: `${metric} to the other heads of layer ${l} (weight space: q_cosine = cosine of W_Q)`}, detail);
      const sim = el("div", {id: "similarity"}, detail), series = [];
      for (let o = 0; o < H; o++) if (o !== h) series.push({values: D.pairs[metric].map(m => m[i][o]), color: `hsl(${o * 360 / H},60%,45%)`, label: `L${l}H${o}`});
      lineChart(sim, `${metric} L${l}H${h} vs ${series.map(s => s.label).join(", ")}`, steps, series, S.t);
    }
  }

  function drawTokens() {
    tokens.innerHTML = "";
    el("h2", {text: "Token view: the selected head's attention from the hovered query token to every key"}, tokens);
    if (!tok) { el("p", {id: "no-tokens", text: (D.notes || []).find(n => n.startsWith("no token view")) || "no token view"}, tokens); return; }
    const i = S.head, T = D.tokens, ti = nearest(T.steps, steps[S.t]), W = tok.w;
    el("p", {class: "legend", text: `step ${T.steps[ti]}, L${Math.floor(i / H)}H${i % H}; probe sentence:`}, tokens);
    const pick = el("div", {}, tokens);
    T.sentences.forEach((s, k) => {
      const b = el("button", {class: "sent" + (k === S.sentence ? " on" : ""), text: `${k + 1}`}, pick);
      b.addEventListener("click", () => { S.sentence = k; S.query = null; drawTokens(); });
    });
    const box = el("div", {id: "sentence"}, tokens), s = S.sentence, n = T.lengths[s];
    const index = ((ti * L * H) + i) * T.n_sentences + s, m = matrix(tok.codes, T.scale, index, W * W);
    const spans = T.sentences[s].map((t, j) => el("span", {class: "tok", "data-i": j, text: t}, box));
    function show(q) {
      S.query = q;
      spans.forEach((sp, j) => {
        const w = q === null ? null : m[q * W + j];
        sp.classList.toggle("query", j === q);
        sp.dataset.weight = w === null ? "" : w.toFixed(4);
        sp.title = w === null ? "" : `${T.sentences[s][q]} -> ${T.sentences[s][j]}: ${w.toFixed(3)}`;
        const [r, g, b] = color(w === null ? 0 : Math.sqrt(w));
        sp.style.background = w === null ? "" : `rgba(${r},${g},${b},${0.15 + 0.85 * Math.min(1, w * 4)})`;
        sp.style.color = w !== null && w > 0.15 ? "#fff" : "";
      });
    }
    spans.forEach((sp, j) => sp.addEventListener("mouseenter", () => show(j)));
    if (S.query !== null && S.query < n) show(S.query);
  }

  slider.addEventListener("input", () => { S.t = +slider.value; update(); });
  let timer = null;
  play.addEventListener("click", () => {
    if (timer) { clearInterval(timer); timer = null; play.textContent = "play"; return; }
    if (S.t === steps.length - 1) S.t = 0;
    play.textContent = "pause";
    timer = setInterval(() => {
      if (S.t >= steps.length - 1) { clearInterval(timer); timer = null; play.textContent = "play"; return; }
      S.t += 1; update();
    }, 700);
  });
  update();
}

// ---------------------------------------------------------------------------------------- sweep
function sweepPage() {
  el("h2", {text: "Head-to-head divergence over training (mean JS between the heads of a layer; line: mean over seeds, band: min to max)"}, app);
  const curves = el("div", {id: "curves"}, app);
  const range = extent(D.configs.flatMap(c => [c.mean, c.lo, c.hi]));  // one y range: configs compare by eye
  for (const c of D.configs) {
    lineChart(curves, `${c.label} (${c.n_seeds} seeds)`, c.steps, [{values: c.mean}], null, [c.lo, c.hi], range);
  }
  el("h2", {text: "Another seed, another division: each seed's heads at its last measurement, aligned to the first seed by the cross-seed matching"}, app);
  const pick = el("select", {id: "config"}, app);
  D.configs.forEach((c, k) => el("option", {value: k, text: c.label}, pick));
  const grids = el("div", {id: "seed-grids"}, app);
  function draw() {
    grids.innerHTML = "";
    const g = D.configs[+pick.value].grid;
    if (!g) { el("p", {text: "no maps stored for this config"}, grids); return; }
    const codes = bytes(g.data), L = g.n_layers, H = g.n_heads;
    g.seeds.forEach((seed, si) => {
      for (let l = 0; l < L; l++) {
        const row = el("div", {class: "layer-row"}, grids);
        el("div", {class: "layer-label", text: `${seed} L${l}`}, row);
        for (let k = 0; k < H; k++) {
          const h = g.order[si][l][k], i = l * H + h, role = g.roles[si][i];
          const cell = el("div", {class: "cell", "data-seed": seed, "data-layer": l, "data-head": h}, row);
          const t = el("div", {class: "cell-title", text: `H${h} ${role || ""}`}, cell);
          t.style.borderLeftColor = ROLE_COLORS[role] || "transparent";
          drawMap(el("canvas", {}, cell), matrix(codes, g.scale, si * L * H + i, g.size * g.size), g.size);
        }
      }
    });
  }
  pick.addEventListener("change", draw);
  draw();
}

notes(D.notes);
report(D.report);
if (D.kind === "sweep") sweepPage(); else runPage();
