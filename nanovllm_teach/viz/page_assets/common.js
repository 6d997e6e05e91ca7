// The replay page's script, in parts that page.py joins, in this order, inside one function scope:
// common.js (the data, UI strings, helpers), charts.js (the step axis, timelines, Gantt chart in SVG: drawn
// once per width, stepping moves only the cursors), grid.js (the KV block grid on a canvas, redrawn per
// step), steps.js (the step shown, play/pause, language, resizing; it starts the page).
// The data (see nanovllm_teach/viz/page.py) is the JSON in #trace-data; every string from the trace is
// shown with textContent, never parsed as HTML.

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
                     'step shown. Click a timeline or the Gantt chart to jump to a step.',
         batchSize: 'batch size', kvUsed: 'KV blocks used (of {n})', latency: 'step latency (ms)', log: ', log',
         queuesLabel: 'queues: waiting', preemption: '▼ preemption', finishes: '● EOS   | max_tokens',
         seqColour: 'seq colour', freeHashed: '(free, hashed)', timelinesAria: 'timelines',
         ganttAria: 'request Gantt chart',
         state: {waiting: 'waiting', preempted: 'preempted', prefill: 'prefill', decode: 'decode',
                 stalled: 'stalled', held: 'held (finished, slot kept)'}},
    zh: {replay: '回放', step: '步', of: '/', timelines: '时间线', requests: '请求',
         queues: '本步结束时的队列', blocks: '本步结束时的 KV 块', lines: '本步的 TEACHING 日志',
         play: '▶ 播放', pause: '❚❚ 暂停', batch: 'batch', tokens: 'tokens', waiting: 'waiting',
         running: 'running', finished: '本步结束', preemptedNote: '（下划线：被抢占）', none: '—',
         noLines: '（本步没有 TEACHING 日志）', used: '已用', shared: '共享', cached: '已缓存', free: '空闲',
         blocksOf: '块', cell: '一格 = {g} 块，按占用比例填充', hover: '悬停或点击格子查看',
         convention: '每个面板都把第 N 步结束时的状态画在第 N 步上；红色游标即当前步。点击时间线或甘特图可跳到该步。',
         batchSize: 'batch 大小', kvUsed: '已用 KV 块（共 {n} 块）', latency: '每步延迟（ms）', log: '，对数坐标',
         queuesLabel: '队列：waiting', preemption: '▼ 抢占', finishes: '● EOS   | max_tokens',
         seqColour: '序列的颜色', freeHashed: '（空闲，仍有哈希）', timelinesAria: '时间线',
         ganttAria: '请求甘特图',
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
