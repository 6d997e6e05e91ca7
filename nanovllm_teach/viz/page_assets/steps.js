// The step shown, play/pause, language and resizing; starts the page. Part of the replay page's script (common.js).

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
    drawAll();  // the charts' labels and legends are in the language too
  }
  function gridLegend() {
    const box = $('grid-legend');
    box.textContent = '';
    legendItem(box, C.seq[0], `${t('used')}: ${t('seqColour')}`);
    legendItem(box, null, `▣ ${t('shared')} (×refs)`);
    legendItem(box, C.cached, `${t('cached')} ${t('freeHashed')}`);
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
  setLang(lang);  // draws everything
