// The replay page's drawing: timelines and Gantt chart in SVG (drawn once per width; stepping moves only the
// cursor), the KV block grid on a canvas (redrawn per step), queues, header and TEACHING lines as text.
// The data (see nanovllm_teach/viz/page.py) is the JSON in #trace-data; every string from the trace is
// shown with textContent, never parsed as HTML.
(() => {
  'use strict';
  const D = JSON.parse(document.getElementById('trace-data').textContent);
  const S = D.steps;
  const N = S.step.length;
  const FIRST = S.step[0], LAST = S.step[N - 1];
  const SPAN = LAST - FIRST + 1;
  const NB = D.numBlocks;
  const C = D.colors;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);
  const indexOfStep = new Map(S.step.map((s, i) => [s, i]));

  const UI = {
    en: {replay: 'Replay', step: 'step', of: 'of', timelines: 'Timelines', requests: 'Requests',
         queues: 'Queues at the end of the step', blocks: 'KV blocks at the end of the step',
         lines: 'TEACHING lines of the step', play: '▶ play', pause: '❚❚ pause', batch: 'batch',
         tokens: 'tokens', waiting: 'waiting', running: 'running', finished: 'finished this step',
         preemptedNote: '(underlined: preempted)', none: '—', noLines: '(no TEACHING line in this step)',
         used: 'used', shared: 'shared', cached: 'cached', free: 'free', blocksOf: 'blocks',
         cell: 'one cell = {g} blocks, filled by occupancy', hover: 'hover or click a cell to read it',
         convention: 'Every panel draws the state at the end of step N over step N; the red cursor is the ' +
                     'step shown. Click a timeline or the Gantt chart to jump to a step.'},
    zh: {replay: '回放', step: '步', of: '/', timelines: '时间线', requests: '请求',
         queues: '本步结束时的队列', blocks: '本步结束时的 KV 块', lines: '本步的 TEACHING 日志',
         play: '▶ 播放', pause: '❚❚ 暂停', batch: 'batch', tokens: 'tokens', waiting: 'waiting',
         running: 'running', finished: '本步结束', preemptedNote: '（下划线：被抢占）', none: '—',
         noLines: '（本步没有 TEACHING 日志）', used: '已用', shared: '共享', cached: '已缓存', free: '空闲',
         blocksOf: '块', cell: '一格 = {g} 块，按占用比例填充', hover: '悬停或点击格子查看',
         convention: '每个面板都把第 N 步结束时的状态画在第 N 步上；红色游标即当前步。点击时间线或甘特图可跳到该步。'},
  };
  let lang = D.lang in UI ? D.lang : 'en';
  const t = (key) => UI[lang][key];

  function svgEl(tag, attrs, parent) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }
  const seqColor = (sid) => C.seq[sid % C.seq.length];

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
    {label: 'batch size', kind: 'bars', values: S.batch},
    {label: `KV blocks used (of ${NB})`, kind: 'area', values: S.used, capacity: NB},
    {label: 'step latency (ms)' + (logLatency ? ', log' : ''), kind: 'bars', values: S.latency, log: logLatency},
    {label: 'queues: waiting / running', kind: 'queues'},
  ];
  let cursors = [];

  function drawTimelines() {
    const box = $('timelines');
    box.textContent = '';
    const height = PANELS.length * (PANEL_H + PANEL_GAP) + 36;
    const svg = svgEl('svg', {width: axis.width, height, 'aria-label': 'timelines'}, box);
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
      svgEl('tspan', {fill: '#777'}, label).textContent = 'queues: waiting';
      svgEl('tspan', {}, label).textContent = ' / ';
      svgEl('tspan', {fill: C.phase.decode}, label).textContent = 'running';
      svgEl('tspan', {fill: '#7570b3'}, label).textContent = '  ▼ preemption';
    } else {
      label.textContent = p.label;
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
    const svg = svgEl('svg', {width: axis.width, height: bottom + 22, 'aria-label': 'request Gantt chart'}, box);
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
    D.states.forEach((name, k) => { if (used.has(k)) legendItem($('gantt-legend'), C.state[name], name); });
    legendItem($('gantt-legend'), null, '● EOS   | max_tokens');
    return addCursor(svg, top, bottom);
  }
  function legendItem(box, color, label) {
    const span = document.createElement('span');
    if (color) { const sw = document.createElement('i'); sw.style.background = color; span.appendChild(sw); }
    span.appendChild(document.createTextNode(label));
    box.appendChild(span);
  }

  // --- KV block codes at a step: deltas replayed forward from the nearest kept copy ------------------------
  // Code 0: free, 1: cached (free, hashed), k >= 2: held by the seq ids D.holders[k - 2].
  const KEY_EVERY = 64;
  const keyframes = [];
  (() => {
    const c = new Int32Array(NB);
    for (let i = 0; i < N; i++) {
      applyDelta(c, i);
      if (i % KEY_EVERY === 0) keyframes.push(c.slice());
    }
  })();
  function applyDelta(c, i) {
    const d = D.blockDeltas[i];
    for (let k = 0; k < d.length; k += 2) c[d[k]] = d[k + 1];
  }
  let codes = null, codesAt = -1;
  function codesAtIndex(i) {
    if (codesAt === i) return codes;
    if (codes !== null && codesAt < i && i - codesAt <= KEY_EVERY) {
      for (let j = codesAt + 1; j <= i; j++) applyDelta(codes, j);
    } else {
      const k = Math.floor(i / KEY_EVERY);
      codes = keyframes[k].slice();
      for (let j = k * KEY_EVERY + 1; j <= i; j++) applyDelta(codes, j);
    }
    codesAt = i;
    return codes;
  }

  // --- block grid ---------------------------------------------------------------------------------------
  const GRID_MAX_H = 380, MIN_CELL = 7;
  const grid = {group: 1, cols: 1, cell: 10, cells: 0, selected: null, hovered: null};
  function layoutGrid() {
    const canvas = $('grid');
    const width = Math.max(240, canvas.parentElement.clientWidth);
    // The largest cell that fits every block in width x GRID_MAX_H; below MIN_CELL, group blocks.
    let cell = Math.floor(Math.sqrt(width * GRID_MAX_H / Math.max(NB, 1)));
    cell = Math.min(26, cell);
    let group = 1;
    if (cell < MIN_CELL) {
      cell = MIN_CELL + 3;
      const fit = Math.floor(width / cell) * Math.floor(GRID_MAX_H / cell);
      group = Math.ceil(NB / fit);
    }
    const cells = Math.ceil(NB / group);
    const cols = Math.max(1, Math.min(cells, Math.floor(width / cell)));
    Object.assign(grid, {group, cols, cell, cells});
    const dpr = window.devicePixelRatio || 1;
    const h = Math.ceil(cells / cols) * cell;
    canvas.width = cols * cell * dpr; canvas.height = h * dpr;
    canvas.style.width = `${cols * cell}px`; canvas.style.height = `${h}px`;
    canvas.getContext('2d').setTransform(dpr, 0, 0, dpr, 0, 0);
  }
  function holdersOf(code) { return code >= 2 ? D.holders[code - 2] : null; }
  function groupCounts(c, g) {
    const a = g * grid.group, b = Math.min(NB, a + grid.group);
    const out = {first: a, last: b - 1, used: 0, shared: 0, cached: 0, free: 0, seqs: new Map()};
    for (let blk = a; blk < b; blk++) {
      const code = c[blk];
      if (code === 0) out.free++;
      else if (code === 1) out.cached++;
      else {
        const h = D.holders[code - 2];
        out.used++;
        if (h.length > 1) out.shared++;
        for (const sid of h) out.seqs.set(sid, (out.seqs.get(sid) || 0) + 1);
      }
    }
    return out;
  }
  function drawGrid(c) {
    const ctx = $('grid').getContext('2d');
    const {cell, cols, cells, group} = grid;
    ctx.fillStyle = '#e3e3e3';
    ctx.fillRect(0, 0, cols * cell, Math.ceil(cells / cols) * cell);
    ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
    ctx.font = `bold ${Math.max(8, Math.floor(cell * 0.45))}px sans-serif`;
    let previousOwner = null;
    for (let g = 0; g < cells; g++) {
      const px = (g % cols) * cell, py = Math.floor(g / cols) * cell, s = cell - 2;
      if (group === 1) {
        const code = c[g];
        const h = holdersOf(code);
        ctx.fillStyle = h ? seqColor(h[0]) : code === 1 ? C.cached : C.free;
        ctx.fillRect(px + 1, py + 1, s, s);
        if (h && h.length > 1) {
          ctx.strokeStyle = '#000'; ctx.lineWidth = 2; ctx.strokeRect(px + 2, py + 2, s - 2, s - 2);
        }
        if (h && cell >= 16 && (h.length > 1 || h[0] !== previousOwner || g % cols === 0)) {
          ctx.fillStyle = textColor(seqColor(h[0]));
          ctx.fillText(h.length > 1 ? `×${h.length}` : String(h[0]), px + cell / 2, py + cell / 2 + 1);
        }
        previousOwner = h && h.length === 1 ? h[0] : null;
      } else {
        // A group: filled from the bottom by its used blocks (in the colour of the seq holding its first used
        // block), then its cached ones; a black top edge when it holds a shared block.
        const a = g * group, b = Math.min(NB, a + group);
        const n = {used: 0, cached: 0, shared: 0};
        let owner = null;
        for (let blk = a; blk < b; blk++) {
          const code = c[blk];
          if (code === 1) n.cached++;
          else if (code >= 2) {
            n.used++;
            const h = D.holders[code - 2];
            if (h.length > 1) n.shared++;
            if (owner === null) owner = h[0];
          }
        }
        const total = b - a;
        ctx.fillStyle = C.free; ctx.fillRect(px + 1, py + 1, s, s);
        const uh = s * n.used / total, ch = s * n.cached / total;
        if (n.used) { ctx.fillStyle = seqColor(owner); ctx.fillRect(px + 1, py + 1 + s - uh, s, uh); }
        if (n.cached) { ctx.fillStyle = C.cached; ctx.fillRect(px + 1, py + 1 + s - uh - ch, s, ch); }
        if (n.shared) { ctx.fillStyle = '#000'; ctx.fillRect(px + 1, py + 1, s, 2); }
      }
    }
    const mark = grid.selected !== null ? grid.selected : grid.hovered;
    if (mark !== null && mark < cells) {
      ctx.strokeStyle = 'red'; ctx.lineWidth = 2;
      ctx.strokeRect((mark % cols) * cell + 1, Math.floor(mark / cols) * cell + 1, cell - 2, cell - 2);
    }
  }
  function textColor(hex) {
    const r = parseInt(hex.slice(1, 3), 16), g = parseInt(hex.slice(3, 5), 16), b = parseInt(hex.slice(5, 7), 16);
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255 > 0.6 ? '#000' : '#fff';
  }
  function gridSummary(c) {
    let used = 0, shared = 0, maxRefs = 0, cached = 0;
    for (let b = 0; b < NB; b++) {
      const code = c[b];
      if (code === 1) cached++;
      else if (code >= 2) {
        used++;
        const refs = D.holders[code - 2].length;
        if (refs > 1) { shared++; maxRefs = Math.max(maxRefs, refs); }
      }
    }
    let text = `${used} ${t('used')} (${shared} ${t('shared')}${shared ? `, max ×${maxRefs}` : ''}), ` +
               `${cached} ${t('cached')}, ${NB - used - cached} ${t('free')} · ${NB} ${t('blocksOf')}`;
    if (grid.group > 1) text += ` · ${t('cell').replace('{g}', grid.group)}`;
    return text;
  }
  function cellInfo(c, g) {
    if (g === null || g >= grid.cells) return t('hover');
    if (grid.group === 1) {
      const h = holdersOf(c[g]);
      if (h && h.length > 1) return `block ${g}: ${t('shared')} ×${h.length}, seqs ${h.join(', ')}`;
      if (h) return `block ${g}: seq ${h[0]}`;
      return `block ${g}: ${c[g] === 1 ? t('cached') : t('free')}`;
    }
    const n = groupCounts(c, g);
    const seqs = [...n.seqs.keys()].sort((a, b) => a - b);
    const shown = seqs.slice(0, 12).join(', ') + (seqs.length > 12 ? `, … (+${seqs.length - 12})` : '');
    return `blocks ${n.first}–${n.last}: ${n.used} ${t('used')} (${n.shared} ${t('shared')}), ` +
           `${n.cached} ${t('cached')}, ${n.free} ${t('free')}` + (seqs.length ? ` · seqs ${shown}` : '');
  }
  function cellAt(ev) {
    const g = Math.floor(ev.offsetY / grid.cell) * grid.cols + Math.floor(ev.offsetX / grid.cell);
    return ev.offsetX < grid.cols * grid.cell && g < grid.cells ? g : null;
  }

  // --- the step shown -----------------------------------------------------------------------------------
  let current = FIRST;
  const MAX_IDS = 64;  // longer queues show their head and a count
  function ids(list, preempted) {
    const span = document.createElement('span');
    if (!list.length) { span.textContent = t('none'); return span; }
    list.slice(0, MAX_IDS).forEach((sid, k) => {
      if (k) span.appendChild(document.createTextNode(', '));
      const node = document.createElement(preempted.has(sid) ? 'u' : 'span');
      node.textContent = sid;
      span.appendChild(node);
    });
    if (list.length > MAX_IDS) span.appendChild(document.createTextNode(`, … (+${list.length - MAX_IDS})`));
    return span;
  }
  function showQueues(i) {
    const [waiting, running, preemptedList, finished] = D.queues[i];
    const preempted = new Set(preemptedList);
    const box = $('queues');
    box.textContent = '';
    const rows = [[t('waiting'), waiting], [t('running'), running], [t('finished'), finished]];
    for (const [label, list] of rows) {
      const div = document.createElement('div');
      const b = document.createElement('b');
      b.textContent = `${label} (${list.length}): `;
      div.append(b, ids(list, preempted));
      if (label === t('waiting') && preempted.size) div.append(' ' + t('preemptedNote'));
      box.appendChild(div);
    }
  }
  function showLines(i) {
    const [en, zh] = D.lines[i];
    const lines = lang === 'zh' && zh !== null ? zh : en;
    const box = $('lines');
    box.textContent = '';
    if (!lines.length) { box.textContent = t('noLines'); return; }
    const frag = document.createDocumentFragment();
    for (const line of lines) { const div = document.createElement('div'); div.textContent = line; frag.appendChild(div); }
    box.appendChild(frag);
  }
  function show(step) {
    const t0 = performance.now();
    const i = indexOfStep.get(step);
    current = step;
    const slider = $('slider');
    if (Number(slider.value) !== step) slider.value = step;
    $('readout').textContent = `${step} / ${LAST}`;
    for (const c of cursors) moveCursor(c, step);
    const phase = S.prefill[i] ? 'prefill' : 'decode';
    $('step-header').textContent = `${t('step')} ${step} ${t('of')} ${LAST} · ${phase} · ${t('batch')} ${S.batch[i]} · ` +
      `${S.tokens[i]} ${t('tokens')} · ${S.latency[i].toFixed(2)} ms`;
    const c = codesAtIndex(i);
    drawGrid(c);
    $('grid-summary').textContent = gridSummary(c);
    $('grid-info').textContent = cellInfo(c, grid.selected !== null ? grid.selected : grid.hovered);
    showQueues(i);
    showLines(i);
    replay.lastStepMs = performance.now() - t0;
  }
  function setStep(step) {
    const i = Math.max(0, Math.min(N - 1, bisectRight(S.step, step) - 1));
    show(S.step[i]);
  }

  // --- play / pause, language, resizing -------------------------------------------------------------------
  let timer = null;
  function setPlaying(on) {
    if (timer !== null) { clearInterval(timer); timer = null; }
    if (on) {
      if (current === LAST) show(FIRST);
      timer = setInterval(() => {
        const i = indexOfStep.get(current);
        if (i >= N - 1) setPlaying(false); else show(S.step[i + 1]);
      }, Number($('speed').value));
    }
    $('play').textContent = timer !== null ? t('pause') : t('play');
  }
  function setLang(value) {
    lang = value;
    document.documentElement.lang = value;
    for (const node of document.querySelectorAll('[data-ui]')) node.textContent = t(node.dataset.ui);
    for (const b of document.querySelectorAll('.langs button')) b.setAttribute('aria-pressed', String(b.dataset.lang === value));
    $('play').textContent = timer !== null ? t('pause') : t('play');
    show(current);
  }
  function gridLegend() {
    const box = $('grid-legend');
    box.textContent = '';
    legendItem(box, C.seq[0], `${t('used')}: seq colour`);
    legendItem(box, null, `▣ ${t('shared')} (×refs)`);
    legendItem(box, C.cached, `${t('cached')} (free, hashed)`);
    legendItem(box, C.free, t('free'));
  }
  function drawAll() {
    layoutAxis($('timelines').parentElement.clientWidth);
    cursors = [drawTimelines(), drawGantt()];
    layoutGrid();
    gridLegend();
    show(current);
  }

  const replay = {
    setStep, show, get step() { return current; }, lastStepMs: 0,
    play: () => setPlaying(true), pause: () => setPlaying(false), get playing() { return timer !== null; },
    setLang,
  };
  window.replay = replay;

  $('title').textContent = D.title;
  $('lesson').textContent = D.lesson || '';
  const slider = $('slider');
  slider.min = FIRST; slider.max = LAST; slider.value = FIRST;
  slider.addEventListener('input', () => { setPlaying(false); setStep(Number(slider.value)); });
  $('play').addEventListener('click', () => setPlaying(timer === null));
  $('speed').addEventListener('change', () => { if (timer !== null) setPlaying(true); });
  for (const b of document.querySelectorAll('.langs button')) b.addEventListener('click', () => setLang(b.dataset.lang));
  const canvas = $('grid');
  canvas.addEventListener('mousemove', (ev) => { grid.hovered = cellAt(ev); show(current); });
  canvas.addEventListener('mouseleave', () => { grid.hovered = null; show(current); });
  canvas.addEventListener('click', (ev) => { const g = cellAt(ev); grid.selected = grid.selected === g ? null : g; show(current); });
  let resizeTimer = null;
  window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(drawAll, 100); });
  setLang(lang);
  drawAll();
})();
