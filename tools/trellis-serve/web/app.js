// The trellis-serve page: sends a generation request (POST v1/infer), follows
// the job's event stream (a progress bar per stage) and shows the results: the
// mesh in <model-viewer>, the Gaussians in a splat viewer, every file as a
// download. The viewers' modules are imported only when a result needs them.
//
// For tests and styling, document.body.dataset holds the page's state:
//   state:  idle | submitting | queued | running | done | failed | cancelled
//   mesh, splats: loading | shown | error (absent when there is no such result)
// "shown" means the viewer has the model and has started drawing it.

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'trellis-serve-token';
const ACTIVE_STATES = new Set(['submitting', 'queued', 'running']);
const DECODER_NAMES = { decode_gs: 'Gaussians', decode_rf: 'radiance field', decode_mesh: 'mesh' };

let job = null; // {id, events, decoders, decodersDone: Set, decoderSeconds}
// The shown job's blob: URLs, its splat viewer's close(), and a counter that
// tells callbacks of an older job's viewers to stand down.
let results = { objectUrls: [], closeSplats: null, generation: 0 };

// A refused request: the server's message and, for 4xx, the field it names.
class RequestError extends Error {
  constructor(message, { status = 0, field = '' } = {}) {
    super(message);
    this.status = status; // 0: refused here, before anything was sent
    this.field = field;
  }
}

function token() {
  return $('token').value.trim();
}

// fetch() with the bearer token, throwing RequestError on a non-2xx answer.
async function api(path, options = {}) {
  const headers = new Headers(options.headers);
  if (token()) headers.set('Authorization', `Bearer ${token()}`);
  const response = await fetch(path, { ...options, headers });
  if (response.ok) return response;
  let message = `${response.status} ${response.statusText}`;
  let field = '';
  try {
    const body = await response.json();
    if (body.error) message = body.error;
    field = body.field ?? '';
  } catch {
    // Not JSON: the status line says it.
  }
  if (response.status === 429) message = `the server's queue is full, try again later (${message})`;
  if (response.status === 401 || response.status === 403) message += ' (check the API token)';
  throw new RequestError(message, { status: response.status, field });
}

// ---- the request -----------------------------------------------------------

// IMAGE INPUT: when the server takes pictures, read the image input of
// index.html here and return {image: <base64>} when one is chosen.
async function readConditioning() {
  const file = $('cond').files[0];
  if (!file) throw new RequestError('choose a conditioning .npy file', { field: 'cond' });
  return { cond: await base64Of(file) };
}

function base64Of(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result.slice(reader.result.indexOf(',') + 1));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file); // "data:...;base64,<payload>"
  });
}

// The POST body (as text) and the formats it asks for.
function requestBody(conditioning) {
  const body = { ...conditioning };
  const formats = [...document.querySelectorAll('input[name=formats]:checked')].map((box) => box.value);
  if (formats.length === 0) throw new RequestError('choose at least one output', { field: 'formats' });
  body.formats = formats;
  for (const stage of ['ss', 'slat']) {
    const sampler = {};
    const steps = $(`${stage}-steps`).value;
    const cfg = $(`${stage}-cfg`).value;
    if (steps !== '') sampler.steps = Number(steps);
    if (cfg !== '') sampler.cfg = Number(cfg);
    if (Object.keys(sampler).length) body[stage] = sampler;
  }
  let text = JSON.stringify(body);
  // Seeds go up to 2^64-1, past what a JS number holds exactly: spliced in as digits.
  const seed = $('seed').value.trim();
  if (seed !== '') {
    if (!/^[0-9]+$/.test(seed) || BigInt(seed) >= 2n ** 64n)
      throw new RequestError('expected an integer in 0..2^64-1', { field: 'seed' });
    text = `${text.slice(0, -1)},"seed":${BigInt(seed)}}`;
  }
  return { text, formats };
}

async function submit(event) {
  event.preventDefault();
  if (ACTIVE_STATES.has(document.body.dataset.state)) return;
  try {
    await reset();
    setState('submitting');
    const { text, formats } = requestBody(await readConditioning());
    const response = await api('v1/infer', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: text,
    });
    const { id } = await response.json();
    follow(id, formats);
  } catch (e) {
    refused(e);
  }
}

// ---- progress ----------------------------------------------------------------

