// The replay page's script, in parts that page.py joins, in this order, inside one function scope:
// common.js (the data, decoded; UI strings, helpers), charts.js (the step axis, timelines, Gantt chart in
// SVG: drawn once per width, stepping moves only the cursors), grid.js (the KV block grid on a canvas,
// redrawn per step), steps.js (the step shown, step buttons, play/pause, keys, language, resizing; it starts
// the page). The scope is an async function: the data is inflated before anything is drawn.
// The data (see nanovllm_teach/viz/page.py) is in #trace-data; every string from the trace is shown with
// textContent, never parsed as HTML.

  // The data is gzip-compressed JSON in base64 (page.py: _packed); the browser's own DecompressionStream
  // inflates it, so the page needs no library and no network.
  async function inflate(base64) {
    const bytes = Uint8Array.from(atob(base64), (ch) => ch.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return JSON.parse(await new Response(stream).text());
  }
  // Undo page.py's differences: a column of deltas back to its values.
  function sums(deltas) {
    const out = new Array(deltas.length);
    let v = 0;
    for (let i = 0; i < deltas.length; i++) { v += deltas[i]; out[i] = v; }
    return out;
  }
  const D = await inflate(document.getElementById('trace-data').textContent);
  const S = {};
  for (const [name, deltas] of Object.entries(D.steps)) S[name] = sums(deltas);
  S.latency = S.latencyUs.map((us) => us / 1000);
  // Segments: flat [row, state, first step, end step] differences -> [[row, state, a, b], ...].
  D.segments = (() => {
    const out = [], prev = [0, 0, 0, 0];
    for (let k = 0; k < D.segments.length; k += 4) {
      for (let j = 0; j < 4; j++) prev[j] += D.segments[k + j];
      out.push(prev.slice());
    }
    return out;
  })();
  // Queues: a 0 stands for the previous step's list.
  D.queues.forEach((q, i) => { for (let j = 0; j < 4; j++) if (q[j] === 0) q[j] = D.queues[i - 1][j]; });
  // TEACHING lines: per step [pair, numbers...] with each number a difference from the same slot of the
  // pair's previous line; made absolute here, once, and turned into text only for the step shown.
  const L = D.lines;
  const slotsOf = L.pairs.map(([en]) => L.texts[en].split(L.slot).length - 1);
  (() => {
    const last = slotsOf.map((n) => new Array(n).fill(0));
    for (const flat of L.steps) {
      for (let k = 0; k < flat.length;) {
        const pair = flat[k++], prev = last[pair];
        for (let j = 0; j < prev.length; j++, k++) { prev[j] += flat[k]; flat[k] = prev[j]; }
      }
    }
  })();
  function fillLines(flat, side) {
    const out = [];
    for (let k = 0; k < flat.length;) {
      const pair = flat[k++], parts = L.texts[L.pairs[pair][side]].split(L.slot);
      let text = parts[0];
      for (let j = 1; j < parts.length; j++) text += String(flat[k++]) + parts[j];
      out.push(text);
    }
    return out;
  }
  // The lines of step index i in language ``which``.
  function linesOf(i, which) {
    if (which === 'zh' && L.zhAlone[i] !== undefined) return fillLines(L.zhAlone[i], 0);
    return fillLines(L.steps[i], which === 'zh' ? 1 : 0);
  }
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
                     'step shown. Click a timeline or the Gantt chart to jump to a step.',
         batchSize: 'batch size', kvUsed: 'KV blocks used (of {n})', latency: 'step latency (ms)', log: ', log',
         queuesLabel: 'queues: waiting', runningLabel: 'running', preemption: '▼ preemption', finishes: '● EOS   | max_tokens',
         cachedLegend: 'cached (free, hashed)', timelinesAria: 'timelines',
         ganttAria: 'request Gantt chart', back: '◀ back', forward: 'forward ▶',
         backTitle: 'step back (← key)', forwardTitle: 'step forward (→ key)', playTitle: 'play / pause (space)',
         usedBySeq: 'used (colour: its seq)', freed: "freed at the step's end", sharedRefs: 'shared (×refs)',
         groupUsed: 'used (colour: the seq of its first used block; filled by the share used)',
         ganttRows: '{n} requests, one row each: scroll the chart',
         state: {waiting: 'waiting', preempted: 'preempted', prefill: 'prefill', decode: 'decode',
                 stalled: 'stalled', held: 'held (finished, slot kept)'}},
    zh: {replay: '回放', step: '步', of: '/', timelines: '时间线', requests: '请求',
         queues: '本步结束时的队列', blocks: '本步结束时的 KV 块', lines: '本步的 TEACHING 日志',
         play: '▶ 播放', pause: '❚❚ 暂停', batch: 'batch', tokens: '个 token', waiting: '等待队列',
         running: '运行队列', finished: '本步结束', preemptedNote: '（下划线：被抢占）', none: '—',
         noLines: '（本步没有 TEACHING 日志）', used: '已用', shared: '共享', cached: '已缓存', free: '空闲',
         blocksOf: '块', cell: '一格 = {g} 块，按占用比例填充', hover: '悬停或点击格子查看',
         convention: '每个面板都把第 N 步结束时的状态画在第 N 步上；红色游标即当前步。点击时间线或甘特图可跳到该步。',
         batchSize: 'batch 大小', kvUsed: '已用 KV 块（共 {n} 块）', latency: '每步延迟（ms）', log: '，对数坐标',
         queuesLabel: '队列：等待', runningLabel: '运行', preemption: '▼ 抢占', finishes: '● EOS   | max_tokens',
         cachedLegend: '已缓存（空闲，仍有哈希）', timelinesAria: '时间线',
         ganttAria: '请求甘特图', back: '◀ 上一步', forward: '下一步 ▶',
         backTitle: '上一步（← 键）', forwardTitle: '下一步（→ 键）', playTitle: '播放 / 暂停（空格键）',
         usedBySeq: '已用（颜色：所属序列）', freed: '本步结束时释放', sharedRefs: '共享（×引用数）',
         groupUsed: '已用（颜色：格内第一个已用块所属的序列；填充高度为已用比例）',
         ganttRows: '共 {n} 个请求，每个一行：可滚动查看',
         state: {waiting: '等待', preempted: '被抢占后等待', prefill: '预填充', decode: '解码',
                 stalled: '停顿（他人在预填充）', held: '占位（已结束，名额保留）'}},
  };
  let lang = D.lang in UI ? D.lang : 'en';
  // The text of ``key`` in the page's language; ``{name}`` fields filled from ``values``.
  const t = (key, values = {}) => {
    const text = UI[lang][key];
    return typeof text === 'string' ? text.replace(/\{(\w+)\}/g, (_, name) => values[name]) : text;
  };

  function svgEl(tag, attrs, parent) {
    const node = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }
  const seqColor = (sid) => C.seq[sid % C.seq.length];
