// The KV block grid at the step shown (a canvas). Part of the replay page's script (common.js).

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

  // The blocks the step's finished requests freed at its end (blockgrid.freed_at_step_end): block -> seq.
  function freedAt(i) {
    const out = new Map(), flat = D.freed[i] || [];
    for (let k = 0; k < flat.length; k += 2) out.set(flat[k], flat[k + 1]);
    return out;
  }
  // blockgrid's faded colour of a freed block, made opaque over the white cell: the legend's swatch and the
  // cell get the very same colour.
  function faded(hex) {
    const mix = (k) => Math.round(255 - C.freedAlpha * (255 - parseInt(hex.slice(k, k + 2), 16)));
    return '#' + [1, 3, 5].map((k) => mix(k).toString(16).padStart(2, '0')).join('');
  }

  // --- block grid ---------------------------------------------------------------------------------------
  const MIN_CELL = 7;
  // The grid takes at most about a third of the window's height, so the TEACHING lines below it stay in view.
  const gridMaxHeight = () => Math.max(160, Math.min(380, Math.floor(window.innerHeight * 0.36)));
  const grid = {group: 1, cols: 1, cell: 10, cells: 0, selected: null, hovered: null};
  function layoutGrid() {
    const canvas = $('grid');
    const width = Math.max(240, canvas.parentElement.clientWidth);
    // The largest cell that fits every block in width x maxH; below MIN_CELL, group blocks.
    const maxH = gridMaxHeight();
    let cell = Math.floor(Math.sqrt(width * maxH / Math.max(NB, 1)));
    cell = Math.min(26, cell);
    let group = 1;
    if (cell < MIN_CELL) {
      cell = MIN_CELL + 3;
      const fit = Math.floor(width / cell) * Math.floor(maxH / cell);
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
    const out = {first: a, last: b - 1, used: 0, cached: 0, free: 0, seqs: new Map()};
    for (let blk = a; blk < b; blk++) {
      const code = c[blk];
      if (code === 0) out.free++;
      else if (code === 1) out.cached++;
      else {
        out.used++;
        for (const sid of D.holders[code - 2]) out.seqs.set(sid, (out.seqs.get(sid) || 0) + 1);
      }
    }
    return out;
  }
  function drawGrid(c, freed) {
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
        // As blockgrid draws it: held in its seq's colour; else freed at the step's end, faded; else grey
        // if cached (free, hashed), white if free.
        if (h) ctx.fillStyle = seqColor(h[0]);
        else if (freed.has(g)) ctx.fillStyle = faded(seqColor(freed.get(g)));
        else ctx.fillStyle = code === 1 ? C.cached : C.free;
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
  // The whole cache in the kinds the legend draws, as blockgrid.cache_summary says it (the same words): used,
  // freed at the step's end, cached and free add up to the cache.
  function gridSummary(c, freed) {
    let used = 0, shared = 0, maxRefs = 0, gone = 0, cached = 0;
    for (let b = 0; b < NB; b++) {
      const code = c[b];
      if (code >= 2) {
        used++;
        const refs = D.holders[code - 2].length;
        if (refs > 1) { shared++; maxRefs = Math.max(maxRefs, refs); }
      } else if (freed.has(b)) gone++;
      else if (code === 1) cached++;
    }
    let text = t('gridSummary', {used, shared, max_refs: shared ? t('gridMaxRefs', {refs: maxRefs}) : '',
                                 freed: gone ? t('gridFreed', {freed: gone}) : '', cached,
                                 free: NB - used - gone - cached, total: NB});
    if (grid.group > 1) text += ` · ${t('gridCell', {group: grid.group})}`;
    return text;
  }
  const seqNames = (sids) => sids.map((sid) => t('seq', {seq_id: sid})).join(', ');
  // What cell g holds: one block (as blockgrid's legend names it), or a group (as blockgrid.group_summary).
  function cellInfo(c, freed, g) {
    if (g === null || g >= grid.cells) return t('hover');
    if (grid.group === 1) {
      const h = holdersOf(c[g]);
      let value;
      if (h && h.length > 1) value = t('sharedBy', {refs: h.length, seqs: seqNames(h)});
      else if (h) value = seqNames(h);
      else if (freed.has(g)) value = t('freed') + t('inBrackets', {inner: seqNames([freed.get(g)])});
      else value = c[g] === 1 ? t('cached') : t('free');
      return t('labelValue', {label: t('block', {i: g}), value});
    }
    const n = groupCounts(c, g);
    const seqs = [...n.seqs.keys()].sort((a, b) => a - b);
    const owners = seqs.slice(0, 12).map((sid) => `${t('seq', {seq_id: sid})}: ${n.seqs.get(sid)}`).join(', ') +
                   (seqs.length > 12 ? `, … (+${seqs.length - 12})` : '');
    return t('groupSummary', {first: n.first, last: n.last, used: n.used, cached: n.cached, free: n.free,
                              who: seqs.length ? t('inBrackets', {inner: owners}) : ''});
  }
  function cellAt(ev) {
    const g = Math.floor(ev.offsetY / grid.cell) * grid.cols + Math.floor(ev.offsetX / grid.cell);
    return ev.offsetX < grid.cols * grid.cell && g < grid.cells ? g : null;
  }

  // --- the cache by owner: at scale, one bar of the whole cache, each request's blocks side by side --------
  // A cache of many blocks reads better summed up: a bar whose segments are the blocks each seq holds (in
  // its colour, seq ids in order; a shared block counts for its first holder), then the cached and the free
  // ones, each as wide as its share of the cache.
  const OWNERS_FROM = 512;  // blocks; a smaller cache's grid is read cell by cell
  const owners = {segments: []};
  function drawOwners(c) {
    const canvas = $('owners');
    canvas.hidden = NB < OWNERS_FROM;
    if (canvas.hidden) return;
    const width = $('grid').parentElement.clientWidth, height = 22, dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(width * dpr)) {
      canvas.width = Math.round(width * dpr); canvas.height = height * dpr;
      canvas.style.width = `${width}px`; canvas.style.height = `${height}px`;
    }
    const bySeq = new Map();
    let cached = 0;
    for (let b = 0; b < NB; b++) {
      const code = c[b];
      if (code === 1) cached++;
      else if (code >= 2) { const sid = D.holders[code - 2][0]; bySeq.set(sid, (bySeq.get(sid) || 0) + 1); }
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = C.free; ctx.fillRect(0, 0, width, height);
    ctx.strokeStyle = '#999'; ctx.lineWidth = 1; ctx.strokeRect(0.5, 0.5, width - 1, height - 1);
    ctx.font = 'bold 10px sans-serif'; ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
    owners.segments = [];
    let at = 0;
    const segment = (n, color, sid) => {
      const w = n / NB * width;
      ctx.fillStyle = color; ctx.fillRect(at, 1, w, height - 2);
      if (sid !== null && w >= 22) { ctx.fillStyle = textColor(color); ctx.fillText(String(sid), at + w / 2, height / 2 + 1); }
      owners.segments.push({x0: at, x1: at + w, sid, n});
      at += w;
    };
    for (const sid of [...bySeq.keys()].sort((a, b) => a - b)) segment(bySeq.get(sid), seqColor(sid), sid);
    if (cached) segment(cached, C.cached, null);
  }
  function ownerInfo(px) {
    const seg = owners.segments.find((s) => px >= s.x0 && px < s.x1);
    if (!seg) return t('free');
    return t('labelValue', {label: seg.sid === null ? t('cached') : t('seq', {seq_id: seg.sid}),
                            value: t('blocksN', {n: seg.n})});
  }
