"""The engine (trellis_engine_* / tc.trellis.Pipeline / trellis.exe with several
generations) on the tiny preset, CPU reference: a reused engine gives the same
bits as a fresh run, also across voxel sets of different sizes and after a
failed run; misuse of the C ABI is a named error; trellis.exe runs several
generations into their own folders and writes only what was asked for."""
import ctypes
import json
import shutil
import struct
import threading

import numpy as np
import pytest

import _tc_env  # noqa: F401
from _tc_env import run, tiny_cpu_program
import trellisc as tc
from trellisc import _native

STEPS = ["--steps-ss", "1", "--steps-slat", "1"]
FILES = [
    "ss_latent.npy",
    "coords.npy",
    "slat.npy",
    "gaussians.ply",
    "gaussians.npz",
    "radiance_field.npz",
    "mesh.ply",
    "mesh.glb",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    model, exe = tiny_cpu_program(d)
    return model, exe, d


@pytest.fixture(scope="module")
def pipeline(tiny):
    model, exe, _ = tiny
    return tc.trellis.Pipeline(exe_bundle(exe), model_dir=model)


def exe_bundle(exe):
    """The bundle bytes trellis.exe carries (its trailer says where)."""
    data = exe.read_bytes()
    assert data[-8:] == b"TRLSEXE1"
    offset, size = struct.unpack_from("<QQ", data, len(data) - 24)
    return data[offset : offset + size]


def fresh(tiny, cond, **kw):
    model, exe, _ = tiny
    return tc.trellis.run(None, cond, bundle_path=exe, model_dir=model, ss_steps=1, slat_steps=1, **kw)


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], k)


