// The notebook's Player (viz/player.py): an anywidget module around the replay page's viewer (startViewer,
// defined before this part; MARKUP, page.html, too). The trace's data comes once, as the bytes of the
// ``data`` trait; playing, stepping and scrubbing happen here, in the browser, with no kernel round trip.
// The step shown goes back to Python (the ``step`` trait) at once when it settles, at most every SYNC_MS
// while playing; a ``step`` or ``lang`` set from Python moves the viewer.
const SYNC_MS = 250;

export default {
  async render({ model, el }) {
    el.classList.add('replay', 'in-notebook');
    el.tabIndex = 0;  // the arrow keys and the space bar reach the viewer once it is clicked
    let viewer = null, lastSync = 0, pending = null;
    function sync(step) {
      clearTimeout(pending);
      pending = null;
      lastSync = performance.now();
      if (model.get('step') !== step) { model.set('step', step); model.save_changes(); }
    }
    function onStep(step, playing) {
      const wait = SYNC_MS - (performance.now() - lastSync);
      if (!playing || wait <= 0) sync(step);
      else { clearTimeout(pending); pending = setTimeout(() => sync(viewer.step), wait); }
    }
    function onLang(lang) {
      if (model.get('lang') !== lang) { model.set('lang', lang); model.save_changes(); }
    }
    // The lines of a step outside the windows the viewer holds: asked of the kernel once per window.
    // (The first window, in the data, is as long as any: player.py's LINE_WINDOW steps.)
    const asked = new Set();
    let windowSize = 1;
    function fetchLines(i) {
      const key = Math.floor(i / windowSize);
      if (!asked.has(key)) { asked.add(key); model.send({lines: i}); }
    }
    model.on('msg:custom', (msg) => { if (msg.lines && viewer) viewer.addLines(msg.lines); });
    async function start() {
      asked.clear();
      if (viewer) viewer.stop();
      el.innerHTML = MARKUP;
      const D = await inflate(model.get('data'));
      Object.assign(D, {lang: model.get('lang'), start: model.get('step')});
      windowSize = Math.max(1, D.lines.steps.length);
      viewer = await startViewer(el, D, {keys: el, onStep, onLang, fetchLines});
      el.replay = viewer;  // for the tests, as the page's window.replay
    }
    model.on('change:step', () => {
      const step = model.get('step');
      if (viewer && viewer.step !== step) viewer.setStep(step);
    });
    model.on('change:lang', () => { if (viewer) viewer.setLang(model.get('lang')); });
    model.on('change:data', start);
    await start();
    return () => { clearTimeout(pending); if (viewer) viewer.stop(); };
  },
};
