// The viewer's data is gzip-compressed JSON (page.py: packed_bytes); the browser's own DecompressionStream
// inflates it, so the viewer needs no library and no network. ``bytes``: a Uint8Array or a DataView (what
// a widget's bytes trait arrives as).
async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}