function setState(state) {
  document.body.dataset.state = state;
  $('submit').disabled = ACTIVE_STATES.has(state);
  $('cancel').hidden = !(state === 'queued' || state === 'running');
}

function setStatus(text) {
  $('status').textContent = text;
}

// The progress row "ss", "slat" or "decoders" of index.html.
function stageRow(name) {
  const row = document.querySelector(`.stage[data-stage="${name}"]`);
  if (!row) return null;
  return { title: row.querySelector('.title'), bar: row.querySelector('progress'), detail: row.querySelector('.detail') };
}

// The progress row of an event's stage ("ss_stage", "decode_mesh", ...).
function rowOf(stage) {
  if (stage === 'ss_stage') return stageRow('ss');
  if (stage === 'slat_stage') return stageRow('slat');
  return stage.startsWith('decode_') ? stageRow('decoders') : null;
}

// Follows job `id` through its event stream. The server replays the stream
// from the job's start to every subscriber (also after EventSource's own
// reconnects), so every handler below only sets, never accumulates blindly.
function follow(id, formats) {
  job = { id, decoders: formats.length, decodersDone: new Set(), decoderSeconds: 0 };
  setState('queued');
  setStatus(`job ${id}: queued`);
  $('progress').hidden = false;
  stageRow('decoders').bar.max = formats.length;

  // EventSource cannot send headers: the token goes in the query.
  const url = new URL(`v1/jobs/${encodeURIComponent(id)}/events`, document.baseURI);
  if (token()) url.searchParams.set('token', token());
  const events = new EventSource(url);
  job.events = events;
  const on = (name, handler) =>
    events.addEventListener(name, (e) => {
      if (job?.id === id) handler(JSON.parse(e.data));
    });
  on('queued', ({ position }) => setStatus(`job ${id}: queued, position ${position}`));
  on('stage', onStage);
  on('step', onStep);
  on('coords', ({ voxels }) => ($('voxels').textContent = `· ${voxels} voxels`));
  on('done', ({ files, seconds }) => {
    events.close();
    finished(id, files, seconds);
  });
  on('failed', ({ error, state }) => {
    events.close();
    jobFailed(error, state);
  });
  events.onerror = () => {
    // CONNECTING: EventSource retries by itself. CLOSED: the server refused
    // the stream (a bad token, an unknown job); ask for the job instead.
    if (events.readyState === EventSource.CLOSED && job?.id === id) pollOnce(id);
  };
}

function onStage({ stage, title, phase, seconds }) {
  const row = rowOf(stage);
  if (!row) return;
  setState('running');
  if (title) row.title.textContent = title; // "1/3 sparse structure"
  if (stage.startsWith('decode_')) {
    const name = DECODER_NAMES[stage] ?? stage;
    if (phase === 'end' && !job.decodersDone.has(stage)) {
      job.decodersDone.add(stage);
      job.decoderSeconds += seconds ?? 0;
    }
    row.bar.value = job.decodersDone.size;
    const count = `${job.decodersDone.size}/${job.decoders}`;
    row.detail.textContent =
      job.decodersDone.size === job.decoders
        ? `done in ${job.decoderSeconds.toFixed(2)} s`
        : phase === 'begin' ? `${count}, ${name}…` : count;
  } else if (phase === 'end') {
    row.bar.value = row.bar.max;
    row.detail.textContent = seconds == null ? 'done' : `done in ${seconds.toFixed(2)} s`;
  }
  if (phase === 'begin') setStatus(`job ${job.id}: ${title ?? stage}`);
}

function onStep({ stage, step, steps }) {
  const row = rowOf(stage);
  if (!row) return;
  setState('running');
  row.bar.max = steps;
  row.bar.value = step;
  row.detail.textContent = `step ${step}/${steps}`;
}

function finished(id, files, seconds) {
  setState('done');
  setStatus(seconds == null ? `job ${id}: done` : `job ${id}: done in ${seconds.toFixed(2)} s`);
  showResults(id, files);
}

function jobFailed(error, state) {
  if (state === 'cancelled') {
    setState('cancelled');
    setStatus(`job ${job.id}: cancelled`);
    return;
  }
  setState('failed');
  setStatus(`job ${job.id}: failed`);
  showError(error ?? 'the job failed');
}

