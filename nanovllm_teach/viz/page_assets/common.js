// The viewer's script, in parts that viz/page.py joins, in this order, as the body of one function,
// ``startViewer(root, D, host)`` (inflate.js defines ``inflate`` beside it): common.js (the data decoded;
// UI strings, helpers), charts.js (the step axis, timelines, Gantt chart in SVG: drawn once per width and
// window of steps, stepping moves only the cursors), grid.js (the KV block grid on a canvas, redrawn per
// step), steps.js (the step shown, step buttons, play/pause, keys, language, resizing; it draws the viewer
// and returns its handle). The replay page (page.py) and the notebook's Player (player.py, an anywidget)
// both call it: ``root`` is the element holding page.html's markup, ``D`` the inflated data (page.py's
// page_data), ``host`` what differs between them: ``keys`` (the node whose key presses step: the page's
// document, the widget's own element), ``onStep(step, playing)`` and ``onLang(lang)`` (the widget tells its
// Python side; the page has neither).
// Every string from the trace is shown with textContent, never parsed as HTML.

  // Undo page.py's differences: a column of deltas back to its values.
  function sums(deltas) {
    const out = new Array(deltas.length);
    let v = 0;
    for (let i = 0; i < deltas.length; i++) { v += deltas[i]; out[i] = v; }
    return out;
  }
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
  // TEACHING lines, in windows of steps (page.py: step_lines_window; the page has one of all of them, the
  // Player's kernel sends a long trace's on demand): per step [pair, numbers...] with each number a
  // difference from the same slot of the pair's previous line; made absolute once, when a window comes, and
  // turned into text only for the step shown.
  const lineWindows = [];
  function addLines(L) {
    const slotsOf = L.pairs.map(([en]) => L.texts[en].split(L.slot).length - 1);
    const last = slotsOf.map((n) => new Array(n).fill(0));
    for (const flat of L.steps) {
      for (let k = 0; k < flat.length;) {
        const pair = flat[k++], prev = last[pair];
        for (let j = 0; j < prev.length; j++, k++) { prev[j] += flat[k]; flat[k] = prev[j]; }
      }
    }
    lineWindows.push(L);
  }
  addLines(D.lines);
  function fillLines(L, flat, side) {
    const out = [];
    for (let k = 0; k < flat.length;) {
      const pair = flat[k++], parts = L.texts[L.pairs[pair][side]].split(L.slot);
      let text = parts[0];
      for (let j = 1; j < parts.length; j++) text += String(flat[k++]) + parts[j];
      out.push(text);
    }
    return out;
  }
  // The lines of step index i in language ``which``; null while their window has not come.
  function linesOf(i, which) {
    const L = lineWindows.find((w) => i >= w.from && i < w.from + w.steps.length);
    if (!L) return null;
    const j = i - L.from;
    if (which === 'zh' && L.zhAlone[j] !== undefined) return fillLines(L, L.zhAlone[j], 0);
    return fillLines(L, L.steps[j], which === 'zh' ? 1 : 0);
  }
  const N = S.step.length;
  const FIRST = S.step[0], LAST = S.step[N - 1];
  const SPAN = LAST - FIRST + 1;
  const NB = D.numBlocks;
  const C = D.colors;
  const SVGNS = 'http://www.w3.org/2000/svg';
  // Scoped to the viewer's root: a notebook may show several viewers, each with the same ids.
  const $ = (id) => root.querySelector(`#${id}`);
  const indexOfStep = new Map(S.step.map((s, i) => [s, i]));

  // The page's words in both languages, from viz/page_words.py.
  const UI = D.ui;
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
  // The largest and smallest of a column: a loop, as spreading a run's 70,000 values into Math.max's
  // arguments overflows the stack.
  function maxOf(values) { let m = -Infinity; for (const v of values) if (v > m) m = v; return m; }
  function minOf(values) { let m = Infinity; for (const v of values) if (v < m) m = v; return m; }
