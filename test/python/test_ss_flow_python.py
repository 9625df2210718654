"""The sparse-structure flow model written in Python (python/examples/ss_flow.py) against the C++ builder's, on
the tiny preset: one velocity at t = 1 from the Python model (tc.compile) and from trellis.exe (one Euler step
with CFG off: v = noise - latent), the same checkpoint and inputs, both compiled for the same target: the CPU
reference, or CUDA (fused ops, which round once where the CPU form rounds per op; CUDA needs no GPU to compile,
and without one the program runs on the CPU reference)."""
import sys
from pathlib import Path

import numpy as np
import pytest

import _tc_env  # noqa: F401
from _tc_env import BUILD, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))
import ss_flow  # noqa: E402


@pytest.fixture(scope="module")
def cpp_velocity(tmp_path_factory):
    """(model dir, noise, {target: the C++ builder's velocity})."""
    d = tmp_path_factory.mktemp("ssflow")
    model = d / "tiny"
    r = run(BUILD / "bin/trellis-mkmodel", "--preset", "tiny", "--seed", "4", "--out", model, "--quiet")
    assert r.returncode == 0, r.stderr
    noise = np.random.default_rng(0).standard_normal((1, 8, 8, 8, 8)).astype(np.float32)
    np.save(d / "noise.npy", noise)
    velocities = {}
    for target in ("cpu", "cuda"):
        exe, out = d / f"tiny-{target}.exe", d / f"out-{target}"
        r = run(
            BUILD / "bin/trellisc",
            model / "pipeline.json",
            f"--target={target}",
            "--cond-tokens",
            "21",
            "-o",
            exe,
        )
        assert r.returncode == 0, r.stderr
        steps = ["--steps-ss", "1", "--cfg-ss", "0", "--stop-after", "ss", "--gpu", "off"]
        r = run(
            exe,
            "--model",
            model,
            "--cond",
            model / "cond.npy",
            "--ss-noise",
            d / "noise.npy",
            *steps,
            "--out",
            out,
        )
        assert r.returncode == 0, r.stderr
        velocities[target] = noise - np.load(out / "ss_latent.npy")
    return model, noise, velocities


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_python_ss_flow_matches_the_cpp_builder(cpp_velocity, target):
    model_dir, noise, velocities = cpp_velocity
    want = velocities[target]
    model, args = ss_flow.load(model_dir)
    cond = np.load(model_dir / "cond.npy")
    exe = ss_flow.compile_model(model, args, cond.shape[1], target=target)
    assert exe.target == target
    got = exe(noise, np.array([1000.0], np.float32), cond)
    assert got.shape == want.shape
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"{target} ({exe.backend}): Python SS flow vs the C++ builder: relative L2 {rel:.3g}")
    assert rel <= 1e-5


def test_checkpoint_names_are_checked(cpp_velocity):
    """A model whose parameter names do not match the checkpoint is refused, naming them."""
    import trellisc as tc

    model_dir, _, _ = cpp_velocity
    model, _ = ss_flow.load(model_dir)
    model.blocks.append(ss_flow.ModulatedCrossBlock(128, 128, 2, 256, True))
    ckpt = next((model_dir / "ckpts").glob("ss_flow*.safetensors"))
    with pytest.raises(tc.TrellisError, match=r"missing \['blocks\.2\.adaLN_modulation\.1\.bias'"):
        model.load_safetensors(ckpt)
