"""The TRELLIS pipeline from the C++ model builders, through the C APIs.

``tc.trellis.compile_pipeline(".../pipeline.json")`` compiles it (as
``trellisc --target=cpu`` does) and returns a :class:`Pipeline` that runs it
with ``trellis_run`` (libtrellis_rt.so).
"""
import ctypes
import json
import math
import re
from pathlib import Path

import numpy as np

from . import _bundle, _checks, _native
from ._errors import TrellisError, user_location

TARGETS = {"gs": 1, "rf": 2, "mesh": 4}


def make_synthetic_model(out_dir, preset="tiny", seed=1):
    """Writes a synthetic TRELLIS model directory (``trellis-mkmodel`` of the
    build: random weights in the exact release layout, plus ``cond.npy``)
    and returns its path.

    >>> import pathlib, tempfile
    >>> model = tc.trellis.make_synthetic_model(pathlib.Path(tempfile.mkdtemp()) / "tiny")
    >>> sorted(p.name for p in model.iterdir())
    ['ckpts', 'cond.npy', 'image_cond_model', 'pipeline.json']
    """
    import subprocess

    tool = _native.build_dir() / "bin" / "trellis-mkmodel"
    r = subprocess.run(
        [str(tool), "--preset", preset, "--seed", str(seed), "--out", str(out_dir), "--quiet"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise TrellisError(f"trellis-mkmodel failed: {r.stderr.strip()}", user_location())
    return Path(out_dir)


def compile_pipeline(
    path, batch=1, cond_tokens=0, images=1, multi_image="none", precision="trellis", fp8_scales=None
):
    """Compiles a TRELLIS ``pipeline.json`` to a :class:`Pipeline` (the C++
    model builders, as ``trellisc --target=cpu``).

    ``precision``: "trellis" (fp16 where TRELLIS stores fp16), "fp32" (a
    debugging aid) or "fp8" (the flow transformers' block linears (attention, MLP, adaLN modulation)
    as W8A8 E4M3 products, emulated by the CPU reference). ``fp8_scales``
    (with "fp8"): the calibration file ``trellis.exe --calibrate N`` wrote,
    for static activation scales instead of dynamic ones.

    Errors (config values, checkpoint shapes) raise :class:`TrellisError`
    naming the config file and line.

    >>> import pathlib, tempfile
    >>> model = tc.trellis.make_synthetic_model(pathlib.Path(tempfile.mkdtemp()) / "tiny")
    >>> pipe = tc.trellis.compile_pipeline(model / "pipeline.json", cond_tokens=21)
    >>> pipe.entries
    ['ss_stage', 'slat_stage', 'decode_gs', 'decode_rf', 'decode_mesh']
    >>> out = pipe.run(np.load(model / "cond.npy"), ss_steps=1, slat_steps=1,
    ...                formats=("gs",))
    >>> out["coords"].shape[1], out["slat"].shape[1], out["gs_xyz"].shape[1]
    (4, 8, 3)
    """
    batch = _checks.check_int("batch", batch, 1, _checks.MAX_BATCH)
    cond_tokens = _checks.check_int(
        "cond_tokens", cond_tokens, 0, _checks.MAX_COND_TOKENS, " (0: the model's default)"
    )
    images = _checks.check_int("images", images, 1, _checks.MAX_IMAGES)
    options = {
        "target": "cpu",
        "batch": batch,
        "cond_tokens": cond_tokens,
        "images": images,
        "multi_image": multi_image,
        "precision": precision,
    }
    if fp8_scales is not None:
        options["fp8_scales"] = str(fp8_scales)
    result = _native.compile_pipeline(path, options)
    if result.code != 0:
        from ._errors import SourceLoc, combine

        errors = []
        for d in result.diagnostics:
            if d["severity"] != "error":
                continue
            loc = (
                SourceLoc(d["file"], d["line"], d["column"], None, d["module"])
                if d["file"] and d["line"]
                else None
            )
            extra = None
            if d.get("config") and d.get("kind") != "config":
                # A model-builder error: point at the config value that shaped
                # it (the user's file), name the builder line after.
                file, line, col = d["config"].rsplit(":", 2)
                extra = f"  traced at: {d['file']}:{d['line']}" if d["file"] else None
                loc = SourceLoc(file, int(line), int(col), None, d["module"])
            reason = d["message"]
            if d.get("kind") == "config" and d.get("config_path"):
                reason = f"{d['config_path']}: {reason}"
            errors.append(TrellisError(reason, loc, extra))
        raise combine(errors or [TrellisError("compile failed")])
    return Pipeline(result.bundle, Path(path).resolve().parent)


class Pipeline:
    """A compiled TRELLIS pipeline (bundle bytes) and its model directory.

    The first :meth:`run` creates an engine (the backend started, weights
    staged, memory planned; libtrellis_rt's trellis_engine_create) that later
    runs reuse, so only the first call pays the setup. Runs with other
    engine settings (``model_dir``, ``weights``, ``gpu``, ``check_finite``,
    ``low_memory``, ``device``) replace it with a new one.
    """

    def __init__(self, bundle, model_dir=None):
        self.bundle = bundle
        self.model_dir = str(model_dir) if model_dir else None
        self._program = _native.Program(data=bundle)
        sections = _bundle.parse(bundle)
        self.entries = json.loads(sections["program"])["entries"]
        self._engine = None
        self._engine_key = None

    def save(self, path):
        """Writes the bundle (run it with ``trellis-runtime --bundle``)."""
        Path(path).write_bytes(self.bundle)

    def engine(
        self,
        model_dir=None,
        weights=None,
        gpu="auto",
        check_finite=False,
        low_memory=False,
        device=0,
        threads=0,
        images=False,
        gpu_arch="native",
        memory_budget=0,
        max_voxels=0,
    ):
        """The engine for these settings (made at the first call, then kept;
        ``images``: check the image-conditioning model's weights at setup;
        ``gpu_arch="portable"``: the code an sm_75 card runs, on any GPU;
        ``memory_budget``: the device memory it may allocate, bytes or "6G"
        (0: what the GPU has free), planned before any work; ``max_voxels``:
        the voxel count that plan assumes, 0 for the default 32768)."""
        device = _checks.check_int("device", device, 0, _checks.INT32_MAX)
        threads = _check_threads(threads)
        memory_budget = _check_memory_budget(memory_budget)
        max_voxels = _checks.check_int("max_voxels", max_voxels, 0, 1 << 24)
        model_dir = model_dir or self.model_dir
        key = (
            model_dir,
            id(weights) if weights else None,
            gpu,
            check_finite,
            low_memory,
            device,
            gpu_arch,
            memory_budget,
            max_voxels,
        )
        if self._engine is None or self._engine_key != key:
            if self._engine is not None:
                self._engine.close()
                self._engine = None
            flags = _engine_flags(gpu, check_finite, low_memory, gpu_arch) | (_IMAGES_FLAG if images else 0)
            try:
                self._engine = _native.Engine(
                    self._program,
                    weights,
                    model_dir,
                    flags=flags,
                    device=device,
                    threads=threads,
                    memory_budget=memory_budget,
                    max_voxels=max_voxels,
                )
            except _native.RuntimeFailure as f:
                raise TrellisError(f.message, user_location()) from None
            self._engine_key = key
        return self._engine

    def run(
        self,
        cond=None,
        neg_cond=None,
        seed=42,
        model_dir=None,
        weights=None,
        formats=("gs", "rf", "mesh"),
        ss_steps=0,
        slat_steps=0,
        ss_cfg=None,
        slat_cfg=None,
        ss_noise=None,
        slat_noise=None,
        coords=None,
        out_dir=None,
        check_finite=False,
        threads=0,
        progress=None,
        gpu="auto",
        low_memory=False,
        device=0,
        images=None,
        no_background_removal=False,
        gpu_arch="native",
        memory_budget=0,
        max_voxels=0,
    ):
        """One generation through the pipeline's engine; returns {name: array}
        (names of trellis_outputs).

        Conditioning: ``cond`` (tokens, f32 [images, Lc, Cc]) or ``images``:
        one uint8 array [H, W, 4] (RGBA; alpha marks the object) or [H, W, 3],
        or a list of them for one multi-image generation (a pipeline compiled
        with ``images=N``), preprocessed as TRELLIS does and encoded by the
        compiled image-conditioning model; ``out["cond"]`` is then the tokens
        it made. ``no_background_removal`` accepts an image without a usable
        alpha channel as it is (docs/guide/images.md).

        ``gpu``: where the bundle's GPU stages run: "auto" (the GPU when one
        is usable, else the CPU reference), "off" or "require". ``gpu_arch``:
        "native" or "portable" (the code an sm_75 card runs, on any GPU).
        ``memory_budget`` (bytes, or a size such as "6G"; 0: the GPU's free
        memory) and ``max_voxels``: as trellis.exe's --memory-budget and
        --max-voxels (the engine picks the fastest memory form that fits
        before any work, or raises naming the stage and the bytes).

        ``weights``: {(model key, tensor name): array} (e.g. mapped
        safetensors); what it lacks comes from ``model_dir`` (default: the
        directory of pipeline.json). The engine keeps the arrays alive.
        ``progress(kind, stage, step, steps, coords)`` is called per stage and
        sampler step; ``kind == "coords"`` brings stage 1's coordinates as
        soon as they exist.
        """
        numbers = _check_run(seed, ss_steps, slat_steps, ss_cfg, slat_cfg, threads, formats)
        images = _check_images(cond, images)
        engine = self.engine(
            model_dir,
            weights,
            gpu,
            check_finite,
            low_memory,
            device,
            threads,
            images=images is not None,
            gpu_arch=gpu_arch,
            memory_budget=memory_budget,
            max_voxels=max_voxels,
        )
        return _run(
            engine,
            None,
            cond,
            images=images,
            no_background_removal=no_background_removal,
            neg_cond=neg_cond,
            ss_noise=ss_noise,
            slat_noise=slat_noise,
            coords=coords,
            out_dir=out_dir,
            progress=progress,
            **numbers,
        )

    def close(self):
        """Frees the engine (device memory included) now rather than at
        garbage collection."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None


_GPU_FLAGS = {"auto": 0, "off": 16, "require": 32}
_IMAGES_FLAG = 64  # TRELLIS_FLAG_IMAGES


def _check_images(cond, images):
    """``images`` as a list of C-contiguous uint8 [H, W, 3|4] arrays (None
    without images); exactly one of ``cond`` and ``images``."""
    if (cond is None) == (images is None):
        raise TrellisError(
            "give the conditioning tokens (cond) or images, exactly one of them", user_location()
        )
    if images is None:
        return None
    if isinstance(images, np.ndarray):
        images = [images]
    images = list(images)
    if not images:
        raise TrellisError("images is empty: expected one or more uint8 [H, W, 4] arrays", user_location())
    checked = []
    for i, a in enumerate(images):
        a = np.asarray(a)
        if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] not in (3, 4):
            raise TrellisError(
                f"images[{i}]: expected uint8 [height, width, 4] (RGBA) or [height, width, 3] (RGB), "
                f"found {a.dtype} {list(a.shape)}",
                user_location(),
            )
        checked.append(np.ascontiguousarray(a))
    return checked


def _check_threads(threads):
    return _checks.check_int("threads", threads, 0, _checks.MAX_THREADS, " (0: all cores)")


def _check_run(seed, ss_steps, slat_steps, ss_cfg, slat_cfg, threads, formats):
    """The number arguments of a run, checked (the C ABI's ranges) before an
    engine is made."""
    if isinstance(formats, str) or any(f not in TARGETS for f in formats):
        raise TrellisError(
            f"formats must be a sequence of 'gs', 'rf', 'mesh', " f"found {formats!r}", user_location()
        )
    return dict(
        seed=_checks.check_seed("seed", seed),
        ss_steps=_checks.check_steps("ss_steps", ss_steps),
        slat_steps=_checks.check_steps("slat_steps", slat_steps),
        ss_cfg=_checks.check_cfg("ss_cfg", ss_cfg),
        slat_cfg=_checks.check_cfg("slat_cfg", slat_cfg),
        threads=_check_threads(threads),
        formats=tuple(formats),
    )


_PORTABLE_GPU_FLAG = 256  # trellis_rt.h's TRELLIS_FLAG_PORTABLE_GPU


_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
    "TIB": 1 << 40,
}


def _check_memory_budget(budget):
    """Bytes from an int or a size string ("6G", "4096M", binary units as trellis.exe's --memory-budget)."""
    if isinstance(budget, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", budget)
        unit = m.group(2).upper() if m else None
        if not m or unit not in _SIZE_UNITS:
            raise TrellisError(
                f"memory_budget: expected bytes or a size such as '6G' or '4096M', found {budget!r}",
                user_location(),
            )
        budget = int(float(m.group(1)) * _SIZE_UNITS[unit])
    return _checks.check_int("memory_budget", budget, 0, (1 << 63) - 1)


def _engine_flags(gpu, check_finite, low_memory, gpu_arch="native"):
    if gpu not in _GPU_FLAGS:
        raise TrellisError(f"gpu must be 'auto', 'off' or 'require', found {gpu!r}", user_location())
    if gpu_arch not in ("native", "portable"):
        raise TrellisError(f"gpu_arch must be 'native' or 'portable', found {gpu_arch!r}", user_location())
    portable = _PORTABLE_GPU_FLAG if gpu_arch == "portable" else 0
    return 4 | _GPU_FLAGS[gpu] | (8 if check_finite else 0) | (1 if low_memory else 0) | portable


_KINDS = {0: "stage_begin", 1: "stage_end", 2: "step", 3: "coords", 4: "message"}


def run(
    program_handle=None,
    cond=None,
    *,
    bundle_path=None,
    neg_cond=None,
    seed=42,
    model_dir=None,
    weights=None,
    formats=("gs", "rf", "mesh"),
    ss_steps=0,
    slat_steps=0,
    ss_cfg=None,
    slat_cfg=None,
    ss_noise=None,
    slat_noise=None,
    coords=None,
    out_dir=None,
    check_finite=False,
    threads=0,
    progress=None,
    gpu="auto",
    images=None,
    no_background_removal=False,
):
    """One generation through trellis_run (a fresh engine; see
    :meth:`Pipeline.run`, which keeps its engine)."""
    numbers = _check_run(seed, ss_steps, slat_steps, ss_cfg, slat_cfg, threads, formats)
    flags = _engine_flags(gpu, check_finite, False)
    images = _check_images(cond, images)
    return _run(
        None,
        (program_handle, bundle_path, model_dir, weights, flags),
        cond,
        images=images,
        no_background_removal=no_background_removal,
        neg_cond=neg_cond,
        ss_noise=ss_noise,
        slat_noise=slat_noise,
        coords=coords,
        out_dir=out_dir,
        progress=progress,
        **numbers,
    )


def _run(
    engine,
    fresh,
    cond,
    *,
    images,
    no_background_removal,
    neg_cond,
    seed,
    formats,
    ss_steps,
    slat_steps,
    ss_cfg,
    slat_cfg,
    ss_noise,
    slat_noise,
    coords,
    out_dir,
    threads,
    progress,
):
    """trellis_engine_run on `engine`, or (engine None) trellis_run with
    fresh = (program handle, bundle path, model_dir, weights, flags)."""
    lib = _native.runtime()
    spec = _native.RunSpec()
    lib.trellis_run_spec_init(ctypes.byref(spec))
    spec.seed = seed
    spec.ss.steps, spec.slat.steps = ss_steps, slat_steps
    spec.ss.cfg_strength = math.nan if ss_cfg is None else ss_cfg
    spec.slat.cfg_strength = math.nan if slat_cfg is None else slat_cfg
    spec.targets = sum(TARGETS[f] for f in formats)
    spec.threads = threads
    keep = []

    def opt_tensor(a, dtype):
        if a is None:
            return None
        a = np.ascontiguousarray(a, dtype=dtype)
        keep.append(a)
        t = _native.tensor_of(a)
        keep.append(t)
        return ctypes.pointer(t)

    spec.ss_noise = opt_tensor(ss_noise, np.float32)
    spec.slat_noise = opt_tensor(slat_noise, np.float32)
    spec.coords = opt_tensor(coords, np.int32)
    spec.out_dir = str(out_dir).encode() if out_dir else None
    if progress is not None:

        def cb(p, _user):
            p = p.contents
            c = _native.array_of(p.coords.contents, free=False) if p.kind == 3 else None
            progress(
                _KINDS.get(p.kind, "?"),
                (p.stage or b"").decode(),
                p.step,
                p.steps,
                c if p.kind == 3 else (p.message or b"").decode(),
            )

        spec.progress = _native.PROGRESS_FN(cb)
        keep.append(spec.progress)
    emb = _native.Embeddings()
    if images is not None:
        tensors = (_native.Tensor * len(images))(*[_native.tensor_of(a) for a in images])
        keep.append(tensors)
        spec.images = tensors
        spec.num_images = len(images)
        spec.no_background_removal = 1 if no_background_removal else 0
    else:
        cond = np.ascontiguousarray(cond)
        emb.cond = _native.tensor_of(cond)
    emb.neg_cond = opt_tensor(neg_cond, np.float32)
    outs = _native.Outputs()
    err = _native.Error()
    if engine is not None:
        status = lib.trellis_engine_run(
            engine.handle, ctypes.byref(emb), ctypes.byref(spec), ctypes.byref(outs), ctypes.byref(err)
        )
    else:
        program_handle, bundle_path, model_dir, weights, flags = fresh
        spec.program = program_handle
        spec.bundle_path = str(bundle_path).encode() if bundle_path else None
        spec.flags = flags
        table = _native.weight_table(weights, model_dir, keep)
        status = lib.trellis_run(
            ctypes.byref(spec), ctypes.byref(table), ctypes.byref(emb), ctypes.byref(outs), ctypes.byref(err)
        )
    try:
        _native.check(status, err)
    except _native.RuntimeFailure as f:
        lib.trellis_outputs_free(ctypes.byref(outs))
        raise TrellisError(f.message, user_location()) from None
    result = {}
    for name in _native.OUTPUT_NAMES:
        t = getattr(outs, name)
        if t.data:
            result[name] = _native.array_of(t)
    return result