// The job's state by GET, when the event stream is gone for good.
async function pollOnce(id) {
  try {
    const info = await (await api(`v1/jobs/${encodeURIComponent(id)}`)).json();
    if (job?.id !== id) return;
    if (info.state === 'done') finished(id, info.files ?? [], null);
    else if (info.state === 'failed' || info.state === 'cancelled') jobFailed(info.error, info.state);
    else refused(new Error(`lost the event stream of job ${id} (state: ${info.state}); reload to retry`));
  } catch (e) {
    if (job?.id === id) refused(e);
  }
}

async function cancel() {
  if (!job) return;
  try {
    await api(`v1/jobs/${encodeURIComponent(job.id)}`, { method: 'DELETE' });
    // The stream's "failed" event (state "cancelled") ends the job on the page.
  } catch (e) {
    showError(e.message);
  }
}

// ---- errors ------------------------------------------------------------------

function showError(message) {
  $('error').textContent = message;
  $('error').hidden = false;
}

// A request that never became a job (or lost track of it).
function refused(e) {
  setState(e instanceof RequestError && e.status === 0 ? 'idle' : 'failed');
  const input = e.field ? $(e.field.replace(/\[.*$/, '').replace('.', '-')) : null;
  if (input) {
    input.setAttribute('aria-invalid', 'true');
    input.focus?.();
  }
  // The server's messages often start with the field's name already.
  showError(e.field && !e.message.startsWith(e.field) ? `${e.field}: ${e.message}` : e.message);
}

// ---- results -----------------------------------------------------------------

function fileUrl(id, name) {
  return `v1/jobs/${encodeURIComponent(id)}/files/${encodeURIComponent(name)}`;
}

// A blob: URL of a job file, fetched with the token (viewers and <a download>
// cannot send the Authorization header).
async function blobUrl(path) {
  const url = URL.createObjectURL(await (await api(path)).blob());
  results.objectUrls.push(url);
  return url;
}

function showResults(id, files) {
  $('results').hidden = false;
  const list = $('downloads');
  for (const name of files) {
    const link = document.createElement('a');
    link.href = fileUrl(id, name);
    link.download = name;
    link.textContent = name;
    link.addEventListener('click', downloadWithToken);
    const item = document.createElement('li');
    item.append(link);
    list.append(item);
  }
  if (files.includes('mesh.glb')) showMesh(fileUrl(id, 'mesh.glb'));
  const ply = files.find((name) => /^gaussians(_0)?\.ply$/.test(name)); // the first sample's
  if (ply) showSplats(fileUrl(id, ply), ply);
}

async function downloadWithToken(event) {
  if (!token()) return; // the plain link works
  event.preventDefault();
  const link = event.currentTarget;
  try {
    const save = document.createElement('a');
    save.href = await blobUrl(link.href);
    save.download = link.download;
    save.click();
  } catch (e) {
    showError(`${link.download}: ${e.message}`);
  }
}

// Runs `show` for a viewer and records its progress in body.dataset[key],
// ignoring a result that a newer job has replaced.
async function showViewer(key, show) {
  const generation = results.generation;
  const current = () => generation === results.generation;
  document.body.dataset[key] = 'loading';
  try {
    await show(current);
    if (current()) document.body.dataset[key] = 'shown';
  } catch (e) {
    if (!current()) return;
    document.body.dataset[key] = 'error';
    showError(`${key} viewer: ${e.message ?? e}`);
  }
}

function showMesh(path) {
  return showViewer('mesh', async (current) => {
    await import('@google/model-viewer');
    const src = await blobUrl(path);
    if (!current()) return;
    const viewer = document.createElement('model-viewer');
    viewer.setAttribute('camera-controls', '');
    viewer.setAttribute('interaction-prompt', 'none');
    viewer.setAttribute('loading', 'eager');
    viewer.alt = 'the generated mesh';
    $('mesh-view').hidden = false;
    $('mesh-viewport').replaceChildren(viewer);
    await new Promise((resolve, reject) => {
      viewer.addEventListener('model-visibility', (e) => e.detail.visible && resolve());
      viewer.addEventListener('error', (e) =>
        reject(new Error(e.detail?.sourceError?.message ?? e.detail?.type ?? 'cannot show mesh.glb')),
      );
      viewer.src = src;
    });
  });
}

function showSplats(path, name) {
  return showViewer('splats', async (current) => {
    const [THREE, GaussianSplats3D] = await Promise.all([import('three'), import('@mkkellogg/gaussian-splats-3d')]);
    const src = await blobUrl(path);
    if (!current()) return;
    $('splats-view').hidden = false;
    $('splats-view').querySelector('figcaption').textContent = name;
    const viewport = $('splats-viewport');
    // Our own renderer: with one of its own, the viewer's dispose() removes
    // the root element from document.body, and throws for ours, not a child of it.
    const renderer = new THREE.WebGLRenderer({ antialias: false, alpha: true, precision: 'highp' });
    renderer.setPixelRatio(window.devicePixelRatio);
    renderer.setClearColor(0x000000, 0);
    renderer.setSize(viewport.clientWidth, viewport.clientHeight);
    viewport.replaceChildren(renderer.domElement);
    const viewer = new GaussianSplats3D.Viewer({
      renderer,
      rootElement: viewport,
      // TRELLIS's PLY is y-up, the object inside [-0.5, 0.5]^3; seen from the
      // front and a little above, like model-viewer's default camera.
      cameraUp: [0, 1, 0],
      initialCameraPosition: [0, 0.47, 1.74],
      initialCameraLookAt: [0, 0, 0],
      // Shared memory needs cross-origin isolation (COOP/COEP headers), which
      // the server does not send; without it the sort runs on copies.
      sharedMemoryForWorkers: false,
      gpuAcceleratedSort: false,
      // Draw when the camera moves or a sort lands, not every frame (software
      // GL in tests, laptops' batteries). The viewer also draws every frame
      // while the scene fades in: 20 times faster, that is ~20 frames, not ~400.
      renderMode: GaussianSplats3D.RenderMode.OnChange,
      sceneFadeInRateMultiplier: 20,
      sphericalHarmonicsDegree: 0,
    });
    const resize = new ResizeObserver(() => {
      renderer.setSize(viewport.clientWidth, viewport.clientHeight);
      viewer.forceRenderNextFrame();
    });
    resize.observe(viewport);
    results.closeSplats = async () => {
      resize.disconnect();
      await viewer.dispose();
      renderer.dispose();
    };
    // The URL is a blob: without an extension, hence the explicit format.
    await viewer.addSplatScene(src, {
      format: GaussianSplats3D.SceneFormat.Ply,
      showLoadingUI: false,
      progressiveLoad: false,
    });
    viewer.start();
  });
}

// Forgets the previous job: its stream, progress, errors and results.
async function reset() {
  job?.events?.close();
  job = null;
  results.generation += 1;
  const { objectUrls, closeSplats } = results;
  results.objectUrls = [];
  results.closeSplats = null;
  objectUrls.forEach((url) => URL.revokeObjectURL(url));
  delete document.body.dataset.mesh;
  delete document.body.dataset.splats;
  await closeSplats?.().catch((e) => console.warn('closing the splat viewer:', e));
  $('mesh-viewport').replaceChildren();
  $('splats-viewport').replaceChildren();
  $('mesh-view').hidden = $('splats-view').hidden = $('results').hidden = true;
  $('downloads').replaceChildren();
  $('error').hidden = true;
  $('progress').hidden = true;
  setStatus('');
  $('voxels').textContent = '';
  for (const row of document.querySelectorAll('.stage')) {
    row.querySelector('.title').textContent = row.dataset.title;
    row.querySelector('progress').max = 1;
    row.querySelector('progress').value = 0;
    row.querySelector('.detail').textContent = '';
  }
  document.querySelectorAll('[aria-invalid]').forEach((input) => input.removeAttribute('aria-invalid'));
}

// ---- start -------------------------------------------------------------------

for (const row of document.querySelectorAll('.stage')) row.dataset.title = row.querySelector('.title').textContent;
$('token').value = sessionStorage.getItem(TOKEN_KEY) ?? '';
$('token').addEventListener('change', () =>
  token() ? sessionStorage.setItem(TOKEN_KEY, token()) : sessionStorage.removeItem(TOKEN_KEY),
);
$('request').addEventListener('submit', submit);
$('cancel').addEventListener('click', cancel);
setState('idle');
