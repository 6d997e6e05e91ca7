// The shared step axis, the timelines and the request Gantt chart (SVG). Part of the replay page's script (common.js).

  // --- the shared step axis: step s spans [x(s), x(s) + k], the same in every SVG -------------------------
  const axis = {left: 64, right: 12, width: 600, k: 1};
  const x = (s) => axis.left + (s - FIRST) * axis.k;
  function layoutAxis(width) {
    axis.width = Math.max(320, width);
    axis.k = (axis.width - axis.left - axis.right) / SPAN;
  }
  function stepAtX(px) {
    const s = Math.floor((px - axis.left) / axis.k) + FIRST;
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
    const raw = SPAN / target;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw) || raw;
    for (let s = Math.ceil(FIRST / step) * step; s <= LAST; s += step) {
      svgEl('line', {class: 'axis', x1: x(s) + axis.k / 2, x2: x(s) + axis.k / 2, y1: y, y2: y + 4}, svg);
      svgEl('text', {x: x(s) + axis.k / 2, y: y + 15, 'text-anchor': 'middle'}, svg).textContent = s;
    }
  }

  // --- timelines --------------------------------------------------------------------------------------
  const PANEL_H = 72, PANEL_GAP = 22;
  const logLatency = Math.max(...S.latency) > 20 * Math.max(Math.min(...S.latency), 1e-3);
  const PANELS = [
    {label: () => t('batchSize'), kind: 'bars', values: S.batch},
    {label: () => t('kvUsed', {n: NB}), kind: 'area', values: S.used, capacity: NB},
    {label: () => t('latency') + (logLatency ? t('log') : ''), kind: 'bars', values: S.latency, log: logLatency},
    {kind: 'queues'},
  ];
  let cursors = [];

  function drawTimelines() {
    const box = $('timelines');
    box.textContent = '';
    const height = PANELS.length * (PANEL_H + PANEL_GAP) + 36;
    const svg = svgEl('svg', {width: axis.width, height, 'aria-label': t('timelinesAria')}, box);
    PANELS.forEach((p, n) => drawPanel(svg, p, n * (PANEL_H + PANEL_GAP) + 18));
    const bottom = PANELS.length * (PANEL_H + PANEL_GAP) - PANEL_GAP + 18;
    xTicks(svg, bottom);
    svg.addEventListener('click', (ev) => setStep(stepAtX(ev.offsetX)));
    return addCursor(svg, 18, bottom);
  }

  function drawPanel(svg, p, top) {
    const bottom = top + PANEL_H;
    const series = p.kind === 'queues' ? [S.waiting, S.running] : [p.values];
    let hi = Math.max(1, ...series.flat());
    if (p.capacity && p.capacity <= hi * 1.25 + 1) hi = p.capacity;
    const lo = p.log ? Math.max(Math.min(...p.values), 1e-3) / 2 : 0;
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
      svgEl('tspan', {fill: '#777'}, label).textContent = t('queuesLabel');
      svgEl('tspan', {}, label).textContent = ' / ';
      svgEl('tspan', {fill: C.phase.decode}, label).textContent = 'running';
      svgEl('tspan', {fill: '#7570b3'}, label).textContent = `  ${t('preemption')}`;
    } else {
      label.textContent = p.label();
    }
    if (p.kind === 'bars') {
      const d = {1: [], 0: []};
      for (let i = 0; i < N; i++) {
        const x0 = x(S.step[i]);
        d[S.prefill[i]].push(`M${x0.toFixed(1)} ${bottom}V${y(p.values[i]).toFixed(1)}h${axis.k.toFixed(2)}V${bottom}Z`);
      }
      svgEl('path', {d: d[1].join(''), fill: C.phase.prefill, class: 'bars-prefill'}, svg);
      svgEl('path', {d: d[0].join(''), fill: C.phase.decode, class: 'bars-decode'}, svg);
    } else if (p.kind === 'area') {
      svgEl('path', {d: stepLine(p.values, y) + `V${bottom}H${x(FIRST)}Z`, fill: '#888', 'fill-opacity': 0.6}, svg);
      if (p.capacity === hi) {
        svgEl('line', {x1: axis.left, x2: axis.width - axis.right, y1: y(hi), y2: y(hi), stroke: '#000',
                       'stroke-dasharray': '4 3'}, svg);
      }
    } else {
      svgEl('path', {d: stepLine(S.waiting, y), fill: 'none', stroke: '#777', 'stroke-width': 1.5}, svg);
      svgEl('path', {d: stepLine(S.running, y), fill: 'none', stroke: C.phase.decode, 'stroke-width': 1.5}, svg);
      for (let i = 0; i < N; i++) {
        if (S.preempted[i]) {
          const cx = x(S.step[i]) + axis.k / 2;
          svgEl('path', {d: `M${cx - 4} ${top + 2}h8l-4 7Z`, fill: '#7570b3', class: 'preempt'}, svg);
        }
      }
    }
  }
  // A value held over each step: flat across [x(s), x(s) + k].
  function stepLine(values, y) {
    let d = `M${x(S.step[0]).toFixed(1)} ${y(values[0]).toFixed(1)}`;
    for (let i = 0; i < N; i++) {
      d += `V${y(values[i]).toFixed(1)}H${(x(S.step[i]) + axis.k).toFixed(1)}`;
    }
    return d;
  }

  // --- Gantt chart ------------------------------------------------------------------------------------
  function drawGantt() {
    const box = $('gantt');
    box.textContent = '';
    const rows = D.requests.length;
    const rh = Math.max(2, Math.min(18, Math.floor(420 / Math.max(rows, 1))));
    const top = 4, bottom = top + rows * rh;
    const svg = svgEl('svg', {width: axis.width, height: bottom + 22, 'aria-label': t('ganttAria')}, box);
    const paths = D.states.map(() => []);
    const half = Math.max(1, rh * 0.38);
    for (const [row, state, a, b] of D.segments) {
      const yc = top + row * rh + rh / 2;
      paths[state].push(`M${x(a).toFixed(1)} ${(yc - half).toFixed(1)}H${x(b).toFixed(1)}V${(yc + half).toFixed(1)}H${x(a).toFixed(1)}Z`);
    }
    D.states.forEach((name, k) => {
      const attrs = {d: paths[k].join(''), fill: C.state[name], class: `gantt-${name}`};
      if (name === 'held') Object.assign(attrs, {stroke: '#666', 'stroke-dasharray': '2 2', 'stroke-width': 0.8});
      svgEl('path', attrs, svg);
    });
    D.requests.forEach(([sid, finishStep, reason], row) => {
      const yc = top + row * rh + rh / 2;
      if (rh >= 10) {
        svgEl('text', {x: axis.left - 4, y: yc + 4, 'text-anchor': 'end'}, svg).textContent = `seq ${sid}`;
      }
      if (finishStep !== null) {
        const fx = x(finishStep) + axis.k;
        if (reason === 'eos') svgEl('circle', {cx: fx, cy: yc, r: Math.min(4, half), fill: '#000'}, svg);
        else svgEl('line', {x1: fx, x2: fx, y1: yc - half - 1, y2: yc + half + 1, stroke: '#000', 'stroke-width': 2}, svg);
      }
    });
    svgEl('line', {class: 'axis', x1: axis.left, x2: axis.width - axis.right, y1: bottom, y2: bottom}, svg);
    xTicks(svg, bottom);
    svg.addEventListener('click', (ev) => setStep(stepAtX(ev.offsetX)));
    const used = new Set(D.segments.map((seg) => seg[1]));
    $('gantt-legend').textContent = '';
    D.states.forEach((name, k) => { if (used.has(k)) legendItem($('gantt-legend'), C.state[name], t('state')[name]); });
    legendItem($('gantt-legend'), null, t('finishes'));
    return addCursor(svg, top, bottom);
  }
  function legendItem(box, color, label) {
    const span = document.createElement('span');
    if (color) { const sw = document.createElement('i'); sw.style.background = color; span.appendChild(sw); }
    span.appendChild(document.createTextNode(label));
    box.appendChild(span);
  }
