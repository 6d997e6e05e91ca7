// The shared step axis, the timelines and the request Gantt chart (SVG). Part of the replay page's script (common.js).

  // --- the shared step axis: step s spans [x(s), x(s) + k], the same in every SVG -------------------------
  // The axis shows the steps view.lo..view.hi: the whole run, or a window of view.size steps around the step
  // shown (a long run's bars and requests would be thinner than a pixel over all of it); the window moves
  // on when the step shown leaves it, and i0..i1 are the step indexes inside it.
  const axis = {left: 64, right: 12, width: 600, k: 1};
  const view = {size: SPAN, lo: FIRST, hi: LAST, i0: 0, i1: N - 1};
  const x = (s) => axis.left + (s - view.lo) * axis.k;
  function layoutAxis(width) {
    axis.width = Math.max(320, width);
    axis.k = (axis.width - axis.left - axis.right) / (view.hi - view.lo + 1);
  }
  // Put the window of view.size steps around ``step``: it starts a quarter of the window before it.
  function placeView(step) {
    const size = Math.min(view.size, SPAN);
    view.lo = Math.max(FIRST, Math.min(LAST - size + 1, step - Math.floor(size / 4)));
    view.hi = view.lo + size - 1;
    view.i0 = bisectRight(S.step, view.lo - 1);
    view.i1 = bisectRight(S.step, view.hi) - 1;
  }
  const inView = (step) => step >= view.lo && step <= view.hi;
  function stepAtX(px) {
    const s = Math.floor((px - axis.left) / axis.k) + view.lo;
    const i = bisectRight(S.step, s) - 1;
    return S.step[Math.max(0, i)];
  }
  function bisectRight(arr, v) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] <= v) lo = mid + 1; else hi = mid; }
    return lo;
  }
  function addCursor(svg, top, bottom) {
    const band = svgEl('rect', {class: 'cursor-band', y: top, height: bottom - top, width: 1}, svg);
    const line = svgEl('line', {class: 'cursor', y1: top, y2: bottom}, svg);
    return {band, line};
  }
  function moveCursor(c, s) {
    const w = Math.max(axis.k, 2);
    c.band.setAttribute('x', x(s) + axis.k / 2 - w / 2);
    c.band.setAttribute('width', w);
    c.line.setAttribute('x1', x(s) + axis.k / 2);
    c.line.setAttribute('x2', x(s) + axis.k / 2);
  }
  function xTicks(svg, y) {
    const target = Math.max(2, Math.floor((axis.width - axis.left) / 70));
    const raw = (view.hi - view.lo + 1) / target;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw) || raw;
    for (let s = Math.ceil(view.lo / step) * step; s <= view.hi; s += step) {
      const at = x(s) + axis.k / 2;
      svgEl('line', {class: 'axis', x1: at, x2: at, y1: y, y2: y + 4}, svg);
      const label = svgEl('text', {x: at, y: y + 15, 'text-anchor': 'middle', class: 'tick'}, svg);
      label.textContent = s;
      // A label centred on a tick near an edge would stick out of the frame: it ends at the edge instead.
      const half = label.getComputedTextLength() / 2;
      if (at + half > axis.width - 1) label.setAttribute('text-anchor', 'end'), label.setAttribute('x', axis.width - 1);
      else if (at - half < 1) label.setAttribute('text-anchor', 'start'), label.setAttribute('x', 1);
    }
  }

  // --- timelines --------------------------------------------------------------------------------------
  const PANEL_H = 72, PANEL_GAP = 22;
  const logLatency = maxOf(S.latency) > 20 * Math.max(minOf(S.latency), 1e-3);
  const PANELS = [
    {label: () => t('batchSize'), kind: 'bars', values: S.batch},
    {label: () => t('kvUsed', {total: NB}), kind: 'area', values: S.used, capacity: NB},
    {label: () => t('latency') + (logLatency ? t('log') : ''), kind: 'bars', values: S.latency, log: logLatency},
    {kind: 'queues'},
  ];
  let cursors = [];

  function drawTimelines() {
    const box = $('timelines');
    box.textContent = '';
    const height = PANELS.length * (PANEL_H + PANEL_GAP) + 36;
    const svg = svgEl('svg', {width: axis.width, height, 'aria-label': t('timelines')}, box);
    PANELS.forEach((p, n) => drawPanel(svg, p, n * (PANEL_H + PANEL_GAP) + 18));
    const bottom = PANELS.length * (PANEL_H + PANEL_GAP) - PANEL_GAP + 18;
    xTicks(svg, bottom);
    svg.addEventListener('click', (ev) => setStep(stepAtX(ev.offsetX)));
    return addCursor(svg, 18, bottom);
  }

  function drawPanel(svg, p, top) {
    const bottom = top + PANEL_H;
    const series = p.kind === 'queues' ? [S.waiting, S.running] : [p.values];
    let hi = Math.max(1, ...series.map(maxOf));
    if (p.capacity && p.capacity <= hi * 1.25 + 1) hi = p.capacity;
    const lo = p.log ? Math.max(minOf(p.values), 1e-3) / 2 : 0;
    const y = p.log
      ? (v) => bottom - (Math.log(Math.max(v, lo)) - Math.log(lo)) / (Math.log(hi * 1.05) - Math.log(lo)) * PANEL_H
      : (v) => bottom - (v - lo) / (hi * 1.05 - lo) * PANEL_H;
    svgEl('line', {class: 'axis', x1: axis.left, x2: axis.width - axis.right, y1: bottom, y2: bottom}, svg);
    svgEl('line', {class: 'axis', x1: axis.left, x2: axis.left, y1: top, y2: bottom}, svg);
    svgEl('line', {class: 'grid', x1: axis.left, x2: axis.width - axis.right, y1: y(hi), y2: y(hi)}, svg);
    const fmt = (v) => (v >= 100 || Number.isInteger(v) ? Math.round(v) : v.toPrecision(2));
    svgEl('text', {x: axis.left - 4, y: y(hi) + 4, 'text-anchor': 'end'}, svg).textContent = fmt(hi);
    svgEl('text', {x: axis.left - 4, y: bottom, 'text-anchor': 'end'}, svg).textContent = p.log ? fmt(lo) : 0;
    const label = svgEl('text', {x: axis.left, y: top - 5, 'font-weight': 'bold'}, svg);
    if (p.kind === 'queues') {
      svgEl('tspan', {fill: '#777'}, label).textContent = t('waiting');
      svgEl('tspan', {}, label).textContent = ' / ';
      svgEl('tspan', {fill: C.phase.decode}, label).textContent = t('running');
      svgEl('tspan', {fill: '#7570b3'}, label).textContent = `  ▼ ${t('preemption')}`;
    } else {
      label.textContent = p.label();
    }
    if (p.kind === 'bars') {
      // Narrower than a pixel, a bar would be drawn faint: the steps of each pixel column then make one bar as
      // tall as their highest (one for the prefill steps, and over it one for the decode steps, the many).
      const width = Math.max(axis.k, 1);
      const tallest = {1: new Map(), 0: new Map()};
      for (let i = view.i0; i <= view.i1; i++) {
        const column = axis.k >= 1 ? i : Math.floor((x(S.step[i]) - axis.left) / width);
        const m = tallest[S.prefill[i]], at = m.get(column);
        if (at === undefined || p.values[i] > at.v) {
          m.set(column, {v: p.values[i], x0: axis.k >= 1 ? x(S.step[i]) : axis.left + column * width});
        }
      }
      const d = {1: [], 0: []};
      for (const phase of [1, 0]) {
        for (const {v, x0} of tallest[phase].values()) {
          d[phase].push(`M${x0.toFixed(1)} ${bottom}V${y(v).toFixed(1)}h${width.toFixed(2)}V${bottom}Z`);
        }
      }
      svgEl('path', {d: d[1].join(''), fill: C.phase.prefill, class: 'bars-prefill'}, svg);
      svgEl('path', {d: d[0].join(''), fill: C.phase.decode, class: 'bars-decode'}, svg);
    } else if (p.kind === 'area') {
      svgEl('path', {d: stepLine(p.values, y) + `V${bottom}H${x(S.step[view.i0]).toFixed(1)}Z`, fill: '#888',
                     'fill-opacity': 0.6}, svg);
      if (p.capacity === hi) {
        svgEl('line', {x1: axis.left, x2: axis.width - axis.right, y1: y(hi), y2: y(hi), stroke: '#000',
                       'stroke-dasharray': '4 3'}, svg);
      }
    } else {
      svgEl('path', {d: stepLine(S.waiting, y), fill: 'none', stroke: '#777', 'stroke-width': 1.5}, svg);
      svgEl('path', {d: stepLine(S.running, y), fill: 'none', stroke: C.phase.decode, 'stroke-width': 1.5}, svg);
      for (let i = view.i0; i <= view.i1; i++) {
        if (S.preempted[i]) {
          const cx = x(S.step[i]) + axis.k / 2;
          svgEl('path', {d: `M${cx - 4} ${top + 2}h8l-4 7Z`, fill: '#7570b3', class: 'preempt'}, svg);
        }
      }
    }
  }
  // A value held over each step: flat across [x(s), x(s) + k].
  function stepLine(values, y) {
    let d = `M${x(S.step[view.i0]).toFixed(1)} ${y(values[view.i0]).toFixed(1)}`;
    for (let i = view.i0; i <= view.i1; i++) {
      d += `V${y(values[i]).toFixed(1)}H${(x(S.step[i]) + axis.k).toFixed(1)}`;
    }
    return d;
  }

  // --- Gantt chart ------------------------------------------------------------------------------------
  // The chart shows at most GANTT_MAX_H pixels of rows; more rows scroll inside its box (the step axis stays
  // below, outside the scrolling part), so a long trace never pushes the grid and the lines down the page.
  const GANTT_MAX_H = 240, GANTT_MIN_ROW = 3;
  const ganttRow = {height: 18, top: 4};
  // The chart's rows: the requests with a segment in the steps shown, in the trace's order (rowOfSeq: seq id
  // to row, for the rows drawn).
  let rowOfSeq = new Map();
  function drawGantt() {
    const box = $('gantt');
    box.textContent = '';
    const shown = new Set();
    for (const [row, , a, b] of D.segments) if (a <= view.hi && b > view.lo) shown.add(row);
    const order = [...shown].sort((p, q) => p - q), rowAt = new Map(order.map((row, k) => [row, k]));
    rowOfSeq = new Map(order.map((row, k) => [D.requests[row][0], k]));
    const rows = order.length;
    const rh = Math.max(GANTT_MIN_ROW, Math.min(18, Math.floor((GANTT_MAX_H - 8) / Math.max(rows, 1))));
    const top = ganttRow.top, bottom = top + rows * rh;
    ganttRow.height = rh;
    box.style.maxHeight = `${GANTT_MAX_H}px`;
    const svg = svgEl('svg', {width: axis.width, height: bottom + 4, 'aria-label': t('ganttAria'),
                              'shape-rendering': rh < 6 ? 'crispEdges' : 'auto'}, box);
    const paths = D.states.map(() => []);
    const half = rh < 6 ? rh / 2 : rh * 0.38;  // thin rows touch: one picture of the whole load
    for (const [row, state, a0, b0] of D.segments) {
      if (!rowAt.has(row) || a0 > view.hi || b0 <= view.lo) continue;
      const a = x(Math.max(a0, view.lo)).toFixed(1), b = x(Math.min(b0, view.hi + 1)).toFixed(1);
      const yc = top + rowAt.get(row) * rh + rh / 2;
      paths[state].push(`M${a} ${(yc - half).toFixed(1)}H${b}V${(yc + half).toFixed(1)}H${a}Z`);
    }
    D.states.forEach((name, k) => {
      const attrs = {d: paths[k].join(''), fill: C.state[name], class: `gantt-${name}`};
      if (name === 'held') Object.assign(attrs, {stroke: '#666', 'stroke-dasharray': '2 2', 'stroke-width': 0.8});
      svgEl('path', attrs, svg);
    });
    const eos = [], limit = [];
    order.forEach((row, k) => {
      const [sid, finishStep, reason] = D.requests[row];
      const yc = top + k * rh + rh / 2;
      if (rh >= 10) {
        svgEl('text', {x: axis.left - 4, y: yc + 4, 'text-anchor': 'end'}, svg).textContent = t('seq', {seq_id: sid});
      }
      if (finishStep !== null && inView(finishStep)) {
        const fx = (x(finishStep) + axis.k).toFixed(1);
        if (reason === 'eos') {
          const r = Math.min(4, Math.max(1, half));
          eos.push(`M${fx} ${(yc - r).toFixed(1)}a${r} ${r} 0 1 0 0.01 0Z`);
        } else {
          limit.push(`M${fx} ${(yc - half - 1).toFixed(1)}V${(yc + half + 1).toFixed(1)}`);
        }
      }
    });
    svgEl('path', {d: eos.join(''), fill: '#000', class: 'finish-eos'}, svg);
    svgEl('path', {d: limit.join(''), stroke: '#000', 'stroke-width': 2, fill: 'none', class: 'finish-limit'}, svg);
    svg.addEventListener('click', (ev) => setStep(stepAtX(ev.offsetX)));
    const axisBox = $('gantt-axis');
    axisBox.textContent = '';
    const axisSvg = svgEl('svg', {width: axis.width, height: 22, 'aria-hidden': 'true'}, axisBox);
    svgEl('line', {class: 'axis', x1: axis.left, x2: axis.width - axis.right, y1: 0.5, y2: 0.5}, axisSvg);
    xTicks(axisSvg, 0.5);
    axisSvg.addEventListener('click', (ev) => setStep(stepAtX(ev.offsetX)));
    $('gantt-rows').textContent = bottom > GANTT_MAX_H || rows < D.requests.length
      ? t('ganttRows', {n: rows, total: D.requests.length}) + (bottom > GANTT_MAX_H ? t('ganttScroll') : '') : '';
    const used = new Set(D.segments.map((seg) => seg[1]));
    $('gantt-legend').textContent = '';
    D.states.forEach((name, k) => { if (used.has(k)) legendItem($('gantt-legend'), C.state[name], t('state')[name]); });
    legendItem($('gantt-legend'), null, t('finishes'));
    return addCursor(svg, top, bottom);
  }
  // When the rows scroll, keep the step's running requests in view (the first of them at the top third), unless
  // some already are.
  function followGantt(i) {
    const box = $('gantt');
    if (box.scrollHeight <= box.clientHeight + 1) return;
    const rows = D.queues[i][1].map((sid) => rowOfSeq.get(sid)).filter((r) => r !== undefined);
    if (!rows.length) return;
    const rh = ganttRow.height;
    const y0 = ganttRow.top + minOf(rows) * rh, y1 = ganttRow.top + (maxOf(rows) + 1) * rh;
    if (y1 > box.scrollTop && y0 < box.scrollTop + box.clientHeight) return;
    box.scrollTop = Math.max(0, y0 - box.clientHeight / 3);
  }
  // A legend entry: a swatch of ``color`` (none if null) and ``label``; ``kind`` names it for the tests.
  function legendItem(box, color, label, kind) {
    const span = document.createElement('span');
    if (kind) span.dataset.kind = kind;
    if (color) { const sw = document.createElement('i'); sw.style.background = color; span.appendChild(sw); }
    span.appendChild(document.createTextNode(label));
    box.appendChild(span);
    return span;
  }
