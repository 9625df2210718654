"""pytest configuration shared by the Python tests."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs an NVIDIA GPU; skipped elsewhere, run on the "
        "device by bench/ss_gpu/run_device.sh (never in CI)",
    )
