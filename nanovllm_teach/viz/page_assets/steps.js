// The step shown, play/pause, language and resizing; draws the viewer and returns its handle. Part of the
// viewer's script (common.js).

  // --- the step shown -----------------------------------------------------------------------------------
  // A live run's page opens at its newest step; the Player at the step its Python side shows.
  let current = D.live ? LAST : FIRST;
  if (D.start !== undefined) current = S.step[Math.max(0, bisectRight(S.step, D.start) - 1)];
  const LONG_RUN = 5000;  // steps; a longer run's charts open on a window of steps
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
      b.textContent = t('queueHead', {queue: label, n: list.length});
      div.append(b, ids(list, preempted));
      if (label === t('waiting') && preempted.size) div.append(t('preemptedNote'));
      box.appendChild(div);
    }
  }
  function showLines(i) {
    const lines = linesOf(i, lang);
    const box = $('lines');
    box.textContent = '';
    if (lines === null) { box.textContent = '…'; host.fetchLines(i); return; }  // asked for: shown when it comes
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
    if (!inView(step)) { placeView(step); drawCharts(); }
    for (const c of cursors) moveCursor(c, step);
    const phase = t('state')[S.prefill[i] ? 'prefill' : 'decode'];
    $('step-header').textContent = t('stepHeader', {step, last: LAST, phase, batch: S.batch[i], tokens: S.tokens[i],
                                                     ms: S.latency[i].toFixed(2)});
    const c = codesAtIndex(i), freed = grid.group === 1 ? freedAt(i) : new Map();
    drawGrid(c, freed);
    drawOwners(c);
    $('grid-summary').textContent = gridSummary(c, freed);
    $('grid-info').textContent = cellInfo(c, freed, grid.selected !== null ? grid.selected : grid.hovered);
    showQueues(i);
    followGantt(i);
    showLines(i);
    replay.lastStepMs = performance.now() - t0;
    replay.shown += 1;
    if (host.onStep) host.onStep(step, timer !== null);
  }
  function setStep(step) {
    const i = Math.max(0, Math.min(N - 1, bisectRight(S.step, step) - 1));
    show(S.step[i]);
  }
  // One step back or forward; it pauses, as a reader stepping by hand wants the step to stay.
  function stepBy(delta) {
    setPlaying(false);
    show(S.step[Math.max(0, Math.min(N - 1, indexOfStep.get(current) + delta))]);
  }

  // --- play / pause, language, resizing -------------------------------------------------------------------
  // Playing shows the step that the elapsed time reaches at the chosen rate (steps per second): at most one
  // step per frame, so a fast rate skips steps rather than falling behind, and crosses any run in the time
  // its speed says.
  const FRAME_MS = 16;
  // The speeds, in steps per second: 0.5x to 64x of 2.5 steps a second, and, for a long run, the rate that
  // plays all of it in WHOLE_RUN_S seconds.
  const WHOLE_RUN_S = 30;
  const SPEEDS = [[1.25, '0.5×'], [2.5, '1×'], [10, '4×'], [40, '16×'], [160, '64×']];
  let timer = null;
  function setPlaying(on) {
    if (timer !== null) { clearInterval(timer); timer = null; }
    if (on) {
      if (current === LAST) show(FIRST);
      const rate = Number($('speed').value), from = indexOfStep.get(current), t0 = performance.now();
      timer = setInterval(() => {
        const i = Math.min(N - 1, from + Math.floor((performance.now() - t0) * rate / 1000));
        if (i !== indexOfStep.get(current)) show(S.step[i]);
        if (i >= N - 1) setPlaying(false);
      }, Math.max(FRAME_MS, 1000 / rate));
    }
    playCaption();
    $('play').setAttribute('aria-pressed', String(timer !== null));
  }
  function speedOptions() {
    const box = $('speed'), chosen = box.value;
    box.textContent = '';
    const options = [...SPEEDS];
    if (N / WHOLE_RUN_S > SPEEDS[SPEEDS.length - 1][0]) options.push([N / WHOLE_RUN_S, t('wholeRun', {s: WHOLE_RUN_S})]);
    for (const [rate, name] of options) {
      const option = document.createElement('option');
      option.value = rate; option.textContent = name;
      box.appendChild(option);
    }
    box.value = chosen || 2.5;
    box.title = t('speed');
  }
  // The steps the charts show: all of them, or a window (see charts.js), offered where the run is longer.
  const WINDOWS = [100, 500, 2000];
  function zoomOptions() {
    const box = $('zoom'), chosen = box.value;
    box.textContent = '';
    for (const size of [SPAN, ...WINDOWS.filter((w) => w < SPAN / 2)]) {
      const option = document.createElement('option');
      option.value = size;
      option.textContent = size === SPAN ? t('allSteps', {n: SPAN}) : t('windowSteps', {n: size});
      box.appendChild(option);
    }
    box.value = chosen || view.size;
    box.title = t('zoom');
  }
  function playCaption() { $('play').textContent = timer !== null ? `❚❚ ${t('pause')}` : `▶ ${t('play')}`; }
  function setLang(value) {
    lang = value;
    if (host.onLang) host.onLang(value);
    document.documentElement.lang = value;
    for (const node of document.querySelectorAll('[data-ui]')) node.textContent = t(node.dataset.ui);
    for (const b of document.querySelectorAll('.langs button')) b.setAttribute('aria-pressed', String(b.dataset.lang === value));
    playCaption();
    $('back').textContent = `◀ ${t('back')}`;
    $('forward').textContent = `${t('forward')} ▶`;
    // Each button's tooltip names its key.
    for (const [id, key] of [['back', '←'], ['forward', '→'], ['play', t('spaceBar')]]) $(id).title = t('shortcut', {key});
    // The scenario's lesson in the viewer's language; a text the trace wrote itself is shown as it is, so labelled.
    $('lesson-text').textContent = D.lesson ? D.lesson[lang] : '';
    $('lesson-own').textContent = D.lesson && D.lesson.own ? t('traceText') : '';
    speedOptions();
    zoomOptions();
    drawAll();  // the charts' labels and legends are in the language too
  }
  function gridLegend() {
    const box = $('grid-legend');
    box.textContent = '';
    // blockgrid's legend, with the page's colours: what the grid draws for each kind of block.
    if (grid.group === 1) {
      legendItem(box, C.seq[0], t('usedBySeq'), 'used');
      legendItem(box, faded(C.seq[0]), t('freed'), 'freed');
      legendItem(box, C.free, t('sharedRefs'), 'shared').firstChild.style.border = '2px solid #000';
    } else {
      legendItem(box, C.seq[0], t('groupUsed'), 'used');
    }
    legendItem(box, C.cached, t('cached'), 'cached');
    legendItem(box, C.free, t('free'), 'free');
  }
  function drawCharts() {
    layoutAxis($('timelines').clientWidth);
    cursors = [drawTimelines(), drawGantt()];
  }
  function drawAll() {
    placeView(current);
    drawCharts();
    layoutGrid();
    gridLegend();
    show(current);
  }

  const replay = {
    setStep, show, get step() { return current; }, lastStepMs: 0,
    play: () => setPlaying(true), pause: () => setPlaying(false), get playing() { return timer !== null; },
    setLang, stepBy, ready: false, shown: 0,
    // The speed (steps per second) and the steps the charts show at once (all: the run's span).
    setSpeed(rate) { $('speed').value = rate; if (timer !== null) setPlaying(true); },
    setWindow(size) { view.size = size; $('zoom').value = size; drawAll(); },
    get window() { return [view.lo, view.hi]; },
    stop() { setPlaying(false); resizes.disconnect(); },
    // A window of lines that came (the Player's kernel answering host.fetchLines).
    addLines(L) { addLines(L); show(current); },
    // The grid cell's colour of ``block`` at the step shown, as drawn, for the tests: '#rrggbb'.
    cellColor(block) {
      const canvas = $('grid'), dpr = window.devicePixelRatio || 1;
      const g = Math.floor(block / grid.group);
      const px = ((g % grid.cols) + 0.5) * grid.cell * dpr, py = (Math.floor(g / grid.cols) + 0.5) * grid.cell * dpr;
      const [r, gr, b] = canvas.getContext('2d').getImageData(Math.floor(px), Math.floor(py), 1, 1).data;
      return '#' + [r, gr, b].map((v) => v.toString(16).padStart(2, '0')).join('');
    },
    // What ``block`` is at the step shown, as the grid draws it: {kind: used|shared|freed|cached|free, seq}.
    blockKind(block) {
      const i = indexOfStep.get(current), code = codesAtIndex(i)[block], h = holdersOf(code), freed = freedAt(i);
      if (h) return {kind: h.length > 1 ? 'shared' : 'used', seq: h[0]};
      if (freed.has(block)) return {kind: 'freed', seq: freed.get(block)};
      return {kind: code === 1 ? 'cached' : 'free', seq: null};
    },
  };

  $('title').textContent = D.title;
  const slider = $('slider');
  slider.min = FIRST; slider.max = LAST; slider.value = current;
  slider.addEventListener('input', () => { setPlaying(false); setStep(Number(slider.value)); });
  $('play').addEventListener('click', () => setPlaying(timer === null));
  $('back').addEventListener('click', () => stepBy(-1));
  $('forward').addEventListener('click', () => stepBy(1));
  // Arrow keys step and the space bar plays or pauses, wherever the focus is (a button just clicked keeps
  // it), except in the controls that take those keys themselves: the slider and the lists.
  host.keys.addEventListener('keydown', (ev) => {
    if (ev.target.closest('input, select, textarea') || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === 'ArrowLeft' || ev.key === 'ArrowRight') stepBy(ev.key === 'ArrowLeft' ? -1 : 1);
    else if (ev.key === ' ') setPlaying(timer === null);
    else return;
    // A focused button is not also pressed, the page does not scroll, and a notebook around the viewer does
    // not take the key for itself (JupyterLab's arrows move between cells).
    ev.preventDefault();
    ev.stopPropagation();
  });
  // A list chosen from gives the keys back at once.
  $('speed').addEventListener('change', () => { $('speed').blur(); if (timer !== null) setPlaying(true); });
  $('zoom').addEventListener('change', () => { $('zoom').blur(); replay.setWindow(Number($('zoom').value)); });
  for (const b of document.querySelectorAll('.langs button')) b.addEventListener('click', () => setLang(b.dataset.lang));
  const canvas = $('grid');
  canvas.addEventListener('mousemove', (ev) => { grid.hovered = cellAt(ev); show(current); });
  canvas.addEventListener('mouseleave', () => { grid.hovered = null; show(current); });
  canvas.addEventListener('click', (ev) => { const g = cellAt(ev); grid.selected = grid.selected === g ? null : g; show(current); });
  $('owners').addEventListener('mousemove', (ev) => { $('grid-info').textContent = ownerInfo(ev.offsetX); });
  // Redrawn when the viewer's width changes (the window's, or a notebook's column): its height follows.
  let resizeTimer = null, drawnWidth = root.clientWidth;
  const resizes = new ResizeObserver(() => {
    if (root.clientWidth === drawnWidth) return;
    drawnWidth = root.clientWidth;
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 100);
  });
  resizes.observe(root);
  // A long run opens on a window of steps around the step shown; a short one on all of it.
  view.size = SPAN > LONG_RUN ? WINDOWS[WINDOWS.length - 1] : SPAN;
  setLang(lang);  // draws everything
  replay.ready = true;
  return replay;