def test_reused_engine_matches_fresh_runs(tiny, pipeline):
    model, _, _ = tiny
    cond = np.load(model / "cond.npy")
    ref1, ref2 = fresh(tiny, cond, seed=1), fresh(tiny, cond, seed=2)
    coords = ref1["coords"]
    half = coords[: max(1, len(coords) // 2)]  # another voxel count
    ref_half = fresh(tiny, cond, seed=3, coords=half)
    got = [pipeline.run(cond, seed=s, ss_steps=1, slat_steps=1) for s in (1, 2)]
    got_half = pipeline.run(cond, seed=3, ss_steps=1, slat_steps=1, coords=half)
    again = pipeline.run(cond, seed=1, ss_steps=1, slat_steps=1)
    engine = pipeline.engine()
    assert_same(got[0], ref1)
    assert_same(got[1], ref2)
    assert_same(got_half, ref_half)
    assert len(got_half["coords"]) != len(got[0]["coords"])
    assert_same(again, ref1)
    assert pipeline.engine() is engine  # one engine throughout


def test_a_failed_run_leaves_the_engine_usable(tiny, pipeline):
    model, _, _ = tiny
    cond = np.load(model / "cond.npy")
    with pytest.raises(tc.TrellisError, match="embeddings.cond is"):
        pipeline.run(cond[:, :5], seed=1, ss_steps=1, slat_steps=1)
    with pytest.raises(tc.TrellisError, match="spec.coords"):
        pipeline.run(cond, seed=1, ss_steps=1, slat_steps=1, coords=np.zeros((3, 2), np.int32))
    assert_same(pipeline.run(cond, seed=1, ss_steps=1, slat_steps=1), fresh(tiny, cond, seed=1))


def engine_run(engine, cond, spec=None, outputs=None):
    lib = _native.runtime()
    if spec is None:
        spec = _native.RunSpec()
        lib.trellis_run_spec_init(ctypes.byref(spec))
        spec.ss.steps = spec.slat.steps = 1
        spec.targets = 1
    emb = _native.Embeddings()
    emb.cond = _native.tensor_of(cond)
    err = _native.Error()
    status = lib.trellis_engine_run(
        engine,
        ctypes.byref(emb),
        ctypes.byref(spec),
        ctypes.byref(outputs) if outputs else None,
        ctypes.byref(err),
    )
    message = ctypes.string_at(err.message).decode() if err.message else ""
    lib.trellis_error_clear(ctypes.byref(err))
    return status, message


def test_an_engine_runs_one_generation_at_a_time(tiny, pipeline):
    model, _, _ = tiny
    cond = np.load(model / "cond.npy")
    engine = pipeline.engine().handle
    inside, release = threading.Event(), threading.Event()
    lib = _native.runtime()
    spec = _native.RunSpec()
    lib.trellis_run_spec_init(ctypes.byref(spec))
    spec.ss.steps = spec.slat.steps = 1
    spec.targets = 1

    def hold(p, _user):  # the first progress event parks the run
        inside.set()
        release.wait(60)

    spec.progress = _native.PROGRESS_FN(hold)
    results = []
    t = threading.Thread(target=lambda: results.append(engine_run(engine, cond, spec)))
    t.start()
    assert inside.wait(60)
    status, message = engine_run(engine, cond)
    release.set()
    t.join(120)
    assert status == 9 and "engine busy" in message, (status, message)
    assert results[0][0] == 0, results
    assert engine_run(engine, cond)[0] == 0  # free again


def test_c_abi_misuse_is_a_named_error(tiny):
    model, exe, _ = tiny
    lib = _native.runtime()
    program = _native.Program(path=exe)
    err = _native.Error()
    handle = ctypes.c_void_p()

    def message():
        m = ctypes.string_at(err.message).decode() if err.message else ""
        lib.trellis_error_clear(ctypes.byref(err))
        return m

    # NULL program; no weights at all (named tensor, TRELLIS_ERR_WEIGHTS).
    assert lib.trellis_engine_create(None, None, None, ctypes.byref(handle), ctypes.byref(err)) == 1
    assert "must not be NULL" in message()
    assert lib.trellis_engine_create(program.handle, None, None, ctypes.byref(handle), ctypes.byref(err)) == 3
    assert "weights: " in message()
    # A weight of the wrong shape in the table: named with expected and found.
    keep = []
    bad = {("sparse_structure_flow_model", "input_layer.weight"): np.zeros((3, 3), np.float32)}
    table = _native.weight_table(bad, model, keep)
    assert (
        lib.trellis_engine_create(
            program.handle, ctypes.byref(table), None, ctypes.byref(handle), ctypes.byref(err)
        )
        == 3
    )
    m = message()
    assert "input_layer.weight" in m and "expects" in m, m
    opts = _native.EngineOptions()
    lib.trellis_engine_options_init(ctypes.byref(opts))
    opts.flags = 2  # DETERMINISTIC is a per-run bit
    good = _native.weight_table(None, model, keep)
    assert (
        lib.trellis_engine_create(
            program.handle, ctypes.byref(good), ctypes.byref(opts), ctypes.byref(handle), ctypes.byref(err)
        )
        == 1
    )
    assert "engine options" in message()
    assert (
        lib.trellis_engine_create(
            program.handle, ctypes.byref(good), None, ctypes.byref(handle), ctypes.byref(err)
        )
        == 0
    ), message()
    cond = np.load(model / "cond.npy")
    # NULL engine; a spec naming another program; a too-small caller buffer.
    assert engine_run(None, cond)[0] == 1
    spec = _native.RunSpec()
    lib.trellis_run_spec_init(ctypes.byref(spec))
    other = _native.Program(path=exe)
    spec.program = other.handle
    status, m = engine_run(handle, cond, spec)
    assert status == 1 and "not the program this engine" in m
    outs = _native.Outputs()
    small = np.zeros(4, np.uint8)
    outs.coords.data, outs.coords.capacity = small.ctypes.data, small.nbytes
    status, m = engine_run(handle, cond, outputs=outs)
    assert status == 6 and "outputs.coords needs" in m, m
    # The program closed before the engine: the engine keeps it alive.
    program_handle = program.handle
    lib.trellis_program_close(program_handle)
    program._handle = None
    assert engine_run(handle, cond)[0] == 0
    lib.trellis_engine_destroy(handle)


def test_trellis_exe_runs_several_generations(tiny, tmp_path):
    model, exe, _ = tiny
    cond = model / "cond.npy"
    single = tmp_path / "single"
    r = run(exe, "--model", model, "--cond", cond, "--out", single, "--seed", "5", *STEPS, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in single.iterdir()) == sorted(FILES)  # no debug files
    assert "generation 0:" in r.stderr and "voxels" in r.stderr
    # Two --cond: OUT/0 and OUT/1, each the same bytes as the single run.
    multi = tmp_path / "multi"
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        cond,
        "--cond",
        cond,
        "--out",
        multi,
        "--seed",
        "5",
        "--repeat",
        "2",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "4 of 4 generations" in r.stderr
    for sub in ("0", "1"):
        for f in FILES:
            assert (multi / sub / f).read_bytes() == (single / f).read_bytes(), (sub, f)
    # A manifest with a bad line in the middle: the others still run, exit 1.
    (tmp_path / "m.jsonl").write_text(
        json.dumps({"id": "a", "cond": str(cond), "seed": 5})
        + "\n"
        + json.dumps({"id": "broken", "cond": "missing.npy", "seed": 1})
        + "\n"
        + json.dumps({"id": "c", "cond": str(cond), "seed": 5})
        + "\n"
    )
    man = tmp_path / "man"
    r = run(
        exe,
        "--model",
        model,
        "--inputs",
        tmp_path / "m.jsonl",
        "--out",
        man,
        "--debug-outputs",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 1
    assert "generation broken" in r.stderr and "missing.npy" in r.stderr, r.stderr
    assert "2 of 3 generations" in r.stderr
    for sub in ("a", "c"):
        assert (man / sub / "mesh_fields.npz").exists()  # --debug-outputs
        assert (man / sub / "slat.npy").read_bytes() == (single / "slat.npy").read_bytes()
    # The failed one is recorded (a batch: test_batch_manifest.py), with nothing of its outputs.
    assert sorted(p.name for p in (man / "broken").iterdir()) == ["failed.json"]
    # A malformed line is recorded the same way, naming the line and the field.
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "cond": "x.npy"}\n')
    r = run(exe, "--model", model, "--inputs", tmp_path / "bad.jsonl", "--out", tmp_path / "none")
    assert r.returncode == 1 and "bad.jsonl:1: field 'seed'" in r.stderr, r.stderr
    assert "bad.jsonl:1: field 'seed'" in (tmp_path / "none" / "a" / "failed.json").read_text()


def test_bench_stage1_runs_stage1_then_takes_the_given_voxels(tiny, tmp_path):
    """--bench-stage1 (benchmarks: a whole generation on a chosen voxel set):
    stage 1 runs as without --coords (the same ss_latent.npy), then the SLat
    stage and the decoders see the given voxels (coords.npy is theirs)."""
    model, exe, _ = tiny
    cond = model / "cond.npy"
    own = tmp_path / "own"
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        cond,
        "--out",
        own,
        "--seed",
        "3",
        "--stop-after",
        "ss",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    coords = np.load(own / "coords.npy")
    half = tmp_path / "half.npy"
    np.save(half, coords[: len(coords) // 2])
    bench = tmp_path / "bench"
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        cond,
        "--out",
        bench,
        "--seed",
        "3",
        "--coords",
        half,
        "--bench-stage1",
        "--formats",
        "gs",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert f"{len(coords)} occupied voxels, replaced by the {len(coords) // 2}" in r.stderr
    assert (bench / "ss_latent.npy").read_bytes() == (own / "ss_latent.npy").read_bytes()
    assert (bench / "coords.npy").read_bytes() == half.read_bytes()
    assert np.load(bench / "slat.npy").shape[0] == len(coords) // 2
    # Without voxels to take, the option is an error before any work.
    r = run(exe, "--model", model, "--cond", cond, "--out", tmp_path / "none", "--bench-stage1")
    assert r.returncode == 1 and "--bench-stage1" in r.stderr, r.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--seed", "1.5"], "option --seed expects a whole number in 0..18446744073709551615, found '1.5'"),
        (["--seed", "-1"], "option --seed expects a whole number"),
        (
            ["--steps-ss", "2147483648"],
            "option --steps-ss expects a whole number in 1..10000, found '2147483648'",
        ),
        (["--steps-slat", "2.5"], "option --steps-slat expects a whole number in 1..10000, found '2.5'"),
        (["--cfg-ss", "nan"], "option --cfg-ss expects a finite number >= 0, found 'nan'"),
        (["--threads", "0"], "option --threads expects a whole number in 1..4096, found '0'"),
        (["--repeat", "1e3"], "option --repeat expects a whole number in 1..1000000, found '1e3'"),
        (["--gpu-device", "-1"], "option --gpu-device expects a whole number in 0..1023, found '-1'"),
    ],
)
def test_trellis_exe_numbers_are_checked(tiny, tmp_path, args, message):
    """Every number option is parsed whole (no 2.5 -> 2, no seed through a
    double), in the range pipeline.json allows, and a refusal names the
    option, the range and the value before any work."""
    model, exe, _ = tiny
    out = tmp_path / "out"
    r = run(exe, "--model", model, "--cond", model / "cond.npy", "--out", out, *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr  # a usage error
    assert not out.exists()


def test_large_seeds_stay_distinct(tiny, tmp_path):
    """2^53 and 2^53 + 1 are different seeds (a double would merge them)."""
    model, exe, _ = tiny
    outs = []
    for seed in ("9007199254740992", "9007199254740993"):
        out = tmp_path / seed
        r = run(
            exe,
            "--model",
            model,
            "--cond",
            model / "cond.npy",
            "--out",
            out,
            "--seed",
            seed,
            "--stop-after",
            "ss",
            "--steps-ss",
            "1",
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        outs.append((out / "ss_latent.npy").read_bytes())
    assert outs[0] != outs[1]


def _poison(path, tensor_name_part):
    """Sets the first element of the first tensor whose name contains
    `tensor_name_part` in safetensors file `path` to NaN (in place)."""
    data = bytearray(path.read_bytes())
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__" and tensor_name_part in k)
    info = header[name]
    at = 8 + n + info["data_offsets"][0]
    if info["dtype"] == "F16":
        struct.pack_into("<H", data, at, 0x7E00)
    else:
        struct.pack_into("<I", data, at, 0x7FC00000)
    path.write_bytes(bytes(data))


def test_non_finite_values_are_named_errors(tiny, tmp_path):
    """NaN in the conditioning is refused on load, naming the file; a NaN
    weight makes stage 1 fail naming its latent and --check-finite, instead
    of an "empty structure, try another seed" or NaN files."""
    import shutil

    model, exe, _ = tiny
    cond = np.load(model / "cond.npy")
    cond[0, 3, 5] = np.nan
    bad = tmp_path / "nan_cond.npy"
    np.save(bad, cond)
    out = tmp_path / "out1"
    r = run(exe, "--model", model, "--cond", bad, "--out", out, *STEPS, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "nan_cond.npy holds NaN" in r.stderr and "inputs must be finite" in r.stderr, r.stderr
    assert not out.exists()
    # A poisoned flow-model weight.
    poisoned = tmp_path / "model"
    shutil.copytree(model, poisoned)
    ckpt = next((poisoned / "ckpts").glob("ss_flow*.safetensors"))
    _poison(ckpt, "input_layer.weight")
    out = tmp_path / "out2"
    r = run(exe, "--model", poisoned, "--cond", model / "cond.npy", "--out", out, *STEPS, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "stage 1's latent" in r.stderr and "came out with NaN" in r.stderr, r.stderr
    assert "--check-finite" in r.stderr and "try another seed" not in r.stderr
    assert not (out / "ss_latent.npy").exists()


@pytest.mark.parametrize(
    "ckpt, message",
    [
        ("slat_flow", "stage 2's latent (slat.npy, not written) came out with NaN"),
        ("slat_dec_gs", "the Gaussians (gaussians.ply / .npz, not written) came out with NaN"),
    ],
)
def test_a_failed_generation_leaves_no_output(tiny, tmp_path, ckpt, message):
    """A later stage fails (a NaN weight in its checkpoint only): the files
    of the stages that finished before it (ss_latent.npy and coords.npy;
    with a decoder, slat.npy and the mesh too) are removed, so --out holds
    nothing of the failed run; the user's own files stay."""
    import shutil

    model, exe, _ = tiny
    poisoned = tmp_path / "model"
    shutil.copytree(model, poisoned)
    path = next((poisoned / "ckpts").glob(ckpt + "*.safetensors"))
    _poison(path, "input_layer.weight")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = run(exe, "--model", poisoned, "--cond", model / "cond.npy", "--out", out, *STEPS, timeout=300)
    assert r.returncode == 1, r.stderr
    assert message in r.stderr, r.stderr
    # Stage 1 did finish (and its files were written before the failure).
    assert "[1/3" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_out_is_cleared_of_earlier_outputs_and_never_holds_an_input(tiny, tmp_path):
    """--out: the output files of an earlier run and dead writers' temporary
    files are removed before the run (other files stay); an input that an
    output would replace is refused before any work."""
    model, exe, _ = tiny
    out = tmp_path / "out"
    out.mkdir()
    (out / "mesh.glb").write_bytes(b"old")  # an earlier run's output
    (out / "slat.npy.tmp-999999999").write_bytes(b"")  # a dead writer's temp
    (out / "notes.txt").write_text("mine")
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        out,
        "--formats",
        "gs",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in out.iterdir())
    assert "mesh.glb" not in names and "slat.npy.tmp-999999999" not in names, names
    assert "notes.txt" in names and "gaussians.ply" in names, names
    # --coords inside --out under an output's name: refused, the file kept.
    np.save(out / "coords.npy", np.load(out / "coords.npy"))
    before = (out / "coords.npy").read_bytes()
    r = run(
        exe,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        out,
        "--coords",
        out / "coords.npy",
        *STEPS,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "--coords" in r.stderr and "this run writes coords.npy" in r.stderr, r.stderr
    assert (out / "coords.npy").read_bytes() == before


@pytest.mark.parametrize("signal_name, code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_ends_the_run_without_temporary_files(tiny, tmp_path, signal_name, code):
    """INT / TERM / HUP during a run end it with 128 + the signal and leave
    no '<name>.tmp-<pid>' in --out (generations keep writing files while the
    signal comes)."""
    import signal
    import subprocess
    import time

    model, exe, _ = tiny
    out = tmp_path / "out"
    p = subprocess.Popen(
        [
            str(exe),
            "--model",
            str(model),
            "--cond",
            str(model / "cond.npy"),
            "--out",
            str(out),
            "--repeat",
            "1000",
            *STEPS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while not (out / "slat.npy").exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)  # files are being written now, generation after generation
    p.send_signal(getattr(signal, signal_name))
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert not list(out.glob("*.tmp-*")), sorted(x.name for x in out.iterdir())


def _edited_bundle(exe, tmp_path, edit):
    """The tiny bundle with its host program changed by edit(program JSON)."""
    from trellisc import _bundle

    sections = _bundle.parse(exe_bundle(exe))
    program = json.loads(sections["program"])
    edit(program)
    sections["program"] = json.dumps(program).encode()
    path = tmp_path / "edited.bundle"
    path.write_bytes(_bundle.serialize(sections))
    return path


def _first_op(program, op):
    def walk(body):
        for instr in body:
            if instr["op"] == op:
                return instr
            for region in instr.get("regions", []):
                found = walk(region["body"])
                if found:
                    return found

    for fn in program["functions"]:
        found = walk(fn["body"])
        if found:
            return found


@pytest.mark.parametrize(
    "case, message",
    [
        ("slot", "is not below num_slots"),
        ("steps", "steps must be an integer in 1..10000"),
        ("huge", "is larger than a run can hold"),
        ("loc", "is not in the location table"),
    ],
)
def test_a_hostile_bundle_is_refused_by_name(tiny, tmp_path, case, message):
    """A bundle with valid CRCs but a slot past num_slots, a sampler of 1e12
    steps, a tensor type of 2^60 bytes or a location past the table is
    refused when it loads, naming the function and the op (was: SIGSEGV or
    bad_alloc)."""
    model, exe, _ = tiny

    def edit(program):
        fn = next(f for f in program["functions"] if f["name"] == "ss_stage")
        instr = fn["body"][0]
        if case == "slot":
            instr["out"][0] = fn["num_slots"] + 5
        elif case == "steps":
            _first_op(program, "trellis.flow_sample")["attrs"]["steps"] = 10**12
        elif case == "huge":
            instr["types"][0]["shape"] = [2**30, 2**30]
        else:
            instr["loc"] = 10**9

    bundle = _edited_bundle(exe, tmp_path, edit)
    runtime = _tc_env.BUILD / "bin/trellis-runtime"
    r = run(
        runtime,
        "--bundle",
        bundle,
        "--model",
        model,
        "--cond",
        model / "cond.npy",
        "--out",
        tmp_path / "out",
        *STEPS,
        timeout=120,
    )
    assert r.returncode == 1 and "is malformed" in r.stderr and message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    r = run(runtime, "--bundle", tmp_path, "--inspect")
    assert r.returncode == 1 and "it is a directory" in r.stderr, r.stderr


def test_stop_after_needs_only_the_stages_it_runs(tiny, tmp_path):
    """--stop-after ss opens only the stage-1 checkpoints; a full run names the first missing one."""
    model, exe, _ = tiny
    partial = tmp_path / "model"
    shutil.copytree(model, partial)
    for f in (partial / "ckpts").glob("slat_*.safetensors"):
        f.unlink()
    common = ["--model", partial, "--cond", partial / "cond.npy", "--steps-ss", "1"]
    r = run(exe, *common, "--out", tmp_path / "ss", "--stop-after", "ss", timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ss" / "coords.npy").exists()
    r = run(exe, *common, "--out", tmp_path / "all", "--steps-slat", "1", timeout=300)
    assert r.returncode == 1
    assert "weights: cannot open" in r.stderr and "slat_" in r.stderr, r.stderr
    assert not (tmp_path / "all").exists() or not any((tmp_path / "all").iterdir())


def test_engine_options_of_an_older_caller_and_the_memory_budget(tiny):
    """trellis_engine_options grew memory_budget and max_voxels after user_data: a caller built against the
    older header (struct_size up to user_data) still creates an engine (the new fields take their defaults);
    a smaller struct_size or a negative max_voxels is a named error. Python passes both through
    Pipeline.run(memory_budget=, max_voxels=), sizes as trellis.exe spells them."""
    model, exe, _ = tiny
    lib = _native.runtime()
    program = _native.Program(path=exe)
    err = _native.Error()
    keep = []
    good = _native.weight_table(None, model, keep)

    def create(opts):
        handle = ctypes.c_void_p()
        status = lib.trellis_engine_create(
            program.handle, ctypes.byref(good), ctypes.byref(opts), ctypes.byref(handle), ctypes.byref(err)
        )
        m = ctypes.string_at(err.message).decode() if err.message else ""
        lib.trellis_error_clear(ctypes.byref(err))
        if status == 0:
            lib.trellis_engine_destroy(handle)
        return status, m

    opts = _native.EngineOptions()
    lib.trellis_engine_options_init(ctypes.byref(opts))
    assert opts.struct_size == ctypes.sizeof(_native.EngineOptions)
    assert opts.memory_budget == 0 and opts.max_voxels == 0
    opts.struct_size = _native.EngineOptions.memory_budget.offset  # the header before the new fields
    opts.max_voxels = -5  # beyond that struct_size: not read
    assert create(opts) == (0, "")
    opts.struct_size = _native.EngineOptions.memory_budget.offset - 8
    status, m = create(opts)
    assert status == 1 and "struct_size" in m, m
    lib.trellis_engine_options_init(ctypes.byref(opts))
    opts.max_voxels = -5
    status, m = create(opts)
    assert status == 1 and "max_voxels" in m, m
    opts.max_voxels, opts.memory_budget = 20000, 6 << 30
    assert create(opts) == (0, "")  # (without a GPU there is nothing to plan)


def test_pipeline_memory_budget_arguments(tiny):
    from trellisc import trellis as tt

    assert tt._check_memory_budget("6G") == 6 << 30
    assert tt._check_memory_budget("4096M") == 4 << 30
    assert tt._check_memory_budget(123) == 123
    for bad in ("6X", "G", "-1G", -1):
        with pytest.raises(tc.TrellisError, match="memory_budget"):
            tt._check_memory_budget(bad)
